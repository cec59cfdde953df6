"""Robustify: feasibility after every request, the hysteresis bound, consistency, robustness, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")


def _robust(inst, preds, budget, ratio=2.0):
    from hf_ext.online_covering import Robustify, WithPredictions

    lazy = WithPredictions(inst.make(1), preds, mode="lazy", offline="exact")
    return Robustify(lazy, inst.make(2), ratio=ratio, initial_budget=budget)


@pytest.mark.parametrize("gen_name", ["random_set_cover", "clustered_small", "bursty_parking", "graph_small"])
def test_every_served_request_stays_covered(gen_name):
    from benchmarks.online_covering import instances

    gens = {
        "random_set_cover": instances.random_set_cover,
        "clustered_small": lambda rng: instances.clustered_facility_location(rng, n_points=25, n_requests=12),
        "bursty_parking": instances.bursty_parking,
        "graph_small": lambda rng: instances.geometric_graph_steiner(rng, n=20, n_terminals=6),
    }
    rng = np.random.default_rng(0)
    inst = gens[gen_name](rng)
    rob = _robust(inst, instances.perturb_predictions(inst.stream, inst.universe, 0.5, rng), "min_item")
    for i, r in enumerate(inst.stream):
        rob.serve(r)
        assert all(rob.covers(q) for q in inst.stream[: i + 1])
        active = (rob.primary_, rob.fallback_)[rob.active_]
        assert set(active.solution_) <= set(rob.solution_)


def test_bound_holds_on_50_random_instances():
    from benchmarks.online_covering import instances

    rng = np.random.default_rng(42)
    worst = 0.0
    for i in range(50):
        gen = (instances.random_set_cover, instances.bursty_parking, instances.adversarial_set_cover)[i % 3]
        inst = gen(rng)
        preds = inst.predict(float(rng.choice([0.0, 0.25, 0.5, 1.0])), rng)
        ratio = float(rng.choice([1.05, 1.5, 2.0, 3.0]))
        rob = _robust(inst, preds, ("min_item", "prediction")[i % 2], ratio=ratio)
        for r in inst.stream:
            rob.serve(r)
        best = min(rob.primary_.cost_, rob.fallback_.cost_)
        assert rob.bound() == pytest.approx((1 + ratio) * best + rob.budget0_, rel=1e-8)
        assert rob.cost_ <= rob.bound()
        worst = max(worst, rob.cost_ / min(rob.primary_.cost_, rob.fallback_.cost_))
    assert worst >= 1.0


@pytest.mark.parametrize("gen_name", ["random_set_cover", "bursty_parking"])
def test_perfect_predictions_match_lazy_item_for_item(gen_name):
    from benchmarks.online_covering import instances
    from hf_ext.online_covering import WithPredictions

    inst = getattr(instances, gen_name)(np.random.default_rng(9))
    rob = _robust(inst, list(inst.stream), "prediction")
    lazy = WithPredictions(inst.make(1), list(inst.stream), mode="lazy")
    for r in inst.stream:
        assert rob.serve(r) == lazy.serve(r)
    assert rob.solution_ == lazy.solution_ and rob.phase_ == 0
    assert rob.cost_ == pytest.approx(lazy.cost_)
    assert rob.finalize().eta_ == 0


def test_robust_recovers_on_adversarial_instance():
    from benchmarks.online_covering import instances

    rng = np.random.default_rng(0)
    inst = instances.adversarial_set_cover(rng)
    preds = inst.predict(1.0, rng)
    rob = _robust(inst, preds, "min_item")
    for r in inst.stream:
        rob.serve(r)
    assert rob.phase_ >= 1 and rob.cost_breakdown_["catch_up"] > 0
    assert rob.cost_ < rob.primary_.cost_  # cheaper than following lazy throughout


def test_bad_inputs():
    from hf_ext.online_covering import OnlineSetCover, Robustify, WithPredictions

    a, b = OnlineSetCover([[0]], [1.0], random_state=0), OnlineSetCover([[0]], [1.0], random_state=1)
    for ratio in (1.0, 0.5, -2, float("inf")):
        with pytest.raises(ValueError, match=r"`ratio` must be a finite float > 1"):
            Robustify(a, b, ratio=ratio).serve(0)
    with pytest.raises(
        ValueError, match=r"`initial_budget` must be one of 'prediction', 'min_item', got 'huge'"
    ):
        Robustify(a, b, initial_budget="huge").serve(0)
    with pytest.raises(ValueError, match=r"`initial_budget` must be .* got -1"):
        Robustify(a, b, initial_budget=-1).serve(0)
    with pytest.raises(
        ValueError, match=r'`initial_budget="prediction"` needs `primary` to be a WithPredictions'
    ):
        Robustify(a, b, initial_budget="prediction").serve(0)
    up = WithPredictions(a, [0], mode="upfront")
    with pytest.warns(UserWarning, match=r"sunk and cannot be robustified"):
        rob = Robustify(up, b)
        rob.serve(0)
    assert rob.cost_breakdown_["prebuy"] == 1.0
    rob.finalize()
    with pytest.raises(RuntimeError, match=r"`serve` is not allowed after `finalize`"):
        rob.serve(0)


def test_float_initial_budget_and_min_item_start():
    from hf_ext.online_covering import OnlineSetCover, Robustify

    sets, costs = [[0, 1], [1, 2], [2]], [1.0, 3.0, 2.0]
    rob = Robustify(
        OnlineSetCover(sets, costs, random_state=0), OnlineSetCover(sets, costs, random_state=1), 1.5, 0.5
    )
    rob.serve(0)
    assert rob.budget0_ == 0.5
    rob = Robustify(OnlineSetCover(sets, costs, random_state=0), OnlineSetCover(sets, costs, random_state=1))
    rob.serve(2)
    assert rob.budget0_ == 2.0  # the cheapest set containing element 2


def test_switch_rule_by_hand():
    """Active cost above ratio x other + B_0 switches and catches up; at or below it does not."""
    from hf_ext.online_covering import OnlineSetCover, Robustify, WithPredictions

    # SOL({0, 1, 2}) is the big set {0, 1, 2} (2.5 < 3 singletons); plain (seed 0) buys {0} (cost 1)
    sets, costs = [[0, 1, 2], [0], [1], [2]], [2.5, 1.0, 1.0, 1.0]
    lazy = WithPredictions(OnlineSetCover(sets, costs, random_state=0), [0, 1, 2])
    plain = OnlineSetCover(sets, costs, random_state=0)
    rob = Robustify(lazy, plain, ratio=2.0, initial_budget=0.4)
    rob.serve(0)  # 2.5 > 2 * 1 + 0.4: switch to the plain algorithm, buy its set {0}
    assert rob.phase_ == 1 and rob.solution_ == [1] and rob.cost_breakdown_["catch_up"] == 1.0
    rob = Robustify(lazy, plain, ratio=2.0, initial_budget=0.5)
    rob.serve(0)  # 2.5 <= 2 * 1 + 0.5: keep following the predictions
    assert rob.phase_ == 0 and rob.solution_ == [0] and rob.cost_ == 2.5
    assert Robustify(lazy, plain, initial_budget="prediction").reset().budget0_ == 2.5  # costliest SOL item


def test_prediction_budget_leaves_lazy_on_the_adversarial_family():
    from benchmarks.online_covering import instances

    rng = np.random.default_rng(0)
    inst = instances.adversarial_set_cover(rng)
    preds = inst.predict(1.0, rng)
    rob = _robust(inst, preds, "prediction")
    for r in inst.stream:
        rob.serve(r)
    assert rob.phase_ >= 1 and rob.cost_ < 0.6 * rob.primary_.cost_
    assert rob.cost_ <= rob.bound() * (1 + 1e-9)


def test_primary_and_fallback_must_share_the_instance():
    from hf_ext.online_covering import OnlineSetCover, ParkingPermit, Robustify, WithPredictions

    a = OnlineSetCover([[0], [1]], [1.0, 2.0], random_state=0)
    with pytest.raises(ValueError, match=r"`primary` and `fallback` must be built for the same instance"):
        Robustify(a, OnlineSetCover([[0], [1]], [1.0, 3.0], random_state=1)).serve(0)
    with pytest.raises(ValueError, match=r"must be built for the same instance"):
        Robustify(WithPredictions(a, [0]), ParkingPermit(), initial_budget="prediction").serve(0)
    Robustify(
        WithPredictions(a, [0]), OnlineSetCover([[0], [1]], np.array([1.0, 2.0]), random_state=5)
    ).serve(0)
