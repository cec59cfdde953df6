"""The simulated annotation loop shared by every strategy: cold start, ``query``/``teach`` rounds against a
noisy oracle, test scores after every round."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.harness import Timer
from benchmarks.prior_al.data import Task


@dataclass(frozen=True)
class Schedule:
    """Cold start ``M``, batch ``B`` and ``rounds`` (labels go ``M, M + B, ..., M + rounds B``)."""

    cold_start: int
    batch: int
    rounds: int

    @property
    def budgets(self) -> list[int]:
        return [self.cold_start + t * self.batch for t in range(self.rounds + 1)]


def small_model(task: Task) -> Any:
    """The small model every strategy shares: balanced logistic regression, after the task's fixed
    projection when it has one."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    lr = LogisticRegression(class_weight="balanced", max_iter=300)
    return lr if task.project is None else make_pipeline(FunctionTransformer(task.project), lr)


def scores(y_true: np.ndarray, y_pred: np.ndarray, rare: np.ndarray) -> dict[str, float]:
    """Macro-F1, balanced accuracy and the mean recall of the ``rare`` classes."""
    from sklearn.metrics import balanced_accuracy_score, f1_score, recall_score

    return {
        "macro_f1": float(f1_score(y_true, y_pred, average="macro", zero_division=0)),
        "bal_acc": float(balanced_accuracy_score(y_true, y_pred)),
        "rare_recall": float(
            np.mean(recall_score(y_true, y_pred, labels=rare, average=None, zero_division=0))
        ),
    }


def run_learner(make: Callable[[], Any], task: Task, schedule: Schedule, seed: int) -> dict[str, Any]:
    """Run one strategy on one task; returns per-budget score lists, the wall time and the refit count."""
    rng = np.random.default_rng(seed + 7919)
    y = np.full(len(task.y_pool), -1)
    start = rng.choice(len(y), size=schedule.cold_start, replace=False)
    y[start] = task.y_noisy[start]
    curve: dict[str, list[float]] = {"macro_f1": [], "bal_acc": [], "rare_recall": []}
    learner = make()
    with Timer() as t, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        learner.fit(task.X_pool, y)
        for r in range(schedule.rounds + 1):
            for k, v in scores(task.y_test, learner.predict(task.X_test), task.rare).items():
                curve[k].append(v)
            if r < schedule.rounds:
                idx = learner.query(schedule.batch)
                learner.teach(idx, task.y_noisy[idx])
    return {**curve, "seconds": t.seconds, "refits": len(learner.history_)}


def labels_to_reach(curve: list[float], budgets: list[int], target: float) -> float:
    """First budget whose score reaches ``target`` (``inf`` when none does)."""
    for b, v in zip(budgets, curve):
        if v >= target:
            return float(b)
    return float("inf")
