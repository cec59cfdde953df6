"""``verify_importance`` and ``masked_topk``: Vegas's selection from the verify pass's own scores.

* ``verify_importance(q_rows, k, valid_len, scale, mode)``: ``q_rows`` ``[B, H_q, R, D]`` (``R`` in {1, 2}),
  ``k`` ``[B, H_kv, N, D]`` -> ``imp`` ``[B, valid_len]`` (fp32). Row 0 sees keys ``[0, valid_len)``, row
  ``R-1`` sees ``[0, N)``. ``mode="weight"``: ``exp(scale q.k - lse_row)`` (the row's softmax probability, lse
  over its visible range); ``mode="logit"``: ``scale q.k``. The result is the mean over all ``H_q`` heads and
  ``R`` rows, restricted to ``[0, valid_len)`` [paper semantics: the two score rows plus ``varlen_reduce``].
  Ragged batches pass ``valid_len`` (and ``key_len``, what the last row sees) per row; positions at or past a
  row's ``valid_len`` score ``-inf``.
* ``masked_topk(imp, k)``: ``imp`` ``[B, L]`` -> ascending indices ``[B, min(k, L)]`` of the largest scores
  [paper semantics: ``varlen_topk``]; with a per-row ``k`` the shorter rows are padded with ``-1``.

On CPU in fp32 both selection steps after the verify run in C (``csrc/importance.c``), else the torch
reference: ``importance_from_logits`` (the same mean from logits the verify's attention already wrote) in one
pass over the logits, vectorised ``exp``, no temporaries (9x the reference at 8 rows x 4 heads x 2 score rows
x 32k, whose two 8 MB temporaries cost more in page faults than the arithmetic); ``masked_topk`` by a radix
select per row whose first digit (the top 11 bits) is counted over the row and the later ones over the few
entries that share it, then one ascending pass (no sort; the row is read three times: 0.57 against 1.04 ms for
8 rows x 32k with four 8-bit passes over the row; the reference's ``topk`` and ``sort``: 2.8 ms).

Triton: ``verify_importance`` runs two passes (per-row LSE, then one program per key chunk looping over heads
and rows, no atomics). ``masked_topk`` is a radix select on the order-preserving int32 image of the fp32
scores with radix 2 (32 compare-and-``tl.sum`` passes find the k-th largest value; 4 passes of 8-bit digits
would do an equivalent amount of counting), then one compaction pass writing indices above the threshold plus
the lowest-index ties, in ascending order, via ``tl.cumsum``. Kernels are built lazily on first use.
"""

from __future__ import annotations

import functools
from typing import Any

import torch

from hf_ext.kernels._dispatch import check_triton_sizes, resolve_backend
from hf_ext.kernels._native import call, load
from hf_ext.kernels.gathered_attention import row_lengths

MODES = ("weight", "logit")
BLOCK_N = 64
TOPK_BLOCK = 256


def _check_importance_args(q_rows: torch.Tensor, k: torch.Tensor, mode: str) -> None:
    for name, t in (("q_rows", q_rows), ("k", k)):
        if not t.is_floating_point():
            raise TypeError(f"`{name}` must be a floating-point tensor, got dtype {t.dtype}.")
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {MODES}, got {mode!r}.")
    if q_rows.dim() != 4 or q_rows.shape[2] not in (1, 2):
        raise ValueError(f"`q_rows` must be [B, H_q, R, D] with R in (1, 2), got {tuple(q_rows.shape)}.")
    if k.dim() != 4 or k.shape[0] != q_rows.shape[0] or k.shape[-1] != q_rows.shape[-1]:
        raise ValueError(
            f"`k` must be [B, H_kv, N, D] matching `q_rows` {tuple(q_rows.shape)}, got {tuple(k.shape)}."
        )
    if q_rows.shape[1] % k.shape[1]:
        raise ValueError(f"H_q={q_rows.shape[1]} (from `q_rows`) must be a multiple of H_kv={k.shape[1]}.")


