"""``block_sparse_attention``: attention over a lookup table (LUT) of kept key tiles, with LSE output.

Semantics are [reconstructed] (EchoAttention, reconstructed; not verified against the paper): each query
tile of ``block`` rows attends to the key tiles listed in its LUT row; the softmax normalises over the kept
tiles only. Besides the merged output and its log-sum-exp, the op can return *per-tile partials*
``(O_t, lse_t)`` (the softmax restricted to one key tile) for a list of (query tile, key tile) pairs: these
are the Echo representatives that :func:`hf_ext.kernels.echo_merge.echo_merge` reuses.

Backends: a gather-based PyTorch reference (exact, fp32) and a FlashAttention-2-style Triton kernel
(grid ``(n_q, B*H)``, online softmax in fp32, ``tl.dot`` for QK^T and PV), chosen by
:func:`hf_ext.kernels._dispatch.resolve_backend`. Triton is imported only on first use.
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any

import torch

from hf_ext.kernels._dispatch import check_triton_sizes, resolve_backend
from hf_ext.kernels._lse import add_weighted_rows, merge_weights

Partials = tuple[torch.Tensor, torch.Tensor]


def block_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lut: torch.Tensor,
    lut_count: torch.Tensor,
    block: int,
    scale: float,
    kv_valid: torch.Tensor | None = None,
    tile_partials: torch.Tensor | None = None,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, Partials]:
    """Block-sparse attention with an online softmax over the kept key tiles.

    Args:
        q: Queries ``[B, H, S, D]``; strided views are fine (diffusers' ``[B, S, H, D]`` via ``transpose(1,
            2)``).
        k: Keys ``[B, H, S, D]``.
        v: Values ``[B, H, S, D]``.
        lut: ``[B, H, n_q, max_k]`` integer key-tile ids per query tile (``n_q = ceil(S / block)``), padded
            with ``-1``; only the first ``lut_count`` entries of a row are read.
        lut_count: ``[B, H, n_q]`` number of valid entries per LUT row (``<= max_k``).
        block: Tile size in tokens (both query and key tiles).
        scale: Logit scale, e.g. ``D ** -0.5``.
        kv_valid: *optional* ``[S]`` bool mask; ``False`` keys (per-frame padding) are excluded.
        tile_partials: *optional* ``[B, H, n_p, 2]`` integer (query tile, key tile) pairs, padded with ``-1``;
            every pair must appear in its query tile's LUT row. Their per-tile partials are also returned.
        backend: ``"auto"``, ``"torch"`` or ``"triton"``.

    Returns:
        ``(out, lse)``: ``out`` ``[B, H, S, D]`` in ``q``'s dtype and ``lse`` ``[B, H, S]`` float32 (``-inf``
        for a row that sees no valid key). With ``tile_partials`` also ``(part_out, part_lse)`` of shapes
        ``[B, H, n_p, block, D]`` and ``[B, H, n_p, block]`` (float32; padded pairs give 0 and ``-inf``).

    Raises:
        ValueError: mismatched shapes, LUT ids outside ``[0, n_q)``, counts above ``max_k``, a partial pair
            missing from the LUT, or (Triton) a ``block``/``D`` that is not a power of two >= 16.
        TypeError: integer ``q``/``k``/``v`` or a non-integer ``lut``/``lut_count``/``tile_partials``.

    Example:
        >>> q = k = v = torch.randn(1, 1, 8, 4)
        >>> lut = torch.tensor([[[[0, 1], [1, 0]]]]); cnt = torch.tensor([[[2, 2]]])
        >>> out, lse = block_sparse_attention(q, k, v, lut, cnt, block=4, scale=0.5)
        >>> ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=0.5)
        >>> torch.allclose(out, ref, atol=1e-5)
        True
    """
    _check(q, k, v, lut, lut_count, block, kv_valid, tile_partials)
    path = resolve_backend(backend, q, k, v, lut)
    pslot = None if tile_partials is None else _partial_slots(lut, lut_count, tile_partials)
    if path == "triton":
        check_triton_sizes(16, block=block, D=q.shape[-1])
        n_p = 0 if tile_partials is None else tile_partials.shape[2]
        out, lse, parts = _triton_block_sparse_attention(
            q, k, v, lut, lut_count, block, scale, kv_valid, pslot, n_p
        )
    else:
        out, lse, parts = _reference_block_sparse_attention(
            q, k, v, lut, lut_count, block, scale, kv_valid, tile_partials, pslot
        )
    if tile_partials is None:
        return out, lse
    assert parts is not None
    return out, lse, parts


def _check(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lut: torch.Tensor,
    lut_count: torch.Tensor,
    block: int,
    kv_valid: torch.Tensor | None,
    tile_partials: torch.Tensor | None,
) -> None:
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_floating_point():
            raise TypeError(f"`{name}` must be a floating-point tensor, got dtype {t.dtype}.")
        if t.dim() != 4:
            raise ValueError(f"`{name}` must be [B, H, S, D], got shape {tuple(t.shape)}.")
    if k.shape != q.shape or v.shape != q.shape:
        raise ValueError(
            f"`q`, `k`, `v` must share [B, H, S, D], got {tuple(q.shape)}, {tuple(k.shape)}, "
            f"{tuple(v.shape)}."
        )
    if not isinstance(block, int) or block < 1:
        raise ValueError(f"`block` must be an int >= 1, got {block!r}.")
    b, h, s, _ = q.shape
    n = math.ceil(s / block)
    for name, x in (("lut", lut), ("lut_count", lut_count), ("tile_partials", tile_partials)):
        if x is not None and (x.is_floating_point() or x.dtype == torch.bool):
            raise TypeError(f"`{name}` must be an integer tensor, got dtype {x.dtype}.")
    if lut.dim() != 4 or tuple(lut.shape[:3]) != (b, h, n):
        raise ValueError(
            f"`lut` must be [B, H, n_q, max_k] = [{b}, {h}, {n}, max_k], got {tuple(lut.shape)}."
        )
    if tuple(lut_count.shape) != (b, h, n):
        raise ValueError(f"`lut_count` must be [{b}, {h}, {n}], got {tuple(lut_count.shape)}.")
    max_k = lut.shape[-1]
    if lut_count.numel() and (int(lut_count.min()) < 0 or int(lut_count.max()) > max_k):
        raise ValueError(
            f"`lut_count` must lie in [0, max_k={max_k}], got values in "
            f"[{int(lut_count.min())}, {int(lut_count.max())}]."
        )
    used = torch.arange(max_k, device=lut.device) < lut_count[..., None]
    if used.any() and (int(lut[used].min()) < 0 or int(lut[used].max()) >= n):
        raise ValueError(
            f"`lut` ids must lie in [0, n_k={n}), got values in "
            f"[{int(lut[used].min())}, {int(lut[used].max())}]."
        )
    if kv_valid is not None and tuple(kv_valid.shape) != (s,):
        raise ValueError(f"`kv_valid` must have shape ({s},), got {tuple(kv_valid.shape)}.")
    if tile_partials is not None and (
        tile_partials.dim() != 4 or tuple(tile_partials.shape[:2]) != (b, h) or tile_partials.shape[-1] != 2
    ):
        raise ValueError(f"`tile_partials` must be [{b}, {h}, n_p, 2], got {tuple(tile_partials.shape)}.")


def _partial_slots(lut: torch.Tensor, lut_count: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
    """``[B, H, n_q, max_k]`` int32 map from LUT slot to partial id (``-1`` = none); validates the pairs."""
    b, h, n_q, max_k = lut.shape
    pairs = pairs.long()
    ok = pairs[..., 0] >= 0
    if ok.any() and (int(pairs[..., 0][ok].max()) >= n_q):
        raise ValueError(
            f"`tile_partials` query tiles must lie in [0, {n_q}), got {int(pairs[..., 0][ok].max())}."
        )
    qi = pairs[..., 0].clamp_min(0)
    rows = torch.gather(lut.long(), 2, qi[..., None].expand(-1, -1, -1, max_k))  # [B, H, n_p, max_k]
    live = torch.arange(max_k, device=lut.device) < torch.gather(lut_count.long(), 2, qi)[..., None]
    hit = (rows == pairs[..., 1:2]) & live
    if bool((ok & ~hit.any(-1)).any()):
        raise ValueError(
            "`tile_partials` lists a (query tile, key tile) pair that is not in that query tile's `lut` row."
        )
    slot = hit.int().argmax(-1)
    pslot = torch.full((b, h, n_q * max_k), -1, dtype=torch.int32, device=lut.device)
    pid = torch.arange(pairs.shape[2], device=lut.device, dtype=torch.int32).expand(b, h, -1)
    flat = torch.where(ok, qi * max_k + slot, n_q * max_k)
    pslot = torch.cat([pslot, pslot[..., :1]], -1).scatter(2, flat, torch.where(ok, pid, -1))[..., :-1]
    return pslot.view(b, h, n_q, max_k)


def _tiles(x: torch.Tensor, block: int) -> torch.Tensor:
    """``[B, H, S, D]`` -> ``[B, H, n, block, D]`` float32, zero-padded to a whole number of tiles."""
    b, h, s, d = x.shape
    n = math.ceil(s / block)
    return torch.nn.functional.pad(x.to(torch.float32), (0, 0, 0, n * block - s)).view(b, h, n, block, d)


def _valid_tiles(kv_valid: torch.Tensor | None, s: int, block: int, device: torch.device) -> torch.Tensor:
    """``[n, block]`` bool: real keys (inside ``S`` and ``kv_valid``)."""
    n = math.ceil(s / block)
    valid = torch.ones(s, dtype=torch.bool, device=device) if kv_valid is None else kv_valid.to(torch.bool)
    return torch.nn.functional.pad(valid, (0, n * block - s)).view(n, block)


def _softmax_lse(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Row softmax over the last dim with ``-inf`` masking, in place: (unnormalised p, normaliser l, lse).

    The row max is detached: a constant shift, so gradients are unchanged and ``logits`` may be reused.
    """
    m = logits.detach().amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = logits.sub_(m).exp_()
    l_sum = p.sum(-1, keepdim=True)
    lse = (m + l_sum.log()).squeeze(-1)
    return p, l_sum.clamp_min(torch.finfo(torch.float32).tiny), lse


