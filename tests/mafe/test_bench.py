"""Smoke test of the MAFE benchmark (the quick run, also the tour: the Loan slice) and its figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_ext.testing import requires

pytestmark = [requires("pettingzoo"), pytest.mark.slow]


def test_grid_names_every_environment():
    from benchmarks.mafe.bench import grid

    assert [g["env"] for g in grid()] == ["loan", "healthcare", "education"]


def test_quick_runs_reports_and_plots(quick_report, tmp_path):
    from benchmarks.harness import check_slice
    from benchmarks.mafe.bench import grid, plot

    report = quick_report("mafe")
    check_slice(report.settings, grid(), method="mafe")
    assert report.settings == [{"env": "loan", "max_cycles": 100}]
    systems = {r["system"] for r in report.rows}
    assert {"approve-all", "approve-none", "random", "greedy, no intervention"} <= systems
    assert {"F-MACEM beta=0", "F-MACEM beta=5", "independent CEM beta=5"} <= systems
    assert {"best constant", "F-MACEM beta=5, warm start"} <= systems
    warm = next(r for r in report.rows if r["system"] == "F-MACEM beta=5, warm start")
    assert report.headline.method == warm["fair_return"]
    assert any("best constant policy beyond the seed spread" in n for n in report.notes)
    assert report.headline.figure == "fair_return" and report.headline.higher_is_better
    assert any("agent-steps/s" in n for n in report.notes)
    assert any("trivial baseline" in n for n in report.notes)
    json.dumps(report.to_json(method="mafe", quick=True, seed=0))
    pytest.importorskip("matplotlib")
    files = plot(report, tmp_path)
    assert all(Path(p).is_file() for p in files.values()) and set(files) == {"frontier", "gap_over_time"}
