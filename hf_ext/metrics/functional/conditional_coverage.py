"""Functional forms of the earlier conditional-coverage metrics: CovGap, FSC, SSC, EOC, WSC, size-coverage
dependence.

Definitions follow ``covmetrics`` 0.1.2 (math in :mod:`hf_ext.ert.group_metrics` and :mod:`hf_ext.ert.slab`);
``alpha`` is the miscoverage level (target ``1 - alpha``). Every function takes the coverage indicator
``covered`` or, instead, labels ``y`` with ``prediction_sets`` / ``intervals`` (MAPIE-style arrays accepted)
and returns a 0-d float64 tensor."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from hf_ext._validation import check_choice, check_int, check_probability
from hf_ext.ert import group_metrics
from hf_ext.ert.inputs import (
    Coverage,
    canonical_order,
    check_features,
    check_groups,
    check_vector,
    coverage_indicator,
    resolve_coverage,
)
from hf_ext.ert.slab import worst_slab_coverage as _wsc

CORRELATION_METHODS = ("pearson", "hsic")


def _tensor(value: float) -> Tensor:
    return torch.tensor(value, dtype=torch.float64)


def _sizes_and_coverage(
    sizes: Any, covered: Any, y: Any, prediction_sets: Any, intervals: Any, alpha_index: int | None
) -> tuple[np.ndarray, np.ndarray]:
    """Set sizes and coverage, from ``(sizes, covered)`` or from labels + conformal predictions."""
    if prediction_sets is not None or intervals is not None:
        if sizes is not None or covered is not None:
            raise ValueError(
                "Pass either `sizes` with `covered`, or `y` with `prediction_sets`/`intervals`, not both."
            )
        cov: Coverage = coverage_indicator(y, prediction_sets, intervals, alpha_index)
        return cov.size, cov.covered
    if sizes is None:
        raise ValueError("`sizes` is required (or pass `y` with `prediction_sets`/`intervals`).")
    c = resolve_coverage(covered)
    return check_vector(sizes, c.covered.shape[0], "sizes"), c.covered


def _coverage_gap_update(
    groups: Any,
    covered: Any = None,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Validated ``(groups int64 (n,), covered float64 (n,))``."""
    cov = resolve_coverage(covered, y, prediction_sets, intervals, alpha_index).covered
    return check_groups(groups, cov.shape[0]), cov


