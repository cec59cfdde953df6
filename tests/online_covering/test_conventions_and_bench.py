"""scikit-learn parameter conventions, registry wiring and an end-to-end reduced benchmark sweep."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")


def _algorithms():
    from hf_ext.online_covering import (
        GreedySteinerTree,
        MeyersonFacilityLocation,
        OnlineSetCover,
        ParkingPermit,
        Robustify,
        WithPredictions,
    )

    sc = OnlineSetCover(sets=[[0, 1], [1]], costs=[2.0, 1.0], random_state=3)
    return [
        sc,
        MeyersonFacilityLocation(points=[[0.0, 0.0], [1.0, 1.0]], opening_cost=0.5, random_state=0),
        ParkingPermit(durations=(1, 2), costs=(1.0, 1.5)),
        GreedySteinerTree(points=[[0.0, 0.0], [1.0, 1.0]]),
        WithPredictions(sc, predicted_requests=[1], mode="upfront"),
        Robustify(
            WithPredictions(sc, [1]), OnlineSetCover([[0, 1], [1]], [2.0, 1.0], random_state=4), ratio=1.5
        ),
    ]


@pytest.mark.parametrize("idx", range(6))
def test_clone_is_fresh_and_params_round_trip(idx):
    import warnings

    from sklearn.base import clone

    alg = _algorithms()[idx]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        alg.serve(1 if idx != 2 else 0)
    fresh = clone(alg)
    assert not hasattr(fresh, "history_") or fresh.history_ == []
    assert not any(k.endswith("_") and not k.startswith("_") for k in vars(fresh))
    params = alg.get_params(deep=False)
    again = type(alg)(**params)
    assert again.get_params(deep=False).keys() == params.keys()
    assert fresh.set_params(**params) is fresh


def test_set_params_nested_and_repr_snapshot():
    from hf_ext.online_covering import OnlineSetCover, WithPredictions

    wp = WithPredictions(OnlineSetCover(sets=[[0]], costs=[1.0]), predicted_requests=[0])
    wp.set_params(estimator__random_state=7, mode="upfront")
    assert wp.get_params()["estimator__random_state"] == 7
    assert repr(wp) == (
        "WithPredictions(estimator=OnlineSetCover(costs=[1.0], random_state=7,\n"
        "                                         sets=[[0]]),\n"
        "                mode='upfront', predicted_requests=[0])"
    )


def test_paper_metadata_and_registry():
    import hf_ext
    from hf_ext._registry import get
    from hf_ext.online_covering import Robustify, WithPredictions

    info = get("online_covering")
    assert WithPredictions._paper["id"] == "2507.06032" and Robustify._paper is not None
    assert hf_ext.WithPredictions is WithPredictions
    for name, module in info.public.items():
        import importlib

        assert hasattr(importlib.import_module(module), name)


@pytest.mark.slow
def test_reduced_sweep_over_all_problems_is_fast():
    from benchmarks.online_covering import bench

    problems = tuple(dataclasses.replace(p, quick_reps=1) for p in bench.PROBLEMS)
    start = time.perf_counter()
    report = bench._sweep(problems, quick=True, seed=0)
    seconds = time.perf_counter() - start
    assert seconds < 10, seconds
    assert report.settings == bench.grid()  # --quick runs every problem of the full grid, on fewer instances
    sweep = [r for r in report.rows if r["table"] == "sweep"]
    claim = [r for r in report.rows if r["table"] == "claim"]
    assert len({(r["problem"], r["system"], r["frac"]) for r in sweep}) == len(sweep) == 5 * (4 * 8 + 1)
    assert len({(r["problem"], r["system"]) for r in claim}) == len(claim) == 4 * 8 + 1
    lazy0 = [r for r in sweep if r["system"] == "lazy" and r["frac"] == 0.0 and r["opt"] != "vs MST"]
    assert all(abs(r["cost_over_opt"] - 1.0) < 1e-6 for r in lazy0)
    for row in sweep:  # every cell is compared with the best baseline of that same cell
        same = [r for r in sweep if (r["problem"], r["frac"]) == (row["problem"], row["frac"])]
        best = min((r for r in same if r["is_baseline"]), key=lambda r: r["cost_over_opt"])
        assert row["best_baseline"] == best["system"]
        assert row["vs_best_baseline"] == pytest.approx(row["cost_over_opt"] / best["cost_over_opt"])
    for row in claim:
        key = (row["problem"], row["system"])
        cells = [r["cost_over_opt"] for r in sweep if (r["problem"], r["system"]) == key]
        assert row["robustness"] == max(cells) and row["consistency"] == cells[0]
    set_cover = [r for r in claim if r["problem"] == "set_cover"]
    assert report.headline.method == next(r["robustness"] for r in set_cover if r["system"] == "robust")
    assert report.headline.best_baseline == min(r["robustness"] for r in set_cover if r["is_baseline"])
    assert any(n.startswith("Consistency") for n in report.notes)
    assert any(n.startswith("Robust <= 1.05x plain online") for n in report.notes)
    assert any("Robustify switched in" in n for n in report.notes)
    assert np.isfinite(report.headline.method)
