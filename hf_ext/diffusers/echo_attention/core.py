"""EchoAttention math in pure torch: tiles, estimate, allocation, echo synthesis, stage-1 fit, routing.

EchoAttention (reconstructed; not verified against the paper). Everything here is [reconstructed] from the
one-line description of the method (Sparse operator + Echo operator + per-head routing); see
``docs/methods/echo_attention.md``. Notation: ``F`` latent frames of ``P`` tokens (frame-major), tiles of
``b`` tokens that never straddle frames (``n_s = ceil(P/b)`` per frame, ``n_t = F*n_s`` in all), a *group*
``g = (delta, s_q, s_k)`` is the band of tile pairs ``((f, s_q), (f + delta, s_k))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import torch

from hf_ext.kernels.block_sparse_attention import block_sparse_attention
from hf_ext.kernels.echo_merge import echo_merge
from hf_ext.kernels.pooling import pooled_tile_scores

Theta = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class Layout:
    """Frame-major token layout of one video self-attention call.

    Attributes:
        frames: ``F``, latent frames after patching.
        tokens_per_frame: ``P = (H/p_h) * (W/p_w)``.
        block: Tile size ``b``.
    """

    frames: int
    tokens_per_frame: int
    block: int

    @property
    def n_s(self) -> int:
        """Spatial tiles per frame."""
        return math.ceil(self.tokens_per_frame / self.block)

    @property
    def n_t(self) -> int:
        """Tiles in all."""
        return self.frames * self.n_s

    @property
    def seq_len(self) -> int:
        """``S = F * P`` (unpadded)."""
        return self.frames * self.tokens_per_frame

    @property
    def padded_len(self) -> int:
        """``F * n_s * b``: the length the kernels see."""
        return self.n_t * self.block

    def valid(self, device: torch.device) -> torch.Tensor | None:
        """``[padded_len]`` bool mask of real tokens, or ``None`` when no frame needs padding."""
        if self.tokens_per_frame % self.block == 0:
            return None
        row = torch.arange(self.n_s * self.block, device=device) < self.tokens_per_frame
        return row.repeat(self.frames)

    def pad(self, x: torch.Tensor) -> torch.Tensor:
        """``[B, H, S, D]`` -> ``[B, H, padded_len, D]`` (zero rows at the end of each frame; a view if none)."""
        extra = self.n_s * self.block - self.tokens_per_frame
        if extra == 0:
            return x
        b, h, _, d = x.shape
        x = x.reshape(b, h, self.frames, self.tokens_per_frame, d)
        return torch.nn.functional.pad(x, (0, 0, 0, extra)).reshape(b, h, self.padded_len, d)

    def unpad(self, x: torch.Tensor) -> torch.Tensor:
        """Inverse of :meth:`pad` on the sequence dim (dim 2)."""
        if self.tokens_per_frame % self.block == 0:
            return x
        shape = x.shape
        x = x.reshape(*shape[:2], self.frames, self.n_s * self.block, *shape[3:])
        return x[:, :, :, : self.tokens_per_frame].reshape(*shape[:2], self.seq_len, *shape[3:])

    @cached_property
    def bands(self) -> dict[str, torch.Tensor]:
        """Index tensors of the group view ``[G, F]`` (``G = (2F-1) * n_s^2``, member = query frame).

        ``pair`` flat pair index ``t_q * n_t + t_k``; ``valid`` both frames exist; ``tq``/``tk`` tile ids;
        ``delta`` the frame-offset index ``delta + F - 1`` of each group.
        """
        f, ns = self.frames, self.n_s
        delta = torch.arange(-(f - 1), f).view(-1, 1, 1, 1)
        sq = torch.arange(ns).view(1, -1, 1, 1)
        sk = torch.arange(ns).view(1, 1, -1, 1)
        fq = torch.arange(f).view(1, 1, 1, -1)
        fk = fq + delta
        valid, tq, tk = torch.broadcast_tensors(
            (fk >= 0) & (fk < f), fq * ns + sq, fk.clamp(0, f - 1) * ns + sk
        )
        flat = (tq * self.n_t + tk).reshape(-1, f)
        return {
            "pair": flat,
            "valid": valid.reshape(-1, f),
            "tq": tq.reshape(-1, f),
            "tk": tk.reshape(-1, f),
            "delta": (delta + f - 1).expand(-1, ns, ns, 1).reshape(-1),
        }


def flop_costs(layout: Layout, head_dim: int) -> dict[str, float]:
    """FLOP counts: dense ``4 S^2 D`` (unpadded S), estimate ``2 S D + 2 n_t^2 D``, exact tile ``4 b^2 D``
    (padding included), echoed tile ``6 b D``."""
    s, b, d = layout.seq_len, layout.block, head_dim
    return {
        "dense": 4.0 * s * s * d,
        "estimate": 2.0 * layout.padded_len * d + 2.0 * layout.n_t**2 * d,
        "exact": 4.0 * b * b * d,
        "echo": 6.0 * b * d,
    }


@dataclass
class Allocation:
    """Which tiles of each (batch, head) row are exact, echoed or dropped, in kernel form.

    Row dims ``N = B * h``. ``lut``/``lut_count``/``pairs``/``indptr``/``entries`` are the K5/K6 inputs with
    ``N`` in place of ``[B, H]``; ``flops`` is the counted FLOP fraction of dense per row.
    """

    exact: torch.Tensor  # [N, n_t, n_t] bool
    echoed: torch.Tensor  # [N, n_t, n_t] bool
    lut: torch.Tensor
    lut_count: torch.Tensor
    pairs: torch.Tensor  # [N, n_p, 2]
    indptr: torch.Tensor  # [N, n_t + 1]
    entries: torch.Tensor  # [N, n_e, 3]
    flops: torch.Tensor  # [N]
    coverage: torch.Tensor  # [N]: echoed share of the skipped P_hat mass


def lut_from_mask(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[..., n_q, n_k]`` bool -> (LUT ``[..., n_q, max_k]`` int32 ascending, ``-1``-padded; counts)."""
    count = mask.sum(-1)
    width = max(int(count.max()), 1)
    order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)[..., :width]
    lut = torch.where(torch.arange(width, device=mask.device) < count[..., None], order, -1)
    return lut.to(torch.int32), count.to(torch.int32)


