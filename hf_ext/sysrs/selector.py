"""Best-model selection on a known score matrix: one simulated identification run, scikit-learn parameters.

A best-arm search over a fixed (models x queries) score matrix is not a fit/predict estimator: nothing is
learned from ``X`` that applies to new data. :class:`BestModelIdentifier` is therefore a *selector*: its
parameters follow scikit-learn (``get_params``/``set_params``/``clone``), and
:meth:`BestModelIdentifier.select` runs the chosen scheduler against the matrix. The scikit-learn
meta-estimator over candidate models is :class:`~hf_ext.estimators.sysrs.SySRsSearchCV`.
"""

from __future__ import annotations

import logging
from numbers import Integral
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.sysrs.core import make_scheduler
from hf_ext.sysrs.scores import check_score_matrix
from hf_ext.sysrs.simulation import run_scheduler

logger = logging.getLogger(__name__)


class BestModelIdentifier(BaseEstimator):
    """Budgeted best-model identification on a models x queries score matrix (SySRs and its baselines).

    :meth:`select` simulates one run of the chosen ask/tell scheduler of :mod:`hf_ext.sysrs`, answering each
    of its requests from the matrix, and records which model it picked and what it spent. To run against live
    models instead, drive :class:`~hf_ext.sysrs.core.SynchronizedSuccessiveRejects` (or
    :func:`~hf_ext.sysrs.core.identify_best_model`) directly; to pick among scikit-learn models, use
    :class:`~hf_ext.estimators.sysrs.SySRsSearchCV`.

    SySRs is Successive Rejects on shared queries [reconstructed from the abstract of arXiv 2606.07726: the
    elimination statistic (lowest mean on the shared queries) and the finite-benchmark rules are ours; its
    phase lengths are hf-ext's steep schedule, :func:`~hf_ext.sysrs.core.steep_schedule`].

    Parameters
    ----------
    algorithm : {"sysrs", "sr", "uniform", "uniform_synced", "sh", "sh_synced"}, default="sysrs"
        SySRs, classical Successive Rejects, uniform allocation (independent or shared queries) and Sequential
        Halving (independent or shared queries).
    budget : int or None, default=None
        Total (model, query) evaluations, used when :meth:`select` gets no ``budget``. It must exceed
        ``n_models`` (uniform: at least ``n_models``). ``None`` evaluates every model on every query (the
        exact, most expensive answer).
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
    n_models_, n_queries_ : int
        Shape of the score matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from hf_ext.sysrs import BestModelIdentifier
    >>> rng = np.random.default_rng(0)
    >>> S = (rng.random((5, 400)) < np.array([[0.5], [0.6], [0.7], [0.8], [0.9]])).astype(float)
    >>> selector = BestModelIdentifier(random_state=0)
    >>> selector.select(S, budget=600), selector.budget_used_ <= 600
    (4, True)
    """

    _paper = paper("sysrs")

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

    def select(self, scores: Any, budget: int | None = None) -> int:
        """Run one simulated identification on ``scores`` and return the picked model's row.

        Parameters
        ----------
        scores : array-like of shape (n_models, n_queries)
            Score of every model (rows) on every query (columns); NaN marks a failed evaluation.
        budget : int or None, default=None
            Evaluations for this run; ``None`` uses the ``budget`` parameter.

        Returns
        -------
        best_model : int
            Also stored as ``best_model_``, beside ``budget_used_``, ``history_``, ``n_models_``,
            ``n_queries_``.

        Raises
        ------
        ValueError
            ``scores`` is not a 2-D matrix in [0, 1] (after ``score_range``), the budget is below the
            algorithm's minimum, or a parameter is out of range.
        """
        S = check_score_matrix(scores, self.score_range)
        n_models, n_queries = S.shape
        budget = self.budget if budget is None else budget
        budget = n_models * n_queries if budget is None else check_int("budget", budget, low=0)
        sched = make_scheduler(
            self.algorithm,
            n_models,
            n_queries,
            budget,
            seed=scheduler_seed(self.random_state),
            nan_policy=self.nan_policy,
            statistic=self.statistic,
        )
        self.best_model_ = run_scheduler(S, sched)
        self.budget_used_ = sched.spent
        self.history_ = sched.history
        self.n_models_, self.n_queries_ = n_models, n_queries
        logger.debug("%s picked model %d for %d evaluations", self.algorithm, self.best_model_, sched.spent)
        return self.best_model_


def scheduler_seed(random_state: Any) -> int | None:
    """An int seed passes through (parity with ``simulate``); a ``RandomState`` yields a drawn one."""
    if random_state is None:
        return None
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    if isinstance(random_state, bool) or not isinstance(random_state, Integral):
        raise TypeError(f"`random_state` must be None, an int or a RandomState, got {random_state!r}.")
    return check_int("random_state", random_state, low=0)
