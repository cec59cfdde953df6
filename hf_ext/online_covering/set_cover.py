"""Online weighted set cover: Alon, Awerbuch, Azar, Buchbinder and Naor (randomised primal-dual, rounding)."""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable, Sequence

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils import check_random_state

from hf_ext.online_covering.core import OnlineCoveringAlgorithm
from hf_ext.online_covering.inputs import check_costs, check_sets
from hf_ext.online_covering.offline import OfflineResult, set_cover_opt

logger = logging.getLogger(__name__)


class OnlineSetCover(OnlineCoveringAlgorithm, BaseEstimator):
    """Online weighted set cover (Alon-Awerbuch-Azar-Buchbinder-Naor), ``O(log m log n)``-competitive.

    Elements arrive one at a time; an uncovered element must be covered by buying a set containing it.

    - Fractional part: while ``sum_{S ∋ e} x_S < 1`` repeat
      ``x_S <- min(1, x_S (1 + 1/c_S) + 1/(d c_S))`` over the ``d`` sets containing ``e`` (``O(log d)``
      fractionally). The cap at 1 is [reconstructed] and harmless.
    - Rounding: every set draws ``theta_S`` = the minimum of ``ceil(2 ln(n + 1))`` uniforms at
      :meth:`reset` (``n`` = number of coverable elements) and is bought once ``x_S >= theta_S``.
    - If ``e`` is still uncovered, the cheapest set containing ``e`` is bought.

    Items are set indices.

    Parameters
    ----------
    sets : sequence of sequences of hashable
        The ``m`` sets; their union is the universe of coverable elements.
    costs : sequence of float, length ``m``
        Finite, positive set costs (the update divides by them).
    random_state : int, RandomState instance or None, default=None
        Seeds the rounding thresholds.

    Attributes
    ----------
    x_ : ndarray of shape (m,)
        The fractional solution.
    thresholds_ : ndarray of shape (m,)
        The rounding thresholds ``theta_S``.
    cost_, solution_, history_, cost_breakdown_
        The purchase ledger (see :class:`~hf_ext.online_covering.core.OnlineCoveringAlgorithm`).

    Examples
    --------
    >>> from hf_ext.online_covering import OnlineSetCover
    >>> alg = OnlineSetCover(sets=[[0, 1], [1, 2], [2]], costs=[1.0, 2.0, 1.0], random_state=0)
    >>> for e in [0, 2, 1]:
    ...     _ = alg.serve(e)
    >>> all(alg.covers(e) for e in [0, 1, 2]), sorted(alg.solution_), alg.cost_
    (True, [0, 1, 2], 4.0)
    """

    _instance_attrs = ("sets_", "costs_")

    def __init__(self, sets: Sequence[Sequence[Hashable]], costs: Sequence[float], random_state=None):
        self.sets = sets
        self.costs = costs
        self.random_state = random_state

    def _setup(self) -> None:
        sets = check_sets(self.sets)
        costs = check_costs(self.costs, len(sets), "set")
        self.sets_, self.costs_ = sets, costs
        containing: dict[Hashable, list[int]] = {}
        for i, s in enumerate(sets):
            for e in s:
                containing.setdefault(e, []).append(i)
        self.containing_ = {e: np.asarray(ix) for e, ix in containing.items()}
        rng = check_random_state(self.random_state)
        draws = max(1, math.ceil(2 * math.log(len(self.containing_) + 1)))
        self.thresholds_ = rng.random_sample((len(sets), draws)).min(axis=1)
        self.x_ = np.zeros(len(sets))
        self._covered: set[Hashable] = set()

    def _normalize(self, request: Hashable) -> Hashable:
        try:
            found = request in self.containing_
        except TypeError:
            found = False
        if not found:
            raise ValueError(f"request {request!r} cannot be covered: it lies in no set of `sets`.")
        return request

    def item_cost(self, item: int) -> float:
        return float(self.costs_[item])

    def covers(self, request: Hashable) -> bool:
        return request in self._covered

    def _on_buy(self, item: int) -> None:
        self._covered |= self.sets_[item]

    def fractional_step(self, element: Hashable) -> np.ndarray:
        """Raise the fractional solution until ``element`` is fractionally covered; returns its sets."""
        ix = self.containing_[element]
        c = self.costs_[ix]
        x = self.x_
        while x[ix].sum() < 1.0:
            x[ix] = np.minimum(1.0, x[ix] * (1.0 + 1.0 / c) + 1.0 / (ix.size * c))
        return ix

    def _decide(self, element: Hashable) -> list[int]:
        if self.covers(element):
            return []
        ix = self.fractional_step(element)
        chosen = [int(i) for i in ix if self.x_[i] >= self.thresholds_[i]]
        if not chosen:  # every set in ix contains the element
            chosen.append(int(ix[np.argmin(self.costs_[ix])]))
        return chosen

    def offline(self, requests, *, method: str = "exact", time_limit: float = 20.0) -> OfflineResult:
        return set_cover_opt(self.sets_, self.costs_, list(requests), method=method, time_limit=time_limit)

    def lazy_items(self, request: Hashable, solution) -> list[int]:
        if self.covers(request):
            return []
        serving = [i for i in solution if request in self.sets_[i]]
        return [min(serving, key=self.item_cost)] if serving else []

    def min_item_cost(self, request: Hashable) -> float:
        return float(self.costs_[self.containing_[request]].min())
