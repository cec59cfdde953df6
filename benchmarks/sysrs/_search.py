"""The fit-budget table: ``SySRsSearchCV`` against ``GridSearchCV`` (wall time and the pick) on real data.

Per seed, 1000 of digits' 1797 rows are drawn; every search uses the folds
``StratifiedKFold(5, shuffle=True, random_state=seed)`` and the searches' row orders the same seed; the three
searches run one after the other (interleaved) in one process with ``n_jobs=1``. A search "picks the same"
when its ``best_params_`` equal the grid search's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.harness import Timer

#: SVC on digits: 5 gammas x 5 Cs = 25 candidates, 5-fold cross-validation, fit budget 1/3 of the grid's.
SEARCH_GRID = {"gamma": [1e-4, 3e-4, 1e-3, 3e-3, 1e-2], "C": [0.1, 0.3, 1.0, 3.0, 10.0]}
SEARCH_BUDGET = 1 / 3
SEARCH_ROWS = 1000
SEARCH_ALGORITHMS = ("sysrs", "sh_synced")


def search_settings() -> list[dict[str, Any]]:
    """The one fit-budget setting (seeds are repetitions, not settings)."""
    return [
        {"table": "fit budget", "data": "digits, 1000 rows", "grid": "SVC 5 gammas x 5 Cs", "budget": "1/3"}
    ]


def search_rows(seeds: range) -> list[dict[str, Any]]:
    """One row per search (grid search first): mean seconds per fit, speed-up, picks equal to the grid's."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    from hf_ext.estimators.sysrs import SySRsSearchCV

    X_all, y_all = load_digits(return_X_y=True)
    seconds: dict[str, list[float]] = {"GridSearchCV": [], **{a: [] for a in SEARCH_ALGORITHMS}}
    same = {a: 0 for a in SEARCH_ALGORITHMS}
    used: dict[str, list[float]] = {a: [] for a in SEARCH_ALGORITHMS}
    for seed in seeds:
        rows_of_seed = np.random.default_rng(seed).choice(len(y_all), SEARCH_ROWS, replace=False)
        X, y = X_all[rows_of_seed] / 16.0, y_all[rows_of_seed]
        cv = StratifiedKFold(5, shuffle=True, random_state=seed)
        with Timer() as t:
            grid = GridSearchCV(SVC(), SEARCH_GRID, cv=cv, refit=False).fit(X, y)
        seconds["GridSearchCV"].append(t.seconds)
        for algorithm in SEARCH_ALGORITHMS:
            search = SySRsSearchCV(
                SVC(),
                SEARCH_GRID,
                budget=SEARCH_BUDGET,
                algorithm=algorithm,
                cv=cv,
                refit=False,
                random_state=seed,
            )
            with Timer() as t:
                search.fit(X, y)
            seconds[algorithm].append(t.seconds)
            same[algorithm] += search.best_params_ == grid.best_params_
            used[algorithm].append(search.budget_used_)
    base = float(np.mean(seconds["GridSearchCV"]))
    rows = [
        {
            "system": "GridSearchCV",
            "is_baseline": True,
            "table": "fit budget",
            "seconds": base,
            "speedup": 1.0,
            "same_pick": f"{len(seeds)}/{len(seeds)}",
            "fit_share": 1.0,
        }
    ]
    for a in SEARCH_ALGORITHMS:
        rows.append(
            {
                "system": f"SySRsSearchCV({a})",
                "is_baseline": a != "sysrs",
                "table": "fit budget",
                "seconds": float(np.mean(seconds[a])),
                "speedup": base / float(np.mean(seconds[a])),
                "same_pick": f"{same[a]}/{len(seeds)}",
                "same_share": same[a] / len(seeds),
                "fit_share": float(np.mean(used[a])),
            }
        )
    return rows
