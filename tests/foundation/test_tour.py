"""Every tour entry (each method's quick benchmark) runs green under three seeds and measures a slice of its
full run's grid. This is the `make demo` table, run three times: slow, and marked `tour`."""

from __future__ import annotations

import math

import pytest

from benchmarks.harness import check_slice
from hf_ext._registry import methods
from hf_ext.cli import _unmet_extras, bench_module

SEEDS = (0, 1, 2)


@pytest.mark.slow
@pytest.mark.tour
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("method_id", sorted(methods()))
def test_tour_entry_runs_green_on_a_slice_of_the_full_grid(method_id, seed, quick_report):
    info = methods()[method_id]
    if _unmet_extras(info):
        pytest.skip(f"needs the {_unmet_extras(info)} extras")
    report = quick_report(
        method_id, seed
    )  # run_bench: the tour's own call, shared with tests/<id>/test_bench.py
    check_slice(report.settings, bench_module(method_id).grid(), method=method_id)
    assert report.what and report.rows
    head = report.headline
    assert head.verdict in {"ahead", "behind", "level", "no comparison"}
    assert head.comparable or "no comparison at this size" in head.text()
    assert not head.comparable or math.isfinite(head.ratio) or head.best_baseline == 0
