"""scikit-learn meta-estimator for SySRs: a grid search that spends its fits where they decide the pick.

Like :class:`~sklearn.model_selection.HalvingGridSearchCV`, :class:`SySRsSearchCV` fits the candidates of a
parameter grid on growing subsets of the rows and keeps the best on each, so the costly full-data fits are
paid only by the few candidates left at the end. The eliminations follow Successive Rejects on rows shared
by every survivor: the synchronisation of SySRs (Lyu et al., ICML 2026, arXiv 2606.07726).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone, is_classifier
from sklearn.exceptions import DataConversionWarning, NotFittedError
from sklearn.metrics import check_scoring
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils._tags import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _check_method_params, _num_samples, check_is_fitted, indexable

from hf_ext._registry import paper
from hf_ext._timing import Timer
from hf_ext._validation import check_int

logger = logging.getLogger(__name__)

#: Fit-budgeted search algorithms: name -> (eliminations, rows shared by every survivor).
SEARCH_ALGORITHMS: dict[str, tuple[str, bool]] = {
    "sysrs": ("rejects", True),
    "sr": ("rejects", False),
    "sh_synced": ("halving", True),
    "sh": ("halving", False),
}


def survivor_counts(n_candidates: int, eliminations: str, budget: float) -> list[int]:
    """Candidates fitted in each phase, ending with the two finalists (``[K]`` for ``K <= 2``).

    ``"halving"``: ``K, ceil(K/2), ..., 2`` (Sequential Halving keeps the top half). ``"rejects"``: the
    survivors of Successive Rejects, whose phase ``k`` leaves ``K - k`` candidates after ``n_k`` queries
    each, with ``n_k`` proportional to ``1 / (K + 1 - k)``: survivors times resources stays constant.
    Refitting every survivor in each of SR's ``K - 1`` phases would cost ``K - 1`` times the last phase, so
    the curve is read at ``P`` geometric points, as many as ``budget`` pays for at about two full-data fits
    per phase (``P = floor(budget * K / 2)``, between 2 and ``K - 1``), each dropping everyone SR has dropped
    by then.

    >>> survivor_counts(5, "halving", 1 / 3), survivor_counts(25, "rejects", 1 / 3)
    ([5, 3, 2], [25, 11, 5, 2])
    """
    check_int("n_candidates", n_candidates, low=1)
    if n_candidates <= 2:
        return [n_candidates]
    if eliminations == "halving":
        counts = [n_candidates]
        while counts[-1] > 2:
            counts.append(math.ceil(counts[-1] / 2))
        return counts
    phases = min(n_candidates - 1, max(2, math.floor(budget * n_candidates / 2)))
    counts = [n_candidates]
    for j in range(1, phases):
        geometric = round(n_candidates * (2 / n_candidates) ** (j / (phases - 1)))
        room = 2 + phases - 1 - j  # one more than each later phase needs
        counts.append(max(room, min(counts[-1] - 1, geometric)))
    return counts


def fit_schedule(survivors: list[int], n_rows: int, budget: float, min_rows: int) -> list[int]:
    """Rows each survivor is fitted on (cross-validated) in each phase; growing, the last phase on all rows.

    The cost of a phase is ``survivors * rows`` (fits restart from scratch on each subset). The last phase,
    the comparison a grid search would make among the finalists, always runs on all ``n_rows``; what is left
    of ``budget * n_candidates * n_rows`` is split equally over the earlier phases (the equal-cost phases of
    Successive Rejects and Sequential Halving), each on at least ``min_rows`` rows.

    >>> fit_schedule([5, 4, 3, 2], 1000, 0.5, 20)
    [50, 62, 83, 1000]
    """
    full = survivors[0] * n_rows
    share = (budget * full - survivors[-1] * n_rows) / max(len(survivors) - 1, 1)
    rows: list[int] = []
    floor = min(min_rows, n_rows)
    for alive in survivors[:-1]:
        rows.append(min(n_rows, max(floor, int(share // alive), *rows[-1:])))
    return [*rows, n_rows]


def _best_has(attr: str) -> Callable[[SySRsSearchCV], bool]:
    """``available_if`` check: ``attr`` exists on the refit best estimator (on ``estimator`` before fit)."""

    def check(self: SySRsSearchCV) -> bool:
        if not self.refit:
            raise AttributeError(f"{attr} needs the best candidate refit on all the data (refit=True).")
        getattr(self.best_estimator_ if hasattr(self, "best_estimator_") else self.estimator, attr)
        return True

    return check


class SySRsSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Grid search on a fitting budget: candidates cross-validated on growing shared subsets of the rows.

    Phase by phase, every surviving candidate (one point of ``param_grid``) is cross-validated on the same
    first rows of one shuffled, class-balanced order of the data, with the same folds (each row keeps its
    fold of ``cv`` throughout), and the worst are dropped: one per phase for ``"sysrs"`` (Successive Rejects,
    the SySRs statistic: lowest mean score on the shared rows, which equals the worst mean paired difference
    to the leader), the bottom half for ``"sh_synced"``. Phases cost the same number of fitted rows, and the
    last phase compares the two finalists on all rows with all of ``cv``'s folds, exactly as
    :class:`~sklearn.model_selection.GridSearchCV` would: when the grid search's winner reaches the last
    phase, the pick is the same. ``"sr"`` and ``"sh"`` draw each candidate's rows independently (no pairing).

    The eliminations on shared rows are SySRs's synchronisation [reconstructed from the abstract of arXiv
    2606.07726]; the fit budget, the growing subsets and the last full-data phase are hf-ext's, after the
    successive halving of :class:`~sklearn.model_selection.HalvingGridSearchCV`.

    Parameters
    ----------
    estimator : estimator object
        Cloned for every candidate and fold; must implement ``fit``.
    param_grid : dict or list of dicts
        Candidates, as for :class:`~sklearn.model_selection.GridSearchCV`.
    budget : float in (0, 1], default=1/3
        Fitting work as a share of a grid search's (fits x training rows). The last phase is always paid;
        a budget below it leaves the earlier phases at their minimum size, and ``budget_used_`` says what was
        spent. ``1.0`` with two candidates is a grid search.
    algorithm : {"sysrs", "sr", "sh_synced", "sh"}, default="sysrs"
        Eliminations and row sharing (see above).
    scoring : str, callable or None, default=None
        As for ``GridSearchCV`` (``None``: the estimator's ``score``); higher is better.
    cv : int, cross-validation generator or iterable, default=5
        Folds of all the rows, as for ``GridSearchCV``; a phase on a subset keeps each fold's rows in it.
    min_resources : int or None, default=None
        Fewest rows of a phase; ``None``: ``2 * n_splits`` (times the number of classes for a classifier).
    refit : bool, default=True
        Refit the best candidate on all the data as ``best_estimator_`` (needed for ``predict``).
    random_state : int, RandomState instance or None, default=None
        Seed of the row order.
    n_jobs : int or None, default=None
        Candidate-fold fits of a phase run at once through joblib, as in ``GridSearchCV``. The pick does not
        depend on it.

    Attributes
    ----------
    cv_results_ : dict of numpy (masked) ndarrays
        One row per candidate and phase, keys as in ``HalvingGridSearchCV``: ``iter``, ``n_resources``,
        ``params``, ``param_<name>``, ``split<i>_test_score``, ``mean_test_score``, ``std_test_score``,
        ``rank_test_score`` (1 = the pick; later phases rank first), ``mean_fit_time`` and the like (seconds).
    best_index_ : int
        Row of ``cv_results_`` of the pick in the last phase.
    best_params_ : dict
        Its parameters.
    best_score_ : float
        Its mean cross-validated score on all rows.
    best_estimator_ : estimator
        The pick refit on all the data (``refit=True`` only).
    refit_time_ : float
        Seconds spent refitting it.
    scorer_ : callable
        The scorer used.
    n_splits_ : int
        Number of folds.
    n_candidates_, n_resources_ : list of int
        Candidates fitted and rows used in each phase.
    n_iterations_ : int
        Number of phases.
    budget_used_ : float
        Fitting work spent, as a share of a grid search's (training rows summed over every fit).
    history_ : list of dict
        Per phase: ``phase``, ``n_resources``, ``survivors`` (candidate indices), ``eliminated``.

    Examples
    --------
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.svm import SVC
    >>> from hf_ext.estimators import SySRsSearchCV
    >>> X, y = load_digits(return_X_y=True)
    >>> grid = {"gamma": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "C": [0.1, 0.3, 1.0, 3.0, 10.0]}
    >>> search = SySRsSearchCV(SVC(), grid, budget=1 / 3, random_state=0).fit(X / 16, y)
    >>> search.best_params_, search.n_candidates_, search.n_resources_, round(search.budget_used_, 2)
    ({'C': 10.0, 'gamma': 0.01}, [25, 11, 5, 2], [151, 344, 758, 1797], 0.33)
    """

    _paper = paper("sysrs")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "estimator": [HasMethods(["fit"])],
        "param_grid": [dict, list],
        "budget": [Interval(Real, 0, 1, closed="right")],
        "algorithm": [StrOptions(set(SEARCH_ALGORITHMS))],
        "scoring": [str, callable, None],
        "cv": ["cv_object"],
        "min_resources": [Interval(Integral, 1, None, closed="left"), None],
        "refit": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        estimator: Any,
        param_grid: dict[str, Any] | list[dict[str, Any]],
        *,
        budget: float = 1 / 3,
        algorithm: str = "sysrs",
        scoring: Any = None,
        cv: Any = 5,
        min_resources: int | None = None,
        refit: bool = True,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.budget = budget
        self.algorithm = algorithm
        self.scoring = scoring
        self.cv = cv
        self.min_resources = min_resources
        self.refit = refit
        self.random_state = random_state
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=False)  # the candidates validate their own parameters
    def fit(self, X: Any, y: Any = None, *, groups: Any = None, **fit_params: Any) -> SySRsSearchCV:
        """Cross-validate the candidates phase by phase on growing shared subsets; refit the pick.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, passed to the candidates as is.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs), default=None
            Targets.
        groups : array-like of shape (n_samples,), default=None
            Group labels for a group-aware ``cv``.
        **fit_params : dict
            Passed to every candidate's ``fit`` (sample-aligned arrays are split with the rows).

        Returns
        -------
        self : SySRsSearchCV
            The fitted search.
        """
        X, y, groups = indexable(X, y, groups)
        if y is not None and np.ndim(y) == 2 and np.shape(y)[1] == 1:
            warnings.warn(
                "A column-vector y was passed when a 1d array was expected; it is used as a 1d array.",
                DataConversionWarning,
                stacklevel=2,
            )
            y = np.ravel(y)
        n_rows = _num_samples(X)
        candidates = list(ParameterGrid(self.param_grid))
        if not candidates:
            raise ValueError(f"`param_grid` must hold at least one candidate, got {self.param_grid!r}.")
        classifier = is_classifier(self.estimator)
        splits = list(check_cv(self.cv, y, classifier=classifier).split(X, y, groups))
        fold = np.full(n_rows, -1)
        for f, (_, test) in enumerate(splits):
            fold[test] = f
        self.scorer_ = check_scoring(self.estimator, scoring=self.scoring)
        n_classes = len(np.unique(y)) if classifier and y is not None and np.ndim(y) == 1 else 1
        min_rows = self.min_resources or 2 * len(splits) * n_classes
        eliminations, synced = SEARCH_ALGORITHMS[self.algorithm]
        counts = survivor_counts(len(candidates), eliminations, self.budget)
        rows = fit_schedule(counts, n_rows, self.budget, min_rows)
        rng = np.random.default_rng(_seed(self.random_state))
        shared = _balanced_order(y if classifier else None, n_rows, rng)
        alive = list(range(len(candidates)))
        results: list[dict[str, Any]] = []
        self.history_ = []
        fitted_rows = 0
        for phase, (n_keep_next, n_res) in enumerate(zip([*counts[1:], 1], rows)):
            orders = {
                c: shared if synced else _balanced_order(y if classifier else None, n_rows, rng)
                for c in alive
            }
            n_res = _covering(n_res, n_rows, splits, list(orders.values()), y if classifier else None)
            rows[phase:] = [max(n_res, r) for r in rows[phase:]]
            jobs = [
                (c, f, _restrict(train, orders[c], n_res, n_rows), _restrict(test, orders[c], n_res, n_rows))
                for c in alive
                for f, (train, test) in enumerate(splits)
            ]
            out = Parallel(n_jobs=self.n_jobs)(
                delayed(_fit_and_score)(
                    clone(self.estimator).set_params(**candidates[c]),
                    X,
                    y,
                    train,
                    test,
                    self.scorer_,
                    fit_params,
                )
                for c, _, train, test in jobs
            )
            fitted_rows += sum(len(train) for _, _, train, _ in jobs)
            per_fold = np.array([score for score, _, _ in out]).reshape(len(alive), len(splits))
            times = np.array([t[1:] for t in out]).reshape(len(alive), len(splits), 2)
            mean = per_fold.mean(axis=1)
            for i, c in enumerate(alive):
                results.append(
                    {
                        "iter": phase,
                        "n_resources": n_res,
                        "candidate": c,
                        "scores": per_fold[i],
                        "times": times[i],
                    }
                )
            # Stable sort: ties keep grid order, so the first of tied candidates wins, as in GridSearchCV.
            ranked = [alive[i] for i in np.argsort(-mean, kind="stable")]
            keep = sorted(ranked[:n_keep_next])
            self.history_.append(
                {
                    "phase": phase,
                    "n_resources": n_res,
                    "survivors": list(alive),
                    "eliminated": sorted(set(alive) - set(keep)),
                }
            )
            alive = keep
        self.n_candidates_ = counts
        self.n_resources_ = rows
        self.n_iterations_ = len(rows)
        self.n_splits_ = len(splits)
        grid_rows = len(candidates) * sum(len(train) for train, _ in splits)
        self.budget_used_ = fitted_rows / grid_rows
        self.cv_results_ = _cv_results(results, candidates, len(splits))
        self.best_index_ = int(np.flatnonzero(self.cv_results_["rank_test_score"] == 1)[0])
        self.best_params_ = candidates[alive[0]]
        self.best_score_ = float(self.cv_results_["mean_test_score"][self.best_index_])
        logger.debug(
            "%s picked %s (%.2f of a grid search's fits)",
            self.algorithm,
            self.best_params_,
            self.budget_used_,
        )
        if self.refit:
            with Timer() as refit:
                self.best_estimator_ = (
                    clone(self.estimator).set_params(**self.best_params_).fit(X, y, **fit_params)
                )
            self.refit_time_ = refit.seconds
        return self

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        inner = get_tags(self.estimator)
        tags.estimator_type = inner.estimator_type
        tags.classifier_tags = inner.classifier_tags
        tags.regressor_tags = inner.regressor_tags
        tags.input_tags.pairwise = inner.input_tags.pairwise
        tags.input_tags.sparse = inner.input_tags.sparse
        tags.input_tags.allow_nan = inner.input_tags.allow_nan
        return tags

    @available_if(_best_has("predict"))
    def predict(self, X: Any) -> Any:
        """``best_estimator_.predict(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.predict(X)

    @available_if(_best_has("predict_proba"))
    def predict_proba(self, X: Any) -> Any:
        """``best_estimator_.predict_proba(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.predict_proba(X)

    @available_if(_best_has("predict_log_proba"))
    def predict_log_proba(self, X: Any) -> Any:
        """``best_estimator_.predict_log_proba(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.predict_log_proba(X)

    @available_if(_best_has("decision_function"))
    def decision_function(self, X: Any) -> Any:
        """``best_estimator_.decision_function(X)``."""
        check_is_fitted(self)
        return self.best_estimator_.decision_function(X)

    @available_if(_best_has("score"))
    def score(self, X: Any, y: Any = None, **params: Any) -> float:
        """``best_estimator_.score(X, y)`` (the estimator's own score, e.g. accuracy or R²)."""
        check_is_fitted(self)
        return float(self.best_estimator_.score(X, y, **params))

    @property
    def classes_(self) -> np.ndarray:
        """Class labels of ``best_estimator_`` (classifiers, ``refit=True``)."""
        _best_has("classes_")(self)
        return np.asarray(self.best_estimator_.classes_)

    @property
    def n_features_in_(self) -> int:
        """Number of features seen by ``best_estimator_`` (``refit=True``)."""
        try:
            check_is_fitted(self, "best_estimator_")
        except NotFittedError as err:
            raise AttributeError(
                f"{type(self).__name__} has n_features_in_ only after fit with refit=True."
            ) from err
        return int(self.best_estimator_.n_features_in_)


def _seed(random_state: Any) -> int | None:
    """An int seed as is; a ``RandomState`` yields a drawn one; ``None`` stays fresh entropy."""
    if random_state is None or isinstance(random_state, Integral):
        return None if random_state is None else int(random_state)
    return int(random_state.randint(np.iinfo(np.int32).max))


def _balanced_order(y: Any, n_rows: int, rng: np.random.Generator) -> np.ndarray:
    """A random order of the rows whose every prefix holds each class in about its overall share.

    Rows are shuffled, then sorted by ``(rank within its class + U(0, 1)) / class size``; ``y=None`` (not a
    classifier) gives a plain shuffle.
    """
    perm = rng.permutation(n_rows)
    if y is None or np.ndim(y) != 1:
        return perm
    labels = np.unique(np.asarray(y)[perm], return_inverse=True)[1]
    sizes = np.bincount(labels)
    rank = np.empty(n_rows)
    for label, size in enumerate(sizes):
        where = np.flatnonzero(labels == label)
        rank[where] = (np.arange(size) + rng.random(size)) / size
    return perm[np.argsort(rank, kind="stable")]


def _restrict(indices: np.ndarray, order: np.ndarray, n_res: int, n_rows: int) -> np.ndarray:
    """``indices`` kept to the first ``n_res`` rows of ``order`` (all of them when ``n_res == n_rows``)."""
    if n_res >= n_rows:
        return indices
    inside = np.zeros(n_rows, dtype=bool)
    inside[order[:n_res]] = True
    return indices[inside[indices]]


def _covering(n_res: int, n_rows: int, splits: list[Any], orders: list[np.ndarray], y: Any) -> int:
    """``n_res`` grown (doubling, at most ``n_rows``) until every fold of every order has test rows and, for
    a classifier, training rows of every class."""
    classes = None if y is None or np.ndim(y) != 1 else np.unique(y)
    while n_res < n_rows:
        ok = True
        for order in orders:
            for train, test in splits:
                tr, te = _restrict(train, order, n_res, n_rows), _restrict(test, order, n_res, n_rows)
                if len(te) == 0 or (classes is not None and len(np.unique(np.asarray(y)[tr])) < len(classes)):
                    ok = False
        if ok:
            return n_res
        n_res = min(n_rows, 2 * n_res)
    return n_rows


def _fit_and_score(
    model: Any, X: Any, y: Any, train: np.ndarray, test: np.ndarray, scorer: Any, fit_params: dict[str, Any]
) -> tuple[float, float, float]:
    """``(test score, fit seconds, score seconds)`` of ``model`` fitted on rows ``train``."""
    kwargs = _check_method_params(X, params=fit_params, indices=train)
    y_train = None if y is None else _safe_indexing(y, train)
    with Timer() as fit:
        model.fit(_safe_indexing(X, train), y_train, **kwargs)
    y_test = None if y is None else _safe_indexing(y, test)
    with Timer() as scoring:
        score = float(scorer(model, _safe_indexing(X, test), y_test))
    return score, fit.seconds, scoring.seconds


def _cv_results(
    results: list[dict[str, Any]], candidates: list[dict[str, Any]], n_splits: int
) -> dict[str, Any]:
    """The ``cv_results_`` dict: one entry per (phase, candidate), in phase then grid order."""
    n = len(results)
    scores = np.array([r["scores"] for r in results]).reshape(n, n_splits)
    times = np.array([r["times"] for r in results]).reshape(n, n_splits, 2)
    out: dict[str, Any] = {
        "iter": np.array([r["iter"] for r in results]),
        "n_resources": np.array([r["n_resources"] for r in results]),
        "params": [candidates[r["candidate"]] for r in results],
    }
    for name in sorted({key for params in candidates for key in params}):
        column = np.ma.MaskedArray(np.empty(n, dtype=object), mask=True)
        for i, r in enumerate(results):
            if name in candidates[r["candidate"]]:
                column[i] = candidates[r["candidate"]][name]
        out[f"param_{name}"] = column
    for i in range(n_splits):
        out[f"split{i}_test_score"] = scores[:, i]
    out["mean_test_score"], out["std_test_score"] = scores.mean(axis=1), scores.std(axis=1)
    for j, kind in enumerate(("fit", "score")):
        out[f"mean_{kind}_time"], out[f"std_{kind}_time"] = (
            times[:, :, j].mean(axis=1),
            times[:, :, j].std(axis=1),
        )
    # Later phases first, then the higher mean score; ties keep grid order (the pick is rank 1).
    order = np.lexsort((np.arange(n), -out["mean_test_score"], -out["iter"]))
    rank = np.empty(n, dtype=int)
    rank[order] = np.arange(1, n + 1)
    out["rank_test_score"] = rank
    return out
