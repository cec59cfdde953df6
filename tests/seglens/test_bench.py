"""The benchmark end to end at a toy size (the real sizes run in ``hf-ext bench seglens``)."""

from __future__ import annotations

import pytest

from hf_ext.seglens.bench import METHOD, Plan, _report

pytest.importorskip("scipy")


def test_toy_report_has_every_system_and_a_headline():
    report = _report(Plan(64, 8, 16, 5, 0, 20, 1, 1, 2, (0,)))
    systems = [r["system"] for r in report.rows]
    assert METHOD in systems and "no intervention" in systems and "AdaBN (unlabelled ssa cal.)" in systems
    h = report.headline
    assert h.figure == "recovered" and h.higher_is_better
    assert h.best_baseline_system in {
        r["system"] for r in report.rows if r["setting"] == "frozen weights, latent edit"
    }
    none = next(r for r in report.rows if r["system"] == "no intervention")
    assert none["adult dDice"] == 0 and (none["recovered"] == 0 or none["failures"] == 0)
    assert report.to_json(method="seglens", quick=True, seed=0)["headline"]["figure"] == "recovered"
