"""Smoke test of the MAFE benchmark (the tour: quick Loan only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hf_ext.testing import requires

pytestmark = [requires("pettingzoo", "metrics"), pytest.mark.slow]


def test_tour_runs_and_reports(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("HF_EXT_BENCH_DIR", str(tmp_path))
    from hf_ext.marl.mafe.bench import tour

    report = tour(seed=0)
    systems = {r["system"] for r in report.rows}
    assert {"random", "greedy, no intervention", "F-MACEM beta=0", "F-MACEM beta=5"} <= systems
    assert Path(report.files["frontier"]).is_file()
    assert report.headline.figure == "dp_gap_mean"
    assert any("steps/s" in n for n in report.notes)
    json.dumps(report.to_json(method="mafe", quick=True, seed=0))