def coverage_gap(
    groups: Any,
    covered: Any = None,
    alpha: float = 0.1,
    weighted: bool = False,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Tensor:
    """CovGap: mean over groups of ``|group coverage - (1 - alpha)|`` (lower is better).

    Args:
        groups: Integer group ids of shape ``(n,)`` (e.g. k-means cells of the features).
        covered: Coverage indicator of shape ``(n,)`` (or give ``y`` + ``prediction_sets``/``intervals``).
        alpha: Miscoverage level in (0, 1).
        weighted: Weight each group by its share of samples instead of equally.

    Example:
        >>> coverage_gap([0, 0, 1, 1], [1, 1, 1, 0], alpha=0.1)
        tensor(0.2500, dtype=torch.float64)
    """
    alpha = check_probability("alpha", alpha, low_open=True, high_open=True)
    g, cov = _coverage_gap_update(
        groups, covered, y=y, prediction_sets=prediction_sets, intervals=intervals, alpha_index=alpha_index
    )
    return _tensor(group_metrics.coverage_gap(g, cov, alpha, bool(weighted)))


def feature_stratified_coverage(
    groups: Any,
    covered: Any = None,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Tensor:
    """FSC: the lowest empirical coverage over groups (higher is better; compare with ``1 - alpha``).

    Example:
        >>> feature_stratified_coverage([0, 0, 1, 1], [1, 1, 1, 0])
        tensor(0.5000, dtype=torch.float64)
    """
    g, cov = _coverage_gap_update(
        groups, covered, y=y, prediction_sets=prediction_sets, intervals=intervals, alpha_index=alpha_index
    )
    return _tensor(group_metrics.feature_stratified_coverage(g, cov))


def _stratified_arg_validation(alpha: float, num_groups: int, reduction: str, seed: int) -> None:
    check_probability("alpha", alpha, low_open=True, high_open=True)
    check_int("num_groups", num_groups, low=1)
    check_choice("reduction", reduction, group_metrics.REDUCTIONS)
    check_int("seed", seed, low=0)


def _stratified_compute(
    values: np.ndarray,
    covered: np.ndarray,
    alpha: float,
    num_groups: int,
    reduction: str,
    weighted: bool,
    seed: int,
) -> float:
    order = canonical_order(values, covered)  # seeded k-means draws its first centroid by row
    values, covered = values[order], covered[order]
    groups = group_metrics.discretize(values, num_groups, seed)
    return group_metrics.stratified(groups, covered, alpha, reduction, weighted)


def size_stratified_coverage(
    sizes: Any = None,
    covered: Any = None,
    alpha: float = 0.1,
    num_groups: int = 10,
    reduction: str = "gap",
    weighted: bool = False,
    seed: int = 0,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Tensor:
    """SSC: CovGap (``reduction="gap"``, lower is better) or worst coverage (``"min"``) over set-size groups.

    Sizes with at least ``num_groups`` distinct values are clustered by seeded 1-D k-means (covmetrics' rule;
    covmetrics itself is unseeded).

    Args:
        sizes: Set sizes or interval widths of shape ``(n,)``; or give ``y`` with
            ``prediction_sets``/``intervals``.
        covered: Coverage indicator of shape ``(n,)``.

    Example:
        >>> size_stratified_coverage([1, 1, 2, 2], [1, 0, 1, 1], alpha=0.1, reduction="min")
        tensor(0.5000, dtype=torch.float64)
    """
    _stratified_arg_validation(alpha, num_groups, reduction, seed)
    s, cov = _sizes_and_coverage(sizes, covered, y, prediction_sets, intervals, alpha_index)
    return _tensor(_stratified_compute(s, cov, alpha, num_groups, reduction, bool(weighted), seed))


def equal_opportunity_coverage(
    y: Any,
    covered: Any = None,
    alpha: float = 0.1,
    num_groups: int = 10,
    reduction: str = "gap",
    weighted: bool = False,
    seed: int = 0,
    *,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Tensor:
    """EOC: as :func:`size_stratified_coverage` with groups given by the labels ``y`` (clustered if many).

    Example:
        >>> equal_opportunity_coverage([0, 0, 1, 1], [1, 1, 0, 1], alpha=0.1)
        tensor(0.2500, dtype=torch.float64)
    """
    _stratified_arg_validation(alpha, num_groups, reduction, seed)
    cov = resolve_coverage(
        covered, y if covered is None else None, prediction_sets, intervals, alpha_index
    ).covered
    labels = check_vector(y, cov.shape[0], "y")
    return _tensor(_stratified_compute(labels, cov, alpha, num_groups, reduction, bool(weighted), seed))


def _wsc_arg_validation(delta: float, num_directions: int, seed: int, holdout: float | None) -> None:
    check_probability("delta", delta, low_open=True, high_open=True)
    check_int("num_directions", num_directions, low=1)
    check_int("seed", seed, low=0)
    if holdout is not None:
        check_probability("holdout", holdout, low_open=True, high_open=True)


def worst_slab_coverage(
    features: Any,
    covered: Any = None,
    delta: float = 0.1,
    num_directions: int = 1000,
    seed: int = 42,
    holdout: float | None = None,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Tensor:
    """WSC: lowest coverage over slabs ``{a <= v.x <= b}`` holding >= ``delta`` of the data (higher is
    better).

    Directions are ``num_directions`` uniform unit vectors drawn with ``seed`` (seed 42 reproduces
    covmetrics). In-sample WSC is biased low; ``holdout=0.5`` picks the slab on half the data and reports its
    coverage on the other half [reconstructed]. ``delta=0.1`` is a conventional default [reconstructed];
    covmetrics requires it.

    Args:
        features: Finite features of shape ``(n, d)`` (NaN is rejected).
        covered: Coverage indicator of shape ``(n,)`` (or ``y`` + ``prediction_sets``/``intervals``).

    Example:
        >>> import numpy as np
        >>> x = np.arange(20.0).reshape(-1, 1)
        >>> worst_slab_coverage(x, (x[:, 0] < 15).astype(float), delta=0.2)
        tensor(0., dtype=torch.float64)
    """
    _wsc_arg_validation(delta, num_directions, seed, holdout)
    cov = resolve_coverage(covered, y, prediction_sets, intervals, alpha_index).covered
    feats = check_features(features, cov.shape[0], allow_nan=False)
    return _tensor(_wsc_compute(feats, cov, delta, num_directions, seed, holdout))


def _wsc_compute(
    features: np.ndarray,
    covered: np.ndarray,
    delta: float,
    num_directions: int,
    seed: int,
    holdout: float | None,
) -> float:
    order = canonical_order(features, covered)  # the holdout split is drawn by row
    return _wsc(features[order], covered[order], delta, num_directions, seed, holdout)


def _correlation_compute(
    sizes: np.ndarray, covered: np.ndarray, method: str, max_samples: int, seed: int
) -> float:
    if method == "pearson":
        return group_metrics.pearson(sizes, covered)
    order = canonical_order(sizes, covered)  # HSIC subsamples rows
    return group_metrics.hsic(sizes[order], covered[order], max_samples=max_samples, seed=seed)


def size_coverage_correlation(
    sizes: Any = None,
    covered: Any = None,
    method: str = "pearson",
    max_samples: int = 5000,
    seed: int = 0,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Tensor:
    """Dependence between set size and coverage: Pearson correlation or HSIC (Gaussian kernels, sigma = 1).

    Under conditional coverage the two are independent, so values near 0 are better (HSIC >= 0). HSIC uses a
    random subsample of at most ``max_samples`` points (drawn with ``seed``).

    Example:
        >>> size_coverage_correlation([1, 2, 3, 4], [0, 0, 1, 1])
        tensor(0.8944, dtype=torch.float64)
    """
    check_choice("method", method, CORRELATION_METHODS)
    check_int("max_samples", max_samples, low=2)
    check_int("seed", seed, low=0)
    s, cov = _sizes_and_coverage(sizes, covered, y, prediction_sets, intervals, alpha_index)
    return _tensor(_correlation_compute(s, cov, method, max_samples, seed))
