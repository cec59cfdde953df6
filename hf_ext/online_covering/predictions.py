"""Request predictions for any online covering algorithm: the up-front and lazy reductions, and the error eta.

The whole reduction is [reconstructed] from the abstract and introduction of Jabal Ameli, Sanità and
Venzin, "Learning-Augmented Online Covering Problems" (ICML 2026, arXiv 2507.06032); the paper body
was not available. The count-based error, the lazy rule and the residual hand-off below are ours.
"""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from typing import Any

from sklearn.base import BaseEstimator, clone

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float
from hf_ext.online_covering.core import LedgerView, OnlineCoveringAlgorithm
from hf_ext.online_covering.offline import OfflineResult

logger = logging.getLogger(__name__)

MODES = ("upfront", "lazy")


def prediction_error(true_requests: Iterable[Hashable], predicted_requests: Iterable[Hashable]) -> int:
    """Count-based prediction error ``eta = |R \\ R_hat| + |R_hat \\ R|`` of multisets [reconstructed].

    Args:
        true_requests: The requests ``R`` that arrived (a multiset).
        predicted_requests: The predicted multiset ``R_hat``.

    Returns:
        Missed plus spurious requests.

    Example:
        >>> prediction_error([1, 2, 2, 3], [2, 3, 3, 4])
        4
    """
    true, pred = Counter(true_requests), Counter(predicted_requests)
    return sum((true - pred).values()) + sum((pred - true).values())


