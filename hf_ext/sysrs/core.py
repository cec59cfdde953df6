"""Successive Rejects and SySRs (pure numpy): the schedule, the algorithms by name, a driver for live loops.

Setting: ``n_models`` models, a finite benchmark of ``n_queries`` queries, scores in [0, 1] (usually 0/1
correctness) and a budget counted in (model, query) evaluations. The target is the model with the highest mean
score on the whole benchmark.

* :class:`SuccessiveRejects` -- Audibert & Bubeck (2010), one model dropped per phase [paper, standard
  algorithm].
* :class:`SynchronizedSuccessiveRejects` (alias :data:`SySRs`) -- one model dropped per phase on *shared*
  queries, so every elimination compares models on identical prompts (paired comparison), with a steeper
  phase schedule (:func:`steep_schedule`) by default. [reconstructed from the abstract of arXiv 2606.07726:
  the elimination statistic, the phase lengths and the bound of the paper are unknown; the steep schedule is
  hf-ext's design, SR's own schedule stays available as ``schedule="sr"``.]

The ask/tell machinery lives in :mod:`hf_ext.sysrs.scheduler`, the baselines (Sequential Halving, uniform
allocation) in :mod:`hf_ext.sysrs.baselines`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from functools import cache
from typing import Any

import numpy as np

from hf_ext._validation import check_choice, check_float, check_int
from hf_ext.sysrs.baselines import SequentialHalving, UniformAllocation, sh_schedule
from hf_ext.sysrs.scheduler import NAN_POLICIES, Batch, BestArmScheduler, mean_statistic

__all__ = [
    "ALGORITHMS",
    "SCHEDULES",
    "STEEP_EXPONENT",
    "NAN_POLICIES",
    "Batch",
    "BestArmScheduler",
    "SequentialHalving",
    "SuccessiveRejects",
    "SySRs",
    "SynchronizedSuccessiveRejects",
    "UniformAllocation",
    "halving_last_phase_schedule",
    "identify_best_model",
    "logbar",
    "make_scheduler",
    "mean_statistic",
    "sh_schedule",
    "sr_schedule",
    "steep_schedule",
]

SCHEDULES = ("auto", "steep", "sr", "halving")
STEEP_EXPONENT = 1.75


def logbar(n_models: int) -> Fraction:
    """``1/2 + sum_{i=2}^{K} 1/i``, the normaliser of the Successive Rejects schedule (exact rational)."""
    return Fraction(1, 2) + sum((Fraction(1, i) for i in range(2, n_models + 1)), Fraction(0))


@cache
def sr_schedule(n_models: int, budget: int) -> tuple[int, ...]:
    """Cumulative per-model query counts ``n_1..n_{K-1}`` of Successive Rejects (Audibert & Bubeck, 2010).

    ``n_k = ceil((B - K) / (logbar(K) * (K + 1 - k)))``, computed in exact rational arithmetic. The total cost
    ``n_1 + ... + n_{K-1} + n_{K-1}`` never exceeds ``budget``. Consecutive equal counts (zero-size phases)
    occur at small budgets and are kept as they are: forcing one new query per phase would overspend.

    >>> sr_schedule(3, 30)
    (7, 11)
    """
    check_int("n_models", n_models, low=2)
    check_int("budget", budget, low=n_models + 1, hint="Successive Rejects needs budget > n_models.")
    lb = logbar(n_models)
    return tuple(
        math.ceil(Fraction(budget - n_models) / (lb * (n_models + 1 - k))) for k in range(1, n_models)
    )


@cache
def halving_last_phase_schedule(n_models: int, budget: int) -> tuple[int, ...]:
    """:func:`sr_schedule` with the final pair given at least Sequential Halving's last-pair count [hf-ext].

    The last count becomes ``m = max(n_{K-1}, c)``, where ``c`` is the cumulative per-model count of the last
    round of :func:`~hf_ext.sysrs.baselines.sh_schedule`; the earlier counts are scaled by
    ``(B - 2 m) / (n_1 + ... + n_{K-2})`` and rounded down, so the cost ``n_1 + ... + n_{K-2} + 2 m`` stays
    within ``budget``. On shared queries the last elimination, between the two best models, is the closest
    one; SR gives it ``(B - K) / (2 logbar(K))`` queries, halving about ``B / (2 ceil(log2 K))`` plus its
    earlier rounds.

    >>> sr_schedule(5, 2000), halving_last_phase_schedule(5, 2000)
    ((224, 280, 373, 560), (159, 199, 265, 688))
    """
    counts = sr_schedule(n_models, budget)
    last = max(counts[-1], sh_schedule(n_models, budget)[-1][0])
    head = counts[:-1]
    if last == counts[-1] or not head:
        return counts[:-1] + (last,)
    scale = Fraction(budget - 2 * last, sum(head))
    return tuple(math.floor(c * scale) for c in head) + (last,)


@cache
def steep_schedule(n_models: int, budget: int, exponent: float = STEEP_EXPONENT) -> tuple[int, ...]:
    """Cumulative per-model counts ``n_1..n_{K-1}`` with ``n_k`` proportional to ``(K + 1 - k)^-exponent``.

    ``n_k = ceil((B - K) / (Z (K + 1 - k)^a))`` with ``Z = 2^-a + sum_{j=2}^{K} j^-a``, so that the cost
    ``n_1 + ... + n_{K-1} + n_{K-1}`` stays within ``budget`` (each of its ``K`` terms rounds up by less than
    one). ``exponent = 1`` is :func:`sr_schedule` (``Z = logbar(K)``); larger exponents move queries from the
    early eliminations, among many survivors, to the last ones. The default 1.75 is SySRs's schedule
    [hf-ext design, see :class:`SynchronizedSuccessiveRejects`].

    >>> sr_schedule(5, 2000), steep_schedule(5, 2000)
    ((224, 280, 373, 560), (135, 199, 329, 668))
    """
    check_int("n_models", n_models, low=2)
    check_int("budget", budget, low=n_models + 1, hint="Successive Rejects needs budget > n_models.")
    a = check_float("exponent", exponent, low=0, low_open=True)
    if a == 1:
        return sr_schedule(n_models, budget)
    z = 2.0**-a + sum(j**-a for j in range(2, n_models + 1))
    # Rounded to 1e-9 before the ceiling so that float error never lifts an exact integer by one.
    return tuple(
        math.ceil(round((budget - n_models) / (z * (n_models + 1 - k) ** a), 9)) for k in range(1, n_models)
    )


class SuccessiveRejects(BestArmScheduler):
    """Successive Rejects (Audibert & Bubeck, 2010) as an ask/tell scheduler; ``synchronized=True`` is SySRs.

    Phase ``k = 1..K-1`` brings every survivor to ``n_k`` queries and drops the survivor with the lowest mean.
    With ``synchronized=False`` each model draws its own queries without replacement (classical SR). With
    ``synchronized=True`` one random permutation of the benchmark is consumed in order by every survivor, so
    all eliminations compare models on the same queries (SySRs [reconstructed]). Parameters as in
    :class:`BestArmScheduler`; ``budget`` must exceed ``n_models``, and

    schedule : {"auto", "steep", "sr", "halving"}, default="auto"
        The counts ``n_k``. ``"sr"``: SR's schedule (:func:`sr_schedule`, the paper's). ``"steep"``:
        ``n_k`` proportional to ``(K + 1 - k)^-1.75`` (:func:`steep_schedule`) [hf-ext design].
        ``"halving"``: SR's schedule with the final pair given at least Sequential Halving's last-pair count
        (:func:`halving_last_phase_schedule`) [hf-ext design]. ``"auto"``: ``"steep"`` when synchronised,
        ``"sr"`` otherwise (classical SR keeps its schedule).

    Examples
    --------
    >>> import numpy as np
    >>> S = np.random.default_rng(0).random((4, 50)) < np.array([[0.3], [0.5], [0.7], [0.9]])
    >>> sched = SuccessiveRejects(4, 50, budget=120, synchronized=True, seed=0)
    >>> while not sched.done:
    ...     batch = sched.ask()
    ...     sched.tell(S[np.asarray(batch.model_ids)[:, None], batch.query_ids])
    >>> sched.recommend(), sched.spent <= 120, sched.schedule
    (3, True, 'steep')
    """

    _min_budget_hint = "needs budget > n_models so that every model gets a query"

    def __init__(
        self, n_models: int, n_queries: int, budget: int, *, schedule: str = "auto", **kwargs: Any
    ) -> None:
        schedule = check_choice("schedule", schedule, SCHEDULES)
        if schedule == "auto":
            schedule = "steep" if kwargs.get("synchronized", False) else "sr"
        self.schedule = schedule
        super().__init__(n_models, n_queries, budget, **kwargs)

    def _phases(self) -> tuple[tuple[int, int], ...]:
        schedule = {
            "steep": steep_schedule,
            "sr": sr_schedule,
            "halving": halving_last_phase_schedule,
        }[self.schedule]
        counts = schedule(self.n_models, self.budget)
        return tuple((c, self.n_models - 1 - k) for k, c in enumerate(counts))

    def _config(self) -> dict[str, Any]:
        return {**super()._config(), "schedule": self.schedule}


class SynchronizedSuccessiveRejects(SuccessiveRejects):
    """SySRs: :class:`SuccessiveRejects` on shared queries (``synchronized=True``; the parameter is fixed).

    [reconstructed] Only the abstract of arXiv 2606.07726 is available: one random permutation of the
    queries shared by all survivors, one elimination per phase, of the lowest mean on the shared queries
    (= the worst mean paired difference against the leader). Pairing helps because
    ``Var(S_i - S_j) = s_i^2 + s_j^2 - 2 Cov(S_i, S_j)`` is small when models fail on the same queries.

    [hf-ext design] The default phase lengths are :func:`steep_schedule`'s, ``n_k`` proportional to
    ``(K + 1 - k)^-1.75`` instead of SR's ``(K + 1 - k)^-1``: phase ``k`` risks dropping the best model
    against the weakest survivor, whose gap grows with its rank, and on shared queries the paired variance of
    that large gap is small, so the early eliminations need fewer queries and the close final ones get more.
    The exponent 1.75 was chosen on a screen of coupled draws (seeds apart from the benchmark's); 2 would make
    the per-phase error bounds equal for evenly spaced accuracies. ``schedule="sr"`` restores SR's (the
    paper's) schedule.

    Examples
    --------
    >>> import numpy as np
    >>> S = (np.random.default_rng(0).random((3, 40)) < [[0.2], [0.8], [0.5]]).astype(float)
    >>> sched = SynchronizedSuccessiveRejects(3, 40, budget=60, seed=0)
    >>> batch = sched.ask()
    >>> bool((batch.query_ids == batch.shared_query_ids).all())
    True
    """

    def __init__(self, n_models: int, n_queries: int, budget: int, **kwargs: Any) -> None:
        if "synchronized" in kwargs:
            raise TypeError(
                "`synchronized` is fixed to True for SynchronizedSuccessiveRejects; use SuccessiveRejects."
            )
        super().__init__(n_models, n_queries, budget, synchronized=True, **kwargs)


SySRs = SynchronizedSuccessiveRejects


ALGORITHMS: dict[str, tuple[type[BestArmScheduler], bool]] = {
    "uniform": (UniformAllocation, False),
    "uniform_synced": (UniformAllocation, True),
    "sr": (SuccessiveRejects, False),
    "sysrs": (SuccessiveRejects, True),
    "sh": (SequentialHalving, False),
    "sh_synced": (SequentialHalving, True),
}
"""Algorithm name -> (scheduler class, synchronized)."""


def make_scheduler(
    algorithm: str, n_models: int, n_queries: int, budget: int, **kwargs: Any
) -> BestArmScheduler:
    """The scheduler named ``algorithm`` (a key of :data:`ALGORITHMS`); ``kwargs`` go to its constructor."""
    cls, synced = ALGORITHMS[check_choice("algorithm", algorithm, ALGORITHMS)]
    return cls(n_models, n_queries, budget, synchronized=synced, **kwargs)


def identify_best_model(
    score_fn: Callable[[list[int], np.ndarray], Any],
    n_models: int,
    n_queries: int,
    budget: int,
    algorithm: str = "sysrs",
    seed: int | None = 0,
    **kwargs: Any,
) -> BestArmScheduler:
    """Drive a scheduler to the end with ``score_fn(model_ids, query_ids) -> scores (n_active, n_new)``.

    Returns the finished scheduler: ``.recommend()``, ``.spent`` and ``.history`` hold the outcome.

    >>> import numpy as np
    >>> S = np.array([[0, 1, 0, 1, 0, 0], [1, 1, 1, 1, 1, 1]], dtype=float)
    >>> s = identify_best_model(lambda m, q: S[np.asarray(m)[:, None], q], 2, 6, budget=10, seed=0)
    >>> s.recommend(), s.spent
    (1, 8)
    """
    sched = make_scheduler(algorithm, n_models, n_queries, budget, seed=seed, **kwargs)
    while not sched.done:
        batch = sched.ask()
        sched.tell(score_fn(batch.model_ids, batch.query_ids))
    return sched
