"""The regime table: every algorithm over a correlation x budget x K grid of coupled draws.

Model ``m`` of ``K`` has accuracy ``0.60 + 0.10 m / (K - 1)``; a share ``rho`` of the ``N = 3000`` queries is
decided by one draw for every model (``benchmarks.sysrs.matrices.coupled_matrix``, seed 0). The table gives
each algorithm's error rate per cell, its mean over the grid and SySRs's ratio to SR where ``rho >= 0.7``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from benchmarks.sysrs._paired import Errors, run_errors
from benchmarks.sysrs.figures import METHOD, SYSTEMS
from benchmarks.sysrs.matrices import coupled_matrix, mean_pairwise_correlation
from hf_ext.sysrs.simulation import simulate

GRID_RHO = (0.0, 0.5, 0.75, 0.9)
GRID_BUDGET = (2000, 6000)
GRID_K = (5, 10, 20)
GRID_N = 3000
HIGH_RHO = 0.7
PAPER_SCHEDULE = "SySRs (SR schedule)"
"""SySRs with SR's (the paper's) phase schedule, ``schedule="sr"``: a variant row, not a baseline."""


def grid_cells(quick: bool) -> list[dict[str, Any]]:
    """The cells (rho, budget, K) of the full run; ``quick``: K = 5 only (the shortest schedules)."""
    ks = GRID_K[:1] if quick else GRID_K
    return [
        {"table": "regime grid", "rho": r, "budget": b, "K": k}
        for r in GRID_RHO
        for b in GRID_BUDGET
        for k in ks
    ]


def grid_matrix(cell: dict[str, Any]) -> np.ndarray:
    """The coupled-draws score matrix of one grid cell, shape ``(K, GRID_N)``."""
    return coupled_matrix(np.linspace(0.60, 0.70, cell["K"]), GRID_N, correlation=cell["rho"], seed=0)


def grid_rows(
    cells: list[dict[str, Any]], *, reps: int, seed: int, errors: Errors | None = None
) -> list[dict[str, Any]]:
    """One row per (cell, algorithm): error rate and regret (accuracy points) over ``reps`` runs; SySRs also
    with SR's schedule (:data:`PAPER_SCHEDULE`). ``errors`` receives the per-run error indicators."""
    rows = []
    systems: dict[str, tuple[str, dict[str, Any]]] = {name: (algo, {}) for name, algo in SYSTEMS.items()}
    systems[PAPER_SCHEDULE] = ("sysrs", {"schedule": "sr"})
    for cell in cells:
        S = grid_matrix(cell)
        corr = mean_pairwise_correlation(S)
        key = (cell["rho"], cell["budget"], cell["K"])
        for system, (algorithm, kwargs) in systems.items():
            out = simulate(S, cell["budget"], algorithm, reps=reps, seed=seed, **kwargs)
            if errors is not None:
                errors[(key, system)] = run_errors(out)
            rows.append(
                {
                    "system": system,
                    "is_baseline": system in SYSTEMS and system != METHOD,
                    **cell,
                    "corr": corr,
                    "error_rate": float(out["error_rate"]),
                    "regret_pts": float(out["simple_regret"]),
                }
            )
    return rows


def grid_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per algorithm: mean error over the cells, cells where it is (jointly) lowest among :data:`SYSTEMS`, and
    at ``rho >= 0.7`` its mean error and its mean ratio to SR's error."""
    cells = {(r["rho"], r["budget"], r["K"]) for r in rows}
    lowest = {
        c: min(
            r["error_rate"] for r in rows if (r["rho"], r["budget"], r["K"]) == c and r["system"] in SYSTEMS
        )
        for c in cells
    }
    sr = {(r["rho"], r["budget"], r["K"]): r["error_rate"] for r in rows if r["system"] == "SR"}
    out = []
    for system in [*SYSTEMS, PAPER_SCHEDULE]:
        mine = [r for r in rows if r["system"] == system]
        high = [r for r in mine if r["rho"] >= HIGH_RHO]
        ratios = [
            r["error_rate"] / sr[(r["rho"], r["budget"], r["K"])]
            for r in high
            if sr[(r["rho"], r["budget"], r["K"])] > 0
        ]
        out.append(
            {
                "system": system,
                "is_baseline": system in SYSTEMS and system != METHOD,
                "table": "regime grid summary",
                "cells": len(mine),
                "mean_error": float(np.mean([r["error_rate"] for r in mine])),
                "lowest_in": sum(r["error_rate"] <= lowest[(r["rho"], r["budget"], r["K"])] for r in mine),
                "mean_error_rho>=0.7": float(np.mean([r["error_rate"] for r in high])),
                "err/SR_rho>=0.7": float(np.mean(ratios)) if ratios else float("nan"),
            }
        )
    return out
