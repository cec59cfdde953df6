"""scikit-learn auditors for the earlier conditional-coverage metrics (CovGap/FSC, SSC, EOC, WSC).

Each auditor learns a partition of the feature space in ``fit(X, covered)`` (k-means cells, 1-D value groups,
or the worst slab and its complement), predicts the empirical coverage of a point's cell in ``predict_proba``
(a partition classifier of the coverage, the kind implicit in CovGap), and computes the metric on new data
over the learned partition, i.e. a held-out version of the metric (``statistic``).

``score`` has one sign for every auditor, ``CoverageAuditor`` included: **higher = stronger evidence of
conditional miscoverage**, so ``GridSearchCV`` (which maximises ``score``) picks the most powerful auditor
setting. For the gap statistics (CovGap, SSC/EOC gap) ``score`` is the held-out gap itself; for the coverage
statistics (FSC / ``reduction="min"``, WSC), where a *lower* coverage is the evidence, it is the shortfall
``(1 - alpha) - statistic``.
"""

from __future__ import annotations

from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from hf_ext._registry import paper
from hf_ext.ert import group_metrics
from hf_ext.ert.slab import Slab, sample_directions, worst_slab
from hf_ext.estimators.ert import binary_coverage_target

_ALPHA = [Interval(Real, 0, 1, closed="neither")]
_SEED = [Interval(Integral, 0, None, closed="left")]
_REDUCTION = [StrOptions(set(group_metrics.REDUCTIONS))]


class _PartitionAuditor(ClassifierMixin, BaseEstimator):
    """Base: learn cells in ``_fit_cells``, map points to cells in ``_assign``, score with ``_statistic``."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {}

    def _fit_cells(self, X: np.ndarray, z: np.ndarray) -> None:
        raise NotImplementedError

    def _assign(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def _statistic(self, cells: np.ndarray, z: np.ndarray) -> float:
        raise NotImplementedError

    def _is_coverage(self) -> bool:
        """Whether ``statistic`` is a coverage (low = evidence) rather than a gap (high = evidence)."""
        return getattr(self, "reduction", "gap") == "min"

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> _PartitionAuditor:
        """Learn the partition and the coverage of each cell.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Finite features.
        y : array-like of shape (n_samples,)
            Coverage indicator 1{label in prediction set} (``classes_[1]`` = covered).

        Returns
        -------
        self
        """
        X, y = validate_data(self, X, y, dtype=np.float64)
        z = binary_coverage_target(self, y)
        self._fit_cells(X, z)
        cells = self._assign(X)
        n_cells = int(cells.max()) + 1
        self.cell_counts_ = np.bincount(cells, minlength=n_cells).astype(np.float64)
        hits = np.bincount(cells, weights=z, minlength=n_cells)
        rate = z.mean()
        self.cell_coverage_ = np.where(self.cell_counts_ > 0, hits / np.maximum(self.cell_counts_, 1), rate)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Empirical coverage of each point's cell as ``[1 - c, c]``, shape (n_samples, 2)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        c = self.cell_coverage_[self._assign(X)]
        return np.column_stack([1.0 - c, c])

    def predict(self, X: Any) -> np.ndarray:
        """``classes_[1]`` where the cell coverage is > 0.5, shape (n_samples,)."""
        proba = self.predict_proba(X)
        return self.classes_[(proba[:, 1] > 0.5).astype(int)]

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """Evidence of conditional miscoverage on new data, higher = stronger (module docstring): the held-out
        gap, or the coverage shortfall ``(1 - alpha) - statistic(X, y)`` for the coverage statistics.

        ``sample_weight`` is not supported and must be None.
        """
        if sample_weight is not None:
            raise ValueError(f"`sample_weight` is not supported by {type(self).__name__}.score; pass None.")
        value = self.statistic(X, y)
        return (1.0 - self.alpha) - value if self._is_coverage() else value

    def statistic(self, X: Any, y: Any) -> float:
        """The metric itself on new data, computed on the partition learned in ``fit``: CovGap / SSC gap
        (lower is better for the audited method) or a coverage (FSC, WSC: higher is better)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        z = (np.asarray(y) == self.classes_[1]).astype(np.float64)
        if z.shape[0] != X.shape[0]:
            raise ValueError(f"`y` has {z.shape[0]} entries but `X` has {X.shape[0]} rows; they must match.")
        return self._statistic(self._assign(X), z)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.classifier_tags.multi_class = False
        tags.classifier_tags.poor_score = True
        return tags


