"""Input conversion and validation shared by every conditional-coverage metric.

Every public form (functional, torchmetrics ``Metric``, scikit-learn estimator) accepts numpy arrays, torch
tensors (any device; moved to CPU), pandas objects or nested lists, and converts them here to float64 numpy.
Coverage can be given directly as the indicator ``covered`` = 1{y in C(x)}, or computed by
:func:`coverage_indicator` from labels plus prediction sets (classification) or intervals (regression),
including MAPIE-style outputs ``y_pss`` of shape ``(n, n_classes, n_alpha)`` and ``y_pis`` of shape ``(n, 2,
n_alpha)``."""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

from hf_ext._validation import check_int, check_probability


def as_numpy(value: Any, name: str) -> np.ndarray:
    """``value`` (numpy / torch / pandas / list) as a numpy array, without copying when possible."""
    if value is None:
        raise ValueError(f"`{name}` is required, got None.")
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # torch.Tensor, without importing torch
        value = value.detach().cpu().numpy()
    elif hasattr(value, "to_numpy"):  # pandas Series / DataFrame
        value = value.to_numpy()
    return np.asarray(value)


def canonical_order(*columns: np.ndarray) -> np.ndarray:
    """Row indices sorting ``columns`` (each ``(n,)`` or ``(n, k)``) lexicographically, first column first.

    Statistics that draw folds, subsamples or initial centroids from the rows compute on this order, so their
    value depends on the set of rows only, not on batch, merge or DDP order.
    """
    keys = np.concatenate([c.reshape(c.shape[0], -1) for c in columns], axis=1)
    return np.lexsort(keys.T[::-1])


def shuffled_order(random_state: int, *columns: np.ndarray) -> np.ndarray:
    """:func:`canonical_order`, then permuted with ``np.random.default_rng(random_state)``.

    The result depends on the set of rows and the seed only, like the canonical order, but leaves no sorted
    structure behind: a classifier fitted on the rows in this order (e.g. one with an unshuffled internal
    cross-validation) sees them in random order, as it would on data as usually collected.
    """
    order = canonical_order(*columns)
    return order[np.random.default_rng(random_state).permutation(order.size)]


def check_covered(covered: Any, name: str = "covered") -> np.ndarray:
    """The coverage indicator as float64 of shape ``(n,)`` with values in {0, 1}.

    Raises:
        ValueError: not 1-D, empty, or holding values other than 0/1 (the message lists them).
    """
    arr = as_numpy(covered, name)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D of shape (n,), got shape {arr.shape}.")
    if arr.size == 0:
        raise ValueError(f"`{name}` is empty; pass at least one sample.")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must hold 0/1 or booleans, got dtype {arr.dtype}.")
    arr = arr.astype(np.float64)
    bad = np.unique(arr[(arr != 0) & (arr != 1)])
    if bad.size:
        raise ValueError(
            f"`{name}` must hold only 0/1 (1 = label inside the prediction set), "
            f"got values {bad[:5].tolist()}."
        )
    return arr


def check_features(
    features: Any, n: int | None = None, *, allow_nan: bool = True, name: str = "features"
) -> np.ndarray:
    """Features as float64 of shape ``(n, d)``.

    Args:
        features: Array-like of shape ``(n, d)``.
        n: Expected number of rows (``None`` skips the check).
        allow_nan: Whether NaN is accepted (gradient-boosted trees handle it; WSC and linear models do not).
        name: Argument name used in error messages.

    Raises:
        ValueError: not 2-D, wrong length, infinite values, or NaN when ``allow_nan`` is false.
    """
    arr = as_numpy(features, name)
    if arr.ndim != 2:
        raise ValueError(
            f"`{name}` must be 2-D of shape (n, d), got shape {arr.shape}. "
            "Reshape a single feature to (n, 1)."
        )
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must be numeric, got dtype {arr.dtype}.")
    arr = arr.astype(np.float64)
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"`{name}` has {arr.shape[0]} rows but `covered` has {n} entries; they must match.")
    if np.isinf(arr).any():
        raise ValueError(f"`{name}` contains infinite values; remove or clip them.")
    if not allow_nan and np.isnan(arr).any():
        raise ValueError(f"`{name}` contains NaN; this metric needs finite features (impute them first).")
    return arr


