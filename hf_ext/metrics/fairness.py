"""Group-fairness torchmetrics Metrics (MAFE-style fairness components).

Every class keeps two additive per-group states, ``sums`` and ``counts`` (shape ``(G,)``, reduced with
``"sum"``), so batched accumulation, one-shot evaluation and DDP reduction agree exactly. The math is the
functional twin in :mod:`hf_ext.metrics.functional.fairness`, shared with the environments of
:mod:`hf_ext.mafe`.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torchmetrics import Metric

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.metrics.functional.fairness import (
    _check,
    _check_mask,
    _group_gap_compute,
    _group_rate_compute,
    _group_stats_update,
)


class _GroupMetric(Metric):
    is_differentiable = False
    higher_is_better: bool | None = False
    full_state_update = False
    plot_lower_bound = 0.0
    _paper = paper("mafe")
    _input = "decisions"

    def __init__(self, num_groups: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_groups = check_int("num_groups", num_groups, low=2, hint="Fairness needs at least 2 groups.")
        self.add_state("sums", torch.zeros(num_groups, dtype=torch.float64), dist_reduce_fx="sum")
        self.add_state("counts", torch.zeros(num_groups, dtype=torch.float64), dist_reduce_fx="sum")

    def _accumulate(self, values: torch.Tensor, groups: torch.Tensor, mask: torch.Tensor | None) -> None:
        v, g, _ = _check(values, groups, self.num_groups, name=self._input)
        m = None if mask is None else _check_mask(mask, g, "qualified")
        device = cast(torch.Tensor, self.sums).device
        sums, counts = _group_stats_update(
            v.to(device), g.to(device), self.num_groups, None if m is None else m.to(device)
        )
        self.sums += sums
        self.counts += counts

    def compute(self) -> torch.Tensor:
        return _group_gap_compute(self.sums, self.counts)


class GroupRate(_GroupMetric):
    """Per-group positive-decision rate (``rate/<g>``; ``tpr/<g>`` when ``qualified`` is passed).

    As input to ``forward`` and ``update``:
        - ``decisions`` (Tensor): ``(n,)`` in ``[0, 1]``.
        - ``groups`` (Tensor): ``(n,)`` integer group ids in ``[0, num_groups)``.
        - ``qualified`` (Tensor, optional): ``(n,)`` bool; only qualified individuals count.

    As output of ``forward`` and ``compute``:
        - ``rates`` (Tensor): ``(num_groups,)`` float64, 0.0 for groups never seen.

    Args:
        num_groups: Number of groups ``G >= 2``.

    Examples:
        >>> m = GroupRate(num_groups=2)
        >>> m.update(torch.tensor([1, 1, 0]), torch.tensor([0, 0, 0]))
        >>> m.update(torch.tensor([1, 0, 0]), torch.tensor([1, 1, 1]))
        >>> m.compute()
        tensor([0.6667, 0.3333], dtype=torch.float64)
    """

    higher_is_better = None
    plot_upper_bound = 1.0

    def update(
        self, decisions: torch.Tensor, groups: torch.Tensor, qualified: torch.Tensor | None = None
    ) -> None:
        self._accumulate(decisions, groups, qualified)

    def compute(self) -> torch.Tensor:
        return _group_rate_compute(self.sums, self.counts)


class DemographicParityDifference(_GroupMetric):
    """Demographic parity difference ``max_g rate_g - min_g rate_g`` over non-empty groups (``dp_gap``).

    As input to ``forward`` and ``update``:
        - ``decisions`` (Tensor): ``(n,)`` in ``[0, 1]``.
        - ``groups`` (Tensor): ``(n,)`` integer group ids.

    As output of ``forward`` and ``compute``:
        - ``dp_gap`` (Tensor): 0-d float64 in ``[0, 1]``; 0.0 with fewer than 2 non-empty groups.

    Args:
        num_groups: Number of groups ``G >= 2``.

    Examples:
        >>> m = DemographicParityDifference(num_groups=2)
        >>> m(torch.tensor([1, 1, 0, 1, 0, 0]), torch.tensor([0, 0, 0, 1, 1, 1]))
        tensor(0.3333, dtype=torch.float64)
    """

    plot_upper_bound = 1.0

    def update(self, decisions: torch.Tensor, groups: torch.Tensor) -> None:
        self._accumulate(decisions, groups, None)


class EqualOpportunityDifference(_GroupMetric):
    """Equal opportunity difference: the true-positive-rate gap among ``qualified`` individuals (``eo_gap``).

    As input to ``forward`` and ``update``:
        - ``decisions`` (Tensor): ``(n,)`` in ``[0, 1]``.
        - ``groups`` (Tensor): ``(n,)`` integer group ids.
        - ``qualified`` (Tensor): ``(n,)`` bool (would repay, needs care, skill above the bar).

    As output of ``forward`` and ``compute``:
        - ``eo_gap`` (Tensor): 0-d float64 in ``[0, 1]``.

    Args:
        num_groups: Number of groups ``G >= 2``.

    Examples:
        >>> m = EqualOpportunityDifference(num_groups=2)
        >>> m(torch.tensor([1, 0, 0, 1]), torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 1]))
        tensor(0.5000, dtype=torch.float64)
    """

    plot_upper_bound = 1.0

    def update(self, decisions: torch.Tensor, groups: torch.Tensor, qualified: torch.Tensor) -> None:
        self._accumulate(decisions, groups, qualified)


class MeanLevelGap(_GroupMetric):
    """Gap between the highest and lowest group-mean level (``level_gap``; credit bin, severity, skill).

    As input to ``forward`` and ``update``:
        - ``levels`` (Tensor): ``(n,)`` numeric levels.
        - ``groups`` (Tensor): ``(n,)`` integer group ids.

    As output of ``forward`` and ``compute``:
        - ``level_gap`` (Tensor): 0-d float64, in level units.

    Args:
        num_groups: Number of groups ``G >= 2``.

    Examples:
        >>> m = MeanLevelGap(num_groups=2)
        >>> m(torch.tensor([3, 5, 1, 1]), torch.tensor([0, 0, 1, 1]))
        tensor(3., dtype=torch.float64)
    """

    _input = "levels"

    def update(self, levels: torch.Tensor, groups: torch.Tensor) -> None:
        self._accumulate(levels, groups, None)