def _reference_block_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lut: torch.Tensor,
    lut_count: torch.Tensor,
    block: int,
    scale: float,
    kv_valid: torch.Tensor | None,
    pairs: torch.Tensor | None = None,
    pslot: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Partials | None]:
    """Exact fp32 reference, organised for CPU speed.

    Query tiles are grouped by the number of key tiles they keep, so each group is one batched attention over
    gathered K/V tiles with no padding slots. Tiles listed in ``pairs`` (the echo representatives) are left
    out
    of that pass: their per-tile partials are computed once and merged into the output by the LSE rule, so no
    tile is attended twice. The batched attention is :func:`_attend` (torch's flash-attention CPU op) and, for
    the one-tile partials, :func:`_attend_math`.
    """
    b, h, s, d = q.shape
    n, max_k = lut.shape[2], lut.shape[3]
    qt, kt, vt = (_tiles(x, block).flatten(0, 2) for x in (q, k, v))  # [B*H*n, block, D]
    live = torch.arange(max_k, device=q.device) < lut_count[..., None]
    if pslot is not None:
        live = live & (pslot < 0)
    base = torch.arange(b * h, device=q.device).view(b, h, 1, 1) * n
    ids = torch.where(live, lut.long() + base, -1).flatten(0, 2).sort(-1, descending=True).values
    count = live.flatten(0, 2).sum(-1)
    valid = _valid_tiles(kv_valid, s, block, q.device)  # [n, block]
    masked = kv_valid is not None or s % block != 0
    out = torch.zeros(b * h * n, block, d, device=q.device)
    lse = torch.full((b * h * n, block), -math.inf, device=q.device)
    scratch = not (torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v)))
    for c in count.unique().tolist():
        if c == 0:
            continue
        rows = (count == c).nonzero().squeeze(1)
        sel = ids[rows, :c]
        keep = valid[sel % n].flatten(1) if masked else None  # [rows, c*block]
        o, l_sum = _attend(
            qt.index_select(0, rows),
            _gather(kt, sel, "k", scratch),
            _gather(vt, sel, "v", scratch),
            keep,
            scale,
        )
        out.index_copy_(0, rows, o)
        lse.index_copy_(0, rows, l_sum)
    parts = None
    if pairs is not None:
        ok = pairs[..., 0].flatten() >= 0
        live, pad = ok.nonzero().squeeze(1), (~ok).nonzero().squeeze(1)
        rows = (base[..., 0] + pairs[..., 0].long().clamp_min(0)).flatten()
        cols = (base[..., 0] + pairs[..., 1].long().clamp_min(0)).flatten()
        p_out = torch.empty(rows.shape[0], block, d, device=q.device).index_fill_(0, pad, 0.0)
        p_lse = torch.empty(rows.shape[0], block, device=q.device).index_fill_(0, pad, -math.inf)
        p_out, p_lse = _attend_math(  # the padded slots are not attended: they merge as nothing
            _gather(qt, rows[live, None], "pq", scratch),
            _gather(kt, cols[live, None], "k", scratch),
            _gather(vt, cols[live, None], "v", scratch),
            valid[cols[live] % n] if masked else None,
            scale,
            out=(p_out, p_lse),
            rows=live,
        )
        out, lse = _merge_partials(out, lse, p_out, p_lse, rows)
        parts = (p_out.view(*pairs.shape[:3], block, d), p_lse.view(*pairs.shape[:3], block))
    out = out.view(b, h, n * block, d)[:, :, :s].to(q.dtype)
    return out, lse.view(b, h, n * block)[:, :, :s], parts


