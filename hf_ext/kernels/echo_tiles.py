"""``echo_merge``: synthesise skipped ("echoed") attention tiles from representatives and merge by LSE.

Semantics are [reconstructed] (EchoAttention, reconstructed; not verified against the paper). For every
echo entry of a query tile (representative id ``r``, frame distance ``|df|``, parameter id ``g``), row ``i``
of the tile gets an extra partial

    O_e[i] = a_g * O_rep[r, i] + c_g,        lse_e[i] = lse_rep[r, i] + u_g * |df| + w_g,

and all partials of the row are merged with the exact block-sparse result by the log-sum-exp rule
``lse = logsumexp(lse_E, lse_e, ...)``, ``O = sum_x exp(lse_x - lse) * O_x`` (fp32). About ``6*b*D`` FLOPs
per echoed tile, against ``4*b^2*D`` for an exact one.

Backends: a vectorised PyTorch reference (``index_add``; differentiable in ``theta``, used for calibration)
and a Triton kernel (grid ``(n_q, B*H)``, one pass over each query tile's CSR range).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import torch

from hf_ext.kernels._dispatch import resolve_fast_path
from hf_ext.kernels._lse import add_weighted_rows, merge_weights

Theta = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def echo_merge(
    out_e: torch.Tensor,
    lse_e: torch.Tensor,
    rep_out: torch.Tensor,
    rep_lse: torch.Tensor,
    echo_csr: tuple[torch.Tensor, torch.Tensor],
    theta: Theta,
    backend: str = "auto",
) -> torch.Tensor:
    """Add echoed partials to the exact block-sparse output.

    Args:
        out_e: Exact output ``[B, H, S, D]`` (from
            :func:`~hf_ext.kernels.block_sparse.block_sparse_attention`).
        lse_e: Its log-sum-exp ``[B, H, S]`` (fp32).
        rep_out: Representative per-tile partial outputs ``[B, H, n_p, b, D]``.
        rep_lse: Their log-sum-exps ``[B, H, n_p, b]``.
        echo_csr: ``(indptr, entries)``: ``indptr`` ``[B, H, n_q + 1]`` (``n_q = ceil(S / b)``) delimits each
            query tile's entries in ``entries`` ``[B, H, n_e, 3]`` = (representative id, ``|df|``, parameter
            id).
        theta: ``(a, c, u, w)`` of shapes ``[H, G]``, ``[H, G, D]``, ``[H, G]``, ``[H, G]`` (G parameter ids).
        backend: ``"auto"``, ``"torch"`` or ``"triton"``.

    Returns:
        Merged output ``[B, H, S, D]`` in ``out_e``'s dtype.

    Raises:
        ValueError: inconsistent shapes, a decreasing ``indptr``, or ids out of range.
        TypeError: a non-integer ``echo_csr`` or integer outputs.

    Example:
        >>> out, lse = torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 2)
        >>> csr = (torch.tensor([[[0, 1]]]), torch.tensor([[[[0, 0, 0]]]]))
        >>> theta = (torch.ones(1, 1), torch.zeros(1, 1, 2), torch.zeros(1, 1), torch.zeros(1, 1))
        >>> echo_merge(out, lse, torch.ones(1, 1, 1, 2, 2), torch.zeros(1, 1, 1, 2), csr, theta)[0, 0]
        tensor([[1., 1.],
                [1., 1.]])
    """
    _check(out_e, lse_e, rep_out, rep_lse, echo_csr, theta)
    sizes = {"block": rep_out.shape[3], "D": rep_out.shape[4]}
    if resolve_fast_path("echo_merge", backend, out_e, rep_out, minimum=16, **sizes) == "triton":
        return _triton_echo_merge(out_e, lse_e, rep_out, rep_lse, echo_csr, theta)
    return _reference_echo_merge(out_e, lse_e, rep_out, rep_lse, echo_csr, theta)


def _check(
    out_e: torch.Tensor,
    lse_e: torch.Tensor,
    rep_out: torch.Tensor,
    rep_lse: torch.Tensor,
    echo_csr: tuple[torch.Tensor, torch.Tensor],
    theta: Theta,
) -> None:
    if not out_e.is_floating_point() or not rep_out.is_floating_point():
        raise TypeError(
            f"`out_e` and `rep_out` must be floating point, got {out_e.dtype} and {rep_out.dtype}."
        )
    if out_e.dim() != 4 or tuple(lse_e.shape) != tuple(out_e.shape[:3]):
        raise ValueError(
            f"`out_e` must be [B, H, S, D] and `lse_e` [B, H, S], got {tuple(out_e.shape)}, "
            f"{tuple(lse_e.shape)}."
        )
    b, h, s, d = out_e.shape
    if rep_out.dim() != 5 or tuple(rep_out.shape[:2]) != (b, h) or rep_out.shape[-1] != d:
        raise ValueError(f"`rep_out` must be [{b}, {h}, n_p, block, {d}], got {tuple(rep_out.shape)}.")
    if tuple(rep_lse.shape) != tuple(rep_out.shape[:4]):
        raise ValueError(f"`rep_lse` must be {tuple(rep_out.shape[:4])}, got {tuple(rep_lse.shape)}.")
    indptr, entries = echo_csr
    for name, t in (("echo_csr[0]", indptr), ("echo_csr[1]", entries)):
        if t.is_floating_point() or t.dtype == torch.bool:
            raise TypeError(f"`{name}` must be an integer tensor, got dtype {t.dtype}.")
    n_q = math.ceil(s / rep_out.shape[3])
    if tuple(indptr.shape) != (b, h, n_q + 1):
        raise ValueError(f"`echo_csr[0]` (indptr) must be [{b}, {h}, {n_q + 1}], got {tuple(indptr.shape)}.")
    if entries.dim() != 4 or tuple(entries.shape[:2]) != (b, h) or entries.shape[-1] != 3:
        raise ValueError(f"`echo_csr[1]` (entries) must be [{b}, {h}, n_e, 3], got {tuple(entries.shape)}.")
    if bool((indptr.diff(dim=-1) < 0).any()) or int(indptr[..., 0].abs().max()) != 0:
        raise ValueError("`echo_csr[0]` (indptr) must start at 0 and be non-decreasing along the last dim.")
    if int(indptr[..., -1].max()) > entries.shape[2]:
        raise ValueError(f"`echo_csr[0]` points past the {entries.shape[2]} entries of `echo_csr[1]`.")
    a, c, u, w = theta
    n_g = a.shape[-1]
    if a.shape != (h, n_g) or c.shape != (h, n_g, d) or u.shape != (h, n_g) or w.shape != (h, n_g):
        raise ValueError(
            f"`theta` must be (a [H, G], c [H, G, D], u [H, G], w [H, G]) with H={h}, D={d}, got "
            f"{tuple(a.shape)}, {tuple(c.shape)}, {tuple(u.shape)}, {tuple(w.shape)}."
        )
    live = torch.arange(entries.shape[2], device=entries.device) < indptr[..., -1:]
    if live.any():
        e = entries[live]
        for col, name, hi in ((0, "representative id", rep_out.shape[2]), (2, "parameter id", n_g)):
            if int(e[:, col].min()) < 0 or int(e[:, col].max()) >= hi:
                raise ValueError(
                    f"`echo_csr[1]` {name}s must lie in [0, {hi}), got "
                    f"[{int(e[:, col].min())}, {int(e[:, col].max())}]."
                )
        if int(e[:, 1].min()) < 0:
            raise ValueError(f"`echo_csr[1]` frame distances must be >= 0, got {int(e[:, 1].min())}.")


def _reference_echo_merge(
    out_e: torch.Tensor,
    lse_e: torch.Tensor,
    rep_out: torch.Tensor,
    rep_lse: torch.Tensor,
    echo_csr: tuple[torch.Tensor, torch.Tensor],
    theta: Theta,
) -> torch.Tensor:
    """Vectorised LSE merge: ``scatter_reduce`` for the row maxima, ``index_add`` for the sums.

    The weighted echoed partials ``w_x a O_rep`` are added in cache-sized chunks, so they never materialise at
    ``[n_entries, b, D]``; the ``w_x c`` terms are summed per (row, parameter id) first. The path is
    differentiable in ``theta`` (stage-3 calibration).
    """
    b, h, s, d = out_e.shape
    blk = rep_out.shape[3]
    n_q = math.ceil(s / blk)
    indptr, entries = echo_csr
    n_e = entries.shape[2]
    pad = n_q * blk - s
    o_t = torch.nn.functional.pad(out_e.to(torch.float32), (0, 0, 0, pad)).reshape(b * h * n_q, blk, d)
    l_t = torch.nn.functional.pad(lse_e.to(torch.float32), (0, pad), value=-math.inf).reshape(
        b * h * n_q, blk
    )
    e_idx = torch.arange(n_e, device=out_e.device).expand(b, h, n_e)
    live = e_idx < indptr[..., -1:]
    qtile = torch.searchsorted(indptr[..., 1:].contiguous(), e_idx.contiguous(), right=True).clamp_max(
        n_q - 1
    )
    bh = torch.arange(b * h, device=out_e.device).view(b, h, 1)
    flat_q = (bh * n_q + qtile)[live]  # [n_live]
    flat_r = (bh * rep_out.shape[2] + entries[..., 0].long())[live]
    hh = torch.arange(h, device=out_e.device).view(1, h, 1).expand(b, h, n_e)[live]
    g = entries[..., 2].long()[live]
    dist = entries[..., 1].to(torch.float32)[live]
    a, c, u, w = (t.to(torch.float32) for t in theta)
    l_x = rep_lse.reshape(-1, blk).to(torch.float32)[flat_r] + (u[hh, g] * dist + w[hh, g])[:, None]
    _, w_t, w_x, den = merge_weights(l_t, flat_q, l_x)  # w_x: [n_live, b]
    rep_flat = rep_out.reshape(-1, blk, d).to(torch.float32)
    num = add_weighted_rows(o_t * w_t[..., None], flat_q, rep_flat, a[hh, g][:, None] * w_x, index=flat_r)
    # the c_g terms: sum the weights per (query row, parameter id) first, then one small product per head
    n_g = a.shape[-1]
    w_g = torch.zeros(b * h * n_q * n_g, blk, device=out_e.device).index_add_(0, flat_q * n_g + g, w_x)
    num = num + torch.einsum("bhqgi,hgd->bhqid", w_g.view(b, h, n_q, n_g, blk), c).reshape_as(num)
    out = num / den.clamp_min(torch.finfo(torch.float32).tiny)[..., None]
    return out.view(b, h, n_q * blk, d)[:, :, :s].to(out_e.dtype)


@cache
def _kernel() -> Any:
    """Define the Triton kernel on first use (reads ``TRITON_INTERPRET`` at that moment)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _echo_merge_fwd(
        OE,
        LE,
        PO,
        PL,
        PTR,
        ENT,
        A,
        C,
        U,
        W,
        O,
        n_q,
        n_e,
        n_p,
        n_g,
        H,
        S,
        BLOCK: tl.constexpr,
        D: tl.constexpr,
    ):
        qt = tl.program_id(0)
        bh = tl.program_id(1)
        h = bh % H
        rows = qt * BLOCK + tl.arange(0, BLOCK)
        prow = tl.arange(0, BLOCK)
        dd = tl.arange(0, D)
        rmask = rows < S
        acc = tl.load(OE + (bh * S + rows[:, None]) * D + dd[None, :], mask=rmask[:, None], other=0.0).to(
            tl.float32
        )
        m_i = tl.load(LE + bh * S + rows, mask=rmask, other=float("-inf"))
        l_i = tl.where(m_i == float("-inf"), 0.0, 1.0)
        start = tl.load(PTR + bh * (n_q + 1) + qt)
        end = tl.load(PTR + bh * (n_q + 1) + qt + 1)
        for e in range(start, end):
            rep = tl.load(ENT + (bh * n_e + e) * 3)
            dist = tl.load(ENT + (bh * n_e + e) * 3 + 1).to(tl.float32)
            g = tl.load(ENT + (bh * n_e + e) * 3 + 2)
            a = tl.load(A + h * n_g + g)
            uu = tl.load(U + h * n_g + g)
            ww = tl.load(W + h * n_g + g)
            cc = tl.load(C + (h * n_g + g) * D + dd)
            base = bh * n_p + rep
            o_r = tl.load(PO + (base * BLOCK + prow[:, None]) * D + dd[None, :]).to(tl.float32)
            lam = tl.load(PL + base * BLOCK + prow) + uu * dist + ww
            o_x = a * o_r + cc[None, :]
            m_new = tl.maximum(m_i, lam)
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m_i - m_safe)
            beta = tl.exp(lam - m_safe)
            acc = acc * (l_i * alpha)[:, None] + o_x * beta[:, None]
            l_i = l_i * alpha + beta
            acc = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
            m_i = m_new
        tl.store(O + (bh * S + rows[:, None]) * D + dd[None, :], acc, mask=rmask[:, None])

    return _echo_merge_fwd