def check_vector(values: Any, n: int, name: str) -> np.ndarray:
    """A finite float64 vector of shape ``(n,)`` (set sizes, labels used as groups, per-sample targets)."""
    arr = as_numpy(values, name)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D of shape (n,), got shape {arr.shape}.")
    if arr.dtype.kind not in "biuf":
        raise ValueError(f"`{name}` must be numeric, got dtype {arr.dtype}.")
    if arr.shape[0] != n:
        raise ValueError(f"`{name}` has {arr.shape[0]} entries but `covered` has {n}; they must match.")
    arr = arr.astype(np.float64)
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` contains NaN or infinite values.")
    return arr


def check_groups(groups: Any, n: int, name: str = "groups") -> np.ndarray:
    """Integer group ids of shape ``(n,)`` as int64.

    Raises:
        TypeError: the values are not integers (floats with a fractional part, strings).
        ValueError: not 1-D or the wrong length.
    """
    arr = as_numpy(groups, name)
    if arr.ndim != 1:
        raise ValueError(f"`{name}` must be 1-D of shape (n,), got shape {arr.shape}.")
    if arr.shape[0] != n:
        raise ValueError(f"`{name}` has {arr.shape[0]} entries but `covered` has {n}; they must match.")
    if arr.dtype.kind == "b" or arr.dtype.kind in "iu":
        return arr.astype(np.int64)
    if arr.dtype.kind == "f" and np.isfinite(arr).all() and np.array_equal(arr, np.round(arr)):
        return arr.astype(np.int64)
    raise TypeError(f"`{name}` must hold integer group ids, got dtype {arr.dtype}. Encode groups as 0..G-1.")


def target_vector(alpha: float, target_coverage: Any, n: int) -> np.ndarray:
    """Per-sample target coverage tau of shape ``(n,)``: ``1 - alpha`` unless ``target_coverage`` is given.

    ``target_coverage`` may be a scalar or a vector of shape ``(n,)`` (e.g. ``1 - alpha_i`` per sample); every
    value must lie strictly inside (0, 1)."""
    if target_coverage is None:
        return np.full(n, 1.0 - check_probability("alpha", alpha, low_open=True, high_open=True))
    if isinstance(target_coverage, numbers.Real) and not isinstance(target_coverage, bool):
        return np.full(
            n, check_probability("target_coverage", target_coverage, low_open=True, high_open=True)
        )
    tau = check_vector(target_coverage, n, "target_coverage")
    bad = tau[(tau <= 0) | (tau >= 1)]
    if bad.size:
        raise ValueError(
            f"`target_coverage` must lie strictly inside (0, 1), got values such as {bad[:3].tolist()}."
        )
    return tau


class Coverage(NamedTuple):
    """Coverage indicator and set size per sample, both float64 of shape ``(n,)``."""

    covered: np.ndarray
    size: np.ndarray


def _select_alpha(arr: np.ndarray, name: str, alpha_index: int | None) -> np.ndarray:
    if arr.ndim == 2:
        if alpha_index not in (None, 0):
            raise ValueError(
                f"`alpha_index`={alpha_index!r} given but `{name}` has no alpha axis (shape {arr.shape})."
            )
        return arr
    if arr.ndim != 3:
        raise ValueError(
            f"`{name}` must have shape (n, k) or MAPIE-style (n, k, n_alpha), got shape {arr.shape}."
        )
    if alpha_index is None:
        if arr.shape[2] != 1:
            raise ValueError(
                f"`{name}` holds {arr.shape[2]} confidence levels (shape {arr.shape}); "
                "pick one with `alpha_index`."
            )
        alpha_index = 0
    check_int("alpha_index", alpha_index, low=-arr.shape[2], high=arr.shape[2] - 1)
    return arr[:, :, alpha_index]


def coverage_indicator(
    y: Any,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Coverage:
    """Coverage 1{y in C(x)} and set size (or interval width) from labels and conformal predictions.

    Args:
        y: Labels of shape ``(n,)``: integer class ids in ``[0, n_classes)`` with ``prediction_sets``,
            real targets with ``intervals``.
        prediction_sets: Boolean set masks of shape ``(n, n_classes)``, or MAPIE's ``y_pss`` of shape
            ``(n, n_classes, n_alpha)``.
        intervals: ``[lower, upper]`` of shape ``(n, 2)``, or MAPIE's ``y_pis`` of shape ``(n, 2, n_alpha)``.
            Intervals are closed: ``lower <= y <= upper`` counts as covered.
        alpha_index: Which confidence level to use when the last axis holds several; required then.

    Returns:
        ``Coverage(covered, size)``: float64 arrays of shape ``(n,)``; ``size`` is the number of classes in
        the set or the interval width ``upper - lower``.

    Raises:
        ValueError: both or neither of ``prediction_sets``/``intervals`` given, mismatched shapes, labels out
            of range, or a non-boolean set mask.

    Example:
        >>> import numpy as np
        >>> sets = np.array([[True, False, True], [False, True, False]])
        >>> coverage_indicator(np.array([2, 0]), prediction_sets=sets)
        Coverage(covered=array([1., 0.]), size=array([2., 1.]))
    """
    if (prediction_sets is None) == (intervals is None):
        raise ValueError(
            "Pass exactly one of `prediction_sets` (classification) or `intervals` (regression)."
        )
    labels = as_numpy(y, "y")
    if labels.ndim != 1:
        raise ValueError(f"`y` must be 1-D of shape (n,), got shape {labels.shape}.")
    if prediction_sets is not None:
        sets = _select_alpha(as_numpy(prediction_sets, "prediction_sets"), "prediction_sets", alpha_index)
        if sets.shape[0] != labels.shape[0]:
            raise ValueError(f"`prediction_sets` has {sets.shape[0]} rows but `y` has {labels.shape[0]}.")
        if sets.dtype.kind != "b" and not np.isin(sets, (0, 1)).all():
            raise ValueError("`prediction_sets` must be a boolean (or 0/1) mask of shape (n, n_classes).")
        y_int = check_groups(labels, labels.shape[0], name="y")
        if y_int.size and (y_int.min() < 0 or y_int.max() >= sets.shape[1]):
            raise ValueError(
                f"`y` must hold class ids in [0, {sets.shape[1]}), got range [{y_int.min()}, {y_int.max()}]."
            )
        sets = sets.astype(bool)
        covered = sets[np.arange(sets.shape[0]), y_int]
        return Coverage(covered.astype(np.float64), sets.sum(axis=1).astype(np.float64))
    bounds = _select_alpha(as_numpy(intervals, "intervals"), "intervals", alpha_index)
    if bounds.shape[1] != 2:
        raise ValueError(f"`intervals` must have shape (n, 2) or (n, 2, n_alpha), got shape {bounds.shape}.")
    if bounds.shape[0] != labels.shape[0]:
        raise ValueError(f"`intervals` has {bounds.shape[0]} rows but `y` has {labels.shape[0]}.")
    bounds = bounds.astype(np.float64)
    yf = check_vector(labels, labels.shape[0], "y")
    covered = (bounds[:, 0] <= yf) & (yf <= bounds[:, 1])
    return Coverage(covered.astype(np.float64), bounds[:, 1] - bounds[:, 0])


def resolve_coverage(
    covered: Any,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
) -> Coverage:
    """Coverage from ``covered`` or from labels + predictions (exactly one route); ``size`` is NaN for the
    former."""
    predicted = prediction_sets is not None or intervals is not None
    if covered is not None and (predicted or y is not None):
        raise ValueError("Pass either `covered` or `y` with `prediction_sets`/`intervals`, not both.")
    if covered is not None:
        cov = check_covered(covered)
        return Coverage(cov, np.full(cov.shape, np.nan))
    if y is None or not predicted:
        raise ValueError("Pass `covered`, or `y` together with `prediction_sets` or `intervals`.")
    return coverage_indicator(y, prediction_sets, intervals, alpha_index)
