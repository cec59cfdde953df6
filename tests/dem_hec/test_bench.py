"""The benchmark's grid and its quick slice (the full run is ``hf-ext bench dem_hec``)."""

from __future__ import annotations

from hf_ext.testing import requires

pytestmark = requires("timm", "metrics")


def test_quick_run_is_the_full_setting_at_a_smaller_budget():
    from benchmarks.dem_hec import bench

    quick, full = bench._tier(True), bench._tier(False)
    assert bench.grid() == [bench.SETTING]
    assert {k: quick[k] for k in bench.SETTING} == {k: full[k] for k in bench.SETTING} == bench.SETTING
    assert {k: quick[k] for k in bench.TRAINING} == {k: full[k] for k in bench.TRAINING}
    assert quick["n_train"] < full["n_train"] and quick["n_test"] < full["n_test"]
    assert quick["seeds"] < full["seeds"] and quick["epochs"] == full["epochs"]
    assert set(quick["corruptions"]) <= set(full["corruptions"])
    assert set(quick["severities"]) <= set(full["severities"])
    what = bench._what(quick, quick=True)
    assert f"(full: 1200 train, 15x5 corruptions, 2 seed(s); {bench.FULL_RUN_CLAIM})" in what
    assert bench.FULL_RUN_CLAIM.startswith("claim shown at full size only")