def _triton_echo_merge(
    out_e: torch.Tensor,
    lse_e: torch.Tensor,
    rep_out: torch.Tensor,
    rep_lse: torch.Tensor,
    echo_csr: tuple[torch.Tensor, torch.Tensor],
    theta: Theta,
) -> torch.Tensor:
    """Launch the Triton kernel; ``acc`` holds the normalised running output (fp32)."""
    b, h, s, d = out_e.shape
    blk = rep_out.shape[3]
    n_q = math.ceil(s / blk)
    indptr, entries = echo_csr
    out = torch.empty(b, h, s, d, dtype=torch.float32, device=out_e.device)
    a, c, u, w = (t.to(torch.float32).contiguous() for t in theta)
    _kernel()[(n_q, b * h)](
        out_e.contiguous(),
        lse_e.to(torch.float32).contiguous(),
        rep_out.to(torch.float32).contiguous(),
        rep_lse.to(torch.float32).contiguous(),
        indptr.to(torch.int32).contiguous(),
        entries.to(torch.int32).contiguous(),
        a,
        c,
        u,
        w,
        out,
        n_q,
        entries.shape[2],
        rep_out.shape[2],
        a.shape[-1],
        h,
        s,
        BLOCK=blk,
        D=d,
    )
    return out.to(out_e.dtype)
