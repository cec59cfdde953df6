"""The benchmark end to end at a toy size (the real sizes run in ``hf-ext bench seglens``)."""

from __future__ import annotations

import math

import pytest

from benchmarks.harness import Headline, check_slice
from benchmarks.seglens.bench import (
    INTENSITY,
    METHOD,
    RANDOM,
    SETTING,
    Plan,
    _notes,
    _plan,
    _report,
    _rows,
    _settings,
    grid,
)

pytest.importorskip("scipy")


@pytest.mark.slow
def test_toy_report_has_every_system_and_a_headline():
    report = _report(Plan(64, 8, 16, 5, 0, 20, 1, 1, 2, (0,)))
    systems = [r["system"] for r in report.rows]
    assert METHOD in systems and "no intervention" in systems and "AdaBN (unlabelled ssa cal.)" in systems
    h = report.headline
    assert h.figure == "recovered" and h.higher_is_better
    assert not h.comparable or h.best_baseline_system in {
        r["system"] for r in report.rows if r["setting"] == SETTING
    }
    none = next(r for r in report.rows if r["system"] == "no intervention")
    assert none["adult dDice"] == 0 and (none["recovered"] == 0 or none["failures"] == 0)
    assert report.to_json(method="seglens", quick=True, seed=0)["headline"]["figure"] == "recovered"
    assert report.settings == _settings(Plan(64, 8, 16, 5, 0, 20, 1, 1, 2, (0,)))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_quick_plan_is_a_smaller_slice_of_the_full_grid(seed):
    quick, full = _plan(quick=True, seed=seed), _plan(quick=False, seed=seed)
    check_slice(_settings(quick), grid(), method="seglens")
    assert _settings(full) == grid() and len(grid()) == 3 and full.archs == ("unet", "segformer")
    assert quick.n < full.n and quick.unet_steps < full.unet_steps and len(quick.seeds) < len(full.seeds)


def _run(failures: int, recovered: float) -> dict:
    fig = {"ssa Dice": 0.7, "adult dDice": 0.0, "latents": 4, "ms/img": 1.0}
    fail = {"recovered": recovered, "fail Dice before": 0.4, "fail Dice after": 0.4}
    nan = dict.fromkeys(fail, math.nan)
    return {
        "failures": failures,
        "systems": {
            name: fig | (fail if failures else nan) for name in ("no intervention", METHOD, RANDOM, INTENSITY)
        },
        "sae": {
            "fvu": 0.1,
            "l0": 4.0,
            "dead_fraction": 0.0,
            "spliced_ratio": 1.0,
            "fit_s": 1.0,
            "train_s": 1.0,
        },
    }


def test_a_run_without_failures_has_no_comparison_and_does_not_raise():
    rows = _rows([_run(0, math.nan)], "unet")
    h = Headline.from_rows(
        rows, "recovered", higher_is_better=True, method_system=METHOD, where={"setting": SETTING}
    )
    assert h.verdict == "no comparison" and "no comparison" in h.text()
    assert any("nothing to recover" in n for n in _notes(rows, "unet"))


def test_seeds_without_failures_do_not_poison_the_pooled_share():
    rows = _rows([_run(0, math.nan), _run(10, 0.3)], "unet")
    mine = next(r for r in rows if r["system"] == METHOD)
    assert mine["failures"] == 10 and mine["recovered"] == pytest.approx(0.3)


def test_notes_judge_each_target_against_the_random_controls_and_the_best_baseline():
    run = _run(40, 0.6)
    run["systems"][RANDOM]["recovered"] = 0.25
    run["systems"][INTENSITY]["recovered"] = 0.7
    notes = _notes(_rows([run], "unet"), "unet")
    assert any("recovers >= half" in n and "MET" in n for n in notes)
    assert any(">= 2x the random" in n and "MET" in n and "0.25" in n for n in notes)
    assert any("best same-setting baseline: MISSED" in n and "intensity" in n for n in notes)
