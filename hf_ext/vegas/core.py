"""Vegas math in pure torch: the budget, the score rows, the four KV selectors and the acceptance rule.

Positions are token indices into one global layer's cache. A batch may be ragged (rows accept different
numbers of draft tokens, so their caches hold different lengths): per-row quantities are lists or ``[B]``
tensors, and a selection is ``[B, n]`` with ``-1`` padding the rows that select fewer positions. Every
selector returns positions of ``[0, valid_len)``; the draft also reads the recent tail on top.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
