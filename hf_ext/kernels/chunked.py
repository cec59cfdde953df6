"""``chunk_attention``: a short chunk of query rows (a speculative verify) attending causally to a long cache,
with the scaled logits of chosen score rows returned on the way (Vegas's selection reads them).

Shapes (``B`` batch, ``H_q``/``H_kv`` query/KV heads, ``R`` chunk rows, ``N`` cache slots, ``D`` head size):

* ``chunk_attention(q, k, v, lengths, scale=, score_rows=)``: ``q`` ``[B, H_q, R, D]`` holds the last ``R``
  slots of each row: query ``j`` of row ``b`` sits at slot ``lengths[b] - R + j`` and sees the slots
  ``[0, lengths[b] - R + j]`` of ``k``/``v`` ``[B, H_kv, N, D]`` (rows of a batch may hold different lengths).
  Returns ``out`` ``[B, H_q, R, D]`` (dtype of ``q``), ``lse`` ``[B, H_q, R]`` fp32 (each row's logsumexp over
  what it sees) and, when ``score_rows`` ``[B, S]`` (chunk row indices) is given, ``logits``
  ``[B, H_q, S, max(lengths)]`` fp32: those rows' scaled logits, ``-inf`` where the row does not see.

Paths: the reference is SDPA with a boolean mask plus one matrix product for the score rows. On CPU, fp32,
``backend="auto"`` runs a C kernel instead (``csrc/chunk_attention.c``, built on first use by
:mod:`hf_ext.kernels._native`; falls back to the reference without a compiler): one pass over the keys and
values per (row, KV head) for all ``H_q / H_kv * R`` query vectors, in blocks of 32 keys that stay in L1 for
every query vector, an online softmax, and the score rows' logits written as they are computed. The reason is
CPU arithmetic: SDPA there runs ``R = 7`` rows at about 2.1x the cost of one (its small matrix products are
compute-bound on two cores). Measured at 8 rows x 32k slots, 4 heads of 64, 2 threads (this host's timings
drift by up to 30% between runs): one row 13 ms against SDPA's 20 (the bytes alone, read by a sum, take 11);
4 rows 16 ms; 7 rows 29 ms against SDPA's 58. A one-row call is a decode step, so plain decoding gets the same
kernel (``"hf_ext_chunk"`` in :mod:`hf_ext.vegas.attention`), and so does Vegas's draft
attention (:func:`~hf_ext.kernels.gathered_attention.gathered_decode_attention`). On CUDA the reference (SDPA)
is the fast path.

With a :class:`KeySelection` a row reads its selected slots and then its dense tail, in place: the kernel
takes each block's 32 keys through a list of row pointers and prefetches the rows two blocks ahead into L2
(scattered 256-byte rows read at about half the speed of one stream without it: 4.7 against 2.2 ms at 8 rows
x 2.3k of 32k slots, 4 heads of 64). Positions then count in that order: query ``j`` sits at position
``P_b - R + j`` of the row's ``P_b = counts[b] + lengths[b] - tail_start[b]``, and the score rows' logits are
per position.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import InitVar, dataclass

import torch

from hf_ext._registry import paper
from hf_ext.kernels._dispatch import BACKENDS, check_float, warn_fallback
from hf_ext.kernels._native import call, load

MAX_QUERY_VECTORS, MAX_HEAD_SIZE = 64, 256  # the C kernel's limits per KV head; larger shapes use SDPA


def kernel_applies(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether the C kernel takes these shapes and dtypes (``backend="auto"`` then runs it when it builds):
    CPU fp32, a head size up to 256 and a multiple of 8, at most 64 query vectors per KV head."""
    return (
        q.device.type == "cpu"
        and kernel_refusal(q, k, v) is None
        and q.shape[1] // k.shape[1] * q.shape[2] <= MAX_QUERY_VECTORS
    )


def kernel_refusal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> str | None:
    """Why the C kernel refuses these tensors' dtype or head size (``None`` when it takes them). More query
    vectors than it takes are not a refusal: SDPA is the right path for a long chunk."""
    dtypes = {q.dtype, k.dtype, v.dtype}
    if dtypes != {torch.float32}:
        return f"dtype {', '.join(sorted(str(t) for t in dtypes))}; the C kernel takes torch.float32"
    d = q.shape[-1]
    if d > MAX_HEAD_SIZE or d % 8:
        return f"head size {d}; the C kernel takes a multiple of 8 up to {MAX_HEAD_SIZE}"
    return None


