"""Budget split of EchoAttention: which tiles are exact, echoed or dropped, in kernel form.

EchoAttention (reconstructed; not verified against the paper). Everything here is [reconstructed] from the
one-line description of the method (Sparse operator + Echo operator + per-head routing); see
``docs/methods/echo_attention.md``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from hf_ext.echo_attention.layout import Layout, flop_costs


@dataclass
class Allocation:
    """Which tiles of each (batch, head) row are exact, echoed or dropped, in kernel form.

    Row dims ``N = B * h``. ``lut``/``lut_count`` (exact tiles) and either ``coarse_lut`` (pooled echo: the
    tiles synthesised from their pooled keys) or ``pairs``/``indptr``/``entries`` (representative echo) are
    the kernel inputs with ``N`` in place of ``[B, H]``; ``flops`` is the counted FLOP fraction of dense per
    row.
    """

    exact: torch.Tensor  # [N, n_t, n_t] bool
    echoed: torch.Tensor  # [N, n_t, n_t] bool
    lut: torch.Tensor  # [N, n_t, max_k]
    lut_count: torch.Tensor  # [N, n_t]
    flops: torch.Tensor  # [N]
    coverage: torch.Tensor  # [N]: echoed share of the skipped P_hat mass
    coarse_lut: torch.Tensor | None = None  # [N, n_t, n_c], -1 padded
    pairs: torch.Tensor | None = None  # [N, n_p, 2]
    indptr: torch.Tensor | None = None  # [N, n_t + 1]
    entries: torch.Tensor | None = None  # [N, n_e, 3]


def tile_counts(
    layout: Layout,
    head_dim: int,
    exact_frac: Sequence[float],
    echo_frac: Sequence[float],
    pool: int,
) -> tuple[list[int], list[int]]:
    """Per head, the exact tiles in all and the pooled-echo entries per query tile that fit the budgets.

    Exact tiles take ``exact_frac`` of dense FLOPs less the estimate (``>= 1`` keeps every tile; at least the
    diagonal); the pooled echo spends ``echo_frac`` on the pooled keys and ``coarse`` tiles, the same number
    for every query tile, at most the tiles the exact ones leave, and (where the budget, not that limit,
    binds) a whole number of tiles' worth of pooled keys, since the kernels pack them into whole tiles. Plain
    Python: the widths of the kernel inputs are known before any tensor is read.
    """
    cost = flop_costs(layout, head_dim, pool)
    nt = layout.n_t
    per_block = layout.block // pool if pool > 0 else 1  # entries whose pooled keys fill one tile
    n_exact, n_coarse = [], []
    for fx, fe in zip(exact_frac, echo_frac):
        n = nt * nt if fx >= 1 else int((fx * cost["dense"] - cost["estimate"]) // cost["exact"])
        n = min(max(n, nt), nt * nt)
        per_tile = 0
        if fe > 0 and pool > 0:
            per_tile = int((fe * cost["dense"] - cost["pool_keys"]) // (cost["coarse"] * nt))
        left = nt - -(-n // nt)  # key tiles a query tile has beyond its exact ones
        if left > per_tile >= per_block:
            # the kernels pack pooled keys into whole tiles: a partly filled one costs a full tile's work
            per_tile -= per_tile % per_block
        n_exact.append(n)
        n_coarse.append(max(0, min(per_tile, left)))
    return n_exact, n_coarse


def plan_tiles(
    p_hat: torch.Tensor,
    layout: Layout,
    head_dim: int,
    n_exact: torch.Tensor,
    n_coarse: torch.Tensor,
    widths: tuple[int, int],
    pool: int,
) -> Allocation:
    """Exact tiles and pooled-echo tiles of every row, with static shapes (no host reads) [reconstructed].

    Each query tile keeps its diagonal plus the highest-``P_hat`` key tiles (:func:`select_exact` rule:
    ``k_q`` each, the remainder to the query tiles with the best next candidate); the next ``n_coarse`` tiles
    of its ranking are synthesised from their pooled keys (the pooled echo). Other tiles are dropped.

    Args:
        p_hat: ``[N, n_t, n_t]`` estimated tile mass.
        layout: Token layout.
        head_dim: ``D``.
        n_exact: ``[N]`` exact tiles per row (from :func:`tile_counts`).
        n_coarse: ``[N]`` pooled-echo tiles per query tile.
        widths: ``(max_k, n_c)``: Python upper bounds of the per-query-tile exact and pooled-echo counts.
        pool: Pooled keys per tile.
    """
    n, nt, _ = p_hat.shape
    w_x, w_e = widths
    dev = p_hat.device
    score = p_hat.clone()
    score.diagonal(dim1=-2, dim2=-1).fill_(math.inf)
    order = score.topk(min(w_x + w_e, nt), -1).indices  # [N, n_t, w]: ranking, descending
    kq = (n_exact // nt)[:, None]
    extra = (n_exact % nt)[:, None]
    at = kq.clamp_max(order.shape[-1] - 1)[..., None].expand(n, nt, 1)
    nxt = torch.gather(p_hat, -1, torch.gather(order, -1, at))
    row_rank = torch.empty_like(kq.expand(n, nt)).scatter_(
        -1, nxt[..., 0].argsort(-1, descending=True), torch.arange(nt, device=dev).expand(n, nt)
    )
    count = kq + (row_rank < extra).long()  # [N, n_t]
    slot = torch.arange(w_x, device=dev)
    lut = torch.where(slot < count[..., None], order[..., :w_x], -1).int()
    exact = torch.zeros(n, nt, nt + 1, dtype=torch.bool, device=dev)
    exact = exact.scatter_(-1, torch.where(lut >= 0, lut.long(), nt), True)[..., :nt]
    cost = flop_costs(layout, head_dim, pool)
    flops = cost["estimate"] + cost["exact"] * count.sum(-1)
    coarse_lut = None
    echoed = torch.zeros_like(exact)
    if w_e:
        rank = (count[..., None] + torch.arange(w_e, device=dev)).clamp_max(order.shape[-1] - 1)
        live = (torch.arange(w_e, device=dev) < n_coarse[:, None, None]) & (
            count[..., None] + torch.arange(w_e, device=dev) < order.shape[-1]
        )
        coarse_lut = torch.where(live, torch.gather(order, -1, rank), -1).int()
        echoed = torch.zeros(n, nt, nt + 1, dtype=torch.bool, device=dev)
        echoed = echoed.scatter_(-1, torch.where(live, coarse_lut.long(), nt), True)[..., :nt]
        n_live = live.flatten(1).sum(-1)
        flops = flops + torch.where(n_live > 0, cost["pool_keys"], 0.0) + cost["coarse"] * n_live
    skipped = (p_hat * ~exact).flatten(1).sum(-1)
    coverage = (p_hat * echoed).flatten(1).sum(-1) / skipped.clamp_min(1e-12)
    return Allocation(exact, echoed, lut, count.int(), flops / cost["dense"], coverage, coarse_lut)


def lut_from_mask(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``[..., n_q, n_k]`` bool -> (LUT ``[..., n_q, max_k]`` int32 ascending, ``-1``-padded; counts)."""
    count = mask.sum(-1)
    width = max(int(count.max()), 1)
    order = torch.argsort((~mask).to(torch.int8), dim=-1, stable=True)[..., :width]
    lut = torch.where(torch.arange(width, device=mask.device) < count[..., None], order, -1)
    return lut.to(torch.int32), count.to(torch.int32)


