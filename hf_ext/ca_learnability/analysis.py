"""Correlate a rule's predictors with its measured learnability, per architecture [reconstructed analysis].

Spearman's rank correlation between each feature (average sensitivity, degree and junta profile shares, output
balance) and the test error of each architecture, with a two-sided p-value and a percentile bootstrap interval
over rules. An architecture whose mean normalised error is not below the learning gate did not learn: its
correlations describe the majority baseline rather than learnability, and the rows say so.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from hf_ext._validation import check_float, check_int, check_sequence

FEATURES = ("as", "as_norm", "w_le2", "w_ge4", "junta_r0", "w0")
TARGETS = ("normalized_error", "error")


def spearman(x: Any, y: Any) -> tuple[float, float]:
    """Spearman's ``rho`` of two 1-D samples and its two-sided p-value (``nan`` when either is constant)."""
    from scipy.stats import spearmanr

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"`x` and `y` must be 1-D of one length, got shapes {a.shape} and {b.shape}.")
    if a.size < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return math.nan, math.nan
    result = spearmanr(a, b)
    return float(result.statistic), float(result.pvalue)


def bootstrap_spearman(
    x: Any, y: Any, *, n_resamples: int = 1000, level: float = 0.95, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap interval of Spearman's ``rho`` over resampled (x, y) pairs.

    Resamples in which either variable is constant are dropped. Ranks are recomputed per resample (ties get
    average ranks), vectorised over resamples.
    """
    from scipy.stats import rankdata

    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    n_resamples = check_int("n_resamples", n_resamples, low=10)
    level = check_float("level", level, low=0, high=1, low_open=True, high_open=True)
    idx = np.random.default_rng(check_int("seed", seed, low=0)).integers(0, a.size, (n_resamples, a.size))
    ra, rb = rankdata(a[idx], axis=1), rankdata(b[idx], axis=1)
    ra -= ra.mean(1, keepdims=True)
    rb -= rb.mean(1, keepdims=True)
    denom = np.sqrt((ra**2).sum(1) * (rb**2).sum(1))
    ok = denom > 0
    rho = (ra * rb).sum(1)[ok] / denom[ok]
    if rho.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2
    return float(np.quantile(rho, tail)), float(np.quantile(rho, 1 - tail))


def learnability_correlations(
    records: Sequence[dict[str, Any]],
    features: Sequence[str] = FEATURES,
    *,
    targets: Sequence[str] = TARGETS,
    max_normalized_error: float = 0.8,
    n_resamples: int = 1000,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Spearman correlations of rule features with learned error, one row per (arch, target, feature).

    Args:
        records: Output of :func:`~hf_ext.ca_learnability.harness.learnability_study` (one dict per rule and
            architecture, with the features attached).
        features: Feature keys to correlate (each must be in every record).
        targets: Error columns: ``"normalized_error"`` (error over the majority-class error) and/or
            ``"error"``.
        max_normalized_error: Learning gate; an architecture learned when its mean normalised error is below
            it.
        n_resamples: Bootstrap resamples of the interval.
        seed: Seed of the bootstrap.

    Returns:
        Rows with ``arch``, ``target``, ``feature``, ``rho``, ``p_value``, ``ci_low``, ``ci_high``,
        ``n_rules``, ``mean_normalized_error`` and ``learned`` (the gate). Records whose target is NaN are
        left out.

    Example:
        >>> rows = [{"arch": "cnn", "as": a, "normalized_error": e, "error": e}
        ...         for a, e in [(1, 0.1), (2, 0.3), (3, 0.2), (4, 0.5)]]
        >>> out = learnability_correlations(rows, ["as"], targets=["error"])
        >>> row = out.pop()
        >>> round(row["rho"], 6)
        0.8
    """
    recs: list[dict[str, Any]] = check_sequence("records", list(records), min_length=1)
    feats: list[str] = check_sequence("features", list(features), min_length=1)
    tgts: list[str] = check_sequence("targets", list(targets), min_length=1)
    gate = check_float("max_normalized_error", max_normalized_error, low=0, low_open=True)
    for i, rec in enumerate(recs):
        missing = [k for k in ("arch", *feats, *tgts) if k not in rec]
        if missing:
            raise ValueError(f"`records[{i}]` lacks {missing}; run learnability_study with features=True.")
    out = []
    for arch in dict.fromkeys(r["arch"] for r in recs):
        mine = [r for r in recs if r["arch"] == arch]
        norm = np.array([r.get("normalized_error", math.nan) for r in mine], dtype=np.float64)
        mean_norm = float(np.nanmean(norm)) if np.isfinite(norm).any() else math.nan
        for target in tgts:
            y = np.array([r[target] for r in mine], dtype=np.float64)
            keep = np.isfinite(y)
            for feature in feats:
                x = np.array([r[feature] for r in mine], dtype=np.float64)
                ok = keep & np.isfinite(x)
                rho, p = spearman(x[ok], y[ok])
                low, high = bootstrap_spearman(x[ok], y[ok], n_resamples=n_resamples, seed=seed)
                out.append(
                    {
                        "arch": arch,
                        "target": target,
                        "feature": feature,
                        "rho": rho,
                        "p_value": p,
                        "ci_low": low,
                        "ci_high": high,
                        "n_rules": int(ok.sum()),
                        "mean_normalized_error": mean_norm,
                        "learned": bool(mean_norm < gate),
                    }
                )
    return out
