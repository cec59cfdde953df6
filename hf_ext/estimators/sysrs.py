"""scikit-learn meta-estimator for SySRs: pick the best of several candidate models on an evaluation budget.

Like :class:`~sklearn.model_selection.HalvingGridSearchCV`, :class:`SySRsSearchCV` searches a parameter
grid and exposes ``best_estimator_``; unlike it, the scarce resource is the number of (candidate, sample)
*evaluations* of held-out predictions, which SySRs spends on shared samples (Lyu et al., ICML 2026,
arXiv 2606.07726).
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Callable
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, _fit_context, clone, is_classifier
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import ParameterGrid, check_cv
from sklearn.utils import _safe_indexing
from sklearn.utils._param_validation import HasMethods, Interval, RealNotInt, StrOptions
from sklearn.utils._tags import get_tags
from sklearn.utils.metaestimators import available_if
from sklearn.utils.parallel import Parallel, delayed
from sklearn.utils.validation import _check_method_params, _num_samples, check_is_fitted, indexable

from hf_ext._registry import paper
from hf_ext.sysrs.core import ALGORITHMS, BestArmScheduler, make_scheduler
from hf_ext.sysrs.selector import scheduler_seed

logger = logging.getLogger(__name__)

QueryScore = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _best_has(attr: str) -> Callable[[SySRsSearchCV], bool]:
    """``available_if`` check: ``attr`` exists on the refit best estimator (on ``estimator`` before fit)."""

    def check(self: SySRsSearchCV) -> bool:
        if not self.refit:
            raise AttributeError(f"{attr} needs the best candidate refit on all the data (refit=True).")
        getattr(self.best_estimator_ if hasattr(self, "best_estimator_") else self.estimator, attr)
        return True

    return check


class SySRsSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Pick the best candidate of a parameter grid by a bandit over (candidate, held-out sample) evaluations.

    Every candidate (one point of ``param_grid``) is fitted on the training part of each ``cv`` fold, so every
    sample has one out-of-fold prediction per candidate. Those predictions are the *queries* of best-model
    identification: an evaluation is one candidate's prediction on one held-out sample, scored in [0, 1] by
    ``query_score``. A scheduler (SySRs by default) spends ``budget`` evaluations, asking for predictions only
    when it needs them, and returns the candidate with the best mean score; ``best_estimator_`` is that
    candidate refit on all the data. With ``budget=None`` every candidate is evaluated on every sample, which
    is exactly a grid search on the per-sample score.

    The budget saves prediction and scoring calls, not fits: use it when evaluating a candidate is the
    expensive part (large models, API calls, a costly ``query_score``). Pre-trained models can be compared
    without refitting by passing them wrapped in :class:`sklearn.frozen.FrozenEstimator` as grid values.

    SySRs is Successive Rejects on shared samples [reconstructed from the abstract of arXiv 2606.07726]; the
    meta-estimator around it, the out-of-fold queries and the default scores are hf-ext's.

    Parameters
    ----------
    estimator : estimator object
        Cloned for every candidate; must implement ``fit`` and ``predict``.
    param_grid : dict or list of dicts
        Candidates, as for :class:`~sklearn.model_selection.GridSearchCV` (e.g. ``{"model": [SVC(), KNN()]}``
        on a one-step Pipeline compares different models).
    budget : int, float in (0, 1] or None, default=None
        Evaluations to spend: an int, or a share of ``n_candidates * n_samples`` (rounded up and raised to the
        algorithm's minimum, ``n_candidates + 1``). ``None`` evaluates everything.
    algorithm : {"sysrs", "sr", "uniform", "uniform_synced", "sh", "sh_synced"}, default="sysrs"
        The scheduler (see :data:`hf_ext.sysrs.core.ALGORITHMS`).
    query_score : callable or None, default=None
        ``query_score(y_true, y_pred) -> array (n,)`` of per-sample scores in [0, 1], higher is better.
        ``None``: 1 for a correct prediction, 0 otherwise, for classifiers (the selection targets accuracy);
        ``1 - min(1, |y - y_pred| / (max(y) - min(y)))`` averaged over outputs for other estimators (a bounded
        absolute error, an hf-ext choice).
    cv : int, cross-validation generator or iterable, default=5
        Folds, as for ``GridSearchCV`` (stratified for classifiers); test folds must partition the samples.
    refit : bool, default=True
        Refit the best candidate on all the data as ``best_estimator_`` (needed for ``predict``).
    random_state : int, RandomState instance or None, default=None
        Seed of the scheduler (query order and tie-breaks).
    n_jobs : int or None, default=None
        Candidate-fold fits run at once through joblib, as in ``GridSearchCV`` (``-1``: every core; a
        ``joblib.parallel_config`` backend such as Dask or Ray applies). The pick does not depend on it.

    Attributes
    ----------
    best_index_ : int
        Index of the picked candidate in ``candidates_``.
    best_params_ : dict
        Its parameters.
    best_estimator_ : estimator
        The picked candidate refit on all the data (``refit=True`` only).
    candidates_ : list of dict
        Every candidate's parameters, in grid order.
    n_candidates_, n_splits_ : int
        Number of candidates and of folds.
    budget_used_ : int
        Evaluations spent (``<= budget``).
    evaluations_ : ndarray of shape (n_candidates,)
        Evaluations spent on each candidate.
    mean_scores_ : ndarray of shape (n_candidates,)
        Mean per-sample score over the evaluations each candidate received.
    history_ : list of dict
        The scheduler's phases: ``phase``, ``n_new``, ``n_seen``, ``spent``, ``eliminated``, ``survivors``.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.linear_model import LogisticRegression
    >>> from hf_ext.estimators import SySRsSearchCV
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> search = SySRsSearchCV(
    ...     LogisticRegression(max_iter=5000), {"C": [0.001, 0.1, 10.0]}, budget=0.4, random_state=0
    ... ).fit(X, y)
    >>> search.best_params_, search.budget_used_ <= 0.4 * 3 * 569
    ({'C': 10.0}, True)
    """

    _paper = paper("sysrs")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "estimator": [HasMethods(["fit", "predict"])],
        "param_grid": [dict, list],
        "budget": [
            Interval(Integral, 1, None, closed="left"),
            Interval(RealNotInt, 0, 1, closed="right"),
            None,
        ],
        "algorithm": [StrOptions(set(ALGORITHMS))],
        "query_score": [callable, None],
        "cv": ["cv_object"],
        "refit": ["boolean"],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
    }

    def __init__(
        self,
        estimator: Any,
        param_grid: dict[str, Any] | list[dict[str, Any]],
        *,
        budget: float | None = None,
        algorithm: str = "sysrs",
        query_score: QueryScore | None = None,
        cv: Any = 5,
        refit: bool = True,
        random_state: Any = None,
        n_jobs: int | None = None,
    ) -> None:
        self.estimator = estimator
        self.param_grid = param_grid
        self.budget = budget
        self.algorithm = algorithm
        self.query_score = query_score
        self.cv = cv
        self.refit = refit
        self.random_state = random_state
        self.n_jobs = n_jobs

    @_fit_context(prefer_skip_nested_validation=False)  # the candidates validate their own parameters
    def fit(self, X: Any, y: Any, **fit_params: Any) -> SySRsSearchCV:
        """Fit every candidate on every fold, then identify the best one on the evaluation budget.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training data, passed to the candidates as is.
        y : array-like of shape (n_samples,) or (n_samples, n_outputs)
            Targets.
        **fit_params : dict
            Passed to every candidate's ``fit`` (sample-aligned arrays are split with the folds).

        Returns
        -------
        self : SySRsSearchCV
            The fitted search.
        """
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        X, y = indexable(X, y)
        truth = _targets(y)
        self.candidates_ = list(ParameterGrid(self.param_grid))
        splits = list(check_cv(self.cv, y, classifier=is_classifier(self.estimator)).split(X, y))
        n_samples, n_candidates = _num_samples(X), len(self.candidates_)
        fold = np.full(n_samples, -1)
        for f, (_, test) in enumerate(splits):
            fold[test] = f
        if (fold < 0).any():
            raise ValueError(
                f"`cv` must put every sample in a test fold (a partition such as KFold), got {self.cv!r}."
            )
        fits = Parallel(n_jobs=self.n_jobs)(
            delayed(_fit_one)(clone(self.estimator).set_params(**params), X, y, fit_params, train)
            for params in self.candidates_
            for train, _ in splits
        )
        models = [fits[c * len(splits) : (c + 1) * len(splits)] for c in range(n_candidates)]
        score = self.query_score or _default_query_score(self.estimator, truth)
        sched = make_scheduler(
            self.algorithm,
            n_candidates,
            n_samples,
            self._resolve_budget(n_candidates, n_samples),
            seed=scheduler_seed(self.random_state),
        )
        totals, counts = np.zeros(n_candidates), np.zeros(n_candidates, dtype=int)
        while not sched.done:
            batch = sched.ask()
            scores = _evaluate(models, batch.model_ids, batch.query_ids, X, truth, fold, score)
            sched.tell(scores)
            totals[batch.model_ids] += scores.sum(axis=1)
            counts[batch.model_ids] += scores.shape[1]
        self._record(sched, totals, counts, len(splits))
        if self.refit:
            best = clone(self.estimator).set_params(**self.best_params_)
            self.best_estimator_ = best.fit(X, y, **fit_params)
        return self

    def _resolve_budget(self, n_candidates: int, n_samples: int) -> int:
        full = n_candidates * n_samples
        if self.budget is None:
            return full
        if isinstance(self.budget, Integral):
            return int(self.budget)
        minimum = ALGORITHMS[self.algorithm][0]._min_budget(n_candidates)
        return min(full, max(math.ceil(self.budget * full), minimum))

    def _record(self, sched: BestArmScheduler, totals: np.ndarray, counts: np.ndarray, n_splits: int) -> None:
        self.best_index_ = sched.recommend()
        self.best_params_ = self.candidates_[self.best_index_]
        self.n_candidates_, self.n_splits_ = len(self.candidates_), n_splits
        self.budget_used_, self.history_ = sched.spent, sched.history
        self.evaluations_ = counts
        with np.errstate(invalid="ignore", divide="ignore"):
            self.mean_scores_ = totals / counts
        logger.debug("%s picked candidate %d (%d evaluations)", self.algorithm, self.best_index_, sched.spent)

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


