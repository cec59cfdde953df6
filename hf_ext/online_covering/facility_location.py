"""Online facility location with uniform opening cost: Meyerson's randomised algorithm (2001)."""

from __future__ import annotations

import logging
import numbers
from collections.abc import Hashable

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from hf_ext._validation import check_float
from hf_ext.online_covering.core import OnlineCoveringAlgorithm
from hf_ext.online_covering.inputs import check_points
from hf_ext.online_covering.offline import OfflineResult, facility_location_opt

logger = logging.getLogger(__name__)


class MeyersonFacilityLocation(OnlineCoveringAlgorithm, BaseEstimator):
    """Meyerson's online facility location, expected ``O(log k)``-competitive.

    A request at distance ``d`` from the nearest open facility opens a facility at itself with
    probability ``min(d / f, 1)``, and otherwise connects to that facility (the first request always
    opens). The optimal deterministic ratio is ``Theta(log k / log log k)`` (Fotakis).

    Requests and items (facility sites) are row indices of ``points``; ``cost_`` adds the Euclidean
    connection cost of every request to the nearest facility open when it is served.

    Parameters
    ----------
    points : array-like of shape (n, dim)
        Candidate coordinates: the universe of requests and facility sites.
    opening_cost : float, default=1.0
        ``f``, the finite, positive price of one facility.
    random_state : int, RandomState instance or None, default=None
        Seeds the opening coin flips.

    Attributes
    ----------
    points_ : ndarray of shape (n, dim)
    open_ : list of int
        Open facility sites, in opening order.

    Examples
    --------
    >>> from hf_ext.online_covering import MeyersonFacilityLocation
    >>> alg = MeyersonFacilityLocation(points=[[0.0, 0.0], [1.0, 0.0], [9.0, 0.0]], opening_cost=1e6)
    >>> for r in [0, 1, 2]:
    ...     _ = alg.serve(r)
    >>> alg.open_, alg.cost_ - 1e6
    ([0], 10.0)
    """

    points_: np.ndarray
    open_: list[int]
    _rng: np.random.RandomState

    _instance_attrs = ("points_", "opening_cost")

    def __init__(self, points, opening_cost: float = 1.0, random_state=None):
        self.points = points
        self.opening_cost = opening_cost
        self.random_state = random_state

    def _setup(self) -> None:
        pts = check_points(self.points)
        check_float("opening_cost", self.opening_cost, low=0, low_open=True)
        self.points_ = pts
        self.open_ = []
        self._rng = check_random_state(self.random_state)

    def _normalize(self, request: Hashable) -> int:
        n = len(self.points_)
        if not isinstance(request, numbers.Integral) or isinstance(request, bool) or not 0 <= request < n:
            raise ValueError(
                f"request {request!r} cannot be covered: requests are indices of `points`, 0..{n - 1}."
            )
        return int(request)

    def item_cost(self, item: int) -> float:
        return float(self.opening_cost)

    def covers(self, request: int) -> bool:
        return bool(self.open_)

    def distance(self, request: int) -> float:
        """Distance from ``request`` to the nearest open facility (``inf`` when none is open)."""
        if not self.open_:
            return float("inf")
        return float(np.linalg.norm(self.points_[self.open_] - self.points_[request], axis=1).min())

    def _connection_cost(self, request: int) -> float:
        return self.distance(request)

    def _on_buy(self, item: int) -> None:
        self.open_.append(item)

    def _decide(self, request: int) -> list[int]:
        d = self.distance(request)
        return [request] if self._rng.random_sample() < min(d / self.opening_cost, 1.0) else []

    def offline(self, requests, *, method: str = "exact", time_limit: float = 20.0) -> OfflineResult:
        return facility_location_opt(
            self.points_, float(self.opening_cost), list(requests), method=method, time_limit=time_limit
        )

    def lazy_items(self, request: int, solution) -> list[int]:
        """The predicted facility nearest to ``request``, unless an open one is at least as near.

        Opening the predicted site then would not shorten this request's connection; with spurious
        predictions it would only add ``f`` (about 1-2% of the lazy cost at half the requests wrong).
        """
        if not solution:
            return []
        sites = np.asarray(solution, dtype=int)
        dist = np.linalg.norm(self.points_[sites] - self.points_[request], axis=1)
        nearest = int(np.argmin(dist))
        if self.distance(request) <= dist[nearest]:
            return []
        return [int(sites[nearest])]

    def min_item_cost(self, request: int) -> float:
        return float(self.opening_cost)
