"""EchoAttention math in pure torch: the estimate, the Sparse and Echo operators, the LSE merge, routing.

EchoAttention (reconstructed; not verified against the paper). Everything here is [reconstructed] from the
one-line description of the method (Sparse operator + Echo operator + per-head routing); see
``docs/methods/echo_attention.md``. Tiles, bands and FLOP counts live in
:mod:`~hf_ext.echo_attention.layout`, the budget split in
:mod:`~hf_ext.echo_attention.allocation`, the stage-1 fit in
:mod:`~hf_ext.echo_attention.fit`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from hf_ext.echo_attention.allocation import (
    Allocation,
    allocate,
    from_masks,
    plan_tiles,
    tile_counts,
)
from hf_ext.echo_attention.layout import Layout, flop_costs
from hf_ext.kernels.block_sparse import CoarseKeys, block_sparse_attention
from hf_ext.kernels.echo_tiles import echo_merge
from hf_ext.kernels.pooling import pooled_tile_scores

Theta = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def tile_mass(q: torch.Tensor, k: torch.Tensor, layout: Layout) -> torch.Tensor:
    """``P_hat`` ``[B, H, n_t, n_t]``: softmax over key tiles of the pooled estimate, inputs padded."""
    scale = q.shape[-1] ** -0.5
    return pooled_tile_scores(q, k, layout.block, scale, layout.valid(q.device)).softmax(-1)


def estimate(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: Layout, pool: int = 0
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
    """The estimate pass: ``P_hat`` ``[B, H, n_t, n_t]`` (as :func:`tile_mass`) and, with ``pool > 0``, the
    pooled keys and values of :func:`pooled_keys` from the same pass over K.

    Padded ``q``, ``k``, ``v`` ``[B, H, padded_len, D]`` (strided views are read in place, padding rows are
    zero). K is summed once over runs of ``block // pool`` rows; the tile means of the estimate are sums of
    those run sums, so the pooled keys cost no second read of K (V is read only when ``pool > 0``).
    """
    b, h, _, d = q.shape
    nt, dev = layout.n_t, q.device
    m = max(pool, 1)
    runs = layout.pool_log_count(m, dev).exp()  # [n_t * m] real tokens per run
    tiles = runs.view(nt, m).sum(-1)  # [n_t]

    def run_sums(x: torch.Tensor, n: int) -> torch.Tensor:  # [B, H, n, D]
        if x.stride(1) < x.stride(2):  # a [B, S, H, D] tensor (the processors' views): reduced in its own
            # layout, contiguous runs of H * D values (1.2-1.5x faster than through the view; the same sums)
            return x.transpose(1, 2).unflatten(1, (n, -1)).sum(2, dtype=torch.float32).transpose(1, 2)
        return x.unflatten(2, (n, -1)).sum(3, dtype=torch.float32)

    k_runs = run_sums(k, nt * m)
    q_mean = run_sums(q, nt) / tiles.clamp_min(1.0)[:, None]
    k_mean = k_runs.unflatten(2, (nt, m)).sum(3) / tiles.clamp_min(1.0)[:, None]
    size = torch.where(tiles > 0, tiles.clamp_min(1.0).log(), -math.inf)
    p_hat = (q_mean @ k_mean.transpose(-1, -2) * d**-0.5 + size).softmax(-1)
    if pool <= 0:
        return p_hat, None
    inv = 1.0 / runs.clamp_min(1.0)[:, None]
    return p_hat, (k_runs * inv, run_sums(v, nt * m) * inv)


def identity_theta(heads: int, layout: Layout, head_dim: int, device: torch.device | None = None) -> Theta:
    """``theta = (1, 0, 0, 0)`` for every (head, frame offset): echo copies the representative."""
    g = 2 * layout.frames - 1
    return (
        torch.ones(heads, g, device=device),
        torch.zeros(heads, g, head_dim, device=device),
        torch.zeros(heads, g, device=device),
        torch.zeros(heads, g, device=device),
    )


def split_budget(
    budget: Sequence[float], is_echo: Sequence[bool], echo_share: float
) -> tuple[list[float], list[float]]:
    """Per-head ``(exact_frac, echo_frac)`` of :func:`sparse_echo_attention`: echo heads give ``echo_share``
    of
    their ``budget`` to echo, sparse heads spend it all on exact tiles."""
    exact = [b * (1 - echo_share) if e else b for b, e in zip(budget, is_echo)]
    return exact, [b * echo_share if e else 0.0 for b, e in zip(budget, is_echo)]


def pooled_keys(
    k: torch.Tensor, v: torch.Tensor, layout: Layout, pool: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Means of padded ``k``, ``v`` ``[B, H, padded_len, D]`` over ``pool`` equal runs of every tile's rows
    (real tokens only): ``[B, H, n_t * pool, D]`` each; a run without real tokens gives 0."""
    b, h, _, d = k.shape
    count = layout.pool_log_count(pool, k.device).exp().clamp_min(1.0)[:, None]
    return tuple(  # type: ignore[return-value]
        x.float().reshape(b, h, layout.n_t * pool, layout.block // pool, d).sum(3) / count for x in (k, v)
    )


def sparse_echo_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    exact_frac: Sequence[float],
    echo_frac: Sequence[float],
    theta: Theta,
    *,
    model: str = "pooled",
    pool: int = 8,
    max_distance: int = 4,
    backend: str = "auto",
    exact_mask: torch.Tensor | None = None,
    extra: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, Allocation]:
    """The Sparse and Echo operators on ``[B, h, S, D]`` heads (per-head budgets; ``echo_frac=0`` = sparse).

    ``model="pooled"`` (and sparse-only heads) runs one fused pass with static shapes: the exact tiles and the
    pooled keys of the echoed tiles share one online softmax, the echoed tiles' logits shifted by ``w`` of
    ``theta`` per frame offset. ``model="band"`` echoes skipped tiles from representatives (per-tile partials
    of exact tiles at the nearest frame of the same band) with the linear map ``theta``, merged by the LSE
    rule.

    Args:
        q, k, v: ``[B, h, S, D]`` after q/k-norm and RoPE (strided views are fine).
        layout: Token layout (``S = F * P``).
        exact_frac: Per-head exact-tile budget (fraction of dense FLOPs); echo_frac: per-head echo budget.
        theta: Echo parameters ``(a, c, u, w)`` of shapes ``[h, 2F-1]``, ``[h, 2F-1, D]``, ``[h, 2F-1]``,
            ``[h, 2F-1]`` (the pooled echo reads ``w`` only).
        model: ``"pooled"`` or ``"band"``.
        pool: Pooled keys per tile (pooled echo).
        max_distance: Max frame distance to a representative (band echo).
        backend: Kernel backend.
        exact_mask: *optional* ``[n_t, n_t]`` fixed exact pattern (static-window baseline) instead of the
            estimate.
        extra: *optional* ``(out [B, h, S, D], lse [B, h, S])``: a softmax partial of the same queries over
            other keys (joint models: the dense text keys), fp32 LSE, merged exactly by the LSE rule
            [reconstructed].

    Returns:
        ``(out [B, h, S, D], allocation)`` with allocation rows ``N = B * h``.
    """
    b, h, _, d = q.shape
    dev = q.device
    qp, kp, vp = layout.pad(q), layout.pad(k), layout.pad(v)
    echo = any(f > 0 for f in echo_frac)
    n_ex, n_co = tile_counts(layout, d, exact_frac, echo_frac, pool if echo else 0)
    pooled_echo = exact_mask is None and model == "pooled" and max(n_co) > 0
    p_hat, pooled = estimate(qp, kp, vp, layout, pool if pooled_echo else 0)
    p_hat = p_hat.flatten(0, 1)
    if exact_mask is not None:
        bands = {key: val.to(dev) for key, val in layout.bands.items()}
        none = torch.zeros(b * h, *bands["pair"].shape, dtype=torch.long, device=dev)
        mask = exact_mask.to(dev).expand(b * h, -1, -1)
        alloc = from_masks(p_hat, layout, flop_costs(layout, d), mask, none.bool(), none, bands)
    elif model == "band" and echo:
        fx, fe = (torch.tensor(x, device=dev).repeat(b) for x in (exact_frac, echo_frac))
        alloc = allocate(p_hat, layout, d, fx, fe, max_distance)
    else:
        widths = (-(-max(n_ex) // layout.n_t), max(n_co))
        alloc = plan_tiles(p_hat, layout, d, _row_ints(n_ex, b, dev), _row_ints(n_co, b, dev), widths, pool)

    def rows(x: torch.Tensor) -> torch.Tensor:
        return x.view(b, h, *x.shape[1:])

    coarse = None
    if alloc.coarse_lut is not None and pooled is not None:
        kc, vc = pooled
        ent = alloc.coarse_lut.long().clamp_min(0)  # [N, n_t, n_c]
        delta = torch.gather(layout.delta_index(dev).expand(b * h, -1, -1), -1, ent)
        w = theta[3].float().repeat(b, 1)  # [N, 2F-1]
        bias = torch.gather(w[:, None, :].expand(-1, layout.n_t, -1), -1, delta)
        coarse = CoarseKeys(kc, vc, layout.pool_log_count(pool, dev), rows(alloc.coarse_lut), rows(bias))
    partials = rows(alloc.pairs) if alloc.pairs is not None and alloc.pairs.shape[1] else None
    res = block_sparse_attention(
        qp,
        kp,
        vp,
        rows(alloc.lut),
        rows(alloc.lut_count),
        layout.block,
        d**-0.5,
        layout.valid(dev),
        tile_partials=partials,
        coarse=coarse,
        backend=backend,
        validate=False,
    )
    out, lse = res[0], res[1]
    if extra is not None:  # exact LSE merge (fp32) of the extra keys' partial; padded rows get a dummy 0 LSE
        x_out, x_lse = layout.pad(extra[0].float()), layout.pad(extra[1].float()[..., None])[..., 0]
        merged = torch.logaddexp(lse, x_lse)
        out = out.float() * (lse - merged).exp()[..., None] + x_out * (x_lse - merged).exp()[..., None]
        lse = merged
    if partials is not None and alloc.indptr is not None and alloc.entries is not None and len(res) == 3:
        csr = (rows(alloc.indptr), rows(alloc.entries))
        out = echo_merge(out, lse, res[2][0], res[2][1], csr, theta, backend=backend)
    return layout.unpad(out).to(q.dtype), alloc


_ROW_INTS: dict[tuple[tuple[int, ...], int, torch.device], torch.Tensor] = {}


def _row_ints(per_head: list[int], batch: int, device: torch.device) -> torch.Tensor:
    """``[batch * h]`` int64 tensor of per-head values, built without a host-to-device copy in the hot path
    (a fill when all heads agree; otherwise cached per value list outside ``torch.compile``)."""
    if len(set(per_head)) == 1:
        return torch.full((batch * len(per_head),), per_head[0], dtype=torch.long, device=device)
    if torch.compiler.is_compiling():
        return torch.tensor(per_head, device=device).repeat(batch)
    key = (tuple(per_head), batch, device)
    if key not in _ROW_INTS:
        _ROW_INTS[key] = torch.tensor(per_head, device=device).repeat(batch)
    return _ROW_INTS[key]


def static_route(errors: torch.Tensor, costs: torch.Tensor, budget: float, iters: int = 60) -> torch.Tensor:
    """Lagrangian multiple-choice knapsack: per item ``argmin_o (e_o + lam * c_o)`` with ``lam`` bisected so
    that the mean chosen cost is ``<= budget`` (the cheapest options when even that is infeasible), then the
    budget the relaxation leaves unspent filled greedily: the upgrade of one item with the largest error
    drop per unit of extra cost, while the mean cost stays ``<= budget``. Heads whose error falls steeply
    with cost thus get more budget than flat ones, and no budget is left on the table.

    Args:
        errors: ``[M, O]`` measured relative errors per item (head) and option.
        costs: ``[M, O]`` FLOP fractions.
        budget: Target mean cost.

    Returns:
        ``[M]`` chosen option indices.
    """

    def pick(lam: float) -> torch.Tensor:
        return (errors + lam * costs).argmin(-1)

    def mean_cost(choice: torch.Tensor) -> float:
        return float(costs.gather(1, choice[:, None]).mean())

    if mean_cost(pick(0.0)) <= budget:
        return pick(0.0)
    lo, hi = 0.0, 1.0
    while mean_cost(pick(hi)) > budget and hi < 1e12:
        hi *= 4
    for _ in range(iters):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if mean_cost(pick(mid)) <= budget else (mid, hi)
    choice = pick(hi)
    rows = torch.arange(errors.shape[0])
    while True:
        spare = budget * errors.shape[0] - float(costs[rows, choice].sum())
        gain = errors[rows, choice][:, None] - errors  # [M, O]: error drop of each upgrade
        extra = costs - costs[rows, choice][:, None]
        ok = (gain > 0) & (extra > 0) & (extra <= spare + 1e-9)
        if not ok.any():
            return choice
        rate = torch.where(ok, gain / extra.clamp_min(1e-12), -1.0)
        best = int(rate.flatten().argmax())
        choice[best // errors.shape[1]] = best % errors.shape[1]


def dense_partial(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact softmax partial of ``q`` ``[B, h, S, D]`` over keys ``k, v`` ``[B, h, T, D]`` (scale ``D^-0.5``):
    ``(out [B, h, S, D], lse [B, h, S])`` in fp32, ready for the LSE merge of
    ``sparse_echo_attention(extra=...)``."""
    logits = torch.einsum("bhsd,bhtd->bhst", q.float(), k.float()) * q.shape[-1] ** -0.5
    lse = logits.logsumexp(-1)
    return torch.einsum("bhst,bhtd->bhsd", (logits - lse[..., None]).exp(), v.float()), lse
