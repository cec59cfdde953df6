"""Paired comparisons: SySRs against each other system on the very same simulated runs.

Run ``r`` of every algorithm uses scheduler seed ``seed + r``, so the synchronised algorithms consume the same
query permutation; the per-run difference of the error indicators (SySRs minus the other system) is paired.
Over several settings (equal runs each) its mean is the difference of the mean error rates, and the 95%
interval is ``mean +- 1.96 sd / sqrt(n_runs)`` (normal approximation, ``n_runs`` in the thousands).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchmarks.sysrs.figures import METHOD, SYSTEMS
from hf_ext.sysrs.simulation import simulate

Errors = dict[tuple[Any, str], np.ndarray]
"""(setting key, system) -> per-run error indicator, bool ``(reps,)``."""


def run_errors(out: dict[str, Any]) -> np.ndarray:
    """Per-run error indicator of a :func:`~hf_ext.sysrs.simulation.simulate` result."""
    return ~np.isin(out["picks"], out["best"])


def extended_errors(
    problems: dict[Any, tuple[np.ndarray, int]],
    systems: dict[str, tuple[str, dict[str, Any]]],
    *,
    reps: int,
    seed: int,
) -> Errors:
    """Per-run errors of ``systems`` (name -> (algorithm, scheduler kwargs)) on every ``problems`` entry
    (key -> (score matrix, budget)), ``reps`` runs each: the long paired comparison of the closest rivals."""
    return {
        (key, name): run_errors(simulate(S, budget, algo, reps=reps, seed=seed, **kwargs))
        for key, (S, budget) in problems.items()
        for name, (algo, kwargs) in systems.items()
    }


def paired_rows(errors: Errors, scope: str) -> list[dict[str, Any]]:
    """One row per other system: mean error difference (SySRs minus it) over every setting, 95% interval."""
    settings = sorted({key for key, _ in errors}, key=str)
    systems = list(dict.fromkeys(system for _, system in errors if system != METHOD))
    rows = []
    for system in systems:
        diff = np.concatenate(
            [errors[(key, METHOD)].astype(float) - errors[(key, system)] for key in settings]
        )
        half = 1.96 * diff.std(ddof=1) / math.sqrt(len(diff))
        rows.append(
            {
                "system": system,
                "is_baseline": system in SYSTEMS,
                "table": f"paired {scope}",
                "settings": len(settings),
                "runs": len(diff),
                "mean_diff": float(diff.mean()),
                "ci_low": float(diff.mean() - half),
                "ci_high": float(diff.mean() + half),
                "sysrs_better_runs": int((diff < 0).sum()),
                "other_better_runs": int((diff > 0).sum()),
            }
        )
    return rows