_SCRATCH: dict[tuple[str, torch.device], torch.Tensor] = {}
_SCRATCH_MAX = 1 << 26  # elements (256 MB of fp32) per buffer
_CHUNK = 1 << 19  # logits per chunk of :func:`_attend_math` (cache-sized)


def _gather(x: torch.Tensor, sel: torch.Tensor, name: str, scratch: bool) -> torch.Tensor:
    """Tiles ``sel`` ``[R, c]`` of ``x`` ``[N, block, D]`` -> ``[R, c*block, D]``.

    With ``scratch`` (no autograd through the result) the copy lands in a reused per-process buffer: fresh
    large CPU allocations are page-faulted on every call and cost several times the copy itself.
    """
    r, c = sel.shape
    shape = (r * c, x.shape[1] * x.shape[2])
    numel = shape[0] * shape[1]
    src = x.view(x.shape[0], -1)
    if not scratch or numel > _SCRATCH_MAX:
        return src.index_select(0, sel.flatten()).view(r, c * x.shape[1], x.shape[2])
    key = (name, x.device)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < numel:
        buf = _SCRATCH[key] = torch.empty(numel, dtype=torch.float32, device=x.device)
    dst = buf[:numel].view(shape)
    torch.index_select(src, 0, sel.flatten(), out=dst)
    return dst.view(r, c * x.shape[1], x.shape[2])


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched attention ``[R, b, D]`` x ``[R, m, D]`` (fp32) with key mask ``keep`` ``[R, m]`` -> (out, lse).

    On CPU, torch's flash-attention CPU op (it also returns the LSE); elsewhere, when a row sees no valid key,
    or when gradients are needed, :func:`_attend_math`.
    """
    grads = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    if q.device.type == "cpu" and not grads and (keep is None or bool(keep.any(-1).all())):
        mask = None
        if keep is not None and not bool(keep.all()):
            mask = torch.zeros(keep.shape, device=q.device).masked_fill_(~keep, -math.inf)[:, None, None, :]
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q[:, None], k[:, None], v[:, None], 0.0, False, attn_mask=mask, scale=scale
        )
        return o[:, 0], lse[:, 0]
    return _attend_math(q, k, v, keep, scale)


def _attend_math(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    keep: torch.Tensor | None,
    scale: float,
    out: tuple[torch.Tensor, torch.Tensor] | None = None,
    rows: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`_attend` as explicit logits, softmax and product, in row chunks of ``_CHUNK`` logits.

    Faster than the flash op on CPU for one-tile rows (the per-tile partials); differentiable. With ``out``
    (``[N, b, D]``, ``[N, b]``) and ``rows`` ``[R]``, input row ``i`` is written to row ``rows[i]`` of
    ``out``.
    """
    r, b, m = q.shape[0], q.shape[1], k.shape[1]
    step = max(1, _CHUNK // (b * m))
    o_all, l_all = out if out is not None else (q.new_empty(q.shape), q.new_empty(q.shape[:2]))
    dest = torch.arange(r, device=q.device) if rows is None else rows
    grads = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v))
    # reused chunk buffers (no autograd through them): fresh large buffers page-fault on every call
    bufs = None if grads else (q.new_empty(min(step, r), b, m), q.new_empty(min(step, r), b, q.shape[2]))
    for lo in range(0, r, step):
        sl, n = slice(lo, lo + step), min(step, r - lo)
        if bufs is None:
            logits = torch.bmm(q[sl], k[sl].transpose(1, 2)) * scale
        else:
            logits = torch.bmm(q[sl], k[sl].transpose(1, 2), out=bufs[0][:n]).mul_(scale)
        if keep is not None:
            logits = logits.masked_fill_(~keep[sl, None, :], -math.inf)
        p, l_sum, lse = _softmax_lse(logits)
        if bufs is None:
            o = torch.bmm(p, v[sl]) / l_sum
        else:
            o = torch.bmm(p, v[sl], out=bufs[1][:n]).div_(l_sum)
        o_all = o_all.index_copy_(0, dest[sl], o)
        l_all = l_all.index_copy_(0, dest[sl], lse)
    return o_all, l_all


