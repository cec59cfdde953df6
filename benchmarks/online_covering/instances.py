"""Seeded synthetic instances for the benchmark and tests, and the prediction perturbation.

Every generator takes a ``numpy.random.Generator`` and returns an :class:`Instance`: the online
algorithm's parameters, the request stream (served in order) and the universe of requests that could
have arrived (where spurious predictions are drawn from). All instances are synthetic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse.csgraph import minimum_spanning_tree

from hf_ext._validation import check_float, check_int, check_probability
from hf_ext.online_covering.core import OnlineCoveringAlgorithm
from hf_ext.online_covering.facility_location import MeyersonFacilityLocation
from hf_ext.online_covering.inputs import check_permits, check_range, check_rng
from hf_ext.online_covering.parking_permit import ParkingPermit
from hf_ext.online_covering.set_cover import OnlineSetCover
from hf_ext.online_covering.steiner import GreedySteinerTree

logger = logging.getLogger(__name__)


@dataclass
class Instance:
    """One benchmark instance.

    Attributes:
        make: ``make(random_state) -> OnlineCoveringAlgorithm``, the plain online algorithm.
        stream: The true requests ``R`` in arrival order.
        universe: Requests that could occur (spurious predictions are drawn from the unrequested ones).
        spurious_groups: Adversarial family only: per group, the spurious requests that poison it.
    """

    make: Callable[[int], OnlineCoveringAlgorithm]
    stream: list[Any]
    universe: list[Any]
    spurious_groups: list[list[Any]] | None = field(default=None)

    def predict(self, frac: float, rng: np.random.Generator) -> list[Hashable]:
        """``R_hat`` at error level ``frac``: :func:`perturb_predictions`, or for the adversarial family
        ``R`` plus the spurious requests of ``round(frac * n_groups)`` random groups."""
        if self.spurious_groups is None:
            return perturb_predictions(self.stream, self.universe, frac, rng)
        check_probability("frac", frac)
        groups = self.spurious_groups
        poisoned = rng.choice(len(groups), size=int(round(frac * len(groups))), replace=False)
        return list(self.stream) + [e for g in sorted(poisoned) for e in groups[g]]


def perturb_predictions(
    stream: Sequence[Hashable], universe: Sequence[Hashable], frac: float, rng: np.random.Generator
) -> list[Hashable]:
    """``R_hat``: ``round(frac k)`` of the ``k`` true requests replaced by random unrequested ones.

    With distinct true requests this gives ``eta = 2 round(frac k)``. Replacements are distinct while
    enough unrequested requests exist.
    """
    check_rng(rng)
    check_probability("frac", frac)
    k = len(stream)
    n_rep = int(round(frac * k))
    requested = set(stream)
    pool = [u for u in universe if u not in requested]
    if n_rep and not pool:
        raise ValueError("cannot perturb predictions: every request of the universe was requested.")
    out = list(stream)
    positions = rng.choice(k, size=n_rep, replace=False)
    picks = rng.choice(len(pool), size=n_rep, replace=n_rep > len(pool)) if n_rep else np.array([], dtype=int)
    for pos, pick in zip(positions, picks):
        out[int(pos)] = pool[int(pick)]
    return out


def random_set_cover(
    rng: np.random.Generator,
    n_elements: int = 60,
    n_sets: int = 40,
    set_size: tuple[int, int] = (3, 9),
    cost_range: tuple[float, float] = (1.0, 10.0),
    n_requests: int = 30,
) -> Instance:
    """Random sets of size ``U{set_size}`` over ``n_elements``, costs ``U(cost_range)``; distinct requests."""
    check_rng(rng)
    n_elements = check_int("n_elements", n_elements, low=1)
    n_sets = check_int("n_sets", n_sets, low=1)
    lo, hi = check_range("set_size", set_size, low=1, integer=True)
    check_int("set_size[1]", hi, high=n_elements, hint="Sets are drawn without replacement.")
    check_range("cost_range", cost_range, low=0, low_open=True)
    check_int("n_requests", n_requests, low=1)
    sets = [
        sorted(
            rng.choice(
                n_elements, size=int(rng.integers(set_size[0], set_size[1] + 1)), replace=False
            ).tolist()
        )
        for _ in range(n_sets)
    ]
    costs = rng.uniform(*cost_range, size=n_sets).tolist()
    universe = sorted({e for s in sets for e in s})
    stream = [
        universe[i] for i in rng.choice(len(universe), size=min(n_requests, len(universe)), replace=False)
    ]
    return Instance(lambda seed: OnlineSetCover(sets=sets, costs=costs, random_state=seed), stream, universe)


def clustered_facility_location(
    rng: np.random.Generator,
    n_points: int = 80,
    n_clusters: int = 5,
    sigma: float = 0.5,
    side: float = 10.0,
    n_requests: int = 40,
    opening_cost: float = 2.0,
) -> Instance:
    """Points in Gaussian clusters (std ``sigma``) on a ``side x side`` square; distinct requests."""
    check_rng(rng)
    n_points = check_int("n_points", n_points, low=1)
    check_int("n_clusters", n_clusters, low=1)
    check_float("sigma", sigma, low=0)
    check_float("side", side, low=0, low_open=True)
    check_int("n_requests", n_requests, low=1, high=n_points, hint="Requests are distinct points.")
    check_float("opening_cost", opening_cost, low=0, low_open=True)
    centres = rng.uniform(0, side, size=(n_clusters, 2))
    points = centres[rng.integers(0, n_clusters, size=n_points)] + rng.normal(0, sigma, size=(n_points, 2))
    stream = rng.choice(n_points, size=n_requests, replace=False).tolist()
    return Instance(
        lambda seed: MeyersonFacilityLocation(points=points, opening_cost=opening_cost, random_state=seed),
        stream,
        list(range(n_points)),
    )


def bursty_parking(
    rng: np.random.Generator,
    horizon: int = 64,
    n_bursts: int = 6,
    max_burst: int = 5,
    durations: Sequence[int] = (1, 2, 4, 8, 16),
    costs: Sequence[float] = (1.0, 1.7, 2.8, 4.5, 7.0),
) -> Instance:
    """Bursty demand: ``n_bursts`` clusters of 1..``max_burst`` consecutive days in ``[0, horizon)``."""
    check_rng(rng)
    check_int("horizon", horizon, low=1)
    check_int("n_bursts", n_bursts, low=1)
    check_int("max_burst", max_burst, low=1)
    check_permits(durations, costs)
    days: set[int] = set()
    for start in rng.integers(0, horizon, size=n_bursts):
        days.update(range(int(start), min(horizon, int(start) + int(rng.integers(1, max_burst + 1)))))
    return Instance(
        lambda seed: ParkingPermit(durations=tuple(durations), costs=tuple(costs)),
        sorted(days),
        list(range(horizon)),
    )


def euclidean_steiner(rng: np.random.Generator, n_points: int = 120, n_terminals: int = 50) -> Instance:
    """Uniform points in the unit square; ``n_terminals`` of them arrive in random order."""
    check_rng(rng)
    n_points = check_int("n_points", n_points, low=1)
    check_int("n_terminals", n_terminals, low=1, high=n_points, hint="Terminals are distinct points.")
    points = rng.uniform(size=(n_points, 2))
    stream = rng.choice(n_points, size=n_terminals, replace=False).tolist()
    return Instance(lambda seed: GreedySteinerTree(points=points), stream, list(range(n_points)))


def geometric_graph_steiner(
    rng: np.random.Generator, n: int = 40, n_terminals: int = 10, radius: float = 0.3
) -> Instance:
    """Random geometric graph: Euclidean edge weights within ``radius``, plus its MST edges (connected)."""
    check_rng(rng)
    n = check_int("n", n, low=1)
    check_int("n_terminals", n_terminals, low=1, high=n, hint="Terminals are distinct vertices.")
    check_float("radius", radius, low=0)
    points = rng.uniform(size=(n, 2))
    dist = np.linalg.norm(points[:, None] - points[None, :], axis=-1)
    weights = np.where(dist <= radius, dist, 0.0)
    mst = minimum_spanning_tree(dist).toarray()
    weights = np.maximum(weights, np.maximum(mst, mst.T))
    np.fill_diagonal(weights, 0.0)
    stream = rng.choice(n, size=n_terminals, replace=False).tolist()
    return Instance(lambda seed: GreedySteinerTree(graph=weights), stream, list(range(n)))


def adversarial_set_cover(
    rng: np.random.Generator,
    n_groups: int = 10,
    true_per_group: tuple[int, int] = (1, 3),
    spurious_per_group: int = 4,
    big_cost: float = 50.0,
    spurious_cost: float = 15.0,
) -> Instance:
    """Spurious predictions push ``SOL(R_hat)`` onto costly sets, ``OPT(R)`` uses cheap ones [reconstructed].

    Group ``g`` has true elements ``a`` (cheap singletons, cost 1) and spurious elements ``b`` (singletons
    of cost ``spurious_cost``); one big set (cost ``big_cost``) holds all of them. ``Instance.predict(frac)``
    returns ``R`` plus every ``b`` of ``round(frac n_groups)`` poisoned groups: ``SOL(R_hat)`` buys their
    big sets, so the lazy and up-front variants pay ``big_cost`` per poisoned group where ``OPT(R)`` pays
    1-3. ``eta = spurious_per_group * round(frac * n_groups)``.
    """
    check_rng(rng)
    check_int("n_groups", n_groups, low=1)
    check_range("true_per_group", true_per_group, low=1, integer=True)
    check_int("spurious_per_group", spurious_per_group, low=1)
    check_float("big_cost", big_cost, low=0, low_open=True)
    check_float("spurious_cost", spurious_cost, low=0, low_open=True)
    sets: list[list[int]] = []
    costs: list[float] = []
    stream: list[int] = []
    spurious: list[list[int]] = []
    nxt = 0
    for _ in range(n_groups):
        a = list(range(nxt, nxt + true_per_group[1]))
        b = list(range(nxt + len(a), nxt + len(a) + spurious_per_group))
        nxt += len(a) + len(b)
        sets += [[e] for e in a] + [[e] for e in b] + [a + b]
        costs += [1.0] * len(a) + [spurious_cost] * len(b) + [big_cost]
        n_true = int(rng.integers(true_per_group[0], true_per_group[1] + 1))
        stream += a[:n_true]
        spurious.append(b)
    stream = [stream[i] for i in rng.permutation(len(stream))]
    return Instance(
        lambda seed: OnlineSetCover(sets=sets, costs=costs, random_state=seed),
        stream,
        list(range(nxt)),
        spurious,
    )