class CovGapAuditor(_PartitionAuditor):
    """CovGap / FSC auditor on k-means cells of the features.

    Parameters
    ----------
    alpha : float, default=0.1
        Miscoverage level in (0, 1).
    n_groups : int, default=16
        Number of k-means cells (capped at the number of training samples).
    weighted : bool, default=False
        Size-weighted CovGap.
    reduction : {"gap", "min"}, default="gap"
        ``"gap"``: CovGap (lower is better for the audited method); ``"min"``: FSC, the worst cell coverage
        (``score`` is then its shortfall from ``1 - alpha``).
    random_state : int, default=0
        k-means seed.

    Attributes
    ----------
    kmeans_ : KMeans
        The fitted partition.
    cell_coverage_, cell_counts_ : ndarray of shape (n_cells,)
        Training coverage and size of each cell.
    classes_ : ndarray of shape (2,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(2000, 2))
    >>> covered = (rng.random(2000) < np.where(X[:, 0] > 0.3, 0.75, 0.98)).astype(int)
    >>> gap = CovGapAuditor(n_groups=4).fit(X[:1000], covered[:1000]).score(X[1000:], covered[1000:])
    >>> bool(gap > 0.05)
    True
    """

    _paper = paper("ert")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": _ALPHA,
        "n_groups": [Interval(Integral, 1, None, closed="left")],
        "weighted": ["boolean"],
        "reduction": _REDUCTION,
        "random_state": _SEED,
    }

    def __init__(
        self,
        alpha: float = 0.1,
        n_groups: int = 16,
        weighted: bool = False,
        reduction: str = "gap",
        random_state: int = 0,
    ) -> None:
        self.alpha = alpha
        self.n_groups = n_groups
        self.weighted = weighted
        self.reduction = reduction
        self.random_state = random_state

    def _fit_cells(self, X: np.ndarray, z: np.ndarray) -> None:
        from sklearn.cluster import KMeans

        k = min(self.n_groups, X.shape[0])
        self.kmeans_ = KMeans(n_clusters=k, n_init=1, random_state=self.random_state).fit(X)

    def _assign(self, X: np.ndarray) -> np.ndarray:
        return self.kmeans_.predict(X).astype(np.int64)

    def _statistic(self, cells: np.ndarray, z: np.ndarray) -> float:
        return group_metrics.stratified(cells, z, self.alpha, self.reduction, bool(self.weighted))


class SizeStratifiedAuditor(_PartitionAuditor):
    """SSC auditor: groups by one column of ``X`` holding set sizes (or interval widths).

    The column's distinct values are the groups when there are fewer than ``num_groups``; otherwise seeded 1-D
    k-means centroids. New points join the nearest group value / centroid.

    Parameters
    ----------
    alpha : float, default=0.1
        Miscoverage level in (0, 1).
    num_groups : int, default=10
    reduction : {"gap", "min"}, default="gap"
    weighted : bool, default=False
    column : int, default=0
        Column of ``X`` holding the grouping value.
    random_state : int, default=0
        k-means seed.

    Attributes
    ----------
    centroids_ : ndarray of shape (n_cells,)
        Sorted group values (distinct values or k-means centroids).
    cell_coverage_, cell_counts_ : ndarray of shape (n_cells,)
    classes_ : ndarray of shape (2,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> sizes = np.array([[1], [1], [2], [2], [3], [3]])
    >>> covered = [1, 1, 1, 0, 0, 1]
    >>> auditor = SizeStratifiedAuditor(reduction="min").fit(sizes, covered)
    >>> auditor.statistic(sizes, covered), round(auditor.score(sizes, covered), 2)
    (0.5, 0.4)
    """

    _paper = paper("ert")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": _ALPHA,
        "num_groups": [Interval(Integral, 1, None, closed="left")],
        "reduction": _REDUCTION,
        "weighted": ["boolean"],
        "column": [Interval(Integral, 0, None, closed="left")],
        "random_state": _SEED,
    }

    def __init__(
        self,
        alpha: float = 0.1,
        num_groups: int = 10,
        reduction: str = "gap",
        weighted: bool = False,
        column: int = 0,
        random_state: int = 0,
    ) -> None:
        self.alpha = alpha
        self.num_groups = num_groups
        self.reduction = reduction
        self.weighted = weighted
        self.column = column
        self.random_state = random_state

    def _fit_cells(self, X: np.ndarray, z: np.ndarray) -> None:
        if self.column >= X.shape[1]:
            raise ValueError(f"`column`={self.column} but `X` has {X.shape[1]} columns.")
        values = X[:, self.column]
        uniq = np.unique(values)
        self.centroids_ = (
            uniq
            if uniq.size < self.num_groups
            else group_metrics.kmeans_1d(values, self.num_groups, self.random_state)
        )

    def _assign(self, X: np.ndarray) -> np.ndarray:
        return group_metrics.assign_1d(X[:, self.column], self.centroids_)

    def _statistic(self, cells: np.ndarray, z: np.ndarray) -> float:
        return group_metrics.stratified(cells, z, self.alpha, self.reduction, bool(self.weighted))