def _merge_partials(
    out: torch.Tensor, lse: torch.Tensor, p_out: torch.Tensor, p_lse: torch.Tensor, rows: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """LSE-merge partials ``p_out`` ``[M, b, D]`` / ``p_lse`` ``[M, b]`` into rows ``rows`` of ``out``,
    ``lse``."""
    m, w, w_p, den = merge_weights(lse, rows, p_lse)
    num = add_weighted_rows(out * w[..., None], rows, p_out, w_p)
    return num / den.clamp_min(torch.finfo(torch.float32).tiny)[..., None], m + den.log()


@cache
def _kernel() -> Any:
    """Define the Triton kernel on first use (reads ``TRITON_INTERPRET`` at that moment)."""
    import triton
    import triton.language as tl

    @triton.jit
    def _bsa_fwd(
        Q,
        K,
        V,
        LUT,
        CNT,
        VALID,
        PSLOT,
        O,
        L,
        PO,
        PL,
        sqb,
        sqh,
        sqs,
        sqd,
        skb,
        skh,
        sks,
        skd,
        svb,
        svh,
        svs,
        svd,
        n_q,
        max_k,
        H,
        S,
        n_p,
        scale,
        BLOCK: tl.constexpr,
        D: tl.constexpr,
        HAS_VALID: tl.constexpr,
        HAS_PART: tl.constexpr,
    ):
        qt = tl.program_id(0)
        bh = tl.program_id(1)
        b = bh // H
        h = bh % H
        rows = qt * BLOCK + tl.arange(0, BLOCK)
        dd = tl.arange(0, D)
        rmask = rows < S
        q = tl.load(
            Q + b * sqb + h * sqh + rows[:, None] * sqs + dd[None, :] * sqd, mask=rmask[:, None], other=0.0
        )
        m_i = tl.full([BLOCK], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK], tl.float32)
        acc = tl.zeros([BLOCK, D], tl.float32)
        row_off = (bh * n_q + qt) * max_k
        cnt = tl.load(CNT + bh * n_q + qt)
        for j in range(0, cnt):
            kt = tl.load(LUT + row_off + j)
            cols = kt * BLOCK + tl.arange(0, BLOCK)
            cmask = cols < S
            if HAS_VALID:
                cmask = cmask & (tl.load(VALID + cols, mask=cmask, other=0) != 0)
            kk = tl.load(
                K + b * skb + h * skh + cols[:, None] * sks + dd[None, :] * skd,
                mask=cmask[:, None],
                other=0.0,
            )
            vv = tl.load(
                V + b * svb + h * svh + cols[:, None] * svs + dd[None, :] * svd,
                mask=cmask[:, None],
                other=0.0,
            )
            s = tl.dot(q, tl.trans(kk)).to(tl.float32) * scale
            s = tl.where(cmask[None, :], s, float("-inf"))
            m_t = tl.max(s, 1)
            m_t_safe = tl.where(m_t == float("-inf"), 0.0, m_t)
            p = tl.exp(s - m_t_safe[:, None])
            l_t = tl.sum(p, 1)
            o_t = tl.dot(p.to(vv.dtype), vv).to(tl.float32)
            m_new = tl.maximum(m_i, m_t)
            m_new_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.exp(m_i - m_new_safe)
            beta = tl.exp(m_t_safe - m_new_safe)
            l_i = l_i * alpha + l_t * beta
            acc = acc * alpha[:, None] + o_t * beta[:, None]
            m_i = m_new
            if HAS_PART:
                pid = tl.load(PSLOT + row_off + j)
                if pid >= 0:
                    base = bh * n_p + pid
                    inv = tl.where(l_t > 0, 1.0 / l_t, 0.0)
                    lse_t = tl.where(l_t > 0, m_t_safe + tl.log(l_t), float("-inf"))
                    prow = tl.arange(0, BLOCK)
                    tl.store(PO + (base * BLOCK + prow[:, None]) * D + dd[None, :], o_t * inv[:, None])
                    tl.store(PL + base * BLOCK + prow, lse_t)
        inv_l = tl.where(l_i > 0, 1.0 / l_i, 0.0)
        m_safe = tl.where(m_i == float("-inf"), 0.0, m_i)
        lse = tl.where(l_i > 0, m_safe + tl.log(l_i), float("-inf"))
        tl.store(O + (bh * S + rows[:, None]) * D + dd[None, :], acc * inv_l[:, None], mask=rmask[:, None])
        tl.store(L + bh * S + rows, lse, mask=rmask)

    return _bsa_fwd