@dataclass(frozen=True)
class KeySelection:
    """The cache slots each row attends to, in this order: ``indices[b, :counts[b]]`` (ascending, all below
    ``tail_start[b]``), then every slot from ``tail_start[b]`` up to the row's length (the chunk's own slots
    among them). Vegas's drafts read their selection and the tokens after it this way, in place in the cache;
    Quest's drafts read their pages per KV head the same way.

    Args:
        indices: ``[B, n]`` int64 selected slots shared by the KV heads, or ``[B, H_kv, n]`` per KV head (each
            head its own ``counts[b]`` slots); entries past ``counts[b]`` are ignored.
        counts: ``[B]`` int64 in ``[0, n]``: selected slots per row.
        tail_start: ``[B]`` int64: the first slot of each row's dense tail.
        validate: Check the arguments (default). ``False`` skips the checks, for slots that are valid by
            construction (a top-k's ascending indices, as Vegas's selection after each verify): the kernel
            reads the cache at these slots unchecked, so invalid ones read outside the row.

    Raises:
        ValueError: with ``validate``, wrong dtypes or shapes, or a row whose selected slots are not strictly
            ascending in ``[0, tail_start[b])``.

    Example:
        >>> sel = KeySelection.from_rows([torch.tensor([0, 5]), torch.tensor([2])], tail_start=[9, 4])
        >>> sel.slots(torch.tensor([11, 6])).tolist()  # row 0: slots 0, 5, 9, 10; row 1: 2, 4, 5
        [[0, 5, 9, 10], [2, 4, 5, -1]]
    """

    _paper = paper("vegas")

    indices: torch.Tensor
    counts: torch.Tensor
    tail_start: torch.Tensor
    validate: InitVar[bool] = True

    def __post_init__(self, validate: bool) -> None:
        if not validate:
            return
        idx, counts, tail = self.indices, self.counts, self.tail_start
        if any(t.dtype != torch.int64 for t in (idx, counts, tail)):
            raise ValueError("`indices`, `counts` and `tail_start` must be int64 tensors.")
        if idx.dim() not in (2, 3) or counts.shape != (idx.shape[0],) or tail.shape != (idx.shape[0],):
            raise ValueError(
                f"`indices` must be [B, n] or [B, H_kv, n] and `counts`, `tail_start` [B], got "
                f"{tuple(idx.shape)}, {tuple(counts.shape)} and {tuple(tail.shape)}."
            )
        if bool((counts < 0).any() | (counts > idx.shape[-1]).any() | (tail < 0).any()):
            raise ValueError(
                f"`counts` must lie in [0, {idx.shape[-1]}] and `tail_start` be >= 0, got {counts.tolist()} "
                f"and {tail.tolist()}."
            )
        per_head = self.per_head()  # [B, G, n]
        live = torch.arange(idx.shape[-1], device=idx.device) < counts[:, None, None]
        bad = live & ((per_head < 0) | (per_head >= tail[:, None, None]))
        bad[..., 1:] |= live[..., 1:] & (per_head[..., 1:] <= per_head[..., :-1])
        if bool(bad.any()):
            row, head = (int(i) for i in bad.any(-1).nonzero()[0])
            raise ValueError(
                f"`indices` of row {row} must be strictly ascending in [0, tail_start={int(tail[row])}), got "
                f"{per_head[row, head, : int(counts[row])].tolist()}."
            )

    @classmethod
    def from_padded(
        cls, indices: torch.Tensor, tail_start: Sequence[int] | torch.Tensor, *, validate: bool = True
    ) -> KeySelection:
        """From ``[B, n]`` selected slots per row, ascending and ``-1``-padded at the end of a row (as
        :func:`pad_rows` and ``masked_topk`` give them), and each row's tail start; ``validate`` as for the
        class."""
        tail = torch.as_tensor(tail_start, dtype=torch.int64, device=indices.device)
        return cls(indices.clamp(min=0), (indices >= 0).sum(-1), tail, validate)

    @classmethod
    def from_rows(cls, rows: Sequence[torch.Tensor], tail_start: Sequence[int]) -> KeySelection:
        """From one 1-D tensor of selected slots per row (ascending) and each row's tail start."""
        return cls.from_padded(pad_rows(rows), tail_start)

    def per_head(self) -> torch.Tensor:
        """``indices`` as ``[B, G, n]``: ``G = 1`` when the heads share them, else ``H_kv``."""
        return self.indices if self.indices.dim() == 3 else self.indices[:, None]

    def runs(self) -> float:
        """Contiguous runs of the selected slots (a jump in the slot list starts one), summed over rows;
        per-head slots count the mean over the KV heads. Each run is one scattered read."""
        idx = self.per_head()
        live = torch.arange(idx.shape[-1], device=idx.device) < self.counts[:, None, None]
        jump = torch.ones_like(idx, dtype=torch.bool)
        jump[..., 1:] = idx[..., 1:] != idx[..., :-1] + 1
        return float((live & jump).sum()) / idx.shape[1]

    def positions(self, lengths: torch.Tensor) -> torch.Tensor:
        """``[B]``: the slots each row attends to when it holds ``lengths`` ``[B]`` slots."""
        return self.counts + lengths - self.tail_start

    def slots(self, lengths: torch.Tensor) -> torch.Tensor:
        """The slot of each row's positions in order, ``-1`` past a row's last: ``[B, P]``, or
        ``[B, H_kv, P]`` for per-head indices."""
        n = self.positions(lengths)
        width = int(n.max())
        p = torch.arange(width, device=lengths.device)
        picked = self.per_head()[..., :width]
        picked = torch.nn.functional.pad(picked, (0, width - picked.shape[-1]))
        counts = self.counts[:, None, None]
        out = torch.where(p < counts, picked, self.tail_start[:, None, None] + p - counts)
        out = out.masked_fill(p >= n[:, None, None], -1)
        return out if self.indices.dim() == 3 else out[:, 0]


