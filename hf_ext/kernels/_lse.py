"""Scatter log-sum-exp merging shared by the PyTorch paths of ``block_sparse_attention`` and ``echo_merge``.

Partials ``(O_x, lse_x)`` of some rows are merged into running ``(O, lse)`` rows by the LSE rule
``lse' = logsumexp(lse, lse_x, ...)``, ``O' = (exp(lse - m) O + sum_x exp(lse_x - m) O_x) / exp(lse' - m)``
with a per-row shift ``m`` (the row maximum; a constant for autograd, so gradients are unchanged).
"""

from __future__ import annotations

import torch

_CHUNK = 1 << 18  # elements of weighted partials built at once (cache-sized)


def merge_weights(
    lse: torch.Tensor, rows: torch.Tensor, part_lse: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Stable weights for merging partials with log-sum-exps ``part_lse`` ``[M, b]`` into rows ``rows``
    ``[M]`` of ``lse`` ``[N, b]``.

    Returns:
        ``(m, w, w_part, den)``: the shift ``m`` ``[N, b]``, ``w = exp(lse - m)``, ``w_part = exp(part_lse -
        m[rows])`` and ``den = w + sum of w_part per row``; the merged LSE is ``m + log(den)``.
    """
    with torch.no_grad():
        m = lse.scatter_reduce(0, rows[:, None].expand_as(part_lse), part_lse, "amax")
        m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    w = torch.exp(lse - m)
    w_part = torch.exp(part_lse - m[rows])
    return m, w, w_part, w.index_add(0, rows, w_part)


def add_weighted_rows(
    num: torch.Tensor,
    rows: torch.Tensor,
    source: torch.Tensor,
    weight: torch.Tensor,
    index: torch.Tensor | None = None,
) -> torch.Tensor:
    """``num[rows[i]] += weight[i, :, None] * source[index[i]]`` (``index`` defaults to ``i``), in place.

    ``num`` ``[N, b, D]``, ``source`` ``[*, b, D]``, ``weight`` ``[M, b]``; the weighted rows are built in
    chunks of ``_CHUNK`` elements, so they stay in cache and never materialise at ``[M, b, D]``.
    """
    step = max(1, _CHUNK // (source.shape[1] * source.shape[2]))
    for lo in range(0, rows.shape[0], step):
        sl = slice(lo, lo + step)
        src = source[sl] if index is None else source.index_select(0, index[sl])
        num = num.index_add_(0, rows[sl], src * weight[sl, :, None])
    return num
