"""scikit-learn-style front end of the SySRs schedulers: ``fit`` on a score matrix runs one identification."""

from __future__ import annotations

import logging
from numbers import Integral
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import validate_data

from hf_ext._registry import paper
from hf_ext.sysrs.core import ALGORITHMS, make_scheduler
from hf_ext.sysrs.scheduler import NAN_POLICIES
from hf_ext.sysrs.scores import check_score_matrix
from hf_ext.sysrs.simulate import run_scheduler

logger = logging.getLogger(__name__)


class BestModelIdentifier(BaseEstimator):  # type: ignore[misc]
    """Budgeted best-model identification on a models x queries score matrix (SySRs and baselines).

    ``fit(S)`` simulates one run of the chosen ask/tell scheduler of :mod:`hf_ext.sysrs`, answering each of
    its requests from ``S``; the learned attributes say which model it picked and what it spent. To run
    against live models instead, drive :class:`~hf_ext.sysrs.core.SynchronizedSuccessiveRejects` (or
    :func:`~hf_ext.sysrs.core.identify_best_model`) directly.

    SySRs is Successive Rejects on shared queries [reconstructed from the abstract of arXiv 2606.07726: the
    elimination statistic (lowest mean on the shared queries), the classical SR phase lengths and the
    finite-benchmark rules are ours].

    Parameters
    ----------
    algorithm : {"sysrs", "sr", "uniform", "uniform_synced", "sh", "sh_synced"}, default="sysrs"
        SySRs, classical Successive Rejects, uniform allocation (independent or shared queries) and Sequential
        Halving (independent or shared queries).
    budget : int or None, default=None
        Total (model, query) evaluations. It must exceed ``n_models`` (uniform: at least ``n_models``).
        ``None`` evaluates every model on every query (the exact, most expensive answer).
    nan_policy : {"zero", "drop_query"}, default="zero"
        A NaN score (failed evaluation) counts as 0, or its query is dropped for every surviving model.
    score_range : (float, float) or None, default=None
        Range ``(lo, hi)`` of the raw scores, rescaled to [0, 1]. Without it, scores outside [0, 1] raise.
    statistic : "mean" or callable, default="mean"
        Elimination statistic ``f(obs (n_active, n_seen)) -> (n_active,)``, higher is better.
    random_state : int, RandomState instance or None, default=None
        Seed of the query orders and tie-breaks. An int ``s`` gives the same run as
        ``hf_ext.sysrs.simulate(S, ..., reps=1, seed=s)``.

    Attributes
    ----------
    best_model_ : int
        Row index of the identified best model.
    budget_used_ : int
        Evaluations spent (``<= budget``).
    history_ : list of dict
        One record per phase: ``phase``, ``n_new``, ``n_seen``, ``spent``, ``eliminated``, ``survivors``.
    n_models_ : int
        Number of rows of ``S``.
    n_features_in_ : int
        Number of queries (columns of ``S``).

    Examples
    --------
    >>> import numpy as np
    >>> from hf_ext.estimators import BestModelIdentifier
    >>> rng = np.random.default_rng(0)
    >>> S = (rng.random((5, 400)) < np.array([[0.5], [0.6], [0.7], [0.8], [0.9]])).astype(float)
    >>> est = BestModelIdentifier(budget=600, random_state=0).fit(S)
    >>> est.best_model_, est.budget_used_ <= 600
    (4, True)
    """

    _paper = paper("sysrs")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "algorithm": [StrOptions(set(ALGORITHMS))],
        "budget": [Interval(Integral, 0, None, closed="left"), None],
        "nan_policy": [StrOptions(set(NAN_POLICIES))],
        "score_range": ["array-like", None],
        "statistic": [StrOptions({"mean"}), callable],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        algorithm: str = "sysrs",
        budget: int | None = None,
        *,
        nan_policy: str = "zero",
        score_range: tuple[float, float] | None = None,
        statistic: Any = "mean",
        random_state: Any = None,
    ) -> None:
        self.algorithm = algorithm
        self.budget = budget
        self.nan_policy = nan_policy
        self.score_range = score_range
        self.statistic = statistic
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, S: Any, y: Any = None) -> BestModelIdentifier:
        """Run one simulated identification on ``S``.

        Parameters
        ----------
        S : array-like of shape (n_models, n_queries)
            Score of every model (rows) on every query (columns); NaN marks a failed evaluation.
        y : None
            Ignored; present for API consistency.

        Returns
        -------
        self : BestModelIdentifier
            The fitted estimator.
        """
        if not hasattr(S, "tocsr") and np.ndim(S) != 2:
            raise ValueError(
                "`S` must be a 2-D score matrix of shape (n_models, n_queries), "
                f"got {np.ndim(S)} dimension(s)."
            )
        S = validate_data(self, S, ensure_all_finite="allow-nan", dtype=np.float64)
        S = check_score_matrix(S, self.score_range)
        n_models, n_queries = S.shape
        budget = n_models * n_queries if self.budget is None else self.budget
        sched = make_scheduler(
            self.algorithm,
            n_models,
            n_queries,
            budget,
            seed=_seed(self.random_state),
            nan_policy=self.nan_policy,
            statistic=self.statistic,
        )
        self.best_model_ = run_scheduler(S, sched)
        self.budget_used_ = sched.spent
        self.history_ = sched.history
        self.n_models_ = n_models
        logger.debug(
            "%s picked model %d for %d evaluations", self.algorithm, self.best_model_, self.budget_used_
        )
        return self

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.target_tags.required = False
        return tags


def _seed(random_state: Any) -> int | None:
    """An int seed passes through (parity with ``simulate``); a RandomState yields a drawn one."""
    if random_state is None or isinstance(random_state, Integral):
        return None if random_state is None else int(random_state)
    return int(random_state.randint(np.iinfo(np.int32).max))
