"""The benchmark at a toy size, and its quick run as a slice of the full grid."""

from __future__ import annotations

import pytest

from benchmarks.harness import check_slice
from hf_ext.testing import requires

pytestmark = requires("sklearn")

from benchmarks.mvprobe.bench import METHOD, Plan, _plan, _report, grid  # noqa: E402


def test_quick_plan_is_a_smaller_slice_of_the_full_grid():
    quick, full = _plan(quick=True), _plan(quick=False)
    assert set(quick.archs) < set(full.archs) and len(grid()) == len(full.archs)
    assert quick.n_models < full.n_models and quick.seeds < full.seeds and quick.epochs < full.epochs


def test_toy_report_compares_with_the_best_baseline_of_its_zoo(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_EXT_CACHE", str(tmp_path))
    report = _report(Plan(archs=("mlp",), n_models=20, seeds=1, epochs=2, ablations=False), seed=0)
    check_slice(report.settings, grid(), method="mvprobe")
    h = report.headline
    assert h.figure == "per_label_acc" and h.higher_is_better
    bases = {r["system"]: r["per_label_acc"] for r in report.rows if r["is_baseline"]}
    assert set(bases) == {"StatNN", "Flattened LR", "ProbeX", "ProbeX x4"}
    assert h.best_baseline == pytest.approx(max(bases.values()))
    assert {r["system"] for r in report.rows} == {*bases, METHOD}
