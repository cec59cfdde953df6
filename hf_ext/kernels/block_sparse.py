"""``block_sparse_attention``: attention over a lookup table (LUT) of kept key tiles, with LSE output.

Semantics are [reconstructed] (EchoAttention, reconstructed; not verified against the paper): each query
tile of ``block`` rows attends to the key tiles listed in its LUT row; the softmax normalises over the kept
tiles only. Two optional extras serve EchoAttention's Echo operator in the same pass:

- *coarse keys* (:class:`CoarseKeys`): pooled keys of further key tiles join the same softmax with a logit
  bias (``log`` of the tokens a pooled key stands for, plus a per-entry correction), so skipped tiles are
  synthesised from their pooled keys and values inside the one online softmax;
- *per-tile partials* ``(O_t, lse_t)`` (the softmax restricted to one key tile) for a list of (query tile,
  key tile) pairs: the representatives that :func:`hf_ext.kernels.echo_tiles.echo_merge` echoes.

Backends: a gather-based PyTorch path (exact, fp32: one fixed-width batched attention over the gathered
tiles, torch's fused flash-attention CPU op on CPU, an explicit softmax when gradients are needed or off the
CPU) and a FlashAttention-2-style Triton kernel (grid ``(n_q, B*H)``, online softmax in fp32, ``tl.dot`` for
QK^T and PV), chosen by :func:`hf_ext.kernels._dispatch.resolve_fast_path` (under ``backend="auto"`` a
Triton path that cannot run -- CUDA without triton, a ``block`` or head size that is not a power of two >= 16
-- falls back to the PyTorch path with one warning per reason). Triton is imported only on first
use. Neither path reads a tensor back to the host unless ``validate=True`` (the default for callers that
build their own LUT).
"""

from __future__ import annotations

import math
from functools import cache
from typing import Any, NamedTuple

import torch

from hf_ext.kernels._dispatch import resolve_fast_path
from hf_ext.kernels._native import call, load

Partials = tuple[torch.Tensor, torch.Tensor]