def _reference_verify_importance(
    q_rows: torch.Tensor, k: torch.Tensor, valid: torch.Tensor, key_len: torch.Tensor, scale: float, mode: str
) -> torch.Tensor:
    b, h_q, r, d = q_rows.shape
    h_kv, n = k.shape[1], int(key_len.max())
    g = h_q // h_kv
    logits = (
        torch.matmul(q_rows.float().view(b, h_kv, g * r, d), k[:, :, :n].float().transpose(-1, -2)) * scale
    )
    logits = logits.view(b, h_q, r, n)
    width = int(valid.max())
    pos = torch.arange(n, device=k.device)
    if mode == "weight":  # each row's lse over its own visible range, then its weights on [0, valid_len)
        limits = torch.stack([valid] + [key_len] * (r - 1), dim=-1)  # [B, R]
        seen = pos < limits[:, None, :, None]
        lse = torch.logsumexp(logits.masked_fill(~seen, float("-inf")), dim=-1)
        imp = torch.exp(logits[..., :width] - lse[..., None]).mean(dim=(1, 2))
    else:
        imp = logits[..., :width].mean(dim=(1, 2))
    if int(valid.min()) < width:
        imp = imp.masked_fill(pos[None, :width] >= valid[:, None], float("-inf"))
    return imp


