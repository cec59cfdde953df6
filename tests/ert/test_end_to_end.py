"""End to end: split conformal on load_diabetes, audited by the Metric (batches of 64) and the estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")


def _split_conformal():
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression

    x, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(0)
    idx = rng.permutation(y.size)
    fit, cal, test = idx[:150], idx[150:250], idx[250:]
    model = LinearRegression().fit(x[fit], y[fit])
    scores = np.abs(y[cal] - model.predict(x[cal]))
    q = np.quantile(scores, math.ceil((cal.size + 1) * 0.9) / cal.size, method="higher")
    pred = model.predict(x[test])
    y_pis = np.stack([pred - q, pred + q], axis=1)[:, :, None]  # MAPIE-style (n, 2, n_alpha)
    return x[test], y[test], y_pis


def test_metric_in_batches_and_auditor_on_split_conformal():
    import torch
    from sklearn.linear_model import LogisticRegression

    from hf_ext.estimators import CoverageAuditor
    from hf_ext.metrics import ExcessRiskTargetCoverage

    x, y, y_pis = _split_conformal()
    metric = ExcessRiskTargetCoverage(alpha=0.1, n_splits=3, classifier=LogisticRegression())
    for start in range(0, y.size, 64):
        sl = slice(start, start + 64)
        metric.update(torch.tensor(x[sl]), y=torch.tensor(y[sl]), intervals=torch.tensor(y_pis[sl]))
    out = metric.compute()
    assert all(torch.isfinite(v).all() for v in out.values())

    from hf_ext.ert.inputs import coverage_indicator

    covered = coverage_indicator(y, intervals=y_pis).covered
    assert 0.8 < covered.mean() < 0.97
    auditor = CoverageAuditor(classifier=LogisticRegression(), n_splits=3).fit(x[:100], covered[:100])
    assert np.isfinite(auditor.score(x[100:], covered[100:]))
    assert set(auditor.cross_fit_ert(x, covered)) >= {"l1", "kl_under", "fold_values"}


@pytest.mark.slow
def test_bench_rows_notes_and_plots_tiny(tmp_path):
    from dataclasses import replace

    from benchmarks.ert import bench
    from benchmarks.ert.config import BenchConfig

    cfg = replace(
        BenchConfig.quick(),
        validity_ns=(300,),
        r_validity=6,
        r_validity_power=3,
        conformal_ns=(400,),
        r_conformal=4,
        ns=(600,),
        shapes=("step", "localized"),
        r_null=3,
        r_alt=3,
        n_jobs=1,
    )
    rows = (
        bench._validity_rows(cfg, seed=0)
        + bench._conformal_rows(cfg, seed=0)
        + bench._power_rows(cfg, seed=0)
    )
    systems = {(r["part"], r["system"], r["shape"]) for r in rows}
    assert ("power", "ERT-L1", "step") in systems and ("power", "CovGap", "none") in systems
    assert ("validity", "ERT-L1 held-out test", "none / localized") in systems
    assert ("validity", "ERT-L1 cross-fit z-test", "none / localized") in systems
    assert ("conformal", "ERT-L1 held-out test", "split conformal") in systems
    assert ("conformal", "ERT-L1 held-out test (null p = tau)", "split conformal") in systems
    step = {r["system"]: r for r in rows if r["shape"] == "step"}
    # a 0.105 L1 shift is obvious at n=600, also to the held-out test that fits on half of the rows
    assert step["ERT-L1"]["power"] == pytest.approx(1.0)
    assert step["ERT-L1 held-out test"]["power"] == pytest.approx(1.0)
    report = bench._report(rows, cfg, quick=True, seconds=1.0)
    assert report.headline.figure == "power"
    parts = {"validity", "conformal", "power"}
    assert report.settings == cfg.settings() and {s["part"] for s in report.settings} == parts
    assert any(line.startswith("n=600: power(ERT-L1)") for line in report.notes)
    assert any(line.startswith("n=300: held-out test FPR") for line in report.notes)
    assert any(line.startswith("split conformal n=400: held-out test rejects") for line in report.notes)
    files = bench.plot(report, tmp_path)
    assert {"validity", "power"} == set(files) and all((tmp_path / f"ert_{k}.png").exists() for k in files)


def test_quick_settings_are_a_slice_of_the_full_grid():
    from benchmarks.ert import bench
    from benchmarks.ert.config import BenchConfig
    from benchmarks.harness import check_slice

    grid = bench.grid()
    assert {s["part"] for s in grid} == {"validity", "conformal", "power", "estimate", "digits"}
    assert len([s for s in grid if s["part"] == "power"]) == 10  # 5 shapes x 2 n
    quick = BenchConfig.quick()
    check_slice(quick.settings(), grid, method="ert")
    assert quick.r_null >= 19  # the fewest nulls whose Monte-Carlo threshold has size <= 0.05


def test_rate_ci_is_the_wilson_interval():
    from benchmarks.ert.stats import rate_ci

    lo, hi = rate_ci(5, 100)
    assert lo == pytest.approx(0.0215, abs=1e-4) and hi == pytest.approx(0.1118, abs=1e-4)


def test_null_threshold_has_exact_monte_carlo_size():
    from benchmarks.ert.stats import null_threshold

    rng = np.random.default_rng(0)
    hits = []
    for _ in range(4000):
        draws = rng.random(61)
        hits.append(draws[60] > null_threshold(draws[:60], 0.05))
    assert np.mean(hits) == pytest.approx(3 / 61, abs=0.012)  # 1 - 58/61 <= 0.05


def test_exact_size_of_the_held_out_test():
    from benchmarks.ert.stats import exact_size

    # 20 rows above tau = 0.9: P(W >= 20) = 0.9^20 <= 0.2 < P(W >= 19), so the size at 0.2 is 0.9^20
    assert exact_size(20, 0, 0.9, 0.2) == pytest.approx(0.9**20, abs=1e-12)
    assert exact_size(20, 0, 0.9, 0.05) == 0.0  # no rejection region below 0.9^20
    for n_above, n_below in ((125, 125), (200, 50), (2500, 2500)):
        assert 0.03 < exact_size(n_above, n_below, 0.9, 0.05) <= 0.05
