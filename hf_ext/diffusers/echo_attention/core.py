"""EchoAttention math in pure torch: the estimate, the Sparse and Echo operators, the LSE merge, routing.

EchoAttention (reconstructed; not verified against the paper). Everything here is [reconstructed] from the
one-line description of the method (Sparse operator + Echo operator + per-head routing); see
``docs/methods/echo_attention.md``. Tiles, bands and FLOP counts live in
:mod:`~hf_ext.diffusers.echo_attention.layout`, the budget split in
:mod:`~hf_ext.diffusers.echo_attention.allocation`, the stage-1 fit in
:mod:`~hf_ext.diffusers.echo_attention.fit`.
"""

from __future__ import annotations

import torch

from hf_ext.diffusers.echo_attention.allocation import Allocation, allocate, from_masks
from hf_ext.diffusers.echo_attention.layout import Layout, flop_costs
from hf_ext.kernels.block_sparse_attention import block_sparse_attention
from hf_ext.kernels.echo_merge import echo_merge
from hf_ext.kernels.pooling import pooled_tile_scores

Theta = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def tile_mass(q: torch.Tensor, k: torch.Tensor, layout: Layout) -> torch.Tensor:
    """``P_hat`` ``[B, H, n_t, n_t]``: softmax over key tiles of the pooled estimate, inputs padded."""
    scale = q.shape[-1] ** -0.5
    return pooled_tile_scores(q, k, layout.block, scale, layout.valid(q.device)).softmax(-1)


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
    budget: torch.Tensor, is_echo: torch.Tensor, echo_share: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-head ``(exact_frac, echo_frac)`` of :func:`sparse_echo_attention`: echo heads (``is_echo`` ``[h]``)
    give
    ``echo_share`` of their ``budget`` ``[h]`` to echo, sparse heads spend it all on exact tiles."""
    return torch.where(is_echo, budget * (1 - echo_share), budget), torch.where(
        is_echo, budget * echo_share, 0.0
    )


def sparse_echo_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    exact_frac: torch.Tensor,
    echo_frac: torch.Tensor,
    theta: Theta,
    max_distance: int,
    backend: str = "auto",
    exact_mask: torch.Tensor | None = None,
    extra: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, Allocation]:
    """The Sparse and Echo operators on ``[B, h, S, D]`` heads (per-head budgets; ``echo_frac=0`` = sparse).

    Args:
        q, k, v: ``[B, h, S, D]`` after q/k-norm and RoPE (strided views are fine).
        layout: Token layout (``S = F * P``).
        exact_frac: ``[h]`` exact-tile budget per head; echo_frac: ``[h]`` echo budget per head.
        theta: Echo parameters ``(a, c, u, w)`` of shapes ``[h, 2F-1]``, ``[h, 2F-1, D]``, ``[h, 2F-1]``,
            ``[h, 2F-1]``.
        max_distance: Max frame distance to a representative.
        backend: Kernel backend.
        exact_mask: *optional* ``[n_t, n_t]`` fixed exact pattern (static-window baseline) instead of the
            estimate.
        extra: *optional* ``(out [B, h, S, D], lse [B, h, S])``: a softmax partial of the same queries over
            other keys (joint models: the dense text keys), fp32 LSE. It is merged exactly into the
            block-sparse output by the LSE rule before the echo terms (LSE merging is associative)
            [reconstructed].

    Returns:
        ``(out [B, h, S, D], allocation)`` with allocation rows ``N = B * h``.
    """
    b, h, _, d = q.shape
    qp, kp, vp = layout.pad(q), layout.pad(k), layout.pad(v)
    p_hat = tile_mass(qp, kp, layout).flatten(0, 1)
    if exact_mask is None:
        alloc = allocate(p_hat, layout, d, exact_frac.repeat(b), echo_frac.repeat(b), max_distance)
    else:
        bands = {key: val.to(q.device) for key, val in layout.bands.items()}
        none = torch.zeros(b * h, *bands["pair"].shape, dtype=torch.long, device=q.device)
        mask = exact_mask.to(q.device).expand(b * h, -1, -1)
        alloc = from_masks(p_hat, layout, flop_costs(layout, d), mask, none.bool(), none, bands)

    def rows(x: torch.Tensor) -> torch.Tensor:
        return x.view(b, h, *x.shape[1:])

    valid = layout.valid(q.device)
    scale = d**-0.5
    partials = rows(alloc.pairs) if alloc.pairs.shape[1] else None
    res = block_sparse_attention(
        qp,
        kp,
        vp,
        rows(alloc.lut),
        rows(alloc.lut_count),
        layout.block,
        scale,
        valid,
        tile_partials=partials,
        backend=backend,
    )
    out, lse = res[0], res[1]
    if extra is not None:  # exact LSE merge (fp32) of the extra keys' partial; padded rows get a dummy 0 LSE
        x_out, x_lse = layout.pad(extra[0].float()), layout.pad(extra[1].float()[..., None])[..., 0]
        merged = torch.logaddexp(lse, x_lse)
        out = out.float() * (lse - merged).exp()[..., None] + x_out * (x_lse - merged).exp()[..., None]
        lse = merged
    if partials is not None:
        csr = (rows(alloc.indptr), rows(alloc.entries))
        assert len(res) == 3
        out = echo_merge(out, lse, res[2][0], res[2][1], csr, theta, backend=backend)
    return layout.unpad(out).to(q.dtype), alloc


def static_route(errors: torch.Tensor, costs: torch.Tensor, budget: float, iters: int = 60) -> torch.Tensor:
    """Lagrangian multiple-choice knapsack: per item ``argmin_o (e_o + lam * c_o)`` with ``lam`` bisected so
    that the mean chosen cost is ``<= budget`` (the cheapest options when even that is infeasible).

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
    return pick(hi)


def dense_partial(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact softmax partial of ``q`` ``[B, h, S, D]`` over keys ``k, v`` ``[B, h, T, D]`` (scale ``D^-0.5``):
    ``(out [B, h, S, D], lse [B, h, S])`` in fp32, ready for the LSE merge of
    ``sparse_echo_attention(extra=...)``."""
    logits = torch.einsum("bhsd,bhtd->bhst", q.float(), k.float()) * q.shape[-1] ** -0.5
    lse = logits.logsumexp(-1)
    return torch.einsum("bhst,bhtd->bhsd", (logits - lse[..., None]).exp(), v.float()), lse
