"""torchmetrics Metrics for the earlier conditional-coverage diagnostics: CovGap, FSC, SSC, EOC, WSC and the
size-coverage dependence.

Definitions follow ``covmetrics`` 0.1.2 (see :mod:`hf_ext.metrics.functional.conditional_coverage`). States
are per-sample lists with ``dist_reduce_fx="cat"`` (or per-group sums for :class:`CoverageGap` with
``num_groups``), so DDP gathering and ``merge_state`` are exact. ``compute`` calls the functional form's
computation, which puts the rows in a canonical order wherever the order could matter, so a Metric and its
functional twin give the same value, whatever the batch order, world size or merge order.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_int, check_probability
from hf_ext.ert import group_metrics
from hf_ext.ert.inputs import check_features, check_vector, resolve_coverage
from hf_ext.metrics.functional.conditional_coverage import (
    CORRELATION_METHODS,
    _correlation_compute,
    _coverage_gap_update,
    _sizes_and_coverage,
    _stratified_arg_validation,
    _stratified_compute,
    _wsc_arg_validation,
    _wsc_compute,
)


class _CatCoverageMetric(Metric):
    """Base: per-sample float64 columns stored as ``cat`` list states."""

    is_differentiable = False
    full_state_update = False
    _columns: tuple[str, ...] = ()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        for name in self._columns:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def _append(self, **arrays: np.ndarray) -> None:
        for name, arr in arrays.items():
            getattr(self, name).append(
                torch.as_tensor(np.ascontiguousarray(arr), dtype=torch.float64, device=self.device)
            )

    def _gather(self) -> dict[str, np.ndarray]:
        """All stored columns as float64 numpy arrays (rows in the order gathered)."""
        if isinstance(self.covered, list) and not self.covered:
            raise RuntimeError(
                f"{type(self).__name__}.compute() was called before any update(); no samples to score."
            )
        return {name: dim_zero_cat(getattr(self, name)).detach().cpu().numpy() for name in self._columns}


class _GroupCoverage(_CatCoverageMetric):
    """Coverage per integer group: ``cat`` states, or per-group sums when ``num_groups`` is given."""

    _columns: tuple[str, ...] = ("groups", "covered")
    counts: Tensor
    hits: Tensor

    def __init__(self, num_groups: int | None = None, **kwargs: Any) -> None:
        self.num_groups = None if num_groups is None else check_int("num_groups", num_groups, low=1)
        if self.num_groups is None:
            super().__init__(**kwargs)
        else:
            self._columns = ()
            super().__init__(**kwargs)
            self.add_state(
                "counts", default=torch.zeros(self.num_groups, dtype=torch.float64), dist_reduce_fx="sum"
            )
            self.add_state(
                "hits", default=torch.zeros(self.num_groups, dtype=torch.float64), dist_reduce_fx="sum"
            )

    def update(
        self,
        groups: Any,
        covered: Any = None,
        *,
        y: Any = None,
        prediction_sets: Any = None,
        intervals: Any = None,
        alpha_index: int | None = None,
    ) -> None:
        """Add a batch: integer ``groups`` ``(n,)`` and ``covered`` ``(n,)`` (or ``y`` with predictions)."""
        g, cov = _coverage_gap_update(
            groups,
            covered,
            y=y,
            prediction_sets=prediction_sets,
            intervals=intervals,
            alpha_index=alpha_index,
        )
        if self.num_groups is None:
            self._append(groups=g, covered=cov)
            return
        if g.min() < 0 or g.max() >= self.num_groups:
            raise ValueError(
                f"`groups` must lie in [0, {self.num_groups}) with num_groups={self.num_groups}, "
                f"got range [{g.min()}, {g.max()}]."
            )
        self.counts += torch.as_tensor(
            np.bincount(g, minlength=self.num_groups), dtype=torch.float64, device=self.device
        )
        self.hits += torch.as_tensor(
            np.bincount(g, weights=cov, minlength=self.num_groups), dtype=torch.float64, device=self.device
        )

    def _sums(self) -> tuple[np.ndarray, np.ndarray]:
        if self.num_groups is None:
            data = self._gather()
            return group_metrics.group_sums(data["groups"], data["covered"])
        counts, hits = self.counts.detach().cpu().numpy(), self.hits.detach().cpu().numpy()
        if counts.sum() == 0:
            raise RuntimeError(
                f"{type(self).__name__}.compute() was called before any update(); no samples to score."
            )
        return counts, hits


class CoverageGap(_GroupCoverage):
    """CovGap: mean (or size-weighted mean) over groups of ``|group coverage - (1 - alpha)|``. Lower is
    better.

    Args:
        alpha: Miscoverage level in (0, 1).
        num_groups: If given, group ids must lie in ``[0, num_groups)`` and the state is two sum vectors of
            that length (constant memory); otherwise per-sample ``cat`` states.
        weighted: Weight groups by their share of samples.
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``:
        - ``groups``: integer group ids, shape ``(n,)``.
        - ``covered``: coverage indicator, shape ``(n,)``; or keyword ``y`` with ``prediction_sets`` /
          ``intervals``.

    As output of ``forward`` and ``compute``:
        - 0-d float64 tensor.

    Example:
        >>> m = CoverageGap(alpha=0.1, num_groups=2)
        >>> m.update(torch.tensor([0, 0, 1]), torch.tensor([1, 1, 1]))
        >>> m.update(torch.tensor([1]), torch.tensor([0]))
        >>> m.compute()
        tensor(0.2500, dtype=torch.float64)
    """

    _paper = paper("ert")
    higher_is_better = False
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def __init__(
        self, alpha: float = 0.1, num_groups: int | None = None, weighted: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(num_groups=num_groups, **kwargs)
        self.alpha = check_probability("alpha", alpha, low_open=True, high_open=True)
        self.weighted = bool(weighted)

    def compute(self) -> Tensor:
        """CovGap over all samples seen."""
        return torch.tensor(
            group_metrics.gap_from_sums(*self._sums(), self.alpha, self.weighted), dtype=torch.float64
        )


class FeatureStratifiedCoverage(_GroupCoverage):
    """FSC: the lowest empirical coverage over groups. Higher is better (compare with ``1 - alpha``).

    Args:
        num_groups: As in :class:`CoverageGap`.
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``: ``groups`` ``(n,)`` and ``covered`` ``(n,)`` (or ``y`` +
    predictions).

    As output of ``forward`` and ``compute``: 0-d float64 tensor.

    Example:
        >>> m = FeatureStratifiedCoverage()
        >>> m.update(torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 1, 0]))
        >>> m.compute()
        tensor(0.5000, dtype=torch.float64)
    """

    _paper = paper("ert")
    higher_is_better = True
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def compute(self) -> Tensor:
        """FSC over all samples seen."""
        return torch.tensor(group_metrics.min_from_sums(*self._sums()), dtype=torch.float64)


class _DiscretizedCoverage(_CatCoverageMetric):
    """SSC / EOC: group by a 1-D value (set size, label), k-means-clustered when it has many distinct values.

    ``higher_is_better`` is None: lower is better for ``reduction="gap"``, higher for ``"min"``.
    """

    higher_is_better = None
    _columns = ("values", "covered")

    def __init__(
        self,
        alpha: float = 0.1,
        num_groups: int = 10,
        reduction: str = "gap",
        weighted: bool = False,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _stratified_arg_validation(alpha, num_groups, reduction, seed)
        self.alpha, self.num_groups, self.reduction = float(alpha), int(num_groups), reduction
        self.weighted, self.seed = bool(weighted), int(seed)

    def compute(self) -> Tensor:
        """The stratified statistic over all samples seen."""
        d = self._gather()
        value = _stratified_compute(
            d["values"], d["covered"], self.alpha, self.num_groups, self.reduction, self.weighted, self.seed
        )
        return torch.tensor(value, dtype=torch.float64)


class SizeStratifiedCoverage(_DiscretizedCoverage):
    """SSC: CovGap (``reduction="gap"``, lower is better) or worst coverage (``"min"``) over set-size groups.

    Args:
        alpha: Miscoverage level in (0, 1).
        num_groups: Sizes with at least this many distinct values are clustered into it by seeded 1-D k-means.
        reduction: ``"gap"`` or ``"min"``.
        weighted: Size-weighted CovGap.
        seed: k-means seed.
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``:
        - ``sizes`` ``(n,)`` and ``covered`` ``(n,)``; or keywords ``y`` with ``prediction_sets`` ``(n, K)`` /
          ``(n, K, n_alpha)`` or ``intervals`` ``(n, 2)`` / ``(n, 2, n_alpha)`` (sizes = set size / width).

    As output of ``forward`` and ``compute``: 0-d float64 tensor.

    Example:
        >>> m = SizeStratifiedCoverage(alpha=0.1)
        >>> sets = torch.tensor([[True, False], [True, True], [False, True]])
        >>> m.update(y=torch.tensor([1, 0, 1]), prediction_sets=sets)
        >>> m.compute()
        tensor(0.2500, dtype=torch.float64)
    """

    _paper = paper("ert")

    def update(
        self,
        sizes: Any = None,
        covered: Any = None,
        *,
        y: Any = None,
        prediction_sets: Any = None,
        intervals: Any = None,
        alpha_index: int | None = None,
    ) -> None:
        """Add a batch of set sizes and coverage."""
        s, cov = _sizes_and_coverage(sizes, covered, y, prediction_sets, intervals, alpha_index)
        self._append(values=s, covered=cov)


class EqualOpportunityCoverage(_DiscretizedCoverage):
    """EOC: as :class:`SizeStratifiedCoverage` with groups given by the labels ``y`` (clustered if many
    values).

    As input to ``forward`` and ``update``: ``y`` ``(n,)`` and ``covered`` ``(n,)``, or ``y`` with keyword
    ``prediction_sets`` / ``intervals``.

    As output of ``forward`` and ``compute``: 0-d float64 tensor.

    Example:
        >>> m = EqualOpportunityCoverage(alpha=0.1)
        >>> m.update(torch.tensor([0, 0, 1, 1]), torch.tensor([1, 1, 0, 1]))
        >>> m.compute()
        tensor(0.2500, dtype=torch.float64)
    """

    _paper = paper("ert")

    def update(
        self,
        y: Any,
        covered: Any = None,
        *,
        prediction_sets: Any = None,
        intervals: Any = None,
        alpha_index: int | None = None,
    ) -> None:
        """Add a batch of labels and coverage."""
        cov = resolve_coverage(
            covered, y if covered is None else None, prediction_sets, intervals, alpha_index
        )
        self._append(values=check_vector(y, cov.covered.shape[0], "y"), covered=cov.covered)


class WorstSlabCoverage(_CatCoverageMetric):
    """WSC: lowest coverage over slabs ``{a <= v.x <= b}`` holding >= ``delta`` of the data. Higher is better.

    Args:
        delta: Minimum slab mass in (0, 1); 0.1 is a conventional default [reconstructed].
        num_directions: Random unit directions searched (seed 42 reproduces covmetrics' draw).
        seed: Seed of the directions and of the holdout split.
        holdout: If given (e.g. 0.5), the slab is chosen on ``1 - holdout`` of the samples and its coverage is
            reported on the rest [reconstructed]; in-sample WSC is biased low.
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``: finite ``features`` ``(n, d)`` and ``covered`` ``(n,)`` (or ``y``
    + predictions).

    As output of ``forward`` and ``compute``: 0-d float64 tensor.

    Example:
        >>> m = WorstSlabCoverage(delta=0.2, num_directions=10)
        >>> x = torch.arange(20.0).reshape(-1, 1)
        >>> m.update(x, (x[:, 0] < 15).int())
        >>> m.compute()
        tensor(0., dtype=torch.float64)
    """

    _paper = paper("ert")
    higher_is_better = True
    plot_lower_bound = 0.0
    plot_upper_bound = 1.0
    _columns = ("features", "covered")

    def __init__(
        self,
        delta: float = 0.1,
        num_directions: int = 1000,
        seed: int = 42,
        holdout: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        _wsc_arg_validation(delta, num_directions, seed, holdout)
        self.delta, self.num_directions, self.seed, self.holdout = delta, num_directions, seed, holdout

    def update(
        self,
        features: Any,
        covered: Any = None,
        *,
        y: Any = None,
        prediction_sets: Any = None,
        intervals: Any = None,
        alpha_index: int | None = None,
    ) -> None:
        """Add a batch of features and coverage."""
        cov = resolve_coverage(covered, y, prediction_sets, intervals, alpha_index).covered
        self._append(features=check_features(features, cov.shape[0], allow_nan=False), covered=cov)

    def compute(self) -> Tensor:
        """WSC over all samples seen."""
        d = self._gather()
        value = _wsc_compute(
            d["features"], d["covered"], self.delta, self.num_directions, self.seed, self.holdout
        )
        return torch.tensor(value, dtype=torch.float64)


class SizeCoverageCorrelation(_CatCoverageMetric):
    """Dependence of coverage on set size: Pearson correlation or HSIC. Values near 0 are better.

    Args:
        method: ``"pearson"`` (signed, ideal 0) or ``"hsic"`` (>= 0, lower is better); ``higher_is_better`` is
            None because the ideal is 0, not an extreme.
        max_samples: HSIC subsample size.
        seed: HSIC subsample seed.
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``: ``sizes`` ``(n,)`` and ``covered`` ``(n,)``, or keywords ``y``
    with ``prediction_sets`` / ``intervals``.

    As output of ``forward`` and ``compute``: 0-d float64 tensor.

    Example:
        >>> m = SizeCoverageCorrelation()
        >>> m.update(torch.tensor([1.0, 2.0, 3.0, 4.0]), torch.tensor([0, 0, 1, 1]))
        >>> m.compute()
        tensor(0.8944, dtype=torch.float64)
    """

    _paper = paper("ert")
    higher_is_better = None
    _columns = ("sizes", "covered")

    def __init__(
        self, method: str = "pearson", max_samples: int = 5000, seed: int = 0, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.method = check_choice("method", method, CORRELATION_METHODS)
        self.max_samples, self.seed = (
            check_int("max_samples", max_samples, low=2),
            check_int("seed", seed, low=0),
        )

    def update(
        self,
        sizes: Any = None,
        covered: Any = None,
        *,
        y: Any = None,
        prediction_sets: Any = None,
        intervals: Any = None,
        alpha_index: int | None = None,
    ) -> None:
        """Add a batch of set sizes and coverage."""
        s, cov = _sizes_and_coverage(sizes, covered, y, prediction_sets, intervals, alpha_index)
        self._append(sizes=s, covered=cov)

    def compute(self) -> Tensor:
        """The size-coverage dependence over all samples seen."""
        d = self._gather()
        return torch.tensor(
            _correlation_compute(d["sizes"], d["covered"], self.method, self.max_samples, self.seed),
            dtype=torch.float64,
        )


__all__ = [
    "CoverageGap",
    "EqualOpportunityCoverage",
    "FeatureStratifiedCoverage",
    "SizeCoverageCorrelation",
    "SizeStratifiedCoverage",
    "WorstSlabCoverage",
]
