"""Offline simulation of best-model identification over a known score matrix (models x queries).

The simulator drives the very schedulers of :mod:`hf_ext.sysrs` through ``ask``/``tell``, answering each
batch from the matrix, so a simulated run is exactly what the scheduler would do against live models.
Repetition ``r`` uses scheduler seed ``seed + r``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from hf_ext._validation import check_int
from hf_ext.sysrs.core import make_scheduler
from hf_ext.sysrs.scheduler import BestArmScheduler
from hf_ext.sysrs.scores import check_score_matrix, true_means


def run_scheduler(S: np.ndarray, sched: BestArmScheduler) -> int:
    """Answer ``sched``'s batches from ``S`` (shape ``(n_models, n_queries)``) until done; return its pick."""
    while not sched.done:
        batch = sched.ask()
        sched.tell(S[np.asarray(batch.model_ids)[:, None], batch.query_ids])
    return sched.recommend()


def iter_runs(
    S: np.ndarray, budget: int, algorithm: str, reps: int, seed: int, **kwargs: Any
) -> Iterator[tuple[int, int]]:
    """Yield ``(picked model, evaluations spent)`` for repetitions ``0..reps-1`` (seeds ``seed + r``).

    ``S`` must already be validated (:func:`check_score_matrix`); ``kwargs`` go to the scheduler.
    """
    n_models, n_queries = S.shape
    for r in range(reps):
        sched = make_scheduler(algorithm, n_models, n_queries, budget, seed=seed + r, **kwargs)
        yield run_scheduler(S, sched), sched.spent


def simulate(
    S: Any,
    budget: int,
    algorithm: str = "sysrs",
    *,
    reps: int = 400,
    seed: int = 0,
    nan_policy: str = "zero",
    score_range: tuple[float, float] | None = None,
    statistic: Any = "mean",
    **scheduler_kwargs: Any,
) -> dict[str, Any]:
    """Repeat one identification run ``reps`` times on the score matrix ``S`` and summarise the outcome.

    Args:
        S: Scores, shape ``(n_models, n_queries)``, in [0, 1] (or in ``score_range``); NaN = failed
            evaluation.
        budget: Evaluations per run.
        algorithm: ``"sysrs"``, ``"sr"``, ``"uniform"``, ``"uniform_synced"``, ``"sh"`` or ``"sh_synced"``.
        reps: Number of repetitions (seeds ``seed .. seed + reps - 1``).
        seed: Seed of the first repetition.
        nan_policy: ``"zero"`` or ``"drop_query"``; also defines the ground truth (:func:`true_means`).
        score_range: ``(lo, hi)`` of the raw scores, rescaled to [0, 1].
        statistic: Elimination statistic passed to the scheduler (see ``SuccessiveRejects``).
        **scheduler_kwargs: Further scheduler parameters, e.g. ``schedule="sr"`` for SySRs with SR's (the
            paper's) phase schedule.

    Returns:
        A dict with ``error_rate`` (share of runs not picking a best model; ties in the true means all count
        as best), ``simple_regret`` (mean gap between the best and the picked model's full-benchmark mean, in
        percentage points), ``spent`` (int array ``(reps,)``), ``picks`` (int array ``(reps,)``) and ``best``
        (ids of the true best models).

    >>> import numpy as np
    >>> S = np.array([[1.0] * 20, [0.0] * 20, [1.0] * 10 + [0.0] * 10])
    >>> out = simulate(S, budget=30, algorithm="sr", reps=5)
    >>> out["error_rate"], out["best"].tolist()
    (0.0, [0])
    """
    reps = check_int("reps", reps, low=1)
    S = check_score_matrix(S, score_range)
    means = true_means(S, nan_policy)
    best = np.flatnonzero(means >= means.max() - 1e-12)
    runs = list(
        iter_runs(
            S, budget, algorithm, reps, seed, nan_policy=nan_policy, statistic=statistic, **scheduler_kwargs
        )
    )
    picks = np.array([p for p, _ in runs])
    return {
        "error_rate": float(np.mean(~np.isin(picks, best))),
        "simple_regret": float(100.0 * np.mean(means.max() - means[picks])),
        "spent": np.array([s for _, s in runs]),
        "picks": picks,
        "best": best,
    }