class EqualOpportunityAuditor(SizeStratifiedAuditor):
    """EOC auditor: as :class:`SizeStratifiedAuditor` with ``X[:, column]`` holding the labels y.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[0], [0], [1], [1]])
    >>> EqualOpportunityAuditor().fit(labels, [1, 1, 0, 1]).score(labels, [1, 1, 0, 1])
    0.25
    """

    _paper = paper("ert")


class WorstSlabAuditor(_PartitionAuditor):
    """WSC auditor: learns the worst slab ``{a <= v.x <= b}`` in ``fit``; ``score`` is its coverage on new
    data.

    This is the held-out WSC [reconstructed from the older WSC literature]: in-sample WSC is biased low.

    ``score`` is the shortfall ``(1 - alpha) - coverage`` (higher = stronger evidence, as every auditor);
    ``statistic`` is the held-out slab coverage itself.

    Parameters
    ----------
    alpha : float, default=0.1
        Miscoverage level in (0, 1); the target coverage is ``1 - alpha``.
    delta : float, default=0.1
        Minimum slab mass in (0, 1) [reconstructed conventional default].
    num_directions : int, default=1000
    random_state : int, default=42
        Seed of the random directions (42 reproduces covmetrics' draw).

    Attributes
    ----------
    slab_ : Slab
        ``(coverage, direction, a, b)`` found on the training data (``coverage`` is the in-sample WSC).
    cell_coverage_, cell_counts_ : ndarray of shape (2,)
        Training coverage outside (cell 0) and inside (cell 1) the slab.
    classes_ : ndarray of shape (2,)
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> X = np.arange(40.0).reshape(-1, 1)
    >>> covered = (X[:, 0] < 30).astype(int)
    >>> auditor = WorstSlabAuditor(delta=0.2, num_directions=5).fit(X[::2], covered[::2])
    >>> auditor.statistic(X[1::2], covered[1::2]), round(auditor.score(X[1::2], covered[1::2]), 2)
    (0.0, 0.9)
    """

    _paper = paper("ert")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "alpha": _ALPHA,
        "delta": [Interval(Real, 0, 1, closed="neither")],
        "num_directions": [Interval(Integral, 1, None, closed="left")],
        "random_state": _SEED,
    }

    def __init__(
        self, alpha: float = 0.1, delta: float = 0.1, num_directions: int = 1000, random_state: int = 42
    ) -> None:
        self.alpha = alpha
        self.delta = delta
        self.num_directions = num_directions
        self.random_state = random_state

    def _fit_cells(self, X: np.ndarray, z: np.ndarray) -> None:
        directions = sample_directions(self.num_directions, X.shape[1], self.random_state)
        self.slab_: Slab = worst_slab(X, z, self.delta, directions)

    def _assign(self, X: np.ndarray) -> np.ndarray:
        proj = X @ self.slab_.direction
        return ((proj >= self.slab_.a) & (proj <= self.slab_.b)).astype(np.int64)

    def _is_coverage(self) -> bool:
        return True

    def _statistic(self, cells: np.ndarray, z: np.ndarray) -> float:
        inside = cells == 1
        return float(z[inside].mean()) if inside.any() else float("nan")