class WithPredictions(LedgerView, BaseEstimator):
    """Wrap an online covering algorithm with a predicted request multiset ``R_hat`` [reconstructed].

    At :meth:`reset` (time 0, before any request) the offline solution ``SOL(R_hat)`` is computed:
    exact (MILP / DP, small instances) or approximate. Then

    - ``mode="upfront"`` buys all of ``SOL(R_hat)`` at time 0 (``cost_breakdown_["prebuy"]``);
    - ``mode="lazy"`` (default), when a predicted request arrives uncovered, buys only the cheapest part
      of ``SOL(R_hat)`` serving it: the cheapest solution set containing it (set cover), its nearest
      predicted facility (facility location), the predicted permit covering the day (parking), or the
      predicted-tree path to the current tree (Steiner).

    Each copy in ``R_hat`` is used once (multiset semantics). A request that is covered afterwards is
    only connected; every other request goes to the wrapped online algorithm ``A``, which runs on the
    residual instance (everything bought costs 0 to it, covered requests are skipped). If
    ``R_hat`` is a subset of ``R`` this gives cost ``<= (alpha + rho(eta)) OPT(R)``; with spurious
    predictions ``SOL(R_hat)`` can be arbitrarily expensive and up-front pays all of it. Only the lazy
    mode can be wrapped by :class:`~hf_ext.online_covering.robust.Robustify`.

    Predicted requests outside the instance's universe are dropped with a ``UserWarning``; they still
    count as spurious in ``eta_``.

    Args:
        estimator: The online algorithm ``A`` (cloned at :meth:`reset`, so its ``random_state`` fixes
            the residual run).
        predicted_requests: ``R_hat``, a multiset of requests.
        mode: ``"upfront"`` or ``"lazy"``.
        offline: ``"exact"`` (raises above the size caps), ``"approx"``, or a precomputed
            :class:`~hf_ext.online_covering.offline.OfflineResult` for ``predicted_requests``.
        time_limit: Seconds allowed to an exact MILP.
        error: ``f(true_requests, predicted_requests) -> float``; defaults to :func:`prediction_error`
            (the eta definition is pluggable because the paper's is unknown).

    Attributes:
        online_: The residual copy of ``estimator``; it also holds the ledger.
        prediction_solution_: ``SOL(R_hat)`` as an ``OfflineResult``.
        prediction_cost_: ``SOL(R_hat).value``.
        eta_: Prediction error, set by :meth:`finalize`.

    Example:
        >>> from hf_ext.online_covering import OnlineSetCover, WithPredictions
        >>> sets, costs = [[0, 1], [1, 2], [2, 3]], [1.0, 1.0, 1.0]
        >>> alg = WithPredictions(OnlineSetCover(sets, costs, random_state=0), predicted_requests=[0, 3])
        >>> for e in [0, 3]:
        ...     _ = alg.serve(e)
        >>> alg.cost_, alg.cost_breakdown_["lazy"], alg.finalize().eta_
        (2.0, 2.0, 0)
    """

    _paper = paper("online_covering")

    online_: OnlineCoveringAlgorithm
    prediction_solution_: OfflineResult
    prediction_cost_: float
    finalized_: bool
    eta_: Any

    def __init__(
        self,
        estimator: OnlineCoveringAlgorithm,
        predicted_requests: Iterable[Hashable] = (),
        mode: str = "lazy",
        offline: str | OfflineResult = "exact",
        time_limit: float = 20.0,
        error: Callable[[list, list], Any] | None = None,
    ):
        self.estimator = estimator
        self.predicted_requests = predicted_requests
        self.mode = mode
        self.offline = offline
        self.time_limit = time_limit
        self.error = error

    def _ledger(self) -> OnlineCoveringAlgorithm:
        if not hasattr(self, "online_"):
            raise AttributeError(
                f"{type(self).__name__} has served nothing yet; call `reset()` or `serve()` first."
            )
        return self.online_

    def reset(self) -> WithPredictions:
        """Validate, compute ``SOL(R_hat)`` (and buy it all in up-front mode); returns ``self``."""
        check_choice("mode", self.mode, MODES)
        if not isinstance(self.offline, OfflineResult):
            check_choice("offline", self.offline, ("exact", "approx"), hint="Or pass an OfflineResult.")
        check_float("time_limit", self.time_limit, low=0, low_open=True, hint="Seconds for an exact MILP.")
        if not isinstance(self.estimator, OnlineCoveringAlgorithm):
            raise TypeError(
                "`estimator` must be an OnlineCoveringAlgorithm (e.g. OnlineSetCover), "
                f"got {type(self.estimator).__name__}."
            )
        online = clone(self.estimator).reset()
        predicted: list[Hashable] = []
        dropped: list[Hashable] = []
        for r in self.predicted_requests:
            (predicted if online.in_universe(r) else dropped).append(r)
        if dropped:
            warnings.warn(
                f"{len(dropped)} predicted request(s) lie outside the instance and were dropped "
                f"(counted as spurious in eta_), e.g. {dropped[0]!r}.",
                UserWarning,
                stacklevel=2,
            )
        predicted = [online.normalize(r) for r in predicted]
        if isinstance(self.offline, OfflineResult):
            sol = self.offline
        else:
            sol = online.offline(predicted, method=self.offline, time_limit=self.time_limit)
        if not sol.exact:
            logger.info("SOL(R_hat) is not proven optimal: %s", sol.status)
        self.online_ = online
        self.prediction_solution_ = sol
        self.prediction_cost_ = float(sol.value)
        self._remaining = Counter(predicted)
        self.finalized_ = False
        if self.mode == "upfront":
            online.buy(sol.solution, kind="prebuy")
        return self

    def _ensure_reset(self) -> None:
        if not hasattr(self, "online_"):
            self.reset()

    def serve(self, request: Hashable) -> list[Hashable]:
        """Serve one request irrevocably (no look-ahead); returns the items bought for it."""
        self._ensure_reset()
        if self.finalized_:
            raise RuntimeError("WithPredictions was finalized; `serve` is not allowed after `finalize`.")
        online = self.online_
        request = online._check_request(request)
        if self._remaining[request] > 0:
            self._remaining[request] -= 1
            if self.mode == "lazy":
                online.buy(online.lazy_items(request, self.prediction_solution_.solution), kind="lazy")
            if online.covers(request):
                return online.settle(request)
        online.buy(online._decide(request), kind="online")
        return online.settle(request)

    def finalize(self, true_requests: Iterable[Hashable] | None = None) -> WithPredictions:
        """Close the sequence and set ``eta_`` (default ``true_requests``: the requests served)."""
        self._ensure_reset()
        true = [h["request"] for h in self.history_] if true_requests is None else list(true_requests)
        self.eta_ = (self.error or prediction_error)(true, list(self.predicted_requests))
        self.finalized_ = True
        return self

    def covers(self, request: Hashable) -> bool:
        """Whether the items bought so far serve ``request``."""
        self._ensure_reset()
        return self._ledger().covers(request)

    def new_ledger(self) -> OnlineCoveringAlgorithm:
        """A fresh, reset copy of the wrapped problem instance."""
        return clone(self.estimator).reset()