def select_exact(p_hat: torch.Tensor, n_tiles: torch.Tensor) -> torch.Tensor:
    """Exact-tile mask: per query tile the diagonal plus the highest-``P_hat`` key tiles.

    ``n_tiles`` ``[N]`` total tiles per row (clamped to ``[n_t, n_t^2]``) gives ``k_q = n_tiles // n_t`` tiles per
    query tile; the remainder goes, one each, to the query tiles whose next candidate has the highest
    ``P_hat`` [reconstructed: lets the counted FLOPs match a budget finely].

    Args:
        p_hat: ``[N, n_t, n_t]`` estimated tile attention mass.
        n_tiles: ``[N]`` int tile totals.
    """
    n, nt, _ = p_hat.shape
    total = n_tiles.clamp(nt, nt * nt)
    score = p_hat.clone()
    score.diagonal(dim1=-2, dim2=-1).fill_(math.inf)
    order = score.argsort(-1, descending=True)
    rank = torch.empty_like(order).scatter_(-1, order, torch.arange(nt, device=p_hat.device).expand_as(order))
    kq = (total // nt)[:, None, None]
    extra = (total % nt)[:, None]
    nxt = torch.gather(p_hat, -1, torch.gather(order, -1, kq.clamp_max(nt - 1).expand(n, nt, 1))).squeeze(-1)
    row_rank = torch.empty_like(order[..., 0]).scatter_(
        -1, nxt.argsort(-1, descending=True), torch.arange(nt, device=p_hat.device).expand(n, nt)
    )
    return (rank < kq) | ((rank == kq) & (row_rank < extra)[..., None])


def _nearest(exact: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For ``[..., F]`` bool members, the nearest exact member's frame and distance (ties -> earlier)."""
    f = exact.shape[-1]
    pos = torch.arange(f, device=exact.device)
    big = 4 * f
    left = torch.where(exact, pos, -big).cummax(-1).values
    right = torch.where(exact, pos, big).flip(-1).cummin(-1).values.flip(-1)
    dl, dr = pos - left, right - pos
    return torch.where(dl <= dr, left, right).clamp(0, f - 1), torch.minimum(dl, dr)


def allocate(
    p_hat: torch.Tensor,
    layout: Layout,
    head_dim: int,
    exact_frac: torch.Tensor,
    echo_frac: torch.Tensor,
    max_distance: int,
) -> Allocation:
    """Budget split between exact, echoed and dropped tiles (spec steps 3-5, all [reconstructed]).

    Exact tiles take ``exact_frac`` of dense FLOPs (estimate included; ``>= 1`` keeps every tile). Rows with
    ``echo_frac > 0`` then echo every skipped member within ``max_distance`` frames of an exact member of its
    group, and spend the rest of ``echo_frac`` on representatives: greedily by uncovered group mass, each
    group's uncovered member with the highest ``P_hat`` becomes exact (cost ``4 b^2 D`` plus ``6 b D`` per
    member it newly covers) while the budget lasts. Other skipped tiles are dropped.

    Args:
        p_hat: ``[N, n_t, n_t]`` estimated tile mass (softmax of :func:`pooled_tile_scores` rows).
        layout: Token layout.
        head_dim: ``D``.
        exact_frac: ``[N]`` budget for exact tiles (fraction of dense FLOPs).
        echo_frac: ``[N]`` budget for echo (0 for sparse-only rows).
        max_distance: Max frame distance to a representative.
    """
    cost = flop_costs(layout, head_dim)
    n, nt, _ = p_hat.shape
    dev = p_hat.device
    n_tiles = torch.floor((exact_frac * cost["dense"] - cost["estimate"]) / cost["exact"]).long()
    n_tiles = torch.where(exact_frac >= 1, nt * nt, n_tiles)
    exact = select_exact(p_hat, n_tiles).flatten(1)
    bands = {k: v.to(dev) for k, v in layout.bands.items()}
    valid = bands["valid"]
    pb = p_hat.flatten(1)[:, bands["pair"]] * valid  # [N, G, F]
    eb = exact[:, bands["pair"]] & valid
    on = (echo_frac > 0)[:, None, None]
    _, dist = _nearest(eb)
    covered = valid & ~eb & (dist <= max_distance) & on
    uncovered = valid & ~eb & ~covered & on
    mass = (pb * uncovered).sum(-1)  # [N, G]
    cand = torch.where(uncovered, pb, -1.0).argmax(-1)  # [N, G]
    pos = torch.arange(layout.frames, device=dev)
    newly = (uncovered & ((pos - cand[..., None]).abs() <= max_distance)).sum(-1)
    rep_cost = cost["exact"] + cost["echo"] * newly
    left = echo_frac * cost["dense"] - cost["echo"] * covered.flatten(1).sum(-1)
    order = mass.argsort(-1, descending=True)
    spent = torch.gather(rep_cost, -1, order).cumsum(-1)
    take_sorted = (spent <= left[:, None]) & (torch.gather(mass, -1, order) > 0)
    take = torch.zeros_like(take_sorted).scatter_(-1, order, take_sorted)
    new_rep = torch.zeros_like(eb).scatter_(-1, cand[..., None], take[..., None])
    eb = eb | new_rep
    exact = _set_pairs(exact, bands["pair"], new_rep)
    src, dist = _nearest(eb)
    echoed_b = valid & ~eb & (dist <= max_distance) & on  # [N, G, F]
    return _package(p_hat, layout, cost, exact.view(n, nt, nt), echoed_b, src, bands)


def _set_pairs(exact: torch.Tensor, pair: torch.Tensor, mark: torch.Tensor) -> torch.Tensor:
    """Set ``exact[n, pair[g, f]] = True`` where ``mark[n, g, f]``."""
    flat = torch.where(mark, pair, exact.shape[1]).flatten(1)
    out = torch.zeros(exact.shape[0], exact.shape[1] + 1, dtype=torch.bool, device=exact.device)
    return out.scatter_(1, flat, True)[:, :-1] | exact


def _package(
    p_hat: torch.Tensor,
    layout: Layout,
    cost: dict[str, float],
    exact: torch.Tensor,
    echoed_b: torch.Tensor,
    src: torch.Tensor,
    bands: dict[str, torch.Tensor],
) -> Allocation:
    """Turn the masks into kernel inputs: LUT, representative pairs, echo CSR, and the counted figures."""
    n, nt, _ = exact.shape
    g, f = bands["pair"].shape
    dev = exact.device
    lut, lut_count = lut_from_mask(exact)
    # representatives: exact members that are the nearest source of some echoed member
    used = torch.zeros(n, g, f, dtype=torch.int32, device=dev).scatter_add_(-1, src, echoed_b.int()) > 0
    rep_id = used.flatten(1).int().cumsum(-1) - 1  # [N, G*F]
    n_p = int(used.flatten(1).sum(-1).max()) if n else 0
    pairs = torch.full((n, n_p + 1, 2), -1, dtype=torch.int32, device=dev)
    slot = torch.where(used.flatten(1), rep_id, n_p).long()
    tq, tk = bands["tq"].flatten().expand(n, -1), bands["tk"].flatten().expand(n, -1)
    pairs[..., 0].scatter_(1, slot, torch.where(used.flatten(1), tq, -1).int())
    pairs[..., 1].scatter_(1, slot, torch.where(used.flatten(1), tk, -1).int())
    pairs = pairs[:, :n_p]
    # echo entries in CSR order of the query tile
    src_flat = (torch.arange(g, device=dev)[:, None] * f + src).flatten(1)  # [N, G*F]
    ent_rep = torch.gather(rep_id, 1, src_flat)
    ent_dist = (src - torch.arange(f, device=dev)).abs().flatten(1)
    ent_g = bands["delta"][:, None].expand(g, f).flatten().expand(n, -1)
    live = echoed_b.flatten(1)
    key = torch.where(live, tq, nt)
    order = torch.argsort(key, dim=1, stable=True)
    n_e = int(live.sum(-1).max()) if n else 0
    pick = order[:, :n_e]
    entries = torch.stack([torch.gather(x, 1, pick) for x in (ent_rep, ent_dist, ent_g)], -1).int()
    counts = torch.zeros(n, nt + 1, dtype=torch.long, device=dev).scatter_add_(1, key, torch.ones_like(key))[
        :, :nt
    ]
    indptr = torch.cat([torch.zeros(n, 1, dtype=torch.long, device=dev), counts.cumsum(-1)], -1).int()
    # figures
    echoed = torch.zeros(n, nt * nt + 1, dtype=torch.bool, device=dev)
    echoed.scatter_(1, torch.where(live, bands["pair"].flatten().expand(n, -1), nt * nt), True)
    echoed = echoed[:, :-1].view(n, nt, nt)
    n_exact, n_echo = exact.flatten(1).sum(-1), echoed.flatten(1).sum(-1)
    flops = (cost["estimate"] + cost["exact"] * n_exact + cost["echo"] * n_echo) / cost["dense"]
    skipped = (p_hat * ~exact).flatten(1).sum(-1)
    coverage = (p_hat * echoed).flatten(1).sum(-1) / skipped.clamp_min(1e-12)
    return Allocation(exact, echoed, lut, lut_count, pairs, indptr, entries, flops, coverage)


def tile_mass(q: torch.Tensor, k: torch.Tensor, layout: Layout) -> torch.Tensor:
    """``P_hat`` ``[B, H, n_t, n_t]``: softmax over key tiles of the pooled estimate (K7), inputs padded."""
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
    """Per-head ``(exact_frac, echo_frac)`` of :func:`sparse_echo_attention`: echo heads (``is_echo`` ``[h]``) give
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
        theta: Echo parameters ``(a, c, u, w)`` of shapes ``[h, 2F-1]``, ``[h, 2F-1, D]``, ``[h, 2F-1]``, ``[h, 2F-1]``.
        max_distance: Max frame distance to a representative.
        backend: Kernel backend.
        exact_mask: *optional* ``[n_t, n_t]`` fixed exact pattern (static-window baseline) instead of the estimate.
        extra: *optional* ``(out [B, h, S, D], lse [B, h, S])``: a softmax partial of the same queries over other
            keys (joint models: the dense text keys), fp32 LSE. It is merged exactly into the block-sparse output
            by the LSE rule before the echo terms (LSE merging is associative) [reconstructed].

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
        alloc = _package(p_hat, layout, flop_costs(layout, d), mask, none.bool(), none, bands)

    def rows(x: torch.Tensor) -> torch.Tensor:
        return x.view(b, h, *x.shape[1:])

    valid = layout.valid(q.device)
    scale = d**-0.5
    partials = rows(alloc.pairs) if alloc.pairs.shape[1] else None
    res = block_sparse_attention(
        qp, kp, vp, rows(alloc.lut), rows(alloc.lut_count), layout.block, scale, valid,
        tile_partials=partials, backend=backend,
    )  # fmt: skip
    out, lse = res[0], res[1]
    if extra is not None:  # exact LSE merge (fp32) of the extra keys' partial; padded rows get a dummy 0 LSE
        x_out, x_lse = layout.pad(extra[0].float()), layout.pad(extra[1].float()[..., None])[..., 0]
        merged = torch.logaddexp(lse, x_lse)
        out = out.float() * (lse - merged).exp()[..., None] + x_out * (x_lse - merged).exp()[..., None]
        lse = merged
    if partials is not None:
        csr = (rows(alloc.indptr), rows(alloc.entries))
        out = echo_merge(out, lse, *res[2], csr, theta, backend=backend)  # type: ignore[misc]
    return layout.unpad(out).to(q.dtype), alloc


class EchoParams(torch.nn.Module):
    """Fitted state of one transformer: echo parameters theta and per-head routes, with their layout.

    ``theta = (a, c, u, w)`` per (layer, head, frame offset ``delta``): ``a`` ``[L, H, 2F-1]``, ``c``
    ``[L, H, 2F-1, D]``, ``u``/``w`` ``[L, H, 2F-1]``; identity (``a=1``, rest 0) until stage 1 runs.
    ``route_op`` ``[L, H]`` holds 0/1/2 (dense/sparse/echo) or -1 (unrouted: use ``mode``), ``route_budget``
    the per-head FLOP budget. Both are valid only for the calibration ``layout`` ``(F, P)``. ``last_alloc``
    keeps, per layer, the routed heads and :class:`Allocation` of the last call (for ``handle.stats()``).
    """

    route_op: torch.Tensor
    route_budget: torch.Tensor

    def __init__(self, num_layers: int, heads: int, head_dim: int) -> None:
        super().__init__()
        self.num_layers, self.heads, self.head_dim = num_layers, heads, head_dim
        self.layout: Layout | None = None
        self.a: torch.nn.Parameter | None = None
        self.c: torch.nn.Parameter | None = None
        self.u: torch.nn.Parameter | None = None
        self.w: torch.nn.Parameter | None = None
        self.last_alloc: dict[int, tuple[list[int], Allocation]] = {}
        self.register_buffer("route_op", torch.full((num_layers, heads), -1, dtype=torch.long))
        self.register_buffer("route_budget", torch.ones(num_layers, heads))

    def bind(self, layout: Layout, device: torch.device | None = None) -> None:
        """Fix the calibration layout and reset theta to identity (shape ``2F-1`` offsets)."""
        self.layout = layout
        a, c, u, w = identity_theta(self.heads, layout, self.head_dim, device)
        rep = (self.num_layers,)
        self.a, self.c, self.u, self.w = (
            torch.nn.Parameter(x.expand(*rep, *x.shape).clone()) for x in (a, c, u, w)
        )

    def check_layout(self, layout: Layout) -> None:
        """Raise when theta/routes were fitted at another ``(F, P)``."""
        ref = self.layout
        if ref is not None and (ref.frames, ref.tokens_per_frame) != (layout.frames, layout.tokens_per_frame):
            raise ValueError(
                f"EchoAttention was calibrated for (F, P) = ({ref.frames}, {ref.tokens_per_frame}) but is called "
                f"with (F, P) = ({layout.frames}, {layout.tokens_per_frame}); routes and theta are layout-specific. "
                "Recalibrate at this layout (calibrate_echo) or use a handle without calibration."
            )

    def theta(
        self, layer: int, heads: list[int], layout: Layout, head_dim: int, device: torch.device
    ) -> Theta:
        """Theta rows of ``heads`` at ``layer`` (identity when unfitted)."""
        if self.a is None:
            return identity_theta(len(heads), layout, head_dim, device)
        assert self.c is not None and self.u is not None and self.w is not None
        return (self.a[layer, heads], self.c[layer, heads], self.u[layer, heads], self.w[layer, heads])

    def routes(self, layer: int) -> tuple[list[int], list[float]] | None:
        """Per-head (operator codes, budgets) of ``layer``, or ``None`` when unrouted."""
        op = self.route_op[layer]
        if bool((op < 0).any()):
            return None
        return op.tolist(), self.route_budget[layer].tolist()


def band_partials(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: Layout, delta: int, with_out: bool = True
) -> tuple[torch.Tensor | None, torch.Tensor]:
    """Exact per-tile partials of every pair at frame offset ``delta`` (dense reference, fp32).

    Args:
        q, k, v: Padded ``[B, H, padded_len, D]``.
        layout: Token layout.
        delta: Frame offset ``f_k - f_q``.
        with_out: Also compute the partial outputs (else only the LSE).

    Returns:
        ``(O, lse)``: ``[B, H, n_s(q), n_s(k), F - |delta|, b, D]`` and ``[B, H, n_s, n_s, F - |delta|, b]``;
        member index ``i`` is query frame ``i + max(0, -delta)``.
    """
    bsz, h, _, d = q.shape
    f, ns, blk = layout.frames, layout.n_s, layout.block
    fq = torch.arange(f - abs(delta), device=q.device) + max(0, -delta)
    tiles = [x.to(torch.float32).view(bsz, h, f, ns, blk, d) for x in (q, k, v)]
    qq, kk = tiles[0][:, :, fq], tiles[1][:, :, fq + delta]
    logits = torch.einsum("bhfsid,bhftjd->bhstfij", qq, kk) * d**-0.5
    valid = layout.valid(q.device)
    if valid is not None:
        logits = logits.masked_fill(~valid.view(f, ns, blk)[0][:, None, None, :], -math.inf)
    lse = logits.logsumexp(-1)
    if not with_out:
        return None, lse
    out = torch.einsum(
        "bhstfij,bhftjd->bhstfid", torch.exp(logits - lse[..., None]), tiles[2][:, :, fq + delta]
    )
    return out, lse


def new_theta_stats(heads: int, offsets: int, head_dim: int) -> dict[str, torch.Tensor]:
    """Zeroed sufficient statistics of the stage-1 weighted least squares, per (head, offset)."""
    z = torch.zeros(heads, offsets, dtype=torch.float64)
    out = {key: z.clone() for key in ("W", "Sxx", "Sxy", "Sd", "Sdd", "Sr", "Srd")}
    out["Sx"] = torch.zeros(heads, offsets, head_dim, dtype=torch.float64)
    out["Sy"] = out["Sx"].clone()
    return out


def accumulate_theta_stats(
    stats: dict[str, torch.Tensor],
    g: int,
    o_x: torch.Tensor,
    l_x: torch.Tensor,
    o_y: torch.Tensor,
    l_y: torch.Tensor,
    dist: torch.Tensor,
    weight: torch.Tensor,
) -> None:
    """Add member/representative samples to offset ``g`` of ``stats`` (in place).

    Args:
        stats: From :func:`new_theta_stats`.
        g: Offset index ``delta + F - 1``.
        o_x, o_y: Representative and member partial outputs ``[H, M, b, D]``.
        l_x, l_y: Their LSEs ``[H, M, b]``.
        dist: Frame distances ``[M]``.
        weight: ``[H, M, b]`` sample weights (the member row's true attention mass in the tile) [reconstructed].
    """
    w = weight.double()
    ox, oy, dd = o_x.double(), o_y.double(), dist.double()[None, :, None].expand_as(w)
    r = (l_y - l_x).double()
    r = torch.where(w > 0, r, 0.0)
    stats["W"][:, g] += w.sum((1, 2))
    stats["Sx"][:, g] += torch.einsum("hmb,hmbd->hd", w, ox)
    stats["Sy"][:, g] += torch.einsum("hmb,hmbd->hd", w, oy)
    stats["Sxx"][:, g] += torch.einsum("hmb,hmbd->h", w, ox * ox)
    stats["Sxy"][:, g] += torch.einsum("hmb,hmbd->h", w, ox * oy)
    stats["Sd"][:, g] += (w * dd).sum((1, 2))
    stats["Sdd"][:, g] += (w * dd * dd).sum((1, 2))
    stats["Sr"][:, g] += (w * r).sum((1, 2))
    stats["Srd"][:, g] += (w * r * dd).sum((1, 2))


def solve_theta(stats: dict[str, torch.Tensor], eps: float = 1e-12) -> Theta:
    """Closed-form weighted least squares: ``O_y ~ a O_x + c`` and ``lse_y - lse_x ~ u |df| + w``.

    Offsets without samples keep the identity; a degenerate design keeps ``a = 1`` (resp. ``u = 0``).
    Returns float32 ``(a [H, G], c [H, G, D], u [H, G], w [H, G])``.
    """
    big_w = stats["W"]
    has = big_w > eps
    n = big_w.clamp_min(eps)
    sx, sy = stats["Sx"], stats["Sy"]
    var_x = stats["Sxx"] - (sx * sx).sum(-1) / n
    cov = stats["Sxy"] - (sx * sy).sum(-1) / n
    ok_a = has & (var_x > eps * n)
    a = torch.where(ok_a, cov / torch.where(ok_a, var_x, 1.0), 1.0)
    c = torch.where(has[..., None], (sy - a[..., None] * sx) / n[..., None], 0.0)
    det = big_w * stats["Sdd"] - stats["Sd"] ** 2
    ok_u = has & (det > eps * n * n)
    u = torch.where(
        ok_u, (big_w * stats["Srd"] - stats["Sd"] * stats["Sr"]) / torch.where(ok_u, det, 1.0), 0.0
    )
    w = torch.where(has, (stats["Sr"] - u * stats["Sd"]) / n, 0.0)
    return a.float(), c.float(), u.float(), w.float()


def stage1_stats(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    layout: Layout,
    max_distance: int,
    stats: dict[str, torch.Tensor],
) -> None:
    """Stage 1 on one dense call: regress every member on every other member of its group within
    ``max_distance`` frames (each is a possible representative at run time) [reconstructed], weighted by the
    representative rows' true attention mass. ``q, k, v``: padded ``[B, H, padded_len, D]``."""
    f, ns, blk = layout.frames, layout.n_s, layout.block
    bsz, h = q.shape[:2]
    row = torch.full((bsz, h, f, ns, blk), -math.inf, device=q.device)
    for delta in range(-(f - 1), f):
        _, lse = band_partials(q, k, v, layout, delta, with_out=False)
        fq = torch.arange(f - abs(delta), device=q.device) + max(0, -delta)
        part = lse.logsumexp(3).permute(0, 1, 3, 2, 4)  # [B, H, F', n_s, b]
        row[:, :, fq] = torch.logaddexp(row[:, :, fq], part)
    qvalid = layout.valid(q.device)
    qv = torch.ones(ns, blk, device=q.device) if qvalid is None else qvalid.view(f, ns, blk)[0].float()
    for delta in range(-(f - 1), f):
        out, lse = band_partials(q, k, v, layout, delta)
        assert out is not None
        m = f - abs(delta)
        fq = torch.arange(m, device=q.device) + max(0, -delta)
        ref = row[:, :, fq].permute(0, 1, 3, 2, 4)[:, :, :, None]  # [B, H, n_s, 1, F', b]
        weight = torch.exp(lse - ref) * qv[None, None, :, None, None, :]
        for d in range(1, min(max_distance, m - 1) + 1):
            for y, x in ((slice(d, m), slice(0, m - d)), (slice(0, m - d), slice(d, m))):

                def take(t: torch.Tensor, sl: slice) -> torch.Tensor:
                    return t[:, :, :, :, sl].transpose(0, 1).reshape(h, -1, *t.shape[5:])

                accumulate_theta_stats(
                    stats, delta + f - 1, take(out, x), take(lse, x), take(out, y), take(lse, y),
                    torch.full((take(lse, y).shape[1],), float(d)), take(weight, x),
                )  # fmt: skip


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
