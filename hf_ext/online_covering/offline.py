"""Offline solutions of small covering instances, exact (HiGHS MILP via scipy, dynamic programming) or greedy.

Every solver returns an :class:`OfflineResult`. ``exact=True`` only when optimality is proven; a time-limit
hit keeps the best feasible solution with ``exact=False`` and status ``"OPT unavailable ..."``, so a
ratio against it must be reported as NaN, never silently.

Exact sizes are capped (more than 200 sets, 100 facility sites or 12 Steiner terminals raise
``ValueError`` suggesting ``method="approx"``).
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import wraps
from typing import ClassVar, ParamSpec

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp
from scipy.sparse.csgraph import minimum_spanning_tree, shortest_path

from hf_ext._registry import paper
from hf_ext._timing import Timer
from hf_ext._validation import check_bool, check_choice, check_float, check_int, check_sequence
from hf_ext.online_covering.inputs import (
    check_costs,
    check_indices,
    check_permits,
    check_points,
    check_requests,
    check_sets,
    check_weight_matrix,
)

logger = logging.getLogger(__name__)

MAX_EXACT_SETS = 200
MAX_EXACT_SITES = 100
MAX_EXACT_TERMINALS = 12


@dataclass(frozen=True)
class OfflineResult:
    """An offline solution.

    Attributes:
        value: Its cost (purchases plus connections), in the instance's cost units.
        solution: The items bought (set indices, sites, ``(k, start)`` permits or ``(u, v)`` edges).
        exact: Whether ``value`` is a proven optimum.
        status: ``"optimal"``, ``"approx (...)"``, ``"MST proxy ..."`` or ``"OPT unavailable ..."``.
        seconds: Wall time of the solve.
    """

    _paper: ClassVar[dict[str, object]] = paper("online_covering")

    value: float
    solution: tuple[Hashable, ...]
    exact: bool
    status: str
    seconds: float = 0.0


P = ParamSpec("P")


def _timed(solver: Callable[P, OfflineResult]) -> Callable[P, OfflineResult]:
    """Fill ``OfflineResult.seconds`` with the wall time of the whole solver call."""

    @wraps(solver)
    def timed(*args: P.args, **kwargs: P.kwargs) -> OfflineResult:
        with Timer() as t:
            result = solver(*args, **kwargs)
        return replace(result, seconds=t.seconds)

    return timed


def _check_method(method: str, time_limit: float = 20.0) -> None:
    check_choice("method", method, ("exact", "approx"))
    check_float("time_limit", time_limit, low=0, low_open=True, hint="Seconds allowed to an exact solve.")


def _over_cap(what: str, size: int, cap: int) -> ValueError:
    return ValueError(
        f"exact offline {what} is capped at {cap}, got {size}; the exact solver is exponential in the worst "
        'case. Pass offline="approx" (method="approx") for an approximate solution.'
    )


def _milp_result(res, c: np.ndarray, solution, time_limit: float) -> OfflineResult:
    if res.status == 0:
        return OfflineResult(float(c @ res.x), solution(res.x), True, "optimal")
    if res.x is not None:
        value = float(c @ res.x)
        status = (
            f"OPT unavailable (MILP status {res.status} within {time_limit:g} s; best feasible {value:.4g})"
        )
        logger.warning(status)
        return OfflineResult(value, solution(res.x), False, status)
    status = f"OPT unavailable (MILP status {res.status}: {res.message})"
    logger.warning(status)
    return OfflineResult(math.nan, (), False, status)


# ---------------------------------------------------------------------------------------------- set cover
@_timed
def set_cover_opt(
    sets: Iterable[Iterable[Hashable]],
    costs: Sequence[float] | np.ndarray,
    requests: Sequence[Hashable],
    *,
    method: str = "exact",
    time_limit: float = 20.0,
) -> OfflineResult:
    """Cheapest family of sets covering the distinct ``requests``.

    ``method="exact"``: MILP ``min c^T x`` s.t. ``A x >= 1`` over the distinct requested elements,
    ``x`` binary (HiGHS). ``method="approx"``: the greedy ``H_n``-approximation.

    Raises:
        ValueError: a request lies in no set, a cost is not finite and > 0, ``costs`` and ``sets`` differ in
            length, ``len(sets) > 200`` with ``method="exact"``, or ``method``/``time_limit`` is invalid.
        TypeError: ``sets`` is not a list of sets of hashable elements, or a request is unhashable.
    """
    _check_method(method, time_limit)
    family = check_sets(sets)
    c = check_costs(costs, len(family), "set")
    requests = check_requests(requests)
    elements = list(dict.fromkeys(requests))
    for e in elements:
        if not any(e in s for s in family):
            raise ValueError(f"request {e!r} cannot be covered: it lies in no set of `sets`.")
    if not elements:
        return OfflineResult(0.0, (), True, "optimal")
    if method == "approx":
        left, chosen = set(elements), []
        while left:
            best = min(
                (i for i in range(len(family)) if family[i] & left),
                key=lambda i: c[i] / len(family[i] & left),
            )
            chosen.append(best)
            left -= family[best]
        value = float(c[chosen].sum())
        return OfflineResult(value, tuple(chosen), False, "approx (greedy)")
    if len(family) > MAX_EXACT_SETS:
        raise _over_cap("set cover size (number of sets)", len(family), MAX_EXACT_SETS)
    a = np.array([[e in s for s in family] for e in elements], dtype=float)
    res = milp(
        c,
        constraints=LinearConstraint(a, lb=1.0),
        integrality=np.ones(len(family)),
        bounds=Bounds(0, 1),
        options={"time_limit": time_limit},
    )
    return _milp_result(res, c, lambda x: tuple(int(i) for i in np.flatnonzero(x > 0.5)), time_limit)


# ---------------------------------------------------------------------------------------- facility location
@_timed
def facility_location_opt(
    points: np.ndarray,
    opening_cost: float,
    requests: Sequence[int],
    *,
    sites: Sequence[int] | None = None,
    method: str = "exact",
    time_limit: float = 20.0,
) -> OfflineResult:
    """Uncapacitated facility location with uniform opening cost, Euclidean connection costs.

    Args:
        points: ``(n, dim)`` candidate coordinates; requests and sites are row indices.
        opening_cost: ``f``, the price of one facility.
        requests: Request indices, a multiset: every occurrence pays its own connection.
        sites: Indices where facilities may open (default: all ``n`` points).
        method: ``"exact"`` (MILP, integral ``y_i``, continuous ``x_ij`` in [0, 1], ``sum_i x_ij = 1``,
            ``x_ij <= y_i``) or ``"approx"`` (greedy facility addition, no guarantee claimed).
        time_limit: MILP limit in seconds.

    Raises:
        ValueError: ``points`` is not a finite ``(n, dim)`` array, ``opening_cost`` is not finite and > 0, a
            request or site is not an index in ``[0, n - 1]``, or more than 100 sites with ``method="exact"``.
    """
    _check_method(method, time_limit)
    pts = check_points(points)
    opening_cost = check_float("opening_cost", opening_cost, low=0, low_open=True)
    n = len(pts)
    site_idx = np.arange(n) if sites is None else np.asarray(check_indices("sites", sites, n), dtype=int)
    if site_idx.size == 0:
        raise ValueError("`sites` must hold at least one site index, got [].")
    counts = Counter(check_indices("requests", requests, n))
    if not counts:
        return OfflineResult(0.0, (), True, "optimal")
    req = np.fromiter(counts, dtype=int)
    weight = np.fromiter(counts.values(), dtype=float)
    dist = np.linalg.norm(pts[site_idx][:, None, :] - pts[req][None, :, :], axis=-1)  # (sites, requests)
    n_s, n_r = dist.shape
    if method == "approx":
        best = np.full(n_r, np.inf)
        opened: list[int] = []
        total = np.inf
        while True:
            cand = np.minimum(best[None, :], dist)  # (sites, requests)
            totals = opening_cost * (len(opened) + 1) + (cand * weight).sum(axis=1)
            s = int(np.argmin(totals))
            if totals[s] >= total - 1e-12:
                break
            opened.append(s)
            best, total = cand[s], float(totals[s])
        return OfflineResult(total, tuple(int(site_idx[s]) for s in opened), False, "approx (greedy add)")
    if n_s > MAX_EXACT_SITES:
        raise _over_cap("facility location size (number of sites)", n_s, MAX_EXACT_SITES)
    c = np.concatenate([np.full(n_s, float(opening_cost)), (dist * weight[None, :]).ravel()])
    x_index = n_s + np.arange(n_s * n_r).reshape(n_s, n_r)
    assign = sparse.csr_array(
        (np.ones(n_s * n_r), (np.tile(np.arange(n_r), n_s), x_index.ravel())), shape=(n_r, c.size)
    )
    rows = np.arange(n_s * n_r)
    link = sparse.csr_array(
        (
            np.concatenate([np.ones(n_s * n_r), -np.ones(n_s * n_r)]),
            (np.concatenate([rows, rows]), np.concatenate([x_index.ravel(), np.repeat(np.arange(n_s), n_r)])),
        ),
        shape=(n_s * n_r, c.size),
    )
    res = milp(
        c,
        constraints=[LinearConstraint(assign, 1.0, 1.0), LinearConstraint(link, -np.inf, 0.0)],
        integrality=np.concatenate([np.ones(n_s), np.zeros(n_s * n_r)]),
        bounds=Bounds(0, 1),
        options={"time_limit": time_limit},
    )
    return _milp_result(
        res, c, lambda x: tuple(int(site_idx[s]) for s in np.flatnonzero(x[:n_s] > 0.5)), time_limit
    )


# ------------------------------------------------------------------------------------------ parking permit
@_timed
def parking_permit_opt(
    durations: Sequence[int], costs: Sequence[float] | np.ndarray, requests: Sequence[int]
) -> OfflineResult:
    """Exact parking-permit optimum by dynamic programming over aligned intervals.

    ``cost(k, start)`` is 0 if no request falls in ``[start, start + D_k)``, ``C_0`` for ``k = 0``, and
    ``min(C_k, sum of cost(k-1, child) over the D_k / D_{k-1} children)`` otherwise. Permit types must be
    nested (each duration divides the next) with aligned starts; the top level is summed over the
    intervals that hold requests.

    Raises:
        ValueError: durations not nested and aligned, a cost not finite and > 0, or a day below 0.
    """
    d, costs_ = check_permits(durations, costs)
    c = costs_.tolist()
    days = sorted(set(check_sequence("requests", requests, lambda k, v: check_int(k, v, low=0))))
    top = len(d) - 1

    def solve(k: int, start: int, inside: list[int]) -> tuple[float, list[tuple[int, int]]]:
        if not inside:
            return 0.0, []
        if k == 0:
            return c[0], [(0, start)]
        value, chosen = 0.0, []
        width = d[k - 1]
        for child in range(start, start + d[k], width):
            sub = [t for t in inside if child <= t < child + width]
            v, s = solve(k - 1, child, sub)
            value += v
            chosen += s
        if c[k] <= value:
            return c[k], [(k, start)]
        return value, chosen

    value, chosen = 0.0, []
    for block, group in itertools.groupby(days, key=lambda t: t // d[top]):
        v, s = solve(top, block * d[top], list(group))
        value += v
        chosen += s
    return OfflineResult(value, tuple(chosen), True, "optimal")


# -------------------------------------------------------------------------------------------- Steiner tree
def _edge(u: int, v: int) -> tuple[int, int]:
    return (u, v) if u < v else (v, u)


def _path_edges(pred: np.ndarray, src: int, dst: int) -> list[tuple[int, int]]:
    """Edges of the shortest path ``src -> dst`` from a predecessor row of ``src``."""
    edges, v = [], dst
    while v != src:
        u = int(pred[v])
        edges.append(_edge(u, v))
        v = u
    return edges


def _tree_value(weights: np.ndarray, edges: set[tuple[int, int]]) -> float:
    return float(sum(weights[u, v] for u, v in edges))


@_timed
def steiner_tree_opt(
    weights: np.ndarray, terminals: Sequence[int], *, method: str = "exact", euclidean: bool = False
) -> OfflineResult:
    """Minimum Steiner tree connecting the distinct ``terminals``.

    Args:
        weights: ``(n, n)`` symmetric dense edge weights (0 = no edge), e.g. from
            :class:`~hf_ext.online_covering.steiner.GreedySteinerTree`'s ``weights_``.
        terminals: Terminal vertices (duplicates are ignored).
        method: ``"exact"``: Dreyfus-Wagner DP, ``O(3^t n + 2^t n^2)`` after all-pairs shortest paths,
            for ``t <= 12``; ``"approx"``: MST of the metric closure on the terminals, each edge expanded
            to a shortest path (at most 2 OPT).
        euclidean: The weights are a complete Euclidean graph. Only the MST on the terminals is available
            (OPT <= MST <= 2 OPT, so cost / MST under-states cost / OPT); the result has ``exact=False``.

    Raises:
        ValueError: ``weights`` is not a square, finite, non-negative matrix; a terminal is not a vertex
            index; terminals are not connected; more than 12 terminals (or any Euclidean instance) with
            ``method="exact"``.
    """
    _check_method(method)
    check_bool("euclidean", euclidean)
    w = check_weight_matrix(weights)
    term = list(dict.fromkeys(check_indices("terminals", terminals, len(w))))
    if len(term) <= 1:
        return OfflineResult(0.0, (), True, "optimal")
    if euclidean:
        if method == "exact":
            raise ValueError(
                "exact Euclidean Steiner tree is not available (only the MST proxy, OPT <= MST <= 2 OPT); "
                'pass offline="approx" (method="approx").'
            )
        mst = minimum_spanning_tree(w[np.ix_(term, term)]).tocoo()
        edges = {_edge(term[i], term[j]) for i, j in zip(mst.row, mst.col)}
        return OfflineResult(
            _tree_value(w, edges), tuple(sorted(edges)), False, "MST proxy (OPT <= MST <= 2 OPT)"
        )
    dist, pred = shortest_path(w, directed=False, return_predecessors=True)
    if not np.isfinite(dist[np.ix_(term, term)]).all():
        raise ValueError(
            f"request terminals {term} cannot be covered: they are not all connected in the graph."
        )
    if method == "approx":
        closure = minimum_spanning_tree(dist[np.ix_(term, term)]).tocoo()
        edges = set()
        for i, j in zip(closure.row, closure.col):
            edges.update(_path_edges(pred[term[i]], term[i], term[j]))
        return OfflineResult(
            _tree_value(w, edges), tuple(sorted(edges)), False, "approx (metric-closure MST)"
        )
    if len(term) > MAX_EXACT_TERMINALS:
        raise _over_cap("Steiner tree size (number of terminals)", len(term), MAX_EXACT_TERMINALS)
    value, edges = _dreyfus_wagner(dist, pred, term)
    tree_value = _tree_value(w, edges)
    if not math.isclose(tree_value, value, rel_tol=1e-9, abs_tol=1e-9):
        raise RuntimeError(f"internal error: Dreyfus-Wagner tree weighs {tree_value}, DP value {value}")
    return OfflineResult(value, tuple(sorted(edges)), True, "optimal")


def _dreyfus_wagner(
    dist: np.ndarray, pred: np.ndarray, term: list[int]
) -> tuple[float, set[tuple[int, int]]]:
    """Dreyfus-Wagner: ``dp[S][v]`` = cheapest tree spanning terminal subset ``S`` plus vertex ``v``."""
    t, n = len(term), dist.shape[0]
    full = (1 << t) - 1
    dp = np.full((full + 1, n), np.inf)
    split = np.zeros((full + 1, n), dtype=np.int64)  # best submask at the branching vertex
    hop = np.zeros((full + 1, n), dtype=np.int64)  # branching vertex u reached from v
    for i, ti in enumerate(term):
        dp[1 << i] = dist[ti]
        hop[1 << i] = ti
    # patterns[b]: the 2^b subsets of b bits as 0/1 rows, the full set last
    patterns = [(np.arange(1 << b)[:, None] >> np.arange(b)) & 1 for b in range(t)]
    for mask in range(1, full + 1):
        if mask & (mask - 1) == 0:
            continue
        low = mask & -mask
        rest = np.array([1 << i for i in range(t) if (mask ^ low) >> i & 1])
        # proper submasks containing the lowest bit: each unordered split once
        idx = (patterns[rest.size][:-1] @ rest) | low
        cand = dp[idx] + dp[mask ^ idx]  # (splits, n)
        best = np.argmin(cand, axis=0)
        split[mask] = idx[best]
        g = cand[best, np.arange(n)]
        through = g[:, None] + dist  # (u, v): branch at u, walk to v
        hop[mask] = np.argmin(through, axis=0)
        dp[mask] = through[hop[mask], np.arange(n)]
    edges: set[tuple[int, int]] = set()
    stack = [(full, int(np.argmin(dp[full])))]
    while stack:
        mask, v = stack.pop()
        u = int(hop[mask, v])
        edges.update(_path_edges(pred[u], u, v))
        if mask & (mask - 1):
            part = int(split[mask, u])
            stack += [(part, u), (mask ^ part, u)]
    return float(dp[full].min()), edges
