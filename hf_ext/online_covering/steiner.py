"""Online Steiner tree: the greedy algorithm of Imase and Waxman (1991), on graphs or Euclidean points."""

from __future__ import annotations

import logging
import numbers
from collections import deque
from collections.abc import Hashable

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components, dijkstra
from sklearn.base import BaseEstimator

from hf_ext.online_covering.core import OnlineCoveringAlgorithm
from hf_ext.online_covering.inputs import check_points, check_weight_matrix
from hf_ext.online_covering.offline import OfflineResult, _edge, _path_edges, steiner_tree_opt

logger = logging.getLogger(__name__)


def _dense_weights(graph) -> np.ndarray:
    """``(n, n)`` symmetric dense weights (0 = no edge) from a networkx graph, sparse or dense matrix."""
    if hasattr(graph, "nodes") and hasattr(graph, "edges"):  # networkx, without importing it
        nodes = list(graph.nodes)
        if nodes != list(range(len(nodes))):
            raise ValueError(
                "`graph` (networkx) must have nodes 0..n-1; relabel it with "
                "nx.convert_node_labels_to_integers."
            )
        w = np.zeros((len(nodes), len(nodes)))
        for u, v, data in graph.edges(data=True):
            weight = data.get("weight", 1.0)
            if not np.isfinite(weight) or weight <= 0:
                raise ValueError(
                    f"`graph` edge weights must be finite and > 0, got {weight!r} on edge ({u}, {v})."
                )
            w[u, v] = w[v, u] = weight
        return check_weight_matrix(w, name="graph")
    return check_weight_matrix(graph.toarray() if sparse.issparse(graph) else graph, name="graph")


