"""The benchmark helpers (budget grid, budget-to-5%-error search) and a tiny end-to-end benchmark run."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.sysrs.figures import budget_grid, budget_to_error
from hf_ext.sysrs.simulation import simulate
from hf_ext.testing import requires


def test_budget_grid_is_geometric_and_ends_at_full_evaluation() -> None:
    grid = budget_grid(10, 3000, 1.5)
    assert grid[0] == 11 and grid[-1] == 30_000
    assert all(a < b for a, b in zip(grid, grid[1:]))
    assert grid[1] == 17 and grid[2] == 25  # ceil(11 * 1.5), ceil(11 * 2.25)


@pytest.mark.parametrize("algorithm", ["sr", "sysrs", "uniform"])
def test_budget_to_error_equals_exhaustive_search(algorithm: str) -> None:
    rng = np.random.default_rng(0)
    S = (rng.random((4, 60)) < np.array([[0.4], [0.5], [0.6], [0.8]])).astype(float)
    grid = budget_grid(4, 60, 1.5)
    found = budget_to_error(S, algorithm, grid, reps=60, seed=0)
    exhaustive = next(b for b in grid if simulate(S, b, algorithm, reps=60, seed=0)["error_rate"] <= 0.05)
    assert found == exhaustive


def test_budget_to_error_reports_not_reached() -> None:
    S = np.array([[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 0.0, 0.0]])
    S[2, 3] = 0.5  # model 2 best by half a point; the grid stops before full evaluation
    assert budget_to_error(S, "sr", [4, 6], reps=40, seed=0) is None


@pytest.mark.slow
@requires("sklearn")
def test_quick_run_is_a_slice_and_reports_targets(quick_report) -> None:
    from benchmarks.harness import check_slice
    from benchmarks.sysrs import bench

    report = quick_report("sysrs")
    check_slice(report.settings, bench.grid(), method="sysrs")
    systems = {r["system"] for r in report.rows}
    baselines = {"uniform", "uniform-synced", "SR", "SH", "SH-synced"}
    assert systems == baselines | {"SySRs", "SySRs (SR schedule)"}  # no search in quick
    assert len([r for r in report.rows if r["table"] == "regime grid"]) == 8 * 7  # rho x budget at K = 5
    assert any(n.startswith("Regime grid: SySRs has the lowest mean error") for n in report.notes)
    for scope, runs in (("regime grid", 8 * 100), ("real data", 4 * 100)):
        paired = {r["system"]: r for r in report.rows if r["table"] == f"paired {scope}"}
        assert set(paired) == baselines | {"SySRs (SR schedule)"}
        assert all(
            r["runs"] == runs and r["ci_low"] <= r["mean_diff"] <= r["ci_high"] for r in paired.values()
        )
        assert any(n.startswith(f"{scope.capitalize()}: SySRs below every baseline") for n in report.notes)
    assert report.headline.figure == "error_rate" and report.headline.best_baseline_system != "SySRs"
    assert all(r["max_spent"] <= r["budget"] for r in report.rows if r["table"] == "fixed budget")
    means = [r for r in report.rows if r["table"] == "mean over real data"]
    assert len(means) == 6 and all(r["settings"] == 4 for r in means)
    assert {r["matrix"] for r in report.rows if r["table"] == "fixed confidence"} == {"breast_cancer", "wine"}
    assert any(n.startswith("Spend <= budget in every run: MET") for n in report.notes)


@pytest.mark.slow
def test_correlated_matrices_get_the_target_line() -> None:
    from benchmarks.sysrs import bench

    irt = next(s for s in bench.SETTINGS if s.name == "irt_s3")
    report = bench._report((irt,), reps=20, factor=2.0, seed=0)
    assert any("err(SySRs) <= 0.5 x err(SR) on irt_s3 @ 2000" in n for n in report.notes)


def test_search_table_gets_its_target_line() -> None:
    from benchmarks.sysrs import bench

    rows = [
        {"system": "GridSearchCV", "speedup": 1.0},
        {
            "system": "SySRsSearchCV(sysrs)",
            "speedup": 4.0,
            "same_share": 0.9,
            "same_pick": "9/10",
            "fit_share": 0.3,
        },
    ]
    (line,) = bench._search_notes(rows)
    assert line.startswith("SySRsSearchCV: >= 3x less wall time") and "MET" in line
    rows[1]["same_share"] = 0.8
    assert "MISSED" in bench._search_notes(rows)[0]


def test_grid_is_cheap_and_covers_every_matrix() -> None:
    from benchmarks.sysrs import bench

    grid = bench.grid()
    assert {g["matrix"] for g in grid if "matrix" in g} == {s.name for s in bench.SETTINGS}
    assert sum(g["table"] == "regime grid" for g in grid) == 4 * 2 * 3
    assert {"table": "fixed budget", "matrix": "wine", "budget": 356} in grid
    assert sum(g["table"] == "fixed confidence" for g in grid) == len(bench.SETTINGS)


def test_coupled_matrix_correlation_and_accuracies() -> None:
    from benchmarks.sysrs.matrices import coupled_matrix, mean_pairwise_correlation

    S = coupled_matrix([0.6] * 4, 20000, correlation=0.7, seed=1)
    assert abs(mean_pairwise_correlation(S) - 0.7) < 0.03 and np.allclose(S.mean(1), 0.6, atol=0.02)
    assert mean_pairwise_correlation(coupled_matrix([0.6] * 4, 20000, correlation=0.0)) < 0.03
    nested = coupled_matrix([0.5, 0.7], 1000, correlation=1.0)
    assert (nested[0] <= nested[1]).all()
    with pytest.raises(ValueError, match=r"`correlation` must be a finite float in \[0, 1\], got 1.5"):
        coupled_matrix([0.5], correlation=1.5)
    with pytest.raises(ValueError, match=r"`accuracies\[1\]` must be a finite float in \[0, 1\]"):
        coupled_matrix([0.5, 2.0])


@pytest.mark.slow
def test_plot_writes_the_sweep_figure(tmp_path) -> None:  # noqa: ANN001
    from benchmarks.sysrs import bench

    settings = tuple(s for s in bench.SETTINGS if s.kind == "sweep")[:2]
    report = bench._report(settings, reps=20, factor=2.0, seed=0)
    files = bench.plot(report, tmp_path)
    assert set(files) == {"sweep"} and (tmp_path / "sysrs_sweep.png").stat().st_size > 0
