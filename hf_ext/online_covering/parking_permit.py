"""Online parking permit: Meyerson's deterministic primal-dual algorithm (2005)."""

from __future__ import annotations

import logging
import numbers
from collections import defaultdict
from collections.abc import Hashable

import numpy as np
from sklearn.base import BaseEstimator

from hf_ext.online_covering.core import OnlineCoveringAlgorithm
from hf_ext.online_covering.inputs import check_permits
from hf_ext.online_covering.offline import OfflineResult, parking_permit_opt

logger = logging.getLogger(__name__)

_TIGHT = 1e-12


class ParkingPermit(OnlineCoveringAlgorithm, BaseEstimator):
    """Deterministic primal-dual parking permit (Meyerson 2005), ``O(K)``-competitive.

    ``K`` permit types have nested durations ``D_k`` (each divides the next), aligned starts (multiples
    of ``D_k``) and costs ``C_k``. On an uncovered day ``t`` the dual ``y_t`` rises by the minimum slack
    among the ``K`` permits containing ``t``; that amount is added to each of their payments and every
    permit that became tight is bought. The randomised version is ``O(log K)``; the deterministic lower
    bound is ``Omega(K)``.

    Requests are days (ints >= 0, non-decreasing); items are ``(k, start)`` permits.

    Parameters
    ----------
    durations : sequence of int, default=(1, 2, 4, 8, 16)
        Permit lengths in days, strictly increasing, each dividing the next.
    costs : sequence of float, default=(1, 1.7, 2.8, 4.5, 7)
        Finite, positive permit prices, one per duration.

    Attributes
    ----------
    duals_ : dict of int to float
        ``y_t`` per served day.
    payments_ : dict of (int, int) to float
        Dual payment accumulated by each permit.

    Examples
    --------
    >>> from hf_ext.online_covering import ParkingPermit
    >>> alg = ParkingPermit(durations=[1, 2, 4], costs=[1.0, 1.7, 2.8])
    >>> alg.serve(0), alg.serve(1)
    ([(0, 0)], [(1, 0)])
    >>> round(alg.cost_, 6)
    2.7
    """

    _instance_attrs = ("durations_", "costs_")

    def __init__(self, durations=(1, 2, 4, 8, 16), costs=(1.0, 1.7, 2.8, 4.5, 7.0)):
        self.durations = durations
        self.costs = costs

    def _setup(self) -> None:
        self.durations_, self.costs_ = check_permits(self.durations, self.costs)
        self.duals_: dict[int, float] = {}
        self.payments_: dict[tuple[int, int], float] = defaultdict(float)
        self._last_day = -1

    def _normalize(self, request: Hashable) -> int:
        if not isinstance(request, numbers.Integral) or isinstance(request, bool) or request < 0:
            raise ValueError(f"request {request!r} cannot be covered: parking days are ints >= 0.")
        return int(request)

    def _check_order(self, day: int) -> None:
        if day < self._last_day:
            raise ValueError(
                "parking days must be served in non-decreasing order, "
                f"got day {day} after day {self._last_day}."
            )
        self._last_day = day

    def permits_containing(self, day: int) -> list[tuple[int, int]]:
        """The ``K`` aligned permits ``(k, start)`` whose interval holds ``day``."""
        return [(k, day - day % dk) for k, dk in enumerate(self.durations_)]

    def item_cost(self, item: tuple[int, int]) -> float:
        return float(self.costs_[item[0]])

    def covers(self, day: int) -> bool:
        return any(p in self.item_kind_ for p in self.permits_containing(day))

    def _decide(self, day: int) -> list[tuple[int, int]]:
        if self.covers(day):
            return []
        permits = self.permits_containing(day)
        slack = np.array([self.item_cost(p) - self.payments_[p] for p in permits])
        raise_by = float(slack.min())
        self.duals_[day] = self.duals_.get(day, 0.0) + raise_by
        for p in permits:
            self.payments_[p] += raise_by
        return [p for p, s in zip(permits, slack) if s - raise_by <= _TIGHT * self.item_cost(p)]

    def offline(self, requests, *, method: str = "exact", time_limit: float = 20.0) -> OfflineResult:
        return parking_permit_opt(self.durations_, self.costs_, list(requests))

    def lazy_items(self, day: int, solution) -> list[tuple[int, int]]:
        if self.covers(day):
            return []
        mine = set(self.permits_containing(day))
        serving = [p for p in solution if tuple(p) in mine]
        return [min(serving, key=self.item_cost)] if serving else []

    def min_item_cost(self, day: int) -> float:
        return float(self.costs_.min())