def _triton_block_sparse_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lut: torch.Tensor,
    lut_count: torch.Tensor,
    block: int,
    scale: float,
    kv_valid: torch.Tensor | None,
    pslot: torch.Tensor | None,
    n_p: int,
) -> tuple[torch.Tensor, torch.Tensor, Partials | None]:
    """Launch the Triton kernel; outputs are contiguous fp32, cast to ``q``'s dtype at the end."""
    b, h, s, d = q.shape
    n_q, max_k = lut.shape[2], lut.shape[3]
    dev = q.device
    out = torch.empty(b, h, s, d, dtype=torch.float32, device=dev)
    lse = torch.empty(b, h, s, dtype=torch.float32, device=dev)
    po = torch.zeros(b, h, max(n_p, 1), block, d, dtype=torch.float32, device=dev)
    pl = torch.full((b, h, max(n_p, 1), block), -math.inf, dtype=torch.float32, device=dev)
    valid = (kv_valid if kv_valid is not None else torch.ones(1, device=dev)).to(torch.int8).contiguous()
    slots = (pslot if pslot is not None else torch.full((1,), -1, device=dev)).to(torch.int32).contiguous()
    _kernel()[(n_q, b * h)](
        q,
        k,
        v,
        lut.to(torch.int32).contiguous(),
        lut_count.to(torch.int32).contiguous(),
        valid,
        slots,
        out,
        lse,
        po,
        pl,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        n_q,
        max_k,
        h,
        s,
        max(n_p, 1),
        float(scale),
        BLOCK=block,
        D=d,
        HAS_VALID=kv_valid is not None,
        HAS_PART=pslot is not None,
    )
    parts = None if pslot is None else (po[:, :, :n_p], pl[:, :, :n_p])
    return out.to(q.dtype), lse, parts
