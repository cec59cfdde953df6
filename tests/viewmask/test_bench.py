"""The benchmark's grid, its quick slice and one setting measured at a tiny budget (the full run is
``hf-ext bench viewmask``)."""

from __future__ import annotations

import math

from hf_ext.testing import requires

pytestmark = requires("diffusers", "metrics")


def test_quick_setting_is_a_slice_of_the_full_grid_with_its_own_sizes():
    from benchmarks.harness import check_slice
    from benchmarks.viewmask import bench

    full = bench.grid()
    check_slice([g for g in full if g["image"] == bench.QUICK_IMAGE], full, method="viewmask")
    sizes = {g["image"]: bench.sizes(g, bench.FULL) for g in full}
    assert (sizes[32].tokens_per_view, sizes[32].num_layers) == (64, 3)
    assert (sizes[16].tokens_per_view, sizes[16].num_layers) == (16, 2)
    assert all(bench.QUICK[k] <= bench.FULL[k] for k in bench.QUICK)


def test_one_setting_at_a_tiny_budget_reports_every_arm():
    from benchmarks.harness import pinned_threads, seeded
    from benchmarks.viewmask import bench

    budget = {
        **bench.QUICK,
        "n_train": 16,
        "n_eval": 4,
        "tokenizer_steps": 2,
        "steps": 2,
        "inference_steps": 2,
    }
    with pinned_threads(1), seeded(0):
        rows, figures, losses = bench._measure(bench.sizes(bench.grid()[1], budget), 0)
    assert [r["system"] for r in rows] == [bench.JOINT, bench.INDEP, bench.LINEAR, bench.COPY, bench.CEILING]
    assert all(r["image"] == 16 and 0 <= r["mirror_iou_90_270"] <= 1 for r in rows)
    assert set(figures) == {r["system"] for r in rows} and all(math.isfinite(v) for v in losses.values())
    notes = bench._notes(rows, figures, 0, setting="16 px")
    assert all(n.startswith("16 px: ") for n in notes)