@functools.cache
def _triton_importance_kernels() -> tuple[Any, Any]:
    import triton
    import triton.language as tl

    @triton.jit
    def lse_kernel(
        Q,
        K,
        LSE,
        n,
        VALID,
        KEYLEN,
        scale,
        sqb,
        sqh,
        sqr,
        skb,
        skh,
        skn,
        H: tl.constexpr,
        R: tl.constexpr,
        G: tl.constexpr,
        D: tl.constexpr,
        BLOCK: tl.constexpr,
    ):
        b = tl.program_id(0)
        hr = tl.program_id(1)
        h = hr // R
        r = hr % R
        limit = tl.where(r == 0, tl.load(VALID + b), tl.load(KEYLEN + b))
        d = tl.arange(0, D)
        q = tl.load(Q + b * sqb + h * sqh + r * sqr + d).to(tl.float32)
        m = tl.full([], float("-inf"), tl.float32)
        s_sum = tl.zeros([], tl.float32)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            ok = offs < limit
            kk = tl.load(
                K + b * skb + (h // G) * skh + offs[:, None] * skn + d[None, :], mask=ok[:, None], other=0.0
            )
            s = tl.where(ok, tl.sum(kk.to(tl.float32) * q[None, :], axis=1) * scale, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=0))
            s_sum = s_sum * tl.exp(m - m_new) + tl.sum(tl.exp(s - m_new), axis=0)
            m = m_new
        tl.store(LSE + (b * H + h) * R + r, m + tl.log(s_sum))

    @triton.jit
    def reduce_kernel(
        Q,
        K,
        LSE,
        OUT,
        width,
        VALID,
        scale,
        sqb,
        sqh,
        sqr,
        skb,
        skh,
        skn,
        sob,
        H: tl.constexpr,
        R: tl.constexpr,
        G: tl.constexpr,
        D: tl.constexpr,
        BLOCK: tl.constexpr,
        WEIGHT: tl.constexpr,
    ):
        b = tl.program_id(0)
        offs = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        valid_len = tl.load(VALID + b)
        ok = offs < valid_len
        d = tl.arange(0, D)
        acc = tl.zeros([BLOCK], tl.float32)
        for hk in range(H // G):
            kk = tl.load(
                K + b * skb + hk * skh + offs[:, None] * skn + d[None, :], mask=ok[:, None], other=0.0
            )
            kk = kk.to(tl.float32)
            for gr in range(G * R):
                h = hk * G + gr // R
                r = gr % R
                q = tl.load(Q + b * sqb + h * sqh + r * sqr + d).to(tl.float32)
                s = tl.sum(kk * q[None, :], axis=1) * scale
                if WEIGHT:
                    s = tl.exp(s - tl.load(LSE + (b * H + h) * R + r))
                acc += s
        tl.store(OUT + b * sob + offs, tl.where(ok, acc / (H * R), float("-inf")), mask=offs < width)

    return lse_kernel, reduce_kernel


def _triton_verify_importance(
    q_rows: torch.Tensor, k: torch.Tensor, valid: torch.Tensor, key_len: torch.Tensor, scale: float, mode: str
) -> torch.Tensor:
    import triton

    b, h_q, r, d = q_rows.shape
    h_kv, n, width = k.shape[1], int(key_len.max()), int(valid.max())
    q_rows = q_rows.contiguous()
    if k.stride(-1) != 1:
        k = k.contiguous()
    lse_kernel, reduce_kernel = _triton_importance_kernels()
    lse = torch.zeros(b, h_q, r, dtype=torch.float32, device=k.device)
    common = dict(H=h_q, R=r, G=h_q // h_kv, D=d, BLOCK=BLOCK_N)
    strides = (q_rows.stride(0), q_rows.stride(1), q_rows.stride(2), k.stride(0), k.stride(1), k.stride(2))
    if mode == "weight":
        lse_kernel[(b, h_q * r)](q_rows, k, lse, n, valid, key_len, float(scale), *strides, **common)
    out = torch.empty(b, width, dtype=torch.float32, device=k.device)
    grid = (b, triton.cdiv(width, BLOCK_N))
    reduce_kernel[grid](
        q_rows,
        k,
        lse,
        out,
        width,
        valid,
        float(scale),
        *strides,
        out.stride(0),
        WEIGHT=mode == "weight",
        **common,
    )
    return out


def importance_from_logits(
    logits: torch.Tensor, lse: torch.Tensor, valid_len: torch.Tensor, mode: str = "weight"
) -> torch.Tensor:
    """:func:`verify_importance` from score rows the verify's attention already computed (the paper's fusion:
    no second read of the keys).

    Args:
        logits: Scaled logits of the score rows ``[B, H_q, R, n]`` (``-inf`` where a row does not see), as
            :func:`hf_ext.kernels.chunked.chunk_attention` returns them.
        lse: Those rows' logsumexp over what each sees, ``[B, H_q, R]``.
        valid_len: ``[B]`` int positions to score per row (each ``<= n``).
        mode: ``"weight"`` or ``"logit"``.

    Returns:
        ``[B, max(valid_len)]`` fp32: the mean over heads and rows, ``-inf`` at or past a row's ``valid_len``.

    Example:
        >>> logits = torch.tensor([0.0, 1.0]).view(1, 1, 1, 2)
        >>> lse = torch.logsumexp(logits, dim=-1)
        >>> tuple(round(x, 4) for x in importance_from_logits(logits, lse, torch.tensor([2]))[0].tolist())
        (0.2689, 0.7311)
    """
    if mode not in MODES:
        raise ValueError(f"`mode` must be one of {MODES}, got {mode!r}.")
    if logits.dim() != 4 or lse.shape != logits.shape[:3] or valid_len.shape != (logits.shape[0],):
        raise ValueError(
            f"`logits` [B, H_q, R, n], `lse` [B, H_q, R] and `valid_len` [B] must agree, got "
            f"{tuple(logits.shape)}, {tuple(lse.shape)} and {tuple(valid_len.shape)}."
        )
    width = int(valid_len.max())
    if width > logits.shape[-1] or int(valid_len.min()) < 1:
        raise ValueError(f"`valid_len` must lie in [1, {logits.shape[-1]}], got {valid_len.tolist()}.")
    if logits.device.type == "cpu" and logits.dtype == lse.dtype == torch.float32 and logits.stride(-1) == 1:
        lib = load("importance")
        if lib is not None:
            return _native_importance(lib, logits, lse, valid_len, width, mode)
    part = logits[..., :width].float()
    imp = (torch.exp(part - lse[..., None]) if mode == "weight" else part).mean(dim=(1, 2))
    if int(valid_len.min()) < width:
        pos = torch.arange(width, device=logits.device)
        imp = imp.masked_fill(pos[None] >= valid_len[:, None], float("-inf"))
    return imp


def _native_importance(
    lib: Any, logits: torch.Tensor, lse: torch.Tensor, valid_len: torch.Tensor, width: int, mode: str
) -> torch.Tensor:
    b, h, s, _ = logits.shape
    lse, valid = lse.contiguous(), valid_len.to(torch.int64).contiguous()
    imp = torch.empty(b, width, dtype=torch.float32)
    call(
        lib.importance, logits, lse, b, h, s, *logits.stride()[:3], valid, width, mode == "weight", imp,
        torch.get_num_threads(),
    )  # fmt: skip
    return imp


def verify_importance(
    q_rows: torch.Tensor,
    k: torch.Tensor,
    valid_len: int | torch.Tensor,
    scale: float,
    mode: str = "weight",
    *,
    key_len: int | torch.Tensor | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Per-position importance of the cache ``[0, valid_len)`` from one or two query rows.

    Args:
        q_rows: ``[B, H_q, R, D]``, ``R`` in {1, 2}; row 0 sees ``[0, valid_len)``, row ``R-1`` sees ``[0,
            key_len)``.
        k: Post-RoPE keys ``[B, H_kv, N, D]``.
        valid_len: Number of leading positions to score: an int, or an int tensor ``[B]`` (ragged rows).
        scale: Softmax scale.
        mode: ``"weight"`` (softmax probability of each row) or ``"logit"`` (scaled logit).
        key_len: Keys the last row sees (int or ``[B]``, each in ``[valid_len, N]``); defaults to ``N``.
        backend: ``"auto"``, ``"torch"`` or ``"triton"``.

    Returns:
        ``[B, max(valid_len)]`` fp32, the mean over heads and rows; ``-inf`` at or past a row's
        ``valid_len``.

    Example:
        >>> q = torch.tensor([1.0, 0.0]).view(1, 1, 1, 2)
        >>> k = torch.tensor([[0.0, 0.0], [1.0, 0.0]]).view(1, 1, 2, 2)
        >>> tuple(round(x, 4) for x in verify_importance(q, k, 2, scale=1.0)[0].tolist())
        (0.2689, 0.7311)
    """
    _check_importance_args(q_rows, k, mode)
    batch, n = k.shape[0], k.shape[2]
    valid = row_lengths("valid_len", valid_len, batch, n, k.device)
    keys = row_lengths("key_len", n if key_len is None else key_len, batch, n, k.device)
    if bool((keys < valid).any()):
        raise ValueError(f"`key_len` must be >= `valid_len` in every row, got {key_len!r} and {valid_len!r}.")
    if resolve_backend(backend, q_rows, k) == "triton":
        check_triton_sizes(D=q_rows.shape[-1])
        return _triton_verify_importance(q_rows, k, valid, keys, scale, mode)
    return _reference_verify_importance(q_rows, k, valid, keys, scale, mode)


# -------------------------------------------------------------------------------------------- masked_topk
def _reference_masked_topk(imp: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    width = min(int(k.max()), imp.shape[-1])
    vals, idx = torch.topk(imp, width, dim=-1, sorted=True)
    keep = (torch.arange(width, device=imp.device)[None] < k[:, None]) & (vals > float("-inf"))
    if bool(keep.all()):
        return idx.sort(dim=-1).values
    big = imp.shape[-1]
    idx = torch.where(keep, idx, big).sort(dim=-1).values
    return idx.masked_fill(idx == big, -1)


def _native_masked_topk(lib: Any, imp: torch.Tensor, budgets: torch.Tensor) -> torch.Tensor | None:
    """The compiled radix select, or ``None`` when it could not allocate a row's candidate buffer."""
    imp, budgets = imp.contiguous(), budgets.contiguous()
    b, n = imp.shape
    width = min(int(budgets.max()), n)
    out = torch.empty(b, width, dtype=torch.int64)
    if call(lib.masked_topk, imp, b, n, budgets, width, out, torch.get_num_threads()):
        return None
    return out


@functools.cache
def _triton_topk_kernel() -> Any:
    import triton
    import triton.language as tl

    @triton.jit
    def kernel(IMP, OUT, K, n, sib, sob, BLOCK: tl.constexpr):
        b = tl.program_id(0)
        base = IMP + b * sib
        k = tl.load(K + b)
        lo = tl.full([], -2147483648, tl.int64)
        hi = tl.full([], 2147483647, tl.int64)
        for _ in range(33):  # binary search: largest t with #(key >= t) >= k, i.e. the k-th largest key
            mid = lo + (hi - lo + 1) // 2
            cnt = tl.zeros([], tl.int64)
            for start in range(0, n, BLOCK):
                offs = start + tl.arange(0, BLOCK)
                ok = offs < n
                bits = tl.load(base + offs, mask=ok, other=0.0).to(tl.int32, bitcast=True)
                # order-preserving int image of fp32
                key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).to(tl.int64)
                cnt += tl.sum(((key >= mid) & ok).to(tl.int64), axis=0)
            take = cnt >= k
            lo = tl.where(take, mid, lo)
            hi = tl.where(take, hi, mid - 1)
        thr = lo
        n_gt = tl.zeros([], tl.int64)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            ok = offs < n
            bits = tl.load(base + offs, mask=ok, other=0.0).to(tl.int32, bitcast=True)
            key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).to(tl.int64)
            n_gt += tl.sum(((key > thr) & ok).to(tl.int64), axis=0)
        need_eq = k - n_gt
        written = tl.zeros([], tl.int64)
        eq_seen = tl.zeros([], tl.int64)
        for start in range(0, n, BLOCK):
            offs = start + tl.arange(0, BLOCK)
            ok = offs < n
            bits = tl.load(base + offs, mask=ok, other=0.0).to(tl.int32, bitcast=True)
            key = tl.where(bits >= 0, bits, bits ^ 0x7FFFFFFF).to(tl.int64)
            eq = ((key == thr) & ok).to(tl.int64)
            eq_rank = eq_seen + tl.cumsum(eq, axis=0) - eq
            sel = (((key > thr) & ok) | ((eq == 1) & (eq_rank < need_eq))).to(tl.int64)
            pos = written + tl.cumsum(sel, axis=0) - 1
            tl.store(OUT + b * sob + pos, offs.to(tl.int64), mask=sel == 1)
            written += tl.sum(sel, axis=0)
            eq_seen += tl.sum(eq, axis=0)

    return kernel


def _triton_masked_topk(imp: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    imp = imp.float().contiguous()
    b, n = imp.shape
    k = k.clamp(max=n)
    out = torch.full((b, int(k.max())), -1, dtype=torch.int64, device=imp.device)
    _triton_topk_kernel()[(b,)](imp, out, k, n, imp.stride(0), out.stride(0), BLOCK=TOPK_BLOCK)
    return out


def masked_topk(imp: torch.Tensor, k: int | torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Ascending indices of the ``min(k, L)`` largest scores of each row.

    Args:
        imp: Scores ``[B, L]`` over the selectable range ``[0, L)`` (``L = valid_len``); ``-inf`` marks
            positions that must not be selected.
        k: Budget, ``>= 1``: one int for every row, or an int tensor ``[B]``.
        backend: ``"auto"``, ``"torch"`` or ``"triton"``.

    Returns:
        int64 ``[B, min(max(k), L)]``, unique, ascending; rows with a smaller budget (or fewer finite scores)
        end with ``-1`` padding. Ties at the threshold: lowest index (the C kernel on CPU fp32, Triton) or any
        (the torch reference).

    Example:
        >>> masked_topk(torch.tensor([[0.1, 0.9, 0.3, 0.8]]), 2).tolist()
        [[1, 3]]
        >>> imp = torch.tensor([[0.1, 0.9, 0.3, 0.8], [0.5, 0.0, 0.2, 0.4]])
        >>> masked_topk(imp, torch.tensor([2, 1])).tolist()
        [[1, 3], [0, -1]]
    """
    if not imp.is_floating_point():
        raise TypeError(f"`imp` must be a floating-point tensor, got dtype {imp.dtype}.")
    if imp.dim() != 2 or imp.shape[-1] == 0:
        raise ValueError(f"`imp` must be a non-empty [B, valid_len] tensor, got shape {tuple(imp.shape)}.")
    if isinstance(k, bool) or (not isinstance(k, int | torch.Tensor)) or (isinstance(k, int) and k < 1):
        raise ValueError(f"`k` must be an int >= 1 or an int tensor [B], got {k!r}.")
    budgets = row_lengths("k", k, imp.shape[0], 1 << 62, imp.device)
    if resolve_backend(backend, imp) == "triton":
        return _triton_masked_topk(imp, budgets)
    if backend == "auto" and imp.device.type == "cpu" and imp.dtype == torch.float32:
        lib = load("importance")
        picked = None if lib is None else _native_masked_topk(lib, imp, budgets)
        if picked is not None:
            return picked
    return _reference_masked_topk(imp, budgets)