def select_exact(p_hat: torch.Tensor, n_tiles: torch.Tensor) -> torch.Tensor:
    """Exact-tile mask: per query tile the diagonal plus the highest-``P_hat`` key tiles.

    ``n_tiles`` ``[N]`` total tiles per row (clamped to ``[n_t, n_t^2]``) gives ``k_q = n_tiles // n_t`` tiles
    per query tile; the remainder goes, one each, to the query tiles whose next candidate has the highest
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
    """Budget split between exact, echoed and dropped tiles (all [reconstructed]).

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
    return from_masks(p_hat, layout, cost, exact.view(n, nt, nt), echoed_b, src, bands)


def _set_pairs(exact: torch.Tensor, pair: torch.Tensor, mark: torch.Tensor) -> torch.Tensor:
    """Set ``exact[n, pair[g, f]] = True`` where ``mark[n, g, f]``."""
    flat = torch.where(mark, pair, exact.shape[1]).flatten(1)
    out = torch.zeros(exact.shape[0], exact.shape[1] + 1, dtype=torch.bool, device=exact.device)
    return out.scatter_(1, flat, True)[:, :-1] | exact


def from_masks(
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
    return Allocation(
        exact, echoed, lut, lut_count, flops, coverage, pairs=pairs, indptr=indptr, entries=entries
    )
