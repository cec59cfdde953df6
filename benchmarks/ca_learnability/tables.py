"""Rows of the ``ca_learnability`` benchmark: correlations, cross-validated R² of the predictor, costs."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

# feature key -> (system label, is_baseline)
SYSTEMS = {
    "w_ge4": ("W>=4 (degree tail)", False),
    "w_le2": ("W<=2 (low degree)", False),
    "junta_r0": ("J_0 (centre junta)", False),
    "as": ("AS (avg sensitivity)", True),
    "w0": ("W=0 (output balance)", True),
}
FEATURE_SETS = {
    "AS only": (("as",), True),
    "W0 only": (("w0",), True),
    "degree profile (W<=2, W>=4)": (("w_le2", "w_ge4"), False),
    "AS + degree profile": (("as", "w_le2", "w_ge4"), False),
}


def correlation_rows(corr: list[dict[str, Any]], method: str) -> list[dict[str, Any]]:
    """One row per (feature, arch, target) of the correlations, labelled as systems."""
    rows = []
    for c in corr:
        if c["feature"] not in SYSTEMS:
            continue
        label, base = SYSTEMS[c["feature"]]
        rows.append(
            {
                "table": "spearman",
                "system": label,
                "is_baseline": base,
                "arch": c["arch"],
                "target": c["target"],
                "rho": c["rho"],
                "abs_rho": abs(c["rho"]),
                "p_value": c["p_value"],
                "ci_low": c["ci_low"],
                "ci_high": c["ci_high"],
                "n_rules": c["n_rules"],
                "learned": c["learned"],
            }
        )
    return rows


def cv_r2(X: np.ndarray, y: np.ndarray, *, seed: int, folds: int = 5) -> float:
    """Out-of-fold R² of :class:`LearnabilityPredictor` (predictions pooled over ``folds`` shuffled folds)."""
    from sklearn.metrics import r2_score
    from sklearn.model_selection import KFold, cross_val_predict

    from hf_ext.estimators.ca_learnability import LearnabilityPredictor

    if len(y) < folds or np.ptp(y) == 0:
        return math.nan
    pred = cross_val_predict(LearnabilityPredictor(), X, y, cv=KFold(folds, shuffle=True, random_state=seed))
    return float(r2_score(y, pred))


def predictor_rows(
    records: list[dict[str, Any]], archs: tuple[str, ...], *, seed: int
) -> list[dict[str, Any]]:
    """Cross-validated R² of each feature set for each architecture's normalised error."""
    rows = []
    for arch in archs:
        mine = [r for r in records if r["arch"] == arch and np.isfinite(r["normalized_error"])]
        y = np.array([r["normalized_error"] for r in mine])
        for label, (keys, base) in FEATURE_SETS.items():
            X = np.array([[r[k] for k in keys] for r in mine], dtype=np.float64).reshape(len(mine), -1)
            rows.append(
                {
                    "table": "cv_r2",
                    "system": label,
                    "is_baseline": base,
                    "arch": arch,
                    "cv_r2": cv_r2(X, y, seed=seed),
                    "n_rules": len(mine),
                }
            )
    return rows


def cost_rows(
    records: list[dict[str, Any]], archs: tuple[str, ...], feature_s: list[float], k2_s: float
) -> list[dict[str, Any]]:
    """Seconds per rule: exact spectrum (k = 1 mean, k = 2 for one rule) and training per architecture."""
    rows: list[dict[str, Any]] = [
        {
            "table": "cost",
            "system": "spectrum k=1",
            "is_baseline": False,
            "seconds": float(np.mean(feature_s)),
        },
    ]
    if np.isfinite(k2_s):
        rows.append({"table": "cost", "system": "spectrum k=2 (Life)", "is_baseline": False, "seconds": k2_s})
    for arch in archs:
        mine = [r for r in records if r["arch"] == arch]
        rows.append(
            {
                "table": "cost",
                "system": f"train {arch}",
                "is_baseline": False,
                "seconds": float(np.mean([r["train_seconds"] for r in mine])),
                "mean_error": float(np.mean([r["error"] for r in mine])),
                "mean_majority_error": float(np.mean([r["majority_error"] for r in mine])),
                "mean_normalized_error": float(np.nanmean([r["normalized_error"] for r in mine])),
            }
        )
    return rows
