"""The benchmark's quick run (also the tour) end to end: bits L = 8, aliased, Markov vs PD-GRU, 400 steps."""

from __future__ import annotations

import pytest

from benchmarks.harness import check_slice
from benchmarks.path_gfn.bench import METHOD, grid


def test_grid_is_every_compared_setting():
    settings = grid()
    assert {"task": "bits L=8", "features": "aliased", "loss": "TB"} in settings
    assert {(g["task"], g["loss"]) for g in settings if g["task"].startswith("grid")} == {
        ("grid 8x8", loss) for loss in ("TB", "DB", "SubTB")
    }
    assert len(settings) == len({tuple(sorted(g.items())) for g in settings})


@pytest.mark.slow
def test_quick_report(quick_report):
    report = quick_report("path_gfn")
    check_slice(report.settings, grid(), method="path_gfn")
    h = report.headline
    assert h.figure == "L1" and not h.higher_is_better
    assert h.best_baseline_system in {"Markov MLP", "uniform policy (untrained)"}
    systems = {r["system"] for r in report.rows}
    assert {METHOD, "Markov MLP", "uniform policy (untrained)"} <= systems
    assert all(0 <= r["L1"] <= 2 for r in report.rows)
    gru = next(r for r in report.rows if r["system"] == METHOD)
    assert abs(gru["true logZ"] - 2.814) < 1e-3 and gru["steps"] == 400 and gru["params"] > 0
    assert (
        report.notes and report.to_json(method="path_gfn", quick=True, seed=0)["headline"]["figure"] == "L1"
    )
