"""Baseline schedulers for best-model identification: Sequential Halving and uniform allocation.

Same ask/tell protocol and parameters as :class:`~hf_ext.sysrs.core.SuccessiveRejects` (standard algorithms
[paper]); ``synchronized=True`` shares the queries across survivors (a project addition for both).
"""

from __future__ import annotations

import math

from hf_ext._validation import check_int
from hf_ext.sysrs.scheduler import BestArmScheduler


def sh_schedule(n_models: int, budget: int) -> tuple[tuple[int, int], ...]:
    """Sequential Halving rounds as ``(cumulative per-model count, survivors kept)`` pairs.

    ``R = ceil(log2 K)`` rounds; in round ``r`` each of the ``|S_r|`` survivors gets ``floor(B / (|S_r| R))``
    new queries, then the top ``ceil(|S_r| / 2)`` are kept.

    >>> sh_schedule(4, 100)
    ((12, 2), (37, 1))
    """
    check_int("n_models", n_models, low=2)
    rounds = math.ceil(math.log2(n_models))
    plan, size, cum = [], n_models, 0
    for _ in range(rounds):
        cum += budget // (size * rounds)
        size = math.ceil(size / 2)
        plan.append((cum, size))
    return tuple(plan)


class SequentialHalving(BestArmScheduler):
    """Sequential Halving (Karnin, Koren & Somekh, 2013) as an ask/tell scheduler (:func:`sh_schedule`).

    Rounds whose share rounds down to zero new queries eliminate on the data already seen.

    Examples
    --------
    >>> sched = SequentialHalving(8, 100, budget=400, seed=0)
    >>> sched.ask().query_ids.shape
    (8, 16)
    """

    def _phases(self) -> tuple[tuple[int, int], ...]:
        return sh_schedule(self.n_models, self.budget)


class UniformAllocation(BestArmScheduler):
    """Uniform allocation: every model gets ``budget // n_models`` queries, then the best mean wins.

    ``budget >= n_models`` suffices. With ``synchronized=True`` (every model sees the same queries) this is
    lm-eval's ``--limit`` subsampling.

    Examples
    --------
    >>> sched = UniformAllocation(3, 10, budget=7, synchronized=True, seed=0)
    >>> sched.ask().query_ids.shape
    (3, 2)
    """

    _min_budget_hint = "needs budget >= n_models (one query per model)"

    @staticmethod
    def _min_budget(n_models: int) -> int:
        return n_models

    def _phases(self) -> tuple[tuple[int, int], ...]:
        return ((self.budget // self.n_models, 1),)
