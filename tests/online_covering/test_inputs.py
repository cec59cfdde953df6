"""Every offline solver and instance builder rejects bad inputs with a clear, named error."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")

SETS, COSTS = [[0, 1], [1, 2]], [1.0, 2.0]
PTS = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
W = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 2.0], [0.0, 2.0, 0.0]])


def _solver_cases():
    from hf_ext.online_covering import offline as o

    return [
        (
            lambda: o.set_cover_opt(SETS, [1.0, -1.0], [0]),
            ValueError,
            r"`costs\[1\]` must be a finite float > 0",
        ),
        (
            lambda: o.set_cover_opt(SETS, [1.0, np.nan], [0]),
            ValueError,
            r"`costs\[1\]` must be a finite float",
        ),
        (lambda: o.set_cover_opt(SETS, [1.0], [0]), ValueError, r"`costs` must hold one cost per set \(2\)"),
        (lambda: o.set_cover_opt([], [], [0]), ValueError, r"`sets` must be a list of at least 1 item"),
        (
            lambda: o.set_cover_opt([[0], [[1]]], COSTS, [0]),
            TypeError,
            r"`sets` must be a list of sets of hash",
        ),
        (lambda: o.set_cover_opt(SETS, COSTS, [7]), ValueError, r"request 7 cannot be covered"),
        (lambda: o.set_cover_opt(SETS, COSTS, [[0]]), TypeError, r"`requests\[0\]` must be hashable"),
        (lambda: o.set_cover_opt(SETS, COSTS, 0), TypeError, r"`requests` must be a list, got 0"),
        (lambda: o.set_cover_opt(SETS, COSTS, [0], method="fast"), ValueError, r"`method` must be one of"),
        (
            lambda: o.set_cover_opt(SETS, COSTS, [0], time_limit=0),
            ValueError,
            r"`time_limit` must be a finite",
        ),
        (
            lambda: o.facility_location_opt(PTS, 1.0, [3]),
            ValueError,
            r"`requests\[0\]` must be an int in \[0, 2\]",
        ),
        (lambda: o.facility_location_opt(PTS, 1.0, [-1]), ValueError, r"`requests\[0\]` must be an int in"),
        (lambda: o.facility_location_opt(PTS, 1.0, [0.5]), TypeError, r"`requests\[0\]` must be an int"),
        (
            lambda: o.facility_location_opt(PTS, -2.0, [0]),
            ValueError,
            r"`opening_cost` must be a finite float > 0",
        ),
        (
            lambda: o.facility_location_opt(PTS, 1.0, [0], sites=[5]),
            ValueError,
            r"`sites\[0\]` must be an int in",
        ),
        (
            lambda: o.facility_location_opt(PTS, 1.0, [0], sites=[]),
            ValueError,
            r"`sites` must hold at least one",
        ),
        (
            lambda: o.facility_location_opt(np.full((3, 2), np.inf), 1.0, [0]),
            ValueError,
            r"`points` must be a finite",
        ),
        (
            lambda: o.facility_location_opt(PTS[0], 1.0, [0]),
            ValueError,
            r"`points` must be a finite \(n, dim\)",
        ),
        (lambda: o.parking_permit_opt([2, 3], [1.0, 2.0], [0]), ValueError, r"`durations` must be nested"),
        (lambda: o.parking_permit_opt([1, 2], [1.0, 0.0], [0]), ValueError, r"`costs\[1\]` must be a finite"),
        (lambda: o.parking_permit_opt([1, 2], [1.0], [0]), ValueError, r"one cost per duration \(2\)"),
        (
            lambda: o.parking_permit_opt([1, 2], [1.0, 2.0], [-3]),
            ValueError,
            r"`requests\[0\]` must be an int >= 0",
        ),
        (
            lambda: o.parking_permit_opt([0, 2], [1.0, 2.0], [0]),
            ValueError,
            r"`durations\[0\]` must be an int >= 1",
        ),
        (lambda: o.steiner_tree_opt(-W, [0, 2]), ValueError, r"`weights` weights must be finite and >= 0"),
        (lambda: o.steiner_tree_opt(W[:2], [0, 1]), ValueError, r"`weights` must be a square"),
        (lambda: o.steiner_tree_opt(W, [0, 9]), ValueError, r"`terminals\[1\]` must be an int in \[0, 2\]"),
        (lambda: o.steiner_tree_opt(W, [0, 2], method="best"), ValueError, r"`method` must be one of"),
    ]


@pytest.mark.parametrize("case", range(27))
def test_offline_solver_bad_inputs(case):
    call, error, match = _solver_cases()[case]
    with pytest.raises(error, match=match):
        call()


def test_every_solver_is_covered():
    from hf_ext.online_covering import offline

    cases = _solver_cases()
    assert len(cases) == 27
    solvers = {n for n in dir(offline) if n.endswith("_opt")}
    assert solvers == {"set_cover_opt", "facility_location_opt", "parking_permit_opt", "steiner_tree_opt"}


def _builder_cases():
    from benchmarks.online_covering import instances as i

    rng = np.random.default_rng(0)
    return [
        (lambda: i.random_set_cover(0), TypeError, r"`rng` must be a numpy.random.Generator"),
        (lambda: i.random_set_cover(rng, n_elements=0), ValueError, r"`n_elements` must be an int >= 1"),
        (
            lambda: i.random_set_cover(rng, set_size=(5, 3)),
            ValueError,
            r"`set_size` must be a pair \(lo, hi\)",
        ),
        (
            lambda: i.random_set_cover(rng, set_size=(3, 99)),
            ValueError,
            r"`set_size\[1\]` must be an int <= 60",
        ),
        (
            lambda: i.random_set_cover(rng, cost_range=(-1, 2)),
            ValueError,
            r"`cost_range\[0\]` must be a finite",
        ),
        (lambda: i.random_set_cover(rng, n_requests=0), ValueError, r"`n_requests` must be an int >= 1"),
        (
            lambda: i.clustered_facility_location(rng, n_requests=99),
            ValueError,
            r"`n_requests` must be an int in",
        ),
        (
            lambda: i.clustered_facility_location(rng, sigma=-1),
            ValueError,
            r"`sigma` must be a finite float >= 0",
        ),
        (lambda: i.clustered_facility_location(rng, opening_cost=0), ValueError, r"`opening_cost` must be"),
        (lambda: i.bursty_parking(rng, horizon=0), ValueError, r"`horizon` must be an int >= 1"),
        (lambda: i.bursty_parking(rng, durations=(2, 3)), ValueError, r"`durations` must be nested"),
        (lambda: i.euclidean_steiner(rng, n_terminals=500), ValueError, r"`n_terminals` must be an int in"),
        (lambda: i.geometric_graph_steiner(rng, radius=-0.1), ValueError, r"`radius` must be a finite float"),
        (lambda: i.adversarial_set_cover(rng, n_groups=0), ValueError, r"`n_groups` must be an int >= 1"),
        (
            lambda: i.adversarial_set_cover(rng, big_cost=0),
            ValueError,
            r"`big_cost` must be a finite float > 0",
        ),
        (lambda: i.adversarial_set_cover(rng, true_per_group=(0, 2)), ValueError, r"`true_per_group\[0\]`"),
        (
            lambda: i.perturb_predictions([0], [0, 1], 2.0, rng),
            ValueError,
            r"`frac` must be a finite float in",
        ),
    ]


@pytest.mark.parametrize("case", range(17))
def test_instance_builder_bad_inputs(case):
    call, error, match = _builder_cases()[case]
    with pytest.raises(error, match=match):
        call()


def _online_cases():
    from hf_ext import online_covering as oc

    return [
        (lambda: oc.OnlineSetCover([], []), ValueError, r"`sets` must be a list of at least 1 item"),
        (lambda: oc.OnlineSetCover([[0], 5], COSTS), TypeError, r"`sets` must be a list of sets of hash"),
        (lambda: oc.OnlineSetCover(SETS, [1.0, -1.0]), ValueError, r"`costs\[1\]` must be a finite"),
        (lambda: oc.MeyersonFacilityLocation(PTS[0]), ValueError, r"`points` must be a finite \(n, dim\)"),
        (lambda: oc.MeyersonFacilityLocation(PTS, opening_cost=-1), ValueError, r"`opening_cost` must be"),
        (lambda: oc.ParkingPermit((1, 2), (1.0,)), ValueError, r"one cost per duration \(2\)"),
        (lambda: oc.GreedySteinerTree(graph=-W), ValueError, r"`graph` weights must be finite and >= 0"),
        (lambda: oc.GreedySteinerTree(graph=W[:2]), ValueError, r"`graph` must be a square"),
        (lambda: oc.GreedySteinerTree(points=PTS * np.nan), ValueError, r"`points` must be a finite"),
        (lambda: oc.GreedySteinerTree(), ValueError, r"pass exactly one of `graph` and `points`"),
    ]


@pytest.mark.parametrize("case", range(10))
def test_online_algorithm_bad_inputs(case):
    call, error, match = _online_cases()[case]
    with pytest.raises(error, match=match):
        call().serve(0)


def test_every_online_algorithm_is_covered():
    from hf_ext import online_covering as oc

    assert len(_online_cases()) == 10
    names = {"OnlineSetCover", "MeyersonFacilityLocation", "ParkingPermit", "GreedySteinerTree"}
    assert all(issubclass(getattr(oc, n), oc.OnlineCoveringAlgorithm) for n in names)