def pad_rows(rows: Sequence[torch.Tensor]) -> torch.Tensor:
    """Stack 1-D int tensors into ``[B, max(1, max_len)]`` int64, padding with ``-1``.

    Example:
        >>> pad_rows([torch.tensor([0, 3]), torch.tensor([5])]).tolist()
        [[0, 3], [5, -1]]
    """
    width = max(1, max((len(r) for r in rows), default=0))
    out = torch.full((len(rows), width), -1, dtype=torch.int64, device=rows[0].device if rows else None)
    for i, r in enumerate(rows):
        out[i, : len(r)] = r
    return out


def check_selection(selection: KeySelection, lengths: torch.Tensor, rows: int, heads: int) -> None:
    """Raise ``ValueError`` unless ``selection`` fits a batch of ``lengths`` ``[B]`` whose last ``rows`` slots
    are the queries' (so they must lie in each row's tail) and whose cache holds ``heads`` KV heads."""
    if selection.indices.dim() == 3 and selection.indices.shape[1] != heads:
        raise ValueError(
            f"`selection.indices` holds {selection.indices.shape[1]} heads, the cache has {heads} KV heads."
        )
    if selection.counts.shape != lengths.shape:
        raise ValueError(
            f"`selection` holds {selection.counts.shape[0]} rows, the batch has {lengths.shape[0]}."
        )
    if bool((lengths - selection.tail_start < rows).any()):
        raise ValueError(
            f"`selection.tail_start` {selection.tail_start.tolist()} must leave the last {rows} slot(s) of "
            f"each row in its tail (row lengths {lengths.tolist()})."
        )