def _fit_one(model: Any, X: Any, y: Any, fit_params: dict[str, Any], train: Any) -> Any:
    """``model`` (an unfitted clone) fitted on rows ``train``, with sample-aligned ``fit_params`` split."""
    kwargs = _check_method_params(X, params=fit_params, indices=train)
    return model.fit(_safe_indexing(X, train), _safe_indexing(y, train), **kwargs)


def _targets(y: Any) -> np.ndarray:
    """``y`` as the array the per-sample scores compare with: a column vector becomes 1-D (with scikit-learn's
    ``DataConversionWarning``)."""
    truth = np.asarray(y)
    if truth.ndim == 2 and truth.shape[1] == 1:
        from sklearn.exceptions import DataConversionWarning

        warnings.warn(
            "A column-vector y was passed when a 1d array was expected; it is used as a 1d array.",
            DataConversionWarning,
            stacklevel=3,
        )
        truth = truth.ravel()
    return truth


def _default_query_score(estimator: Any, truth: np.ndarray) -> QueryScore:
    """Exact match for classifiers; a bounded absolute error (scaled by the range of ``y``) otherwise."""
    if is_classifier(estimator):
        return _exact_match
    span = np.ptp(truth.astype(float), axis=0)
    return lambda y_true, y_pred: _bounded_abs_error(y_true, y_pred, span)