class GreedySteinerTree(OnlineCoveringAlgorithm, BaseEstimator):
    """Greedy online Steiner tree (Imase-Waxman), ``O(log k)``-competitive, which is tight.

    Each arriving terminal is connected to the nearest vertex already connected to the first terminal
    by a shortest path (``scipy.sparse.csgraph.dijkstra``). Edges already bought are free on that path
    (they are routed at a 1e-9 relative weight). With ``points`` the graph is the complete Euclidean
    graph, so the greedy step is a straight edge.

    Requests are vertex indices; items are ``(u, v)`` edges with ``u < v``.

    Parameters
    ----------
    graph : array-like of shape (n, n), scipy sparse matrix or networkx.Graph, default=None
        Edge weights (dense/sparse: 0 = no edge; networkx: ``"weight"`` attribute, default 1, nodes
        ``0..n-1``). Exactly one of ``graph`` and ``points`` must be given.
    points : array-like of shape (n, dim), default=None
        Euclidean points; offline solutions then use the MST proxy (labelled "vs MST").

    Attributes
    ----------
    weights_ : ndarray of shape (n, n)
        Dense symmetric weights (0 = no edge).
    root_ : int or None
        The first terminal.

    Examples
    --------
    >>> import numpy as np
    >>> from hf_ext.online_covering import GreedySteinerTree
    >>> w = np.zeros((4, 4)); w[0, 1] = 1.0; w[1, 2] = 2.0; w[2, 3] = 4.0
    >>> alg = GreedySteinerTree(graph=w)
    >>> alg.serve(2), alg.serve(0), alg.serve(3)
    ([], [(0, 1), (1, 2)], [(2, 3)])
    >>> alg.cost_
    7.0
    """

    weights_: np.ndarray
    root_: int | None

    _instance_attrs = ("weights_", "euclidean_")

    def __init__(self, graph=None, points=None):
        self.graph = graph
        self.points = points

    def _setup(self) -> None:
        if (self.graph is None) == (self.points is None):
            raise ValueError(
                "pass exactly one of `graph` and `points`, got "
                f"graph={'set' if self.graph is not None else None}, "
                f"points={'set' if self.points is not None else None}."
            )
        if self.points is not None:
            pts = check_points(self.points)
            w = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=-1)
            off = ~np.eye(len(pts), dtype=bool)
            w[off] = np.maximum(w[off], 1e-12)  # coincident points stay adjacent
        else:
            w = _dense_weights(self.graph)
        self.weights_ = w
        self.euclidean_ = self.points is not None
        _, self.component_ = connected_components(sparse.csr_array(w), directed=False)
        self._parent = np.arange(w.shape[0])
        self._tiny = 1e-9 * float(w[w > 0].min()) if (w > 0).any() else 0.0
        self.root_ = None

    def _find(self, v: int) -> int:
        parent = self._parent
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return int(v)

    def _normalize(self, request: Hashable) -> int:
        n = self.weights_.shape[0]
        if not isinstance(request, numbers.Integral) or isinstance(request, bool) or not 0 <= request < n:
            raise ValueError(
                f"request {request!r} cannot be covered: terminals are vertex indices 0..{n - 1}."
            )
        return int(request)

    def _check_order(self, request: int) -> None:
        if self.root_ is not None and self.component_[request] != self.component_[self.root_]:
            raise ValueError(
                f"request {request!r} cannot be covered: vertex {request} is unreachable from the first "
                f"terminal {self.root_}."
            )

    def item_cost(self, item: tuple[int, int]) -> float:
        return float(self.weights_[item])

    def covers(self, request: int) -> bool:
        return self.root_ is None or self._find(request) == self._find(self.root_)

    def _on_buy(self, item: tuple[int, int]) -> None:
        self._parent[self._find(item[0])] = self._find(item[1])

    def _on_settle(self, request: int) -> None:
        if self.root_ is None:
            self.root_ = request

    def tree_vertices(self) -> np.ndarray:
        """Vertices connected to the first terminal by bought edges."""
        if self.root_ is None:
            return np.array([], dtype=int)
        roots = self._parent.copy()
        while True:  # pointer jumping: every vertex's union-find root
            nxt = roots[roots]
            if np.array_equal(nxt, roots):
                break
            roots = nxt
        return np.flatnonzero(roots == roots[self.root_])

    def _decide(self, request: int) -> list[tuple[int, int]]:
        if self.covers(request):
            return []
        tree = self.tree_vertices()
        root = self._find(int(tree[0]))
        if self.euclidean_ and all(self._find(u) == root for u, _ in self.item_kind_):
            # complete metric graph, no free edges off the tree: the shortest path is the direct edge
            return [_edge(request, int(tree[np.argmin(self.weights_[request, tree])]))]
        w = self.weights_.copy()
        for u, v in self.item_kind_:
            w[u, v] = w[v, u] = self._tiny
        dist, pred = dijkstra(w, directed=False, indices=request, return_predecessors=True)
        target = int(tree[np.argmin(dist[tree])])
        return [e for e in reversed(_path_edges(pred, request, target)) if e not in self.item_kind_]

    def offline(self, requests, *, method: str = "exact", time_limit: float = 20.0) -> OfflineResult:
        return steiner_tree_opt(self.weights_, list(requests), method=method, euclidean=self.euclidean_)

    def lazy_items(self, request: int, solution) -> list[tuple[int, int]]:
        """Edges of the predicted tree on the path from ``request`` to the current tree (empty if none)."""
        if self.covers(request):
            return []
        adjacency: dict[int, list[int]] = {}
        for u, v in solution:
            adjacency.setdefault(u, []).append(v)
            adjacency.setdefault(v, []).append(u)
        root = self._find(int(self.tree_vertices()[0]))
        parent = {request: request}
        queue = deque([request])
        while queue:
            u = queue.popleft()
            if self._find(u) == root:
                path, v = [], u
                while v != request:
                    path.append(_edge(parent[v], v))
                    v = parent[v]
                return [e for e in reversed(path) if e not in self.item_kind_]
            for v in adjacency.get(u, []):
                if v not in parent:
                    parent[v] = u
                    queue.append(v)
        return []

    def min_item_cost(self, request: int) -> float:
        row = self.weights_[request]
        return float(row[row > 0].min()) if (row > 0).any() else 0.0