def _check_args(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor,
                score_rows: torch.Tensor | None, selection: KeySelection | None) -> None:  # fmt: skip
    check_float(q=q, k=k, v=v)
    if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape:
        raise ValueError(
            f"`q` must be [B, H_q, R, D] and `k`, `v` both [B, H_kv, N, D], got {tuple(q.shape)}, "
            f"{tuple(k.shape)} and {tuple(v.shape)}."
        )
    if q.shape[0] != k.shape[0] or q.shape[-1] != k.shape[-1] or q.shape[1] % k.shape[1]:
        raise ValueError(
            f"`q` {tuple(q.shape)} and `k` {tuple(k.shape)} must agree on batch and head size, with H_q a "
            "multiple of H_kv."
        )
    if lengths.dtype != torch.int64 or lengths.shape != (q.shape[0],):
        raise ValueError(f"`lengths` must be an int64 tensor of shape ({q.shape[0]},), got {lengths!r}.")
    if int(lengths.min()) < q.shape[2] or int(lengths.max()) > k.shape[2]:
        raise ValueError(
            f"`lengths` must lie in [R, N] = [{q.shape[2]}, {k.shape[2]}] (the chunk is the last R slots), "
            f"got {lengths.tolist()}."
        )
    if selection is not None:
        check_selection(selection, lengths, q.shape[2], k.shape[1])
    if score_rows is not None:
        if score_rows.dtype != torch.int64 or score_rows.dim() != 2 or score_rows.shape[0] != q.shape[0]:
            raise ValueError(f"`score_rows` must be an int64 tensor [B, S], got {score_rows!r}.")
        if int(score_rows.min()) < 0 or int(score_rows.max()) >= q.shape[2]:
            raise ValueError(
                f"`score_rows` must index chunk rows [0, {q.shape[2]}), got {score_rows.tolist()}."
            )


def _reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float,
    score_rows: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:  # fmt: skip
    b, h_q, r, d = q.shape
    n = int(lengths.max())
    g = h_q // k.shape[1]
    live = (torch.arange(n, device=q.device) < lengths[:, None])[:, None, :, None]  # [B, 1, n, 1]
    # slots past a short row's length get zero weight, and 0 * NaN is NaN: zero them in the copies
    ks = k[:, :, :n].repeat_interleave(g, dim=1).masked_fill(~live, 0.0)
    vs = v[:, :, :n].repeat_interleave(g, dim=1).masked_fill(~live, 0.0)
    rows = lengths[:, None] - r + torch.arange(r, device=q.device)  # [B, R] slot of each query
    seen = torch.arange(n, device=q.device) <= rows[..., None]  # [B, R, n]
    logits = torch.matmul(q.float(), ks.float().transpose(-1, -2)) * scale
    logits = logits.masked_fill(~seen[:, None], float("-inf"))
    lse = torch.logsumexp(logits, dim=-1)
    out = torch.nn.functional.scaled_dot_product_attention(q, ks, vs, attn_mask=seen[:, None], scale=scale)
    if score_rows is None:
        return out, lse, None
    pick = score_rows[:, None, :, None].expand(-1, h_q, -1, n)
    return out, lse, logits.gather(2, pick)


