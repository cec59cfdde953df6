"""Exact offline solvers against brute force, and the networkx Steiner approximation as a peer check."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("sklearn")


@pytest.mark.parametrize("seed", range(4))
def test_set_cover_milp_matches_brute_force(seed):
    from hf_ext.online_covering.offline import set_cover_opt

    rng = np.random.default_rng(seed)
    m, n = 10, 12
    sets = [rng.choice(n, size=int(rng.integers(1, 5)), replace=False).tolist() for _ in range(m)]
    costs = rng.uniform(1, 10, size=m)
    universe = sorted({e for s in sets for e in s})
    req = rng.choice(universe, size=min(6, len(universe)), replace=False).tolist()
    best = min(
        costs[list(sub)].sum()
        for k in range(m + 1)
        for sub in itertools.combinations(range(m), k)
        if set(req) <= {e for i in sub for e in sets[i]}
    )
    res = set_cover_opt(sets, costs, req)
    assert res.exact and res.status == "optimal"
    assert res.value == pytest.approx(best)
    assert set(req) <= {e for i in res.solution for e in sets[i]}
    approx = set_cover_opt(sets, costs, req, method="approx")
    assert not approx.exact and approx.value >= best - 1e-9


@pytest.mark.parametrize("seed", range(3))
def test_facility_location_milp_matches_brute_force(seed):
    from hf_ext.online_covering.offline import facility_location_opt

    rng = np.random.default_rng(seed)
    pts = rng.uniform(0, 3, size=(8, 2))
    req = rng.integers(0, 8, size=10).tolist()  # with duplicates: every occurrence connects
    f = 1.5
    d = np.linalg.norm(pts[:, None] - pts[None], axis=-1)
    best = min(
        f * len(sub) + sum(d[list(sub), r].min() for r in req)
        for k in range(1, 9)
        for sub in itertools.combinations(range(8), k)
    )
    res = facility_location_opt(pts, f, req)
    assert res.exact
    assert res.value == pytest.approx(best, rel=1e-6)
    assert facility_location_opt(pts, f, req, method="approx").value >= best - 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_parking_dp_matches_brute_force(seed):
    from hf_ext.online_covering.offline import parking_permit_opt

    rng = np.random.default_rng(seed)
    durations, costs = [1, 2, 4, 8], [1.0, 1.7, 2.8, 3.9]
    days = sorted(rng.choice(8, size=int(rng.integers(1, 6)), replace=False).tolist())
    permits = [(k, s) for k, dk in enumerate(durations) for s in range(0, 8, dk)]
    cover = np.array([sum(1 << t for t in range(s, s + durations[k])) for k, s in permits])
    bits = (np.arange(2 ** len(permits))[:, None] >> np.arange(len(permits))) & 1  # every permit subset
    covered = np.bitwise_or.reduce(np.where(bits == 1, cover, 0), axis=1)
    need = sum(1 << t for t in days)
    best = (bits @ np.array([costs[k] for k, _ in permits]))[(covered & need) == need].min()
    res = parking_permit_opt(durations, costs, days)
    assert res.value == pytest.approx(best)
    assert sum(costs[k] for k, _ in res.solution) == pytest.approx(best)


def _random_graph(seed: int, n: int = 9, p: float = 0.45) -> np.ndarray:
    rng = np.random.default_rng(seed)
    w = np.triu(np.where(rng.random((n, n)) < p, rng.uniform(1, 5, (n, n)), 0.0), 1)
    for v in range(1, n):  # a spanning path keeps it connected
        w[v - 1, v] = w[v - 1, v] or rng.uniform(3, 8)
    return w + w.T


@pytest.mark.parametrize("seed", range(4))
def test_dreyfus_wagner_matches_brute_force(seed):
    from scipy.sparse.csgraph import connected_components, minimum_spanning_tree

    from hf_ext.online_covering.offline import steiner_tree_opt

    w = _random_graph(seed)
    n = len(w)
    term = [0, 3, 5, 8]
    others = [v for v in range(n) if v not in term]
    best = np.inf
    for k in range(len(others) + 1):
        for extra in itertools.combinations(others, k):
            vs = term + list(extra)
            sub = w[np.ix_(vs, vs)]
            if connected_components(sub, directed=False)[0] == 1:
                best = min(best, minimum_spanning_tree(sub).sum())
    res = steiner_tree_opt(w, term)
    assert res.exact
    assert res.value == pytest.approx(best)
    assert sum(w[u, v] for u, v in res.solution) == pytest.approx(best)


@pytest.mark.parametrize("seed", range(3))
def test_networkx_steiner_lies_between_opt_and_twice_opt(seed):
    nx = pytest.importorskip("networkx")
    from networkx.algorithms.approximation import steiner_tree

    from hf_ext.online_covering.offline import steiner_tree_opt

    w = _random_graph(seed, n=10)
    term = [1, 4, 6, 9]
    opt = steiner_tree_opt(w, term).value
    tree = steiner_tree(nx.from_numpy_array(w), term, weight="weight")
    peer = tree.size(weight="weight")
    assert opt - 1e-9 <= peer <= 2 * opt + 1e-9
    approx = steiner_tree_opt(w, term, method="approx").value
    assert opt - 1e-9 <= approx <= 2 * opt + 1e-9


def test_euclidean_steiner_is_mst_proxy_only():
    from hf_ext.online_covering import GreedySteinerTree

    alg = GreedySteinerTree(points=[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]]).reset()
    res = alg.offline([0, 1, 2], method="approx")
    assert not res.exact and res.status.startswith("MST proxy") and res.value == pytest.approx(2.0)
    with pytest.raises(ValueError, match=r'offline="approx"'):
        alg.offline([0, 1, 2], method="exact")


def test_exact_caps_suggest_approx():
    from hf_ext.online_covering.offline import facility_location_opt, set_cover_opt, steiner_tree_opt

    with pytest.raises(ValueError, match=r'capped at 200, got 201.*offline="approx"'):
        set_cover_opt([[0]] * 201, [1.0] * 201, [0])
    with pytest.raises(ValueError, match=r'capped at 100, got 101.*offline="approx"'):
        facility_location_opt(np.zeros((101, 2)), 1.0, [0])
    w = np.ones((14, 14)) - np.eye(14)
    with pytest.raises(ValueError, match=r'capped at 12, got 13.*offline="approx"'):
        steiner_tree_opt(w, list(range(13)))
    with pytest.raises(ValueError, match=r"cannot be covered: they are not all connected"):
        steiner_tree_opt(np.zeros((3, 3)), [0, 2])
    with pytest.raises(ValueError, match=r"`method` must be one of 'exact', 'approx', got 'fast'"):
        set_cover_opt([[0]], [1.0], [0], method="fast")


def test_time_limit_reports_opt_unavailable():
    from hf_ext.online_covering.offline import facility_location_opt

    rng = np.random.default_rng(0)
    res = facility_location_opt(rng.uniform(size=(100, 2)), 0.05, list(range(100)), time_limit=1e-6)
    assert not res.exact
    assert res.status.startswith("OPT unavailable")
