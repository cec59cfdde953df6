"""Group-fairness metrics on per-individual decisions (functional forms).

The private ``_group_stats_update`` / ``_group_rate_compute`` / ``_group_gap_compute`` functions work on numpy
arrays *and* torch tensors, so the MAFE-style environments (numpy, :mod:`hf_ext.mafe`), these functions and
the torchmetrics classes in :mod:`hf_ext.metrics.fairness` share one implementation and agree exactly. This
module imports torch only when a torch path runs, so the numpy environments do not load it.

Conventions (MAFE-style fairness components), including the two empty-group cases:

- ``rate[g]`` = sum of ``decisions`` over members of group ``g`` / number of members.
- A group with **no members** (or, for the rates among the ``qualified``, **no qualified member**) has rate
  0.0 and is left out of every gap.
- A gap is ``max_g rate - min_g rate`` over the groups that have members; with fewer than 2 such groups it
  is 0.0. No NaN is ever produced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from hf_ext._validation import check_int

if TYPE_CHECKING:
    import torch

Array = Any  # numpy.ndarray or torch.Tensor


def _bincount(index: Array, weights: Array | None, length: int) -> Array:
    if isinstance(index, np.ndarray):
        return np.bincount(index, weights=weights, minlength=length).astype(np.float64)
    import torch

    w = None if weights is None else weights.to(torch.float64)
    return torch.bincount(index, weights=w, minlength=length).to(torch.float64)


def _group_stats_update(values: Array, groups: Array, num_groups: int, mask: Array | None = None) -> tuple:
    """Per-group sums of ``values`` and member counts (the additive Metric states).

    Args:
        values: ``(n,)`` decisions in ``[0, 1]`` (or levels for :func:`mean_level_gap`).
        groups: ``(n,)`` integer group ids in ``[0, num_groups)``.
        num_groups: Number of groups ``G``.
        mask: Optional ``(n,)`` bool; only masked-in individuals count (e.g. the qualified ones).

    Returns:
        ``(sums, counts)``, each ``(G,)`` float64.
    """
    if mask is not None:
        values, groups = values[mask], groups[mask]
    return _bincount(groups, values, num_groups), _bincount(groups, None, num_groups)


def _group_rate_compute(sums: Array, counts: Array) -> Array:
    """Per-group mean ``sums / counts`` with 0.0 for empty groups; any leading batch dims, groups last."""
    if isinstance(sums, np.ndarray):
        return sums / np.maximum(counts, 1.0)
    return sums / counts.clamp_min(1.0)


def _group_gap_compute(sums: Array, counts: Array) -> Array:
    """``max - min`` of the per-group means over non-empty groups (0.0 with fewer than 2 of them).

    Works on ``(G,)`` states or batches ``(S, G)`` (one gap per row), for numpy arrays and torch tensors.
    """
    rates = _group_rate_compute(sums, counts)
    nonempty = counts > 0
    if isinstance(rates, np.ndarray):
        hi = np.where(nonempty, rates, -np.inf).max(-1)
        lo = np.where(nonempty, rates, np.inf).min(-1)
        return np.where(nonempty.sum(-1) >= 2, hi - lo, 0.0)
    import torch

    hi = torch.where(nonempty, rates, -torch.inf).amax(-1)
    lo = torch.where(nonempty, rates, torch.inf).amin(-1)
    return torch.where(nonempty.sum(-1) >= 2, hi - lo, torch.zeros_like(hi))


def _check(decisions: Array, groups: Array, num_groups: int | None, name: str = "decisions") -> tuple:
    import torch

    decisions = torch.as_tensor(decisions)
    groups = torch.as_tensor(groups)
    if decisions.ndim != 1 or groups.shape != decisions.shape:
        raise ValueError(
            f"`{name}` and `groups` must be 1-D of the same length, got shapes {tuple(decisions.shape)} "
            f"and {tuple(groups.shape)}."
        )
    if groups.dtype.is_floating_point or groups.dtype == torch.bool:
        raise ValueError(f"`groups` must hold integer group ids, got dtype {groups.dtype}.")
    if groups.numel() and int(groups.min()) < 0:
        raise ValueError(f"`groups` must be >= 0, got min {int(groups.min())}.")
    if num_groups is None:
        num_groups = int(groups.max()) + 1 if groups.numel() else 0
    num_groups = check_int("num_groups", num_groups, low=2, hint="Fairness needs at least 2 groups.")
    if groups.numel() and int(groups.max()) >= num_groups:
        raise ValueError(f"`groups` must be < num_groups={num_groups}, got max {int(groups.max())}.")
    if name == "decisions" and decisions.numel():
        d = decisions.to(torch.float64)
        if bool((d < 0).any()) or bool((d > 1).any()):
            raise ValueError(
                f"`decisions` must lie in [0, 1], got range [{float(d.min())}, {float(d.max())}]."
            )
    return decisions.to(torch.float64), groups.long(), num_groups


def _check_mask(mask: Array, like: torch.Tensor, name: str) -> torch.Tensor:
    import torch

    mask = torch.as_tensor(mask)
    if mask.shape != like.shape:
        raise ValueError(f"`{name}` must have shape {tuple(like.shape)}, got {tuple(mask.shape)}.")
    return mask.bool()


def group_rates(
    decisions: Array, groups: Array, num_groups: int | None = None, qualified: Array | None = None
) -> torch.Tensor:
    """Positive-decision rate of each group (the MAFE ``rate/<g>``, or ``tpr/<g>`` with ``qualified``).

    Args:
        decisions: ``(n,)`` decisions in ``[0, 1]`` (1 = positive: approved, treated, admitted, hired).
        groups: ``(n,)`` integer group ids.
        num_groups: ``G >= 2``; defaults to ``max(groups) + 1``.
        qualified: Optional ``(n,)`` bool; rates are then computed among qualified individuals only.

    Returns:
        ``(G,)`` float64 tensor, 0.0 for groups without members (or without qualified members).

    Examples:
        >>> group_rates([1, 1, 0, 1, 0, 0], [0, 0, 0, 1, 1, 1])
        tensor([0.6667, 0.3333], dtype=torch.float64)
    """
    d, g, num_groups = _check(decisions, groups, num_groups)
    mask = None if qualified is None else _check_mask(qualified, g, "qualified")
    return _group_rate_compute(*_group_stats_update(d, g, num_groups, mask))


def demographic_parity_difference(
    decisions: Array, groups: Array, num_groups: int | None = None
) -> torch.Tensor:
    """``max_g rate_g - min_g rate_g`` over non-empty groups (MAFE ``dp_gap``), a 0-d float64 tensor.

    A group without members is left out; with fewer than 2 groups that have members the gap is 0.0.

    Examples:
        >>> demographic_parity_difference([1, 1, 0, 1, 0, 0], [0, 0, 0, 1, 1, 1])
        tensor(0.3333, dtype=torch.float64)
    """
    d, g, num_groups = _check(decisions, groups, num_groups)
    return _group_gap_compute(*_group_stats_update(d, g, num_groups))


def equal_opportunity_difference(
    decisions: Array, groups: Array, qualified: Array, num_groups: int | None = None
) -> torch.Tensor:
    """True-positive-rate gap among ``qualified`` individuals (MAFE ``eo_gap``), a 0-d float64 tensor.

    A group without qualified members is left out; with fewer than 2 groups that have qualified members the
    gap is 0.0.

    Examples:
        >>> equal_opportunity_difference([1, 0, 0, 1], [0, 0, 1, 1], qualified=[1, 1, 0, 1])
        tensor(0.5000, dtype=torch.float64)
    """
    d, g, num_groups = _check(decisions, groups, num_groups)
    return _group_gap_compute(*_group_stats_update(d, g, num_groups, _check_mask(qualified, g, "qualified")))


def mean_level_gap(levels: Array, groups: Array, num_groups: int | None = None) -> torch.Tensor:
    """Gap between the highest and lowest group-mean level (MAFE ``level_gap``), a 0-d float64 tensor.

    Examples:
        >>> mean_level_gap([3, 5, 1, 1], [0, 0, 1, 1])
        tensor(3., dtype=torch.float64)
    """
    lv, g, num_groups = _check(levels, groups, num_groups, name="levels")
    return _group_gap_compute(*_group_stats_update(lv, g, num_groups))
