"""Figures of the SySRs benchmark: error rate and regret at a fixed budget, budget to a fixed confidence.

The fixed-confidence figure is the smallest budget on a geometric grid (from ``K + 1`` to ``K * N``) at which
the error rate over the seeded runs is at most ``delta`` (5%): the budget each algorithm needs to identify the
best model reliably.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from benchmarks.harness import Timer
from hf_ext.sysrs.core import sr_schedule
from hf_ext.sysrs.scores import true_means
from hf_ext.sysrs.simulation import iter_runs, simulate

SYSTEMS = {
    "uniform": "uniform",
    "uniform-synced": "uniform_synced",
    "SR": "sr",
    "SySRs": "sysrs",
    "SH": "sh",
    "SH-synced": "sh_synced",
}
"""Row name -> algorithm of :data:`hf_ext.sysrs.core.ALGORITHMS`."""
METHOD = "SySRs"
DELTA = 0.05


def budget_grid(n_models: int, n_queries: int, factor: float) -> list[int]:
    """Geometric budgets ``K + 1, (K + 1) * factor, ...`` rounded up, ending with ``K * N`` (everything)."""
    top, b, grid = n_models * n_queries, float(n_models + 1), []
    while b < top:
        grid.append(math.ceil(b))
        b *= factor
    return sorted(set(grid)) + [top]


def budget_to_error(
    S: np.ndarray, algorithm: str, grid: list[int], *, reps: int, seed: int, target: float = DELTA
) -> int | None:
    """Smallest budget of ``grid`` whose error rate over ``reps`` runs is ``<= target``; ``None`` if none.

    A grid point is abandoned as soon as its error count exceeds ``target * reps`` (the full count could only
    be larger), which gives the same answer as running every repetition.
    """
    means = true_means(S)
    best = set(np.flatnonzero(means >= means.max() - 1e-12).tolist())
    allowed = math.floor(target * reps + 1e-9)
    for budget in grid:
        errors = 0
        for pick, _ in iter_runs(S, budget, algorithm, reps, seed):
            errors += pick not in best
            if errors > allowed:
                break
        else:
            return budget
    return None


def final_duel(S: np.ndarray, budget: int) -> str:
    """What limits SR-type identification on ``S``: the gap of the top two models against the noise of the
    last elimination (``n_{K-1}`` shared queries, paired standard deviation)."""
    means = true_means(S)
    top2 = np.argsort(-means, kind="stable")[:2]
    gap = means[top2[0]] - means[top2[1]]
    n_last = sr_schedule(len(S), budget)[-1] if budget > len(S) else 0
    sd_paired = float(np.std(S[top2[0]] - S[top2[1]]))
    sd_indep = float(np.sqrt(S[top2[0]].var() + S[top2[1]].var()))
    z_p, z_i = (gap * math.sqrt(n_last) / sd if sd > 0 else math.inf for sd in (sd_paired, sd_indep))

    def tail(z: float) -> float:  # P(N(0, 1) > z)
        return 0.5 * math.erfc(z / math.sqrt(2))

    return (
        f"top-2 gap {100 * gap:.2f} pts; last SR phase n_(K-1) = {n_last} queries; "
        f"paired sd {sd_paired:.3f} vs unpaired {sd_indep:.3f} -> P(final duel lost, normal approx.) ~ "
        f"{tail(z_p):.3f} paired, {tail(z_i):.3f} unpaired"
    )


def fixed_budget_rows(
    name: str,
    S: np.ndarray,
    budget: int,
    corr: float,
    reps: int,
    seed: int,
    errors: dict[tuple[Any, str], np.ndarray] | None = None,
) -> list[dict[str, Any]]:
    """One row per system at a fixed budget; ``errors`` receives the per-run error indicators."""
    rows = []
    for system, algo in SYSTEMS.items():
        with Timer() as t:
            out = simulate(S, budget, algo, reps=reps, seed=seed)
        if errors is not None:
            errors[((name, budget), system)] = ~np.isin(out["picks"], out["best"])
        rows.append(
            {
                "system": system,
                "is_baseline": system != METHOD,
                "table": "fixed budget",
                "matrix": name,
                "K": S.shape[0],
                "N": S.shape[1],
                "corr": round(corr, 3),
                "budget": budget,
                "error_rate": out["error_rate"],
                "regret_pts": out["simple_regret"],
                "max_spent": int(out["spent"].max()),
                "seconds": t.seconds,
            }
        )
    sr = next(r for r in rows if r["system"] == "SR")
    for r in rows:
        r["err_vs_SR"] = r["error_rate"] / sr["error_rate"] if sr["error_rate"] else math.nan
        r["regret_vs_SR"] = r["regret_pts"] / sr["regret_pts"] if sr["regret_pts"] else math.nan
    return rows


def fixed_confidence_rows(
    name: str, S: np.ndarray, corr: float, factor: float, reps: int, seed: int
) -> list[dict[str, Any]]:
    n_models, n_queries = S.shape
    grid = budget_grid(n_models, n_queries, factor)
    rows: list[dict[str, Any]] = []
    for system, algo in SYSTEMS.items():
        with Timer() as t:
            need = budget_to_error(S, algo, grid, reps=reps, seed=seed)
        rows.append(
            {
                "system": system,
                "is_baseline": system != METHOD,
                "table": "fixed confidence",
                "matrix": name,
                "corr": round(corr, 3),
                "K*N": S.size,
                "budget_to_delta": need if need is not None else "not reached",
                "share_of_K*N": need / S.size if need is not None else math.nan,
                "seconds": t.seconds,
            }
        )
    sr = float(next(r for r in rows if r["system"] == "SR")["share_of_K*N"])
    for r in rows:
        r["budget_vs_SR"] = float(r["share_of_K*N"]) / sr if not math.isnan(sr) else math.nan
    return rows
