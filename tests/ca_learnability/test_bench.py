"""The benchmark's quick run end to end, its slice of the full grid, and its row helpers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

from benchmarks.ca_learnability import bench  # noqa: E402
from benchmarks.ca_learnability.bench import HEADLINE_ARCH, METHOD, Plan, _plan, grid  # noqa: E402
from benchmarks.ca_learnability.tables import cv_r2  # noqa: E402
from benchmarks.harness import check_slice  # noqa: E402


def test_cv_r2_of_an_exact_linear_law() -> None:
    X = np.linspace(0, 1, 20)[:, None]
    assert cv_r2(X, 3 * X[:, 0] + 1, seed=0) > 0.95
    assert math.isnan(cv_r2(X[:3], np.ones(3), seed=0))


@pytest.mark.slow
def test_quick_report(quick_report) -> None:
    report = quick_report("ca_learnability")
    check_slice(report.settings, grid(), method="ca_learnability")
    h = report.headline
    assert h.figure == "abs_rho" and h.higher_is_better
    assert h.best_baseline_system in {"AS (avg sensitivity)", "W=0 (output balance)"}
    systems = {r["system"] for r in report.rows}
    assert {METHOD, "AS only", "degree profile (W<=2, W>=4)", "train cnn", "spectrum k=1"} <= systems
    spear = [r for r in report.rows if r.get("table") == "spearman"]
    assert all(-1 <= r["rho"] <= 1 and r["ci_low"] <= r["ci_high"] for r in spear)
    assert report.config["n_rules"] == 8 and report.notes
    assert report.to_json(method="ca_learnability", quick=True, seed=0)["headline"]["figure"] == "abs_rho"


def test_quick_plan_is_a_smaller_slice_with_the_headline_arch() -> None:
    quick, full = _plan(quick=True), _plan(quick=False)
    assert HEADLINE_ARCH in quick.archs and set(quick.archs) < set(full.archs)
    assert quick.n_rules < full.n_rules and len(grid()) == len(full.archs)
    assert bench._what(quick).endswith(
        f"(full: 30 rules, mlp_patch, vit_window, mlp_global; {bench.FULL_RUN_CLAIM})"
    )
    assert bench._what(full) == "30 Life-like rules x cnn, mlp_patch, vit_window, mlp_global, k=1"


def test_constant_errors_give_no_comparison(monkeypatch) -> None:
    # every rule learned equally well: no rank correlation is defined, and the run must still report
    def constant(rule, arch, budget):
        return {"rule": rule.name, "arch": arch, "error": 0.0, "majority_error": 0.2, "normalized_error": 0.0,
                "train_loss": 0.0, "train_seconds": 0.0}  # fmt: skip

    monkeypatch.setattr(bench, "train_and_evaluate", constant)
    report = bench._report(Plan(n_rules=4, archs=(HEADLINE_ARCH,), train_steps=1, k2_cost=False), seed=0)
    assert report.headline.verdict == "no comparison"
    assert "no comparison at this size" in " ".join(report.notes)
