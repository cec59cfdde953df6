"""WithPredictions and prediction_error: consistency, the disjoint case, pre-buy accounting, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")


def _generators():
    from benchmarks.online_covering import instances

    return {
        "set_cover": (instances.random_set_cover, "exact"),
        "facility_location": (
            lambda rng: instances.clustered_facility_location(rng, n_points=30, n_requests=12),
            "exact",
        ),
        "parking_permit": (instances.bursty_parking, "exact"),
        "steiner_graph": (lambda rng: instances.geometric_graph_steiner(rng, n=20, n_terminals=6), "exact"),
        "steiner_euclidean": (
            lambda rng: instances.euclidean_steiner(rng, n_points=40, n_terminals=12),
            "approx",
        ),
    }


def _serve(alg, stream):
    for r in stream:
        alg.serve(r)
    return alg


def test_prediction_error_example_and_multisets():
    from hf_ext.online_covering import prediction_error

    assert prediction_error([1, 2, 2, 3], [2, 3, 3, 4]) == 4
    assert prediction_error([1, 1], [1]) == 1
    assert prediction_error([], []) == 0


@pytest.mark.parametrize("problem", list(_generators()))
@pytest.mark.parametrize("mode", ["upfront", "lazy"])
def test_perfect_predictions_give_ratio_one(problem, mode):
    from hf_ext.online_covering import WithPredictions

    gen, method = _generators()[problem]
    inst = gen(np.random.default_rng(3))
    opt = inst.make(0).reset().offline(inst.stream, method=method)
    alg = _serve(WithPredictions(inst.make(0), list(inst.stream), mode=mode, offline=method), inst.stream)
    assert alg.cost_ / opt.value == pytest.approx(1.0, abs=1e-9)
    assert alg.cost_breakdown_["online"] == 0.0
    assert alg.finalize().eta_ == 0


@pytest.mark.parametrize("problem", list(_generators()))
def test_lazy_with_disjoint_predictions_buys_what_plain_buys(problem):
    from benchmarks.online_covering import instances
    from hf_ext.online_covering import WithPredictions

    gen, method = _generators()[problem]
    rng = np.random.default_rng(5)
    inst = gen(rng)
    preds = instances.perturb_predictions(inst.stream, inst.universe, 1.0, rng)
    assert not set(preds) & set(inst.stream)
    plain = _serve(inst.make(7), inst.stream)
    lazy = _serve(WithPredictions(inst.make(7), preds, mode="lazy", offline=method), inst.stream)
    assert lazy.history_ == plain.history_
    assert lazy.cost_ == plain.cost_
    assert lazy.finalize().eta_ == 2 * len(inst.stream)


def test_upfront_prebuy_equals_prediction_cost():
    from benchmarks.online_covering import instances
    from hf_ext.online_covering import WithPredictions

    rng = np.random.default_rng(2)
    inst = instances.random_set_cover(rng)
    preds = instances.perturb_predictions(inst.stream, inst.universe, 0.5, rng)
    alg = WithPredictions(inst.make(0), preds, mode="upfront").reset()
    assert alg.cost_breakdown_["prebuy"] == pytest.approx(alg.prediction_cost_)
    assert alg.prediction_cost_ == pytest.approx(inst.make(0).reset().offline(preds).value)
    _serve(alg, inst.stream)
    assert alg.cost_breakdown_["prebuy"] == pytest.approx(alg.prediction_cost_)
    assert alg.cost_breakdown_["lazy"] == 0.0


def test_facility_location_duplicates_connect_every_occurrence():
    from hf_ext.online_covering import MeyersonFacilityLocation, WithPredictions

    pts = np.array([[0.0, 0.0], [1.0, 0.0], [10.0, 0.0]])
    stream = [1, 1, 1]
    alg = _serve(WithPredictions(MeyersonFacilityLocation(pts, opening_cost=5.0), stream), stream)
    opt = alg.online_.offline(stream)
    assert opt.value == pytest.approx(5.0) and alg.cost_ == pytest.approx(5.0)  # open at 1, connect at 0 cost
    alg = WithPredictions(MeyersonFacilityLocation(pts, opening_cost=0.5), [0, 0])
    alg.reset()
    assert alg.prediction_cost_ == pytest.approx(0.5)


def test_lazy_steiner_follows_predicted_tree():
    from hf_ext.online_covering import GreedySteinerTree, WithPredictions

    # square 0-1-2-3-0 with a cheap hub 4 in the middle: the predicted tree is the star through 4
    w = np.zeros((5, 5))
    for u, v, c in [
        (0, 1, 3.0),
        (1, 2, 3.0),
        (2, 3, 3.0),
        (0, 3, 3.0),
        (0, 4, 1.6),
        (1, 4, 1.6),
        (2, 4, 1.6),
        (3, 4, 1.6),
    ]:
        w[u, v] = w[v, u] = c
    alg = WithPredictions(GreedySteinerTree(graph=w), [0, 1, 2, 3], mode="lazy")
    assert alg.serve(0) == []
    assert alg.serve(2) == [(2, 4), (0, 4)]
    assert alg.serve(1) == [(1, 4)]
    assert alg.cost_ == pytest.approx(3 * 1.6)


def test_out_of_universe_prediction_warns_and_counts_as_spurious():
    from hf_ext.online_covering import OnlineSetCover, WithPredictions

    alg = WithPredictions(OnlineSetCover([[0, 1], [2]], [1.0, 1.0]), predicted_requests=[0, 99])
    with pytest.warns(UserWarning, match=r"1 predicted request\(s\) lie outside the instance.*99"):
        alg.serve(0)
    assert alg.prediction_cost_ == 1.0
    assert alg.finalize().eta_ == 1


def test_pluggable_error():
    from hf_ext.online_covering import OnlineSetCover, WithPredictions

    alg = WithPredictions(OnlineSetCover([[0, 1]], [1.0]), [1], error=lambda r, p: len(r) * 10)
    alg.serve(0)
    assert alg.finalize().eta_ == 10


def test_bad_mode_offline_and_serve_after_finalize():
    from hf_ext.online_covering import OnlineSetCover, WithPredictions

    base = OnlineSetCover([[0]], [1.0])
    with pytest.raises(ValueError, match=r"`mode` must be one of 'upfront', 'lazy', got 'eager'"):
        WithPredictions(base, [0], mode="eager").serve(0)
    with pytest.raises(ValueError, match=r"`offline` must be one of 'exact', 'approx', got 'best'. Or"):
        WithPredictions(base, [0], offline="best").serve(0)
    with pytest.raises(TypeError, match=r"`estimator` must be an OnlineCoveringAlgorithm"):
        WithPredictions(object(), [0]).serve(0)
    alg = WithPredictions(base, [0])
    alg.serve(0)
    alg.finalize()
    with pytest.raises(RuntimeError, match=r"`serve` is not allowed after `finalize`"):
        alg.serve(0)


def test_exact_over_cap_suggests_approx():
    from hf_ext.online_covering import OnlineSetCover, WithPredictions

    sets = [[i] for i in range(201)]
    with pytest.raises(ValueError, match=r'offline="approx"'):
        WithPredictions(OnlineSetCover(sets, [1.0] * 201), [0, 1]).reset()
    alg = WithPredictions(OnlineSetCover(sets, [1.0] * 201), [0, 1], offline="approx").reset()
    assert alg.prediction_cost_ == 2.0


def test_perturb_predictions_eta_and_bad_frac():
    from benchmarks.online_covering import instances
    from hf_ext.online_covering import prediction_error

    rng = np.random.default_rng(0)
    inst = instances.random_set_cover(rng)
    preds = instances.perturb_predictions(inst.stream, inst.universe, 0.5, rng)
    assert prediction_error(inst.stream, preds) == 2 * round(0.5 * len(inst.stream))
    with pytest.raises(ValueError, match=r"`frac` must be a finite float in \[0, 1\], got 1.5"):
        instances.perturb_predictions(inst.stream, inst.universe, 1.5, rng)


def test_lazy_facility_location_skips_a_predicted_site_no_nearer_than_an_open_one():
    from hf_ext.online_covering import MeyersonFacilityLocation

    pts = [[0.0, 0.0], [1.0, 0.0], [5.0, 0.0], [0.5, 0.0]]
    alg = MeyersonFacilityLocation(pts, opening_cost=2.0).reset()
    assert alg.lazy_items(1, [2]) == [2]  # nothing open yet: the predicted site serves the request
    alg.buy([0])
    assert alg.lazy_items(1, [2]) == []  # open site 0 is at 1.0, the predicted site 2 at 4.0
    assert alg.lazy_items(1, [2, 3]) == [3]  # site 3 is at 0.5, nearer than site 0
    assert alg.lazy_items(0, [3]) == []  # the request sits on an open facility
