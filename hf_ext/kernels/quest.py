"""Quest-style page metadata and page scores (the query-aware top-k baseline of Vegas's benchmark).

* ``page_minmax(k, page=16)``: keys ``[B, H_kv, N, D]`` -> ``(kmin, kmax)`` ``[B, H_kv, N // page, D]``, the
  per-channel minimum and maximum of each *complete* page.
* ``quest_page_scores(q, kmin, kmax)``: ``q`` ``[B, H_q, 1, D]`` -> ``[B, H_kv, n_pages]`` with
  ``score = sum_d max(q_d * min_d, q_d * max_d)`` (an upper bound of ``q.k`` inside the page), summed over the
  query heads of each KV head's group.

Torch only (cost ``O(N / page * D)``). As ``min_d <= max_d``, ``max(q_d * min_d, q_d * max_d)`` is
``relu(q_d) * max_d + min(q_d, 0) * min_d``, so the scores are two matrix products that read the page metadata
once, with no ``[B, H_q, P, D]`` temporaries.
"""

from __future__ import annotations

import torch


def page_minmax(k: torch.Tensor, page: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-channel key minimum and maximum of every complete page of ``page`` positions.

    Args:
        k: Keys ``[B, H_kv, N, D]``.
        page: Positions per page.

    Returns:
        ``(kmin, kmax)``, each ``[B, H_kv, N // page, D]``.

    Example:
        >>> kmin, kmax = page_minmax(torch.arange(6.0).view(1, 1, 3, 2), page=2)
        >>> kmin.tolist(), kmax.tolist()
        ([[[[0.0, 1.0]]]], [[[[2.0, 3.0]]]])
    """
    if k.dim() != 4:
        raise ValueError(f"`k` must be [B, H_kv, N, D], got shape {tuple(k.shape)}.")
    if isinstance(page, bool) or not isinstance(page, int) or page < 1:
        raise ValueError(f"`page` must be an int >= 1, got {page!r}.")
    b, h, n, d = k.shape
    pages = k[:, :, : (n // page) * page].reshape(b, h, n // page, page, d)
    return pages.amin(dim=3), pages.amax(dim=3)


def quest_page_scores(q: torch.Tensor, kmin: torch.Tensor, kmax: torch.Tensor) -> torch.Tensor:
    """Quest upper-bound page scores per KV head.

    Args:
        q: Query ``[B, H_q, 1, D]``.
        kmin: Page minima ``[B, H_kv, P, D]``.
        kmax: Page maxima ``[B, H_kv, P, D]``, ``>= kmin`` elementwise (as :func:`page_minmax` returns them).

    Returns:
        ``[B, H_kv, P]`` fp32.

    Example:
        >>> q = torch.tensor([1.0, -2.0]).view(1, 1, 1, 2)
        >>> kmin, kmax = torch.tensor([0.0, -1.0]).view(1, 1, 1, 2), torch.tensor([2.0, 3.0]).view(1, 1, 1, 2)
        >>> quest_page_scores(q, kmin, kmax)
        tensor([[[4.]]])
    """
    if q.dim() != 4 or q.shape[2] != 1:
        raise ValueError(f"`q` must be [B, H_q, 1, D], got shape {tuple(q.shape)}.")
    if kmin.shape != kmax.shape or kmin.dim() != 4:
        raise ValueError(
            f"`kmin` and `kmax` must both be [B, H_kv, P, D], got {tuple(kmin.shape)}, {tuple(kmax.shape)}."
        )
    b, h_q, _, d = q.shape
    h_kv = kmin.shape[1]
    if h_q % h_kv or kmin.shape[-1] != d:
        raise ValueError(
            f"`q` {tuple(q.shape)} does not match the page metadata {tuple(kmin.shape)} (heads, D)."
        )
    qg = q.float().view(b, h_kv, h_q // h_kv, d)
    up = qg.clamp(min=0).sum(2, keepdim=True)  # [B, H_kv, 1, D]: the group's positive parts meet the maxima
    down = qg.clamp(max=0).sum(2, keepdim=True)
    scores = up @ kmax.float().transpose(-1, -2) + down @ kmin.float().transpose(-1, -2)
    return scores[:, :, 0]