def _reference_selected(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float,
    score_rows: torch.Tensor | None, selection: KeySelection,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:  # fmt: skip
    """The reference over a selection: the rows' slots gathered in order, then the dense reference."""
    slots = selection.slots(lengths).clamp(min=0)  # past a row's last: slot 0, not attended
    slots = (slots if slots.dim() == 3 else slots[:, None])[..., None]
    ks = k.gather(2, slots.expand(-1, k.shape[1], -1, k.shape[-1]))
    vs = v.gather(2, slots.expand(-1, v.shape[1], -1, v.shape[-1]))
    return _reference(q, ks, vs, selection.positions(lengths), scale, score_rows)


def run_kernel(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, lengths: torch.Tensor, scale: float,
    score_rows: torch.Tensor | None = None, selection: KeySelection | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None] | None:  # fmt: skip
    """The C kernel's ``(out, lse, logits)`` for valid arguments (:func:`chunk_attention`'s), or ``None``
    where it does not apply (:func:`kernel_applies`) or does not build."""
    if q.device.type == "cpu" and (reason := kernel_refusal(q, k, v)) is not None:
        warn_fallback("chunk_attention", reason)  # off the CPU the reference (SDPA) is the fast path
    lib = load("chunk_attention") if kernel_applies(q, k, v) else None
    if lib is None:
        return None
    b, h_q, r, d = q.shape
    if k.stride(-1) != 1 or v.stride(-1) != 1:
        k, v = k.contiguous(), v.contiguous()
    q, lengths = q.contiguous(), lengths.contiguous()
    out = torch.empty_like(q)
    lse = torch.empty(b, h_q, r, dtype=torch.float32)
    rows = score_rows.contiguous() if score_rows is not None else torch.empty(b, 0, dtype=torch.int64)
    positions = lengths if selection is None else selection.positions(lengths)
    n = int(positions.max())
    logits = torch.empty(b, h_q, rows.shape[1], n if score_rows is not None else 0, dtype=torch.float32)
    if selection is None:
        unread = lengths.new_zeros(1)  # has_sel is 0
        idx, counts, tail = unread[None], unread, unread
    else:
        parts = (selection.per_head(), selection.counts, selection.tail_start)
        idx, counts, tail = (t.contiguous() for t in parts)
    status = call(
        lib.chunk_attention, q, k, v, b, h_q, k.shape[1], r, d, *k.stride()[:3], *v.stride()[:3], lengths,
        selection is not None, idx, idx.shape[1] if idx.dim() == 3 else 1, idx.shape[-1], counts, tail,
        float(scale), out, lse, rows, rows.shape[1], logits, n, torch.get_num_threads(),
    )  # fmt: skip
    if status:
        return None
    if score_rows is None:
        return out, lse, None
    for row, length in enumerate(positions.tolist()):  # the kernel writes each row's logits up to its length
        logits[row, :, :, length:] = float("-inf")
    return out, lse, logits


def chunk_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    lengths: torch.Tensor,
    *,
    scale: float,
    score_rows: torch.Tensor | None = None,
    selection: KeySelection | None = None,
    backend: str = "auto",
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Causal attention of the last ``R`` slots of each row over its cache, or over a :class:`KeySelection` of
    it (module docstring for shapes).

    Args:
        q: Queries ``[B, H_q, R, D]``.
        k: Keys ``[B, H_kv, N, D]`` (post-RoPE), unit stride over ``D`` for the C kernel (else copied).
        v: Values ``[B, H_kv, N, D]``.
        lengths: ``[B]`` int64 live slots per row, the chunk included (in ``[R, N]``).
        scale: Softmax scale.
        score_rows: Optional ``[B, S]`` int64 chunk rows whose scaled logits to return.
        selection: Optional :class:`KeySelection`: each row attends to its selected slots and its tail from
            ``selection.tail_start[b]`` (which must hold the chunk), in that order; the score rows' logits are
            then per position of that order.
        backend: ``"auto"`` (the C kernel on CPU fp32 when it builds, else the reference), ``"torch"`` (the
            reference) or ``"triton"`` (no Triton kernel: the reference, i.e. SDPA, on the tensors' device).

    Returns:
        ``(out [B, H_q, R, D], lse [B, H_q, R] fp32, logits [B, H_q, S, P] fp32 or None)``; ``P`` is
        ``max(lengths)``, or the most positions of a row with a selection.

    Raises:
        TypeError: a non-floating-point ``q``/``k``/``v``.
        ValueError: mismatched shapes, ``lengths`` outside ``[R, N]``, ``score_rows`` outside the chunk, a
            ``selection`` of another batch, past the cache, or whose tail does not hold the chunk, an unknown
            ``backend``.

    Example:
        >>> q = torch.tensor([[1.0, 0.0], [0.0, 1.0]]).view(1, 1, 2, 2)
        >>> k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]).view(1, 1, 3, 2)
        >>> out, lse, logits = chunk_attention(q, k, k, torch.tensor([3]), scale=1.0,
        ...                                    score_rows=torch.tensor([[0]]))
        >>> logits.flatten().tolist()  # row 0 sits at slot 1: it sees slots 0 and 1
        [1.0, 0.0, -inf]
    """
    if backend not in BACKENDS:
        raise ValueError(f"`backend` must be one of {BACKENDS}, got {backend!r}.")
    _check_args(q, k, v, lengths, score_rows, selection)
    result = run_kernel(q, k, v, lengths, scale, score_rows, selection) if backend == "auto" else None
    if result is not None:
        return result
    if selection is not None:
        return _reference_selected(q, k, v, lengths, scale, score_rows, selection)
    return _reference(q, k, v, lengths, scale, score_rows)