class CoarseKeys(NamedTuple):
    """Pooled keys of further key tiles that join each query tile's softmax.

    Attributes:
        keys: ``[B, H, n_k * m, D]``: ``m`` pooled keys per key tile (tile ``t`` owns rows ``t*m`` to
            ``t*m+m-1``).
        values: ``[B, H, n_k * m, D]``: their pooled values.
        log_count: ``[n_k * m]`` float: log of the number of tokens each pooled key stands for (``-inf``:
            none).
        lut: ``[B, H, n_q, n_c]`` integer key-tile ids per query tile (``-1``: unused entry).
        bias: ``[B, H, n_q, n_c]`` float added to the logits of that entry's ``m`` pooled keys.
    """

    keys: torch.Tensor
    values: torch.Tensor
    log_count: torch.Tensor
    lut: torch.Tensor
    bias: torch.Tensor


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
    coarse: CoarseKeys | None = None,
    backend: str = "auto",
    validate: bool = True,
) -> tuple[torch.Tensor, torch.Tensor] | tuple[torch.Tensor, torch.Tensor, Partials]:
    """Block-sparse attention with an online softmax over the kept key tiles (and optional pooled keys).

    Args:
        q: Queries ``[B, H, S, D]``; strided views are fine (diffusers' ``[B, S, H, D]`` via
            ``transpose(1, 2)``).
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
        coarse: *optional* :class:`CoarseKeys`: pooled keys that join each query tile's softmax; a row's
            logit for pooled key ``j`` of entry ``e`` is ``scale * q . keys[j] + log_count[j] + bias[e]``.
        backend: ``"auto"``, ``"torch"`` or ``"triton"``.
        validate: Check shapes and index ranges (reads tensors back to the host). ``False`` skips the checks
            for a caller whose LUT is valid by construction (EchoAttention's planner).

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
    if validate:
        _check(q, k, v, lut, lut_count, block, kv_valid, tile_partials)
        if coarse is not None:
            _check_coarse(coarse, q, lut, block)
    path = resolve_fast_path(
        "block_sparse_attention", backend, q, k, v, lut, minimum=16, block=block, D=q.shape[-1]
    )
    if path == "triton":
        pslot = None if tile_partials is None else _partial_slots(lut, lut_count, tile_partials, validate)
        n_p = 0 if tile_partials is None else tile_partials.shape[2]
        out, lse, parts = _triton_block_sparse_attention(
            q, k, v, lut, lut_count, block, scale, kv_valid, pslot, n_p, coarse
        )
    else:
        if validate and tile_partials is not None:
            _partial_slots(lut, lut_count, tile_partials, validate)
        out, lse, parts = _reference_block_sparse_attention(
            q, k, v, lut, lut_count, block, scale, kv_valid, tile_partials, coarse
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


def _check_coarse(coarse: CoarseKeys, q: torch.Tensor, lut: torch.Tensor, block: int) -> None:
    b, h, s, d = q.shape
    n = math.ceil(s / block)
    keys, values, log_count, c_lut, bias = coarse
    n_c = keys.shape[2] if keys.dim() == 4 else 0
    if keys.dim() != 4 or tuple(keys.shape[:2]) != (b, h) or keys.shape[3] != d or n_c % n:
        raise ValueError(f"`coarse.keys` must be [{b}, {h}, {n} * m, {d}], got {tuple(keys.shape)}.")
    if values.shape != keys.shape or tuple(log_count.shape) != (n_c,):
        raise ValueError(
            f"`coarse.values` must match `coarse.keys` {tuple(keys.shape)} and `coarse.log_count` be "
            f"({n_c},), got {tuple(values.shape)} and {tuple(log_count.shape)}."
        )
    if c_lut.is_floating_point() or c_lut.dim() != 4 or tuple(c_lut.shape[:3]) != (b, h, n):
        raise ValueError(f"`coarse.lut` must be integer [{b}, {h}, {n}, n_c], got {tuple(c_lut.shape)}.")
    if bias.shape != c_lut.shape:
        raise ValueError(f"`coarse.bias` must be {tuple(c_lut.shape)}, got {tuple(bias.shape)}.")
    if c_lut.numel() and (int(c_lut.min()) < -1 or int(c_lut.max()) >= n):
        raise ValueError(
            f"`coarse.lut` ids must lie in [0, {n}) (or -1), got [{int(c_lut.min())}, {int(c_lut.max())}]."
        )


def _partial_slots(
    lut: torch.Tensor, lut_count: torch.Tensor, pairs: torch.Tensor, validate: bool
) -> torch.Tensor:
    """``[B, H, n_q, max_k]`` int32 map from LUT slot to partial id (``-1`` = none); validates the pairs."""
    b, h, n_q, max_k = lut.shape
    pairs = pairs.long()
    ok = pairs[..., 0] >= 0
    if validate and ok.any() and (int(pairs[..., 0][ok].max()) >= n_q):
        raise ValueError(
            f"`tile_partials` query tiles must lie in [0, {n_q}), got {int(pairs[..., 0][ok].max())}."
        )
    qi = pairs[..., 0].clamp_min(0)
    rows = torch.gather(lut.long(), 2, qi[..., None].expand(-1, -1, -1, max_k))  # [B, H, n_p, max_k]
    live = torch.arange(max_k, device=lut.device) < torch.gather(lut_count.long(), 2, qi)[..., None]
    hit = (rows == pairs[..., 1:2]) & live
    if validate and bool((ok & ~hit.any(-1)).any()):
        raise ValueError(
            "`tile_partials` lists a (query tile, key tile) pair that is not in that query tile's `lut` row."
        )
    slot = hit.int().argmax(-1)
    pslot = torch.full((b, h, n_q * max_k), -1, dtype=torch.int32, device=lut.device)
    pid = torch.arange(pairs.shape[2], device=lut.device, dtype=torch.int32).expand(b, h, -1)
    flat = torch.where(ok, qi * max_k + slot, n_q * max_k)
    pslot = torch.cat([pslot, pslot[..., :1]], -1).scatter(2, flat, torch.where(ok, pid, -1))[..., :-1]
    return pslot.view(b, h, n_q, max_k)


def _tiles(x: torch.Tensor, block: int, name: str = "") -> torch.Tensor:
    """``[B, H, S, D]`` -> ``[B*H*n, block, D]`` float32, zero-padded to a whole number of tiles (with a
    ``name``, written straight into a reused buffer where :func:`_buffer` allows: one copy, no fresh
    allocation)."""
    b, h, s, d = x.shape
    n = math.ceil(s / block)
    buf = _buffer(name, b * h * n * block * d, x) if name else None
    if buf is None:
        x = torch.nn.functional.pad(x.to(torch.float32), (0, 0, 0, n * block - s))
        return x.reshape(b * h * n, block, d)
    return _fill_tiles(buf, x, block)


def _fill_tiles(buf: torch.Tensor, x: torch.Tensor, block: int) -> torch.Tensor:
    """Write ``x`` ``[B, H, S, D]``, zero-padded to whole tiles, at the start of the flat fp32 ``buf``;
    returns ``buf`` as ``[-1, block, D]``."""
    b, h, s, d = x.shape
    padded = buf[: b * h * math.ceil(s / block) * block * d].view(b, h, -1, d)
    padded[:, :, :s].copy_(x)
    padded[:, :, s:].zero_()
    return buf.view(-1, block, d)


def _valid_tiles(kv_valid: torch.Tensor | None, s: int, block: int, device: torch.device) -> torch.Tensor:
    """``[n, block]`` bool: real keys (inside ``S`` and ``kv_valid``)."""
    n = math.ceil(s / block)
    valid = torch.ones(s, dtype=torch.bool, device=device) if kv_valid is None else kv_valid.to(torch.bool)
    return torch.nn.functional.pad(valid, (0, n * block - s)).view(n, block)


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
    coarse: CoarseKeys | None = None,
) -> tuple[torch.Tensor, torch.Tensor, Partials | None]:
    """Exact fp32 reference with static shapes (no host reads, so ``torch.compile`` traces it whole).

    Every query tile attends to a fixed-width row of ``max_k`` gathered key tiles in one batched attention,
    unused slots and padding keys masked by a ``-inf`` logit bias. The coarse keys join that same attention:
    each query tile's pooled keys are packed into whole extra tiles appended to its row (one softmax, no
    second pass or merge). The partial pairs are one-tile rows of a second batched attention.
    """
    b, h, s, d = q.shape
    n, max_k = lut.shape[2], lut.shape[3]
    dev = q.device
    valid = _valid_tiles(kv_valid, s, block, dev)  # [n, block]
    base = torch.arange(b * h, device=dev).view(b, h, 1, 1) * n
    live = torch.arange(max_k, device=dev) < lut_count[..., None]
    tile = torch.where(live, lut.long(), 0)
    keep = (live[..., None] & valid[tile]).flatten(0, 2).flatten(1)  # [R, max_k * block]
    ids = (tile + base).flatten(0, 2)
    qt, kt, vt = (
        _tiles(x, block, name) for x, name in ((q, "qt"), (k, "kt"), (v, "vt"))
    )  # [B*H*n, block, D]
    if coarse is None:
        kg, vg, bias = _gather(kt, ids, "k"), _gather(vt, ids, "v"), _bias(keep)
    else:
        kg, vg, bias = _with_coarse_keys(kt, vt, ids, keep, coarse, base)
    out, lse = _attend(qt, kg, vg, bias, scale)
    parts = None
    if pairs is not None:
        ok = (pairs[..., 0] >= 0).flatten()
        rows = (base[..., 0] + pairs[..., 0].long().clamp_min(0)).flatten()
        cols = pairs[..., 1].long().clamp_min(0)
        p_out, p_lse = _attend(
            qt.index_select(0, rows),
            kt.index_select(0, (base[..., 0] + cols).flatten()),
            vt.index_select(0, (base[..., 0] + cols).flatten()),
            _bias(valid[cols].flatten(0, 2)),
            scale,
        )
        p_out = torch.where(ok[:, None, None], p_out, 0.0)
        p_lse = torch.where(ok[:, None], p_lse, -math.inf)
        parts = (p_out.view(*pairs.shape[:3], block, d), p_lse.view(*pairs.shape[:3], block))
    out = out.view(b, h, n * block, d)[:, :, :s].to(q.dtype)
    return out, lse.view(b, h, n * block)[:, :, :s], parts


def _with_coarse_keys(
    kt: torch.Tensor,
    vt: torch.Tensor,
    ids: torch.Tensor,
    keep: torch.Tensor,
    coarse: CoarseKeys,
    base: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each query tile's gathered keys and values with its coarse keys appended as whole extra tiles.

    The ``n_c`` entries of ``m`` pooled keys of each query tile are padded to ``n_v = ceil(n_c m / block)``
    tiles (padding entries masked) after its ``max_k`` exact tiles ``ids`` ``[R, max_k]`` of ``kt``/``vt``
    ``[N, block, D]``. Returns the rows ``[R, (max_k + n_v) * block, D]`` of keys and of values and the logit
    bias ``[R, (max_k + n_v) * block]``: 0 for kept keys, ``-inf`` for masked ones (``keep``),
    ``log_count + bias`` for the pooled keys (``-inf`` for unused entries). The pooled keys are copied once,
    straight into the gathered rows (:func:`_gather`).
    """
    keys, values, log_count, c_lut, c_bias = coarse
    n_all, block, d = kt.shape
    n = c_lut.shape[2]
    r, max_k = ids.shape
    n_c = c_lut.shape[-1]
    m = keys.shape[2] // n
    n_v = -(-n_c * m // block)
    pad = n_v * block // m - n_c  # padding entries so the packed keys fill whole tiles
    live = c_lut >= 0
    tile = torch.where(live, c_lut.long(), 0)  # [B, H, n, n_c]
    logit = torch.where(live[..., None], log_count.view(n, m)[tile] + c_bias.float()[..., None], -math.inf)
    sel = (tile + base).reshape(r, n_c)
    logit = logit.reshape(r, n_c * m)
    if pad:
        sel = torch.nn.functional.pad(sel, (0, pad))
        logit = torch.nn.functional.pad(logit, (0, pad * m), value=-math.inf)
    bias = _bias(keep, n_v * block, logit)
    bias[:, keep.shape[1] :] = logit
    rows = [
        _gather(tiles, ids, name, pooled.to(torch.float32).reshape(n_all, m * d), sel)
        for tiles, pooled, name in ((kt, keys, "k"), (vt, values, "v"))
    ]
    return rows[0], rows[1], bias


def _bias(keep: torch.Tensor, spare: int = 0, like: torch.Tensor | None = None) -> torch.Tensor:
    """``[R, L]`` bool -> additive logit bias ``[R, L + spare]`` (0 kept, ``-inf`` masked; the ``spare``
    columns are left for the caller), in a reused buffer when :func:`_buffer` allows for ``like`` (the
    tensor that will fill the spare columns; default ``keep``)."""
    r, width = keep.shape
    buf = _buffer("bias", r * (width + spare), keep if like is None else like)
    bias = torch.empty(r, width + spare, device=keep.device) if buf is None else buf.view(r, width + spare)
    bias[:, :width] = 0.0
    bias[:, :width].masked_fill_(~keep, -math.inf)
    return bias


_SCRATCH: dict[tuple[str, torch.device], torch.Tensor] = {}
_SCRATCH_MAX = 1 << 26  # elements (256 MB of fp32) per buffer


def _buffer(name: str, numel: int, like: torch.Tensor) -> torch.Tensor | None:
    """A reused per-process fp32 CPU buffer of ``numel`` elements, or ``None`` where reuse is unsafe or
    useless (autograd through ``like``, ``torch.compile``, off the CPU, above the size cap). Fresh large CPU
    allocations are page-faulted on every call and cost several times the copy that fills them."""
    reuse = not (torch.is_grad_enabled() and like.requires_grad) and not torch.compiler.is_compiling()
    if not reuse or numel > _SCRATCH_MAX or like.device.type != "cpu":
        return None
    key = (name, like.device)
    buf = _SCRATCH.get(key)
    if buf is None or buf.numel() < numel:
        buf = _SCRATCH[key] = torch.empty(numel, dtype=torch.float32, device=like.device)
    return buf[:numel]


def _gather(
    x: torch.Tensor,
    sel: torch.Tensor,
    name: str,
    entries: torch.Tensor | None = None,
    entry_sel: torch.Tensor | None = None,
) -> torch.Tensor:
    """Tiles ``sel`` ``[R, c]`` of ``x`` ``[N, block, D]``, each row followed by the pooled-key entries
    ``entry_sel`` ``[R, e]`` of ``entries`` ``[M, m * D]`` -> ``[R, c * block + e * m, D]`` float32.

    On the CPU without autograd or ``torch.compile``: one pass of the C kernel ``csrc/gather_rows.c`` (a
    ``memcpy`` per tile or entry; ATen's ``index_select`` sets up an iterator per copied row, which dominates
    for 1 KB entries) into a reused buffer (:func:`_buffer`). Otherwise, or where the kernel does not build,
    ``index_select`` (and a concatenation for the entries).
    """
    r, c = sel.shape
    n, block, d = x.shape
    e = 0 if entry_sel is None else entry_sel.shape[1]
    width = c * block * d + (0 if entries is None else e * entries.shape[1])
    grads = entries is not None and torch.is_grad_enabled() and entries.requires_grad
    buf = None if grads else _buffer(name, r * width, x)
    lib = None if buf is None else load("gather_rows")
    if lib is not None and buf is not None:
        ent = x if entries is None else entries.contiguous()
        call(lib.gather_rows, buf, x.contiguous(), sel.long().contiguous(), r, c, block * d, ent,
             sel if entry_sel is None else entry_sel.long().contiguous(), e, ent.shape[-1],
             torch.get_num_threads())  # fmt: skip
        return buf.view(r, -1, d)
    rows = x.reshape(n, -1).index_select(0, sel.flatten()).view(r, c * block, d)
    if entries is None or entry_sel is None:
        return rows
    return torch.cat([rows, entries.index_select(0, entry_sel.flatten()).view(r, -1, d)], 1)


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Batched attention ``[R, b, D]`` x ``[R, m, D]`` (fp32) with logit bias ``[R, m]`` -> (out, lse).

    On CPU without gradients, torch's fused flash-attention CPU op (it also returns the LSE); otherwise an
    explicit softmax (differentiable). A row whose keys are all masked gets output 0 and LSE ``-inf``.
    """
    seen = torch.isfinite(bias).any(-1)[:, None]  # [R, 1]
    grads = torch.is_grad_enabled() and any(x.requires_grad for x in (q, k, v, bias))
    if q.device.type == "cpu" and not grads:
        o, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            q[:, None], k[:, None], v[:, None], 0.0, False, attn_mask=bias[:, None, None, :], scale=scale
        )[:2]
        return o[:, 0], torch.where(seen, lse[:, 0], -math.inf)
    logits = torch.baddbmm(bias[:, None, :], q, k.transpose(1, 2), alpha=scale)
    m = logits.detach().amax(-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    p = (logits - m).exp()
    l_sum = p.sum(-1, keepdim=True)
    out = torch.bmm(p, v) / l_sum.clamp_min(torch.finfo(torch.float32).tiny)
    return out, torch.where(seen, (m + l_sum.log()).squeeze(-1), -math.inf)


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
        KC,
        VC,
        LOGC,
        CLUT,
        CBIAS,
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
        n_c,
        scale,
        BLOCK: tl.constexpr,
        D: tl.constexpr,
        HAS_VALID: tl.constexpr,
        HAS_PART: tl.constexpr,
        M: tl.constexpr,
        CBLOCK: tl.constexpr,
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
        if M > 0:  # coarse keys: CBLOCK // M entries of M pooled keys per step, same online softmax
            crow = tl.arange(0, CBLOCK)
            for c0 in range(0, n_c, CBLOCK // M):
                ent = c0 + crow // M
                emask = ent < n_c
                ctile = tl.load(CLUT + (bh * n_q + qt) * n_c + ent, mask=emask, other=-1)
                clive = ctile >= 0
                kidx = tl.where(clive, ctile * M + crow % M, 0)
                coff = (bh * n_q * M + kidx)[:, None] * D + dd[None, :]
                kc = tl.load(KC + coff, mask=clive[:, None], other=0.0)
                vc = tl.load(VC + coff, mask=clive[:, None], other=0.0)
                cb = tl.load(CBIAS + (bh * n_q + qt) * n_c + ent, mask=emask, other=0.0)
                cb = cb + tl.load(LOGC + kidx, mask=clive, other=float("-inf"))
                s = tl.dot(q, tl.trans(kc)).to(tl.float32) * scale + cb[None, :]
                s = tl.where(clive[None, :], s, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(s, 1))
                m_new_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
                alpha = tl.exp(m_i - m_new_safe)
                p = tl.exp(s - m_new_safe[:, None])
                l_i = l_i * alpha + tl.sum(p, 1)
                acc = acc * alpha[:, None] + tl.dot(p.to(vc.dtype), vc).to(tl.float32)
                m_i = m_new
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
    coarse: CoarseKeys | None,
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
    m, n_c = 0, 1
    kc = vc = logc = cbias = torch.zeros(1, dtype=torch.float32, device=dev)
    clut = torch.full((1,), -1, dtype=torch.int32, device=dev)
    if coarse is not None:
        m, n_c = coarse.keys.shape[2] // n_q, coarse.lut.shape[-1]
        kc, vc = (x.to(q.dtype).contiguous() for x in (coarse.keys, coarse.values))
        logc, cbias = coarse.log_count.float().contiguous(), coarse.bias.float().contiguous()
        clut = coarse.lut.to(torch.int32).contiguous()
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
        kc,
        vc,
        logc,
        clut,
        cbias,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        n_q,
        max_k,
        h,
        s,
        max(n_p, 1),
        n_c,
        float(scale),
        BLOCK=block,
        D=d,
        HAS_VALID=kv_valid is not None,
        HAS_PART=pslot is not None,
        M=m,
        CBLOCK=max(16, m),
    )
    parts = None if pslot is None else (po[:, :, :n_p], pl[:, :, :n_p])
    return out.to(q.dtype), lse, parts
