"""Vegas math in pure torch: the budget, the score rows, the four KV selectors and the acceptance rule.

Positions are token indices into one global layer's cache. A batch may be ragged (rows accept different
numbers of draft tokens, so their caches hold different lengths): per-row quantities are lists or ``[B]``
tensors, and a selection is ``[B, n]`` with ``-1`` padding the rows that select fewer positions. Every
selector returns positions of ``[0, valid_len)``; the draft also reads the recent tail on top.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from hf_ext.kernels.importance import importance_from_logits, masked_topk, verify_importance
from hf_ext.kernels.quest import page_minmax, quest_page_scores


def budget(seqlen_k: int, valid_len: int, ratio: float, min_tokens: int, max_length: int) -> int:
    """Per-layer entry budget ``k = min(clamp(ceil(seqlen_k * ratio), m, M), valid_len)`` [paper].

    ``M = max(ceil(max_length * ratio), m)``.

    Example:
        >>> budget(4096, 4096, 0.07, 256, 8192)
        287
    """
    cap = max(math.ceil(max_length * ratio), min_tokens)
    return min(max(min(math.ceil(seqlen_k * ratio), cap), min_tokens), valid_len)


def expected_accepted_length(acceptance: float, gamma: int) -> float:
    """Tokens per iteration (bonus included) when each of ``gamma`` draft tokens is accepted independently
    with probability ``acceptance``: ``(1 - a^(gamma+1)) / (1 - a)`` (arXiv 2211.17192, eq. 1).

    Example:
        >>> round(expected_accepted_length(0.8, 6), 3)
        3.951
    """
    if acceptance >= 1.0:
        return float(gamma + 1)
    return (1.0 - acceptance ** (gamma + 1)) / (1.0 - acceptance)


def forward_cost(
    shape: Mapping[str, Any],
    *,
    rows: int,
    query: int,
    kept: int,
    context: int,
    draft_reads: float | None = None,
) -> tuple[float, float]:
    """``(bytes, FLOPs)`` of one decode forward [reconstructed: a roofline count].

    Bytes: the weights once (``shape["weight_bytes"]``; a tied embedding is counted once, as the LM head reads
    it whole) plus, per row and layer, the cache positions attended (a global layer ``context + query``, or
    ``draft_reads`` when given, as a sparse draft reads; a sliding layer ``min(context + query, window +
    query - 1)``, the union of its query rows' windows).
    FLOPs: ``2 x body_params`` per token row, ``2 x head_params`` per row whose logits are kept (the LM head:
    a verify keeps ``gamma + 1``, a draft 1) and ``4 x heads x head_dim`` per query row and position attended.

    Args:
        shape: ``weight_bytes``, ``entry_bytes`` (K and V of one position of one layer), ``windows`` (per
            layer, its window or ``None`` for global), ``body_params``, ``head_params``, ``heads``,
            ``head_dim`` (missing FLOP keys count 0).
        rows: Batch rows of the forward.
        query: Query tokens per row.
        kept: Logits rows kept per row.
        context: Cache positions per row before the forward.
        draft_reads: Positions a global layer reads instead of its whole cache (a sparse draft).

    Example (Gemma-3-270M's shape, batch 1 at 4096 tokens: a 7-token verify against one plain step):
        >>> shape = {"weight_bytes": 4 * 268e6, "entry_bytes": 2048, "windows": ([512] * 5 + [None]) * 3,
        ...          "body_params": 100e6, "head_params": 168e6, "heads": 4, "head_dim": 256}
        >>> [round(v / 1e9, 2) for v in forward_cost(shape, rows=1, query=1, kept=1, context=4096)]
        [1.11, 0.62]
        >>> [round(v / 1e9, 2) for v in forward_cost(shape, rows=1, query=7, kept=7, context=4096)]
        [1.11, 4.33]
    """
    seen = context + query
    # a sliding layer: the union of the query rows' windows (a verify reads its window plus its extra rows)
    positions = sum(
        (seen if draft_reads is None else draft_reads) if w is None else min(seen, w + query - 1)
        for w in shape["windows"]
    )
    nbytes = shape["weight_bytes"] + rows * shape["entry_bytes"] * positions
    flops = 2 * rows * (query * shape.get("body_params", 0) + kept * shape.get("head_params", 0))
    flops += 4 * rows * query * shape.get("heads", 0) * shape.get("head_dim", 0) * positions
    return float(nbytes), float(flops)


def predicted_speedup(
    *,
    weight_bytes: float,
    entry_bytes: float,
    windows: Sequence[int | None],
    context: int,
    batch: int,
    gamma: int,
    budget_k: int,
    acceptance: float,
    body_params: float = 0.0,
    head_params: float = 0.0,
    heads: int = 0,
    head_dim: int = 0,
    byte_rate: float = 1.0,
    flop_rate: float = math.inf,
    forward_seconds: float = 0.0,
    accepted_length: float | None = None,
) -> float:
    """Decode tokens/s of Vegas over plain decoding, predicted by a byte-and-FLOP model [reconstructed].

    A forward costs ``forward_seconds + bytes / byte_rate + FLOPs / flop_rate`` (:func:`forward_cost` counts
    the bytes and FLOPs; ``forward_seconds`` is the fixed time of a forward: launches, Python). With the
    defaults a forward costs its bytes only (memory-bound decoding). Plain decoding: one forward per token,
    every global layer reading ``context`` positions, a sliding layer ``min(context, window)``. Vegas per
    iteration: ``gamma`` drafts whose global layers read ``budget_k`` selected positions plus the recent tail
    (``(gamma + 1) / 2`` on average), then one verify of ``gamma + 1`` tokens (all their logits kept) over
    the full cache, emitting ``accepted_length`` tokens (default :func:`expected_accepted_length`). Returns
    ``plain seconds per token / Vegas seconds per token``.

    Args:
        weight_bytes: Bytes of the weights a forward reads (a tied LM head counted once).
        entry_bytes: Bytes of one cached position of one layer (K and V of every KV head).
        windows: Per layer, its sliding window, or ``None`` for a global (full-attention) layer.
        context: Cache positions per row.
        batch: Rows decoded together.
        gamma: Draft tokens per iteration.
        budget_k: Selected positions per global layer (:func:`budget`).
        acceptance: Assumed probability that a draft token is accepted.
        body_params: Matmul parameters per token row, the LM head excluded.
        head_params: LM head parameters (per row whose logits are kept).
        heads: Query heads (attention FLOPs).
        head_dim: Head size (attention FLOPs).
        byte_rate: Bytes read per second.
        flop_rate: FLOPs per second (``inf``: arithmetic is free).
        forward_seconds: Fixed seconds per forward.
        accepted_length: Tokens emitted per iteration, if measured.

    Example (Gemma-3-270M in fp32 at batch 1 and a 4096-token context: weights dominate, a loss):
        >>> windows = ([512] * 5 + [None]) * 3
        >>> round(predicted_speedup(weight_bytes=4 * 268e6, entry_bytes=2048, windows=windows, context=4096,
        ...                         batch=1, gamma=6, budget_k=287, acceptance=0.8), 2)
        0.57
    """
    shape = {
        "weight_bytes": weight_bytes,
        "entry_bytes": entry_bytes,
        "windows": windows,
        "body_params": body_params,
        "head_params": head_params,
        "heads": heads,
        "head_dim": head_dim,
    }

    def cost(query: int, reads: float | None) -> float:
        nbytes, flops = forward_cost(
            shape, rows=batch, query=query, kept=query, context=context, draft_reads=reads
        )
        return forward_seconds + nbytes / byte_rate + flops / flop_rate

    plain = cost(1, None)
    draft = cost(1, min(budget_k, context) + (gamma + 1) / 2)
    verify = cost(gamma + 1, None)
    tau = expected_accepted_length(acceptance, gamma) if accepted_length is None else accepted_length
    return plain * tau / (gamma * draft + verify)


def score_row_index(rows: int, last: Sequence[int] | None, batch: int) -> torch.Tensor:
    """``[B, S]`` chunk rows whose scores pick the next selection [paper].

    Prefill (``last=None``) uses the last prompt row (``rows - 1``, "entry 2"). A verify chunk uses its first
    row and its last real row ``last[b]`` (rows of a ragged batch may draft fewer tokens); with one row only,
    the first ("entry 1").

    Example:
        >>> score_row_index(7, [6, 2], 2).tolist()
        [[0, 6], [0, 2]]
    """
    if last is None:
        return torch.full((batch, 1), rows - 1, dtype=torch.long)
    if max(last) == 0:
        return torch.zeros(batch, 1, dtype=torch.long)
    return torch.tensor([[0, t] for t in last], dtype=torch.long)


def score_rows(query: torch.Tensor, last: Sequence[int] | None) -> torch.Tensor:
    """The query rows of :func:`score_row_index`: ``[B, H_q, S, D]``."""
    b, h, q, d = query.shape
    idx = score_row_index(q, last, b).to(query.device)
    return query.gather(2, idx[:, None, :, None].expand(-1, h, -1, d))


def vegas_indices(
    query: torch.Tensor,
    key: torch.Tensor,
    *,
    last: Sequence[int] | None,
    valid_len: Sequence[int],
    budgets: Sequence[int],
    scale: float,
    mode: str,
    backend: str = "auto",
) -> torch.Tensor:
    """Vegas selection: per row, top-``budgets[b]`` of the head- and row-mean scores over ``[0,
    valid_len[b])``: ``[B, max(budgets)]``, ``-1``-padded.

    The first score row sees ``[0, valid_len)``, the last one ``[0, valid_len + last)`` (its causal range).
    """
    dev = key.device
    rows = score_rows(query, last)
    valid = torch.tensor(valid_len, device=dev)
    seen = valid if last is None else valid + torch.tensor(last, device=dev)
    imp = verify_importance(rows, key, valid, scale, mode, key_len=seen, backend=backend)
    return masked_topk(imp, torch.tensor(budgets, device=dev), backend=backend)


def vegas_indices_from_scores(
    logits: torch.Tensor,
    lse: torch.Tensor,
    *,
    valid_len: Sequence[int],
    budgets: Sequence[int],
    mode: str,
    backend: str = "auto",
) -> torch.Tensor:
    """:func:`vegas_indices` from the score rows' logits ``[B, H_q, S, n]`` and logsumexps ``[B, H_q, S]`` the
    verify's attention returned (no second read of the keys): ``[B, max(budgets)]``, ``-1``-padded."""
    dev = logits.device
    imp = importance_from_logits(logits, lse, torch.tensor(valid_len, device=dev), mode)
    return masked_topk(imp, torch.tensor(budgets, device=dev), backend=backend)


def streamingllm_indices(
    valid_len: int, seqlen: int, ratio: float, min_tokens: int, sink: int = 16, block: int = 16
) -> torch.Tensor:
    """Sink block plus a window of the last ``W = block * ceil(max(seqlen * ratio, m) / block)`` positions.

    Returns ascending unique positions in ``[0, valid_len)`` (1-D). The window is token-aligned [reconstructed
    for HF; vLLM aligns it to its blocks].

    Example:
        >>> idx = streamingllm_indices(1000, 1000, 0.07, 16)
        >>> len(idx), idx[:2].tolist(), idx[15:17].tolist(), idx[-1].item()
        (96, [0, 1], [15, 920], 999)
    """
    w = block * math.ceil(max(seqlen * ratio, min_tokens) / block)
    keep = torch.zeros(valid_len, dtype=torch.bool)
    keep[: min(sink, valid_len)] = True
    keep[max(0, valid_len - w) :] = True
    return keep.nonzero().flatten()


class QuestPages:
    """Per-layer Quest page metadata (key min/max of complete pages), extended incrementally.

    Pages are summarised up to the shortest row's selectable length, so every row shares the page count;
    positions past the last complete page are read densely by the draft (the Quest paper's partial page).

    Args:
        page: Positions per page.
    """

    def __init__(self, page: int = 16) -> None:
        self.page = page
        self.kmin: torch.Tensor | None = None
        self.kmax: torch.Tensor | None = None

    @property
    def n_pages(self) -> int:
        return 0 if self.kmin is None else self.kmin.shape[2]

    @property
    def covered(self) -> int:
        """Positions summarised by complete pages (the dense tail starts here)."""
        return self.n_pages * self.page

    def extend(self, key: torch.Tensor, valid_len: int) -> None:
        """Add the complete pages of ``key[:, :, :valid_len]`` not yet summarised."""
        done = self.covered
        new_end = (valid_len // self.page) * self.page
        if new_end <= done:
            return
        kmin, kmax = page_minmax(key[:, :, done:new_end], self.page)
        self.kmin = kmin if self.kmin is None else torch.cat([self.kmin, kmin], dim=2)
        self.kmax = kmax if self.kmax is None else torch.cat([self.kmax, kmax], dim=2)

    def select(self, query: torch.Tensor, budgets: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The top ``ceil(k / page)`` pages per KV head, as positions: ``[B, H_kv, n]`` ascending per head
        (the first ``counts[b]`` of a row are live) and ``counts`` ``[B]``; ``None`` without pages."""
        if self.kmin is None or self.kmax is None:
            return None
        scores = quest_page_scores(query, self.kmin, self.kmax)
        counts = torch.tensor(
            [min(math.ceil(k / self.page), self.n_pages) for k in budgets], device=query.device
        )
        top = scores.topk(int(counts.max()), dim=-1).indices  # [B, H_kv, P], best first
        kept = torch.arange(top.shape[-1], device=top.device) < counts[:, None, None]
        pages = top.masked_fill(~kept, self.n_pages).sort(dim=-1).values  # kept pages first, ascending
        offs = torch.arange(self.page, device=top.device)
        return (pages[..., None] * self.page + offs).flatten(-2), counts * self.page


def lookup_draft(tokens: Sequence[int], max_ngram: int, count: int) -> list[int]:
    """Prompt-lookup candidates [reconstructed: prompt lookup decoding]: for ``n = max_ngram .. 1``, find the
    latest earlier occurrence of the row's last ``n`` tokens and return up to ``count`` tokens that followed
    it; ``[]`` when no n-gram recurs.

    Example:
        >>> lookup_draft([5, 6, 7, 8, 9, 5, 6], max_ngram=2, count=3)
        [7, 8, 9]
    """
    size = len(tokens)
    for n in range(min(max_ngram, size - 1), 0, -1):
        tail = list(tokens[size - n :])
        for start in range(size - n - 1, -1, -1):
            if list(tokens[start : start + n]) == tail:
                return list(tokens[start + n : start + n + count])
    return []


def greedy_accept(draft: torch.Tensor, target: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Greedy verification [paper]: ``draft`` ``[B, g]`` against the target argmax ``target`` ``[B, g+1]``.

    Returns ``(n_acc [B], bonus [B])``: leading matches per row and the target token after them.

    Example:
        >>> greedy_accept(torch.tensor([[4, 5, 6]]), torch.tensor([[4, 5, 7, 8]]))
        (tensor([2]), tensor([7]))
    """
    n_acc = (draft == target[:, :-1]).long().cumprod(dim=-1).sum(dim=-1)
    return n_acc, target.gather(1, n_acc[:, None])[:, 0]


def speculative_accept(
    draft: torch.Tensor, q: torch.Tensor, p: torch.Tensor, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Speculative sampling (arXiv 2211.17192), one row per sequence: exact in distribution.

    Args:
        draft: Drafted tokens ``[B, g]``.
        q: Draft probabilities ``[B, g, V]`` (of the processed draft logits).
        p: Target probabilities ``[B, g + 1, V]``.
        generator: Optional RNG.

    Returns:
        ``(n_acc [B], bonus [B])``: draft token ``i`` is kept with probability ``min(1, p_i / q_i)`` until the
        first rejection, where the bonus is drawn from ``norm(max(0, p - q))``; if all are kept, from ``p_g``.
    """
    b, g = draft.shape
    p_tok = p[:, :g].gather(-1, draft[..., None])[..., 0]
    q_tok = q.gather(-1, draft[..., None])[..., 0]
    u = torch.rand(b, g, device=draft.device, generator=generator)
    n_acc = (u * q_tok <= p_tok).long().cumprod(dim=-1).sum(dim=-1)
    rows = torch.arange(b, device=draft.device)
    residual = p[rows, n_acc]
    rejected = n_acc < g
    q_pad = torch.cat([q, p.new_zeros(b, 1, p.shape[-1])], dim=1)[rows, n_acc]
    residual = torch.where(rejected[:, None], (residual - q_pad).clamp(min=0), residual)
    residual = residual / residual.sum(-1, keepdim=True)
    bonus = torch.multinomial(residual, 1, generator=generator)[:, 0]
    return n_acc, bonus
