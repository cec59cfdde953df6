"""The classical online algorithms: hand-computed steps, limits, determinism and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")


def test_set_cover_fractional_update_by_hand():
    from hf_ext.online_covering import OnlineSetCover

    alg = OnlineSetCover(sets=[[0], [0]], costs=[1.0, 2.0], random_state=0).reset()
    x = alg.x_
    ix = alg.containing_[0]
    c = alg.costs_[ix]
    x[ix] = np.minimum(1.0, x[ix] * (1 + 1 / c) + 1 / (2 * c))  # round 1 by hand
    np.testing.assert_allclose(x, [0.5, 0.25])
    alg.x_[:] = 0.0
    alg.fractional_step(0)  # rounds until the sum reaches 1: round 2 caps x_1 from 1.5
    np.testing.assert_allclose(alg.x_, [1.0, 0.625])


def test_set_cover_buys_cheapest_when_rounding_misses():
    from hf_ext.online_covering import OnlineSetCover

    alg = OnlineSetCover(sets=[[0], [0]], costs=[1.0, 2.0], random_state=0).reset()
    alg.thresholds_[:] = 1.1  # rounding can never fire
    assert alg.serve(0) == [0]
    assert alg.serve(0) == []  # covered requests are skipped
    assert alg.cost_ == 1.0 and alg.cost_breakdown_["online"] == 1.0


def test_parking_primal_dual_by_hand():
    from hf_ext.online_covering import ParkingPermit
    from hf_ext.online_covering.offline import parking_permit_opt

    alg = ParkingPermit(durations=[1, 2, 4], costs=[1.0, 1.7, 2.8])
    assert alg.serve(0) == [(0, 0)]
    assert alg.duals_[0] == pytest.approx(1.0)
    assert alg.serve(1) == [(1, 0)]
    assert alg.duals_[1] == pytest.approx(0.7)
    assert alg.payments_[(2, 0)] == pytest.approx(1.7)
    assert alg.cost_ == pytest.approx(2.7)
    assert parking_permit_opt([1, 2, 4], [1.0, 1.7, 2.8], [0, 1]).value == pytest.approx(1.7)


def test_meyerson_tiny_opening_cost_opens_every_distinct_request():
    from hf_ext.online_covering import MeyersonFacilityLocation

    pts = np.random.default_rng(0).uniform(size=(10, 2))
    alg = MeyersonFacilityLocation(points=pts, opening_cost=1e-12, random_state=0)
    for r in [3, 1, 3, 7, 1, 0]:
        alg.serve(r)
    assert sorted(alg.open_) == [0, 1, 3, 7]
    assert alg.cost_breakdown_["connection"] == 0.0


def test_meyerson_huge_opening_cost_opens_only_first_request():
    from hf_ext.online_covering import MeyersonFacilityLocation

    pts = np.random.default_rng(1).uniform(size=(10, 2))
    f = 1e9
    alg = MeyersonFacilityLocation(points=pts, opening_cost=f, random_state=0)
    stream = [4, 2, 9, 0, 4]
    for r in stream:
        alg.serve(r)
    assert alg.open_ == [4]
    expected = f + sum(np.linalg.norm(pts[r] - pts[4]) for r in stream)
    assert alg.cost_ == pytest.approx(expected, rel=1e-12)


def test_greedy_steiner_on_weighted_path_by_hand():
    from hf_ext.online_covering import GreedySteinerTree

    # path 0 -1- 1 -2- 2 -4- 3 -8- 4
    w = np.zeros((5, 5))
    for u, c in enumerate([1.0, 2.0, 4.0, 8.0]):
        w[u, u + 1] = c
    alg = GreedySteinerTree(graph=w)
    assert alg.serve(2) == []
    assert alg.serve(4) == [(3, 4), (2, 3)]  # 12 = 8 + 4, listed from the new terminal
    assert alg.serve(0) == [(0, 1), (1, 2)]  # 3
    assert alg.serve(3) == []
    assert alg.cost_ == 15.0


def test_greedy_steiner_euclidean_and_networkx_inputs():
    nx = pytest.importorskip("networkx")
    from hf_ext.online_covering import GreedySteinerTree

    pts = np.array([[0.0, 0.0], [3.0, 0.0], [3.0, 4.0]])
    alg = GreedySteinerTree(points=pts)
    for t in [0, 1, 2]:
        alg.serve(t)
    assert alg.cost_ == pytest.approx(7.0)
    g = nx.Graph()
    g.add_weighted_edges_from([(0, 1, 2.0), (1, 2, 3.0)])
    alg = GreedySteinerTree(graph=g)
    alg.serve(0), alg.serve(2)
    assert alg.cost_ == 5.0


@pytest.mark.parametrize("seed", [0, 1])
def test_same_random_state_same_purchases(seed):
    from benchmarks.online_covering.instances import clustered_facility_location, random_set_cover
    from hf_ext.online_covering import MeyersonFacilityLocation, OnlineSetCover

    for gen in (random_set_cover, clustered_facility_location):
        inst = gen(np.random.default_rng(seed))
        runs = []
        for _ in range(2):
            alg = inst.make(seed)
            for r in inst.stream:
                alg.serve(r)
            runs.append(alg.history_)
        assert runs[0] == runs[1]
        assert isinstance(alg, OnlineSetCover | MeyersonFacilityLocation)


# ------------------------------------------------------------------------------------------ bad inputs
def test_request_in_no_set_raises():
    from hf_ext.online_covering import OnlineSetCover

    with pytest.raises(ValueError, match=r"request 7 cannot be covered"):
        OnlineSetCover(sets=[[0, 1]], costs=[1.0]).serve(7)


def test_unreachable_vertex_raises():
    from hf_ext.online_covering import GreedySteinerTree

    w = np.zeros((4, 4))
    w[0, 1] = 1.0
    w[2, 3] = 1.0
    alg = GreedySteinerTree(graph=w)
    alg.serve(0)
    with pytest.raises(ValueError, match=r"request 2 cannot be covered: vertex 2 is unreachable"):
        alg.serve(2)
    with pytest.raises(ValueError, match=r"request 9 cannot be covered"):
        alg.serve(9)


def test_bad_facility_request_raises():
    from hf_ext.online_covering import MeyersonFacilityLocation

    with pytest.raises(ValueError, match=r"request 5 cannot be covered"):
        MeyersonFacilityLocation(points=np.zeros((3, 2))).serve(5)


@pytest.mark.parametrize("costs", [[1.0, 0.0], [1.0, -2.0], [1.0, float("inf")], [float("nan"), 1.0]])
def test_set_cover_bad_costs_raise(costs):
    from hf_ext.online_covering import OnlineSetCover

    with pytest.raises(ValueError, match=r"`costs\[[01]\]` must be a finite float > 0, got"):
        OnlineSetCover(sets=[[0], [1]], costs=costs).serve(0)


def test_parking_bad_costs_and_opening_cost_raise():
    from hf_ext.online_covering import MeyersonFacilityLocation, ParkingPermit

    with pytest.raises(ValueError, match=r"`costs\[1\]` must be a finite float > 0, got 0.0"):
        ParkingPermit(durations=[1, 2], costs=[1.0, 0.0]).serve(0)
    with pytest.raises(ValueError, match=r"`opening_cost` must be a finite float > 0, got 0"):
        MeyersonFacilityLocation(points=np.zeros((2, 2)), opening_cost=0).serve(0)
    with pytest.raises(ValueError, match=r"`opening_cost` must be a finite float > 0, got inf"):
        MeyersonFacilityLocation(points=np.zeros((2, 2)), opening_cost=float("inf")).serve(0)


def test_mismatched_sets_costs_raise():
    from hf_ext.online_covering import OnlineSetCover

    with pytest.raises(ValueError, match=r"`costs` must hold one cost per set \(2\), got 1 cost"):
        OnlineSetCover(sets=[[0], [1]], costs=[1.0]).serve(0)


@pytest.mark.parametrize("durations", [[1, 3, 4], [2, 2], [4, 2], [2, 3]])
def test_parking_durations_not_nested_raise(durations):
    from hf_ext.online_covering import ParkingPermit

    with pytest.raises(ValueError, match=r"`durations` must be nested and aligned"):
        ParkingPermit(durations=durations, costs=[1.0] * len(durations)).serve(0)


def test_parking_days_decreasing_raise():
    from hf_ext.online_covering import ParkingPermit

    alg = ParkingPermit()
    alg.serve(5)
    alg.serve(5)
    with pytest.raises(ValueError, match=r"non-decreasing order, got day 3 after day 5"):
        alg.serve(3)
    with pytest.raises(ValueError, match=r"request -1 cannot be covered"):
        alg.serve(-1)


def test_steiner_needs_exactly_one_input():
    from hf_ext.online_covering import GreedySteinerTree

    with pytest.raises(ValueError, match=r"exactly one of `graph` and `points`"):
        GreedySteinerTree().serve(0)


def test_serve_after_finalize_raises():
    from hf_ext.online_covering import ParkingPermit

    alg = ParkingPermit()
    alg.serve(0)
    alg.finalize()
    with pytest.raises(RuntimeError, match=r"`serve` is not allowed after `finalize`"):
        alg.serve(1)
