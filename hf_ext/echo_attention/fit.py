"""Stage 1 of the EchoAttention distillation: closed-form least squares of the echo parameters.

EchoAttention (reconstructed; not verified against the paper). Everything here is [reconstructed] from the
one-line description of the method (Sparse operator + Echo operator + per-head routing); see
``docs/methods/echo_attention.md``.
"""

from __future__ import annotations

import math

import torch

from hf_ext.echo_attention.core import Theta, pooled_keys
from hf_ext.echo_attention.layout import Layout


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
        weight: ``[H, M, b]`` sample weights (the member row's true attention mass in the tile)
            [reconstructed].
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
                    stats,
                    delta + f - 1,
                    take(out, x),
                    take(lse, x),
                    take(out, y),
                    take(lse, y),
                    torch.full((take(lse, y).shape[1],), float(d)),
                    take(weight, x),
                )


def pooled_stats(
    q: torch.Tensor, k: torch.Tensor, layout: Layout, pool: int, stats: dict[str, torch.Tensor]
) -> None:
    """Stage 1 of the pooled echo on one dense call [reconstructed].

    Per (head, frame offset), adds to ``stats`` the gap ``lse_tile - lse_pooled`` between each row's true
    log-sum-exp over a key tile and its estimate from the tile's pooled keys, weighted by the estimated
    attention mass ``exp(lse_pooled - lse_row)``; :func:`solve_theta` then gives ``w`` as the weighted mean
    gap (``a = 1``, ``c = u = 0``). Weighting by the true mass instead favours the peaky tiles that stay exact
    and overstates the gap of the synthesised ones. ``q, k``: padded ``[B, H, padded_len, D]``.
    """
    f, ns, blk = layout.frames, layout.n_s, layout.block
    bsz, h, _, d = q.shape
    kc = pooled_keys(k, k, layout, pool)[0].view(bsz, h, f, ns, pool, d)
    logc = layout.pool_log_count(pool, q.device).view(f, ns, pool)[0]  # the same in every frame
    qt = q.float().view(bsz, h, f, ns, blk, d)
    lses = {delta: band_partials(q, k, k, layout, delta, with_out=False)[1] for delta in range(-(f - 1), f)}
    row = torch.full((bsz, h, f, ns, blk), -math.inf, device=q.device)
    for delta, lse in lses.items():
        fq = torch.arange(f - abs(delta), device=q.device) + max(0, -delta)
        row[:, :, fq] = torch.logaddexp(row[:, :, fq], lse.logsumexp(3).permute(0, 1, 3, 2, 4))
    qvalid = layout.valid(q.device)
    qv = torch.ones(ns, blk, device=q.device) if qvalid is None else qvalid.view(f, ns, blk)[0].float()
    for delta, lse in lses.items():
        fq = torch.arange(f - abs(delta), device=q.device) + max(0, -delta)
        logits = torch.einsum("bhfsid,bhftjd->bhstfij", qt[:, :, fq], kc[:, :, fq + delta]) * d**-0.5
        est = (logits + logc[None, None, None, :, None, None, :]).logsumexp(-1)  # [B, H, n_s, n_s, F', b]
        ref = row[:, :, fq].permute(0, 1, 3, 2, 4)[:, :, :, None]
        weight = torch.exp(est - ref) * qv[None, None, :, None, None, :]
        gap = torch.where(torch.isfinite(lse) & torch.isfinite(est), lse - est, 0.0)
        g = delta + f - 1
        stats["W"][:, g] += weight.double().transpose(0, 1).reshape(h, -1).sum(-1)
        stats["Sr"][:, g] += (weight * gap).double().transpose(0, 1).reshape(h, -1).sum(-1)