def _exact_match(y_true: np.ndarray, y_pred: np.ndarray) -> np.ndarray:
    hit = np.asarray(y_true) == np.asarray(y_pred)
    return np.asarray(hit.reshape(len(hit), -1).all(axis=1), dtype=float)


def _bounded_abs_error(y_true: np.ndarray, y_pred: np.ndarray, span: Any) -> np.ndarray:
    err = np.abs(np.asarray(y_true, dtype=float) - np.asarray(y_pred, dtype=float).reshape(np.shape(y_true)))
    scaled = np.minimum(1.0, err / np.where(np.asarray(span) > 0, span, 1.0))
    return np.asarray(1.0 - scaled.reshape(len(scaled), -1).mean(axis=1))


def _evaluate(
    models: list[list[Any]],
    model_ids: list[int],
    query_ids: np.ndarray,
    X: Any,
    truth: np.ndarray,
    fold: np.ndarray,
    score: QueryScore,
) -> np.ndarray:
    """Scores of ``model_ids[i]`` on samples ``query_ids[i]``, each predicted by the fold model that did not
    train on it; shape ``query_ids.shape``."""
    out = np.empty(query_ids.shape)
    for row, (m, queries) in enumerate(zip(model_ids, query_ids)):
        for f in np.unique(fold[queries]):
            cols = np.flatnonzero(fold[queries] == f)
            idx = queries[cols]
            got = np.asarray(score(truth[idx], models[m][f].predict(_safe_indexing(X, idx))), dtype=float)
            if got.shape != (len(idx),):
                raise ValueError(
                    f"`query_score` must return one score per sample, shape ({len(idx)},), got {got.shape}."
                )
            out[row, cols] = got
    return out
