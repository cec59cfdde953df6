"""Decode attention over a gathered subset of a KV cache (Vegas drafts, Quest pages).

Shapes (``B`` batch, ``H_q``/``H_kv`` query/KV heads, ``N`` cache length, ``D`` head size):

* ``gathered_decode_attention(q, k, v, idx, scale=, length=)``: ``q`` ``[B, H_q, 1, D]``; ``idx`` ``[B, n]``
  (shared by the heads), ``[B, H_kv, n]`` (per KV head, Quest), a
  :class:`~hf_ext.kernels.chunked.KeySelection` (selected slots, then a dense tail up to each row's
  ``length``: Vegas's drafts) or ``None`` (compact mode: attend to the first ``length`` rows of ``k``/``v``;
  ``length`` an int or per-row ``[B]``). Returns ``out`` ``[B, H_q, 1, D]`` (dtype of ``q``) and ``lse``
  ``[B, H_q]`` (fp32): ``out = softmax(scale * q k[idx]^T) v[idx]`` and ``lse = logsumexp(scale * q
  k[idx]^T)``.
* Rows of a batch may select different numbers of positions: ``idx`` entries equal to ``-1`` are padding.

On CPU, ``backend="auto"`` runs a ``KeySelection`` and compact mode in fp32 through the C kernel of
:mod:`~hf_ext.kernels.chunked` (a one-row chunk that reads the selected rows in place, prefetching
the rows two blocks ahead: at 8 rows x 2.3k of 32k slots, 4 heads of 64, about 1.5x the time of the same
rows laid out contiguously, and no copy), compact mode else through ATen's fused flash kernel (one pass, and
it returns the LSE); ``backend="torch"`` is the reference (gather, then matmul and logsumexp).

The Triton kernel is built by a cached factory on first use (never at import) so that ``TRITON_INTERPRET=1``
is read at that moment. One program per (batch, KV head) serves its ``H_q / H_kv`` query rows, loops over the
indices in chunks of ``BLOCK_N`` and keeps an fp32 online softmax. Split-K (flash-decoding) is not
implemented; a ``KeySelection`` reaches it as an index tensor (:meth:`KeySelection.slots`).
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from hf_ext.kernels._dispatch import check_float, check_triton_sizes, resolve_backend
from hf_ext.kernels.chunked import (
    KeySelection,
    check_selection,
    chunk_attention,
    kernel_applies,
    run_kernel,
)

BLOCK_N = 64


def _check_kv(q: torch.Tensor | None, k: torch.Tensor, v: torch.Tensor) -> None:
    if k.dim() != 4 or v.shape != k.shape:
        raise ValueError(
            f"`k` and `v` must both be [B, H_kv, N, D], got {tuple(k.shape)} and {tuple(v.shape)}."
        )
    if q is None:
        return
    if q.dim() != 4 or q.shape[2] != 1:
        raise ValueError(f"`q` must be [B, H_q, 1, D], got {tuple(q.shape)}.")
    if q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"`q` {tuple(q.shape)} and `k` {tuple(k.shape)} must agree on batch (dim 0) and head size "
            "(dim 3)."
        )
    if q.shape[1] % k.shape[1]:
        raise ValueError(f"H_q={q.shape[1]} (from `q`) must be a multiple of H_kv={k.shape[1]} (from `k`).")


def _check_idx(idx: torch.Tensor, k: torch.Tensor) -> None:
    if idx.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"`idx` must be an int32 or int64 tensor, got dtype {idx.dtype}.")
    per_head_mismatch = idx.dim() == 3 and idx.shape[1] != k.shape[1]
    if idx.dim() not in (2, 3) or idx.shape[0] != k.shape[0] or per_head_mismatch:
        raise ValueError(
            f"`idx` must be [B, n] or [B, H_kv, n] matching `k` {tuple(k.shape)}, got {tuple(idx.shape)}."
        )
    if idx.shape[-1] == 0 or bool((idx.amax(dim=-1) < 0).any()):
        raise ValueError(
            "`idx` selects nothing in some row; each row must select at least one cache position."
        )
    lo, hi = int(idx.min()), int(idx.max())
    if lo < -1 or hi >= k.shape[2]:
        raise ValueError(
            f"`idx` values must lie in [0, {k.shape[2]}) (the cache length), or be -1 (padding), got range "
            f"[{lo}, {hi}]."
        )
    s = idx.sort(dim=-1).values
    if bool(((s[..., 1:] == s[..., :-1]) & (s[..., 1:] >= 0)).any()):
        raise ValueError(
            "`idx` holds duplicated positions; each cache position may be selected once per row."
        )


def row_lengths(name: str, value: int | torch.Tensor, batch: int, high: int, device: Any) -> torch.Tensor:
    """``value`` (an int, or one int per row) as an int64 ``[batch]`` tensor of lengths in ``[1, high]``."""
    if isinstance(value, torch.Tensor):
        if value.dtype not in (torch.int32, torch.int64) or value.shape != (batch,):
            raise ValueError(
                f"`{name}` must be an int or an integer tensor of shape ({batch},), got {value!r}."
            )
        out = value.to(device=device, dtype=torch.int64)
    else:
        out = torch.full((batch,), int(value), dtype=torch.int64, device=device)
    if batch and (int(out.min()) < 1 or int(out.max()) > high):
        raise ValueError(f"`{name}` must lie in [1, {high}], got {value!r}.")
    return out


# ------------------------------------------------------------------------------ gathered_decode_attention
def _reference_gathered_decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor | None,
    scale: float,
    lengths: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    b, h_q, _, d = q.shape
    h_kv = k.shape[1]
    g = h_q // h_kv
    valid: torch.Tensor | None = None  # [B, 1 or H_kv, 1, n]; None when every slot is attended
    if idx is None:
        assert lengths is not None
        n = int(lengths.max())
        ks, vs = k[:, :, :n], v[:, :, :n]
        if int(lengths.min()) < n:
            valid = (torch.arange(n, device=k.device)[None] < lengths[:, None])[:, None, None]
    else:
        per_head = idx if idx.dim() == 3 else idx[:, None].expand(-1, h_kv, -1)
        gi = per_head.clamp(min=0)[..., None].expand(*per_head.shape, d)  # padding reads slot 0, masked below
        ks, vs = k.gather(2, gi), v.gather(2, gi)
        valid = (per_head >= 0)[:, :, None]
    qg = q.float().view(b, h_kv, g, d)
    logits = torch.matmul(qg, ks.float().transpose(-1, -2)) * scale  # [B, H_kv, G, n]
    if valid is not None and not bool(valid.all()):
        logits = logits.masked_fill(~valid, float("-inf"))
        vs = vs.masked_fill(~valid.transpose(-1, -2), 0.0)  # unattended slots may hold NaN: 0 * NaN = NaN
    lse = torch.logsumexp(logits, dim=-1)
    out = torch.matmul(torch.exp(logits - lse[..., None]), vs.float())  # [B, H_kv, G, D]
    return out.reshape(b, h_q, 1, d).to(q.dtype), lse.reshape(b, h_q)


def _tails_finite(k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor) -> bool:
    """Whether the slots from the shortest row's length to the longest's are finite: the fused kernel gives a
    short row's slots there zero weight, and 0 * NaN would still reach its output."""
    low, high = int(lengths.min()), int(lengths.max())
    return low == high or bool(
        torch.isfinite(k[:, :, low:high]).all() and torch.isfinite(v[:, :, low:high]).all()
    )


