"""Vegas math in pure torch: the budget, the score rows, and the four KV selectors.

Positions are token indices into one global layer's cache. Every selector returns the positions of
``[0, valid_len)`` a draft reads; the recent tail ``[valid_len, n)`` is always read on top.
"""

from __future__ import annotations

import math

import torch

from hf_ext.kernels.importance import masked_topk, verify_importance
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


def score_rows(query: torch.Tensor, prefill: bool) -> torch.Tensor:
    """The query rows whose scores pick the next selection: ``[B, H_q, R, D]``.

    Prefill uses the last prompt row ("entry 2"); a verify chunk uses its first and last rows, or only the
    first when it has one row ("entry 1") [paper].
    """
    if prefill or query.shape[2] == 1:
        return query[:, :, -1:] if prefill else query[:, :, :1]
    return query[:, :, [0, -1]]


def vegas_indices(
    query: torch.Tensor,
    key: torch.Tensor,
    *,
    prefill: bool,
    valid_len: int,
    k: int,
    scale: float,
    mode: str,
    backend: str = "auto",
) -> torch.Tensor:
    """Vegas selection: top-``k`` of the head- and row-mean scores over ``[0, valid_len)``: ``[B, k]``."""
    imp = verify_importance(score_rows(query, prefill), key, valid_len, scale, mode, backend=backend)
    return masked_topk(imp, k, backend=backend)


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

    def extend(self, key: torch.Tensor, valid_len: int) -> None:
        """Add the complete pages of ``key[:, :, :valid_len]`` not yet summarised."""
        done = self.n_pages * self.page
        new_end = (valid_len // self.page) * self.page
        if new_end <= done:
            return
        kmin, kmax = page_minmax(key[:, :, done:new_end], self.page)
        self.kmin = kmin if self.kmin is None else torch.cat([self.kmin, kmin], dim=2)
        self.kmax = kmax if self.kmax is None else torch.cat([self.kmax, kmax], dim=2)

    def select(self, query: torch.Tensor, k: int) -> torch.Tensor | None:
        """Positions of the top ``ceil(k / page)`` pages per KV head ``[B, H_kv, n]`` (``None``: no page)."""
        if self.kmin is None or self.kmax is None:
            return None
        scores = quest_page_scores(query, self.kmin, self.kmax)
        top = scores.topk(min(math.ceil(k / self.page), self.n_pages), dim=-1).indices  # [B, H_kv, P]
        offs = torch.arange(self.page, device=top.device)
        return (top[..., None] * self.page + offs).flatten(-2)
