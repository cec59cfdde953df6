"""The benchmark's tour entry end to end, and its row helpers."""

from __future__ import annotations

import math

import numpy as np

from hf_ext.testing import requires

pytestmark = requires("sklearn")

from hf_ext.ca_learnability._bench_tables import cv_r2  # noqa: E402
from hf_ext.ca_learnability.bench import METHOD, tour  # noqa: E402


def test_cv_r2_of_an_exact_linear_law() -> None:
    X = np.linspace(0, 1, 20)[:, None]
    assert cv_r2(X, 3 * X[:, 0] + 1, seed=0) > 0.95
    assert math.isnan(cv_r2(X[:3], np.ones(3), seed=0))


def test_tour_report() -> None:
    report = tour(seed=0)
    h = report.headline
    assert h.figure == "abs_rho" and h.higher_is_better
    assert h.best_baseline_system in {"AS (avg sensitivity)", "W=0 (output balance)"}
    systems = {r["system"] for r in report.rows}
    assert {METHOD, "AS only", "degree profile (W<=2, W>=4)", "train cnn", "spectrum k=1"} <= systems
    spear = [r for r in report.rows if r.get("table") == "spearman"]
    assert all(-1 <= r["rho"] <= 1 and r["ci_low"] <= r["ci_high"] for r in spear)
    assert report.config["n_rules"] == 8 and report.notes
    assert report.to_json(method="ca_learnability", quick=True, seed=0)["headline"]["figure"] == "abs_rho"