def _cpu_compact_decode_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, lengths: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Compact mode on CPU in fp32 through ATen's fused flash kernel, which also returns the LSE: one
    pass over the buffer instead of the reference's matmul, logsumexp, exp and matmul (2x faster, measured
    at 8 rows x 2.3k entries). The ``G`` query heads of a KV head are its ``G`` query rows."""
    b, h_q, _, d = q.shape
    h_kv, n = k.shape[1], int(lengths.max())
    mask = None
    if int(lengths.min()) < n:
        hidden = torch.arange(n, device=k.device)[None] >= lengths[:, None]
        mask = q.new_zeros(b, 1, 1, n).masked_fill(hidden[:, None, None], float("-inf"))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q.view(b, h_kv, h_q // h_kv, d), k[:, :, :n], v[:, :, :n], attn_mask=mask, scale=scale
    )
    return out.reshape(b, h_q, 1, d), lse.reshape(b, h_q)


@functools.cache
def _triton_decode_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(
        Q,
        K,
        V,
        IDX,
        LEN,
        OUT,
        LSE,
        n,
        scale,
        sqb,
        sqh,
        skb,
        skh,
        skn,
        sib,
        sih,
        sob,
        soh,
        slb,
        G: tl.constexpr,
        GP: tl.constexpr,
        D: tl.constexpr,
        BLOCK: tl.constexpr,
        HAS_IDX: tl.constexpr,
    ):
        b = tl.program_id(0)
        hk = tl.program_id(1)
        g = tl.arange(0, GP)
        d = tl.arange(0, D)
        gm = g < G
        qh = hk * G + g
        q = tl.load(Q + b * sqb + qh[:, None] * sqh + d[None, :], mask=gm[:, None], other=0.0).to(tl.float32)
        m = tl.full([GP], float("-inf"), tl.float32)
        lsum = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, D], tl.float32)
        if HAS_IDX:
            limit = n
        else:
            limit = tl.load(LEN + b)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            nm = offs < limit
            if HAS_IDX:
                rows = tl.load(IDX + b * sib + hk * sih + offs, mask=nm, other=-1)
                nm = nm & (rows >= 0)
            else:
                rows = offs
            base = b * skb + hk * skh + rows[:, None] * skn + d[None, :]
            kk = tl.load(K + base, mask=nm[:, None], other=0.0).to(tl.float32)
            vv = tl.load(V + base, mask=nm[:, None], other=0.0).to(tl.float32)
            s = tl.sum(q[:, None, :] * kk[None, :, :], axis=2) * scale
            s = tl.where(nm[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            alpha = tl.where(m_new == float("-inf"), 1.0, tl.exp(m - m_new))
            p = tl.where(nm[None, :], tl.exp(s - m_new[:, None]), 0.0)
            acc = acc * alpha[:, None] + tl.sum(p[:, :, None] * vv[None, :, :], axis=1)
            lsum = lsum * alpha + tl.sum(p, axis=1)
            m = m_new
        out = acc / lsum[:, None]
        tl.store(
            OUT + b * sob + qh[:, None] * soh + d[None, :], out.to(OUT.dtype.element_ty), mask=gm[:, None]
        )
        tl.store(LSE + b * slb + qh, m + tl.log(lsum), mask=gm)

    return kernel


def _triton_gathered_decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor | None,
    scale: float,
    lengths: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    import triton

    b, h_q, _, d = q.shape
    h_kv = k.shape[1]
    g = h_q // h_kv
    q = q.contiguous()
    if k.stride(-1) != 1 or v.stride(-1) != 1 or k.stride() != v.stride():
        k, v = k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    lse = torch.empty(b, h_q, dtype=torch.float32, device=q.device)
    if idx is None:
        assert lengths is not None
        idx_t, sib, sih, n, len_t = q.new_zeros(1, dtype=torch.int32), 0, 0, int(lengths.max()), lengths
    else:
        idx_t = idx.contiguous()
        n, len_t = idx_t.shape[-1], q.new_zeros(1, dtype=torch.int64)
        sib, sih = idx_t.stride(0), (idx_t.stride(1) if idx_t.dim() == 3 else 0)
    _triton_decode_kernel()[(b, h_kv)](
        q,
        k,
        v,
        idx_t,
        len_t,
        out,
        lse,
        n,
        float(scale),
        q.stride(0),
        q.stride(1),
        k.stride(0),
        k.stride(1),
        k.stride(2),
        sib,
        sih,
        out.stride(0),
        out.stride(1),
        lse.stride(0),
        G=g,
        GP=triton.next_power_of_2(g),
        D=d,
        BLOCK=BLOCK_N,
        HAS_IDX=idx is not None,
    )
    return out, lse


def gathered_decode_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    idx: torch.Tensor | KeySelection | None = None,
    *,
    scale: float,
    length: int | torch.Tensor | None = None,
    padding_finite: bool = False,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor]:
    """One-query attention over the cache rows ``idx`` (or the first ``length`` rows in compact mode, or a
    :class:`~hf_ext.kernels.chunked.KeySelection` of rows with each row's ``length``).

    Args:
        q: Query ``[B, H_q, 1, D]``.
        k: Keys ``[B, H_kv, N, D]`` (last dimension contiguous).
        v: Values ``[B, H_kv, N, D]``.
        idx: ``[B, n]`` shared by all heads, ``[B, H_kv, n]`` per KV head, ``None`` (compact mode), or a
            ``KeySelection`` (its selected rows, then the rows from its tail start to ``length``; the query
            is the last of them); ``-1`` entries of an index tensor are padding (rows that select fewer
            positions).
        scale: Softmax scale (e.g. ``module.scaling``).
        length: Compact mode and ``KeySelection``: each row's length (rows ``[0, length)`` in compact mode),
            one int for all rows or an int tensor ``[B]`` (ragged rows); defaults to ``N``.
        padding_finite: Compact mode, ragged rows: ``True`` when the caller guarantees that the slots past
            each row's length (up to the longest row's) hold finite values, so ATen's fused CPU kernel (the
            path where the C kernel does not build or apply), which gives them zero weight, runs without first
            reading them to check (``0 * NaN`` is NaN).
        backend: ``"auto"``, ``"torch"`` or ``"triton"``.

    Returns:
        ``(out [B, H_q, 1, D], lse [B, H_q] fp32)``.

    Example:
        >>> q = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2)
        >>> k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [2.0, 0.0]]).view(1, 1, 3, 2)
        >>> v = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]]).view(1, 1, 3, 2)
        >>> out, lse = gathered_decode_attention(q, k, v, torch.tensor([[0, 2]]), scale=1.0)
        >>> [round(x, 5) for x in out.flatten().tolist()], round(lse.item(), 5)
        ([0.26894, 0.0], 2.31326)
    """
    check_float(q=q, k=k, v=v)
    _check_kv(q, k, v)
    full = k.shape[2] if length is None else length
    if isinstance(idx, KeySelection):
        ends = row_lengths("length", full, k.shape[0], k.shape[2], k.device)
        if backend == "auto" and kernel_applies(q, k, v):  # the C kernel reads the rows in place
            out, lse, _ = chunk_attention(q, k, v, ends, scale=scale, selection=idx)
            return out, lse[..., 0]
        check_selection(idx, ends, 1, k.shape[1])
        idx = idx.slots(ends)
    lengths = None
    if idx is not None:
        _check_idx(idx, k)
    else:
        lengths = row_lengths("length", full, k.shape[0], k.shape[2], k.device)
    if resolve_backend(backend, q, k, v) == "triton":
        check_triton_sizes(D=q.shape[-1])
        return _triton_gathered_decode_attention(q, k, v, idx, scale, lengths)
    if backend == "auto" and lengths is not None:
        result = run_kernel(q, k, v, lengths, scale)  # a one-row chunk: its query sits at the row's last slot
        if result is not None:
            return result[0], result[1][..., 0]
    fp32 = q.dtype == k.dtype == v.dtype == torch.float32
    if (
        backend == "auto"
        and lengths is not None
        and q.device.type == "cpu"
        and fp32
        and (padding_finite or _tails_finite(k, v, lengths))
    ):
        return _cpu_compact_decode_attention(q, k, v, scale, lengths)
    return _reference_gathered_decode_attention(q, k, v, idx, scale, lengths)
