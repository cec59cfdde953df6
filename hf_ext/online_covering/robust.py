"""Follow the cheaper of two online covering algorithms under doubling budgets: a robust combination
[reconstructed]."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Hashable, Iterable
from typing import Any

from sklearn.base import BaseEstimator, clone

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float
from hf_ext.online_covering.core import LedgerView, OnlineCoveringAlgorithm
from hf_ext.online_covering.predictions import WithPredictions

logger = logging.getLogger(__name__)

BUDGET_MODES = ("min_item", "prediction")
_REL_TOL = 1e-9


class Robustify(LedgerView, BaseEstimator):
    """Run two online algorithms in simulation; follow the cheaper one under doubling budgets [reconstructed].

    Both algorithms serve every request (in simulation). Phase ``i`` follows the *active* one under the
    budget ``B_i = B_0 ratio^i``. After both have served the current request, while the active one's
    simulated cost exceeds ``B_i (1 + 1e-9)`` the phase advances and the other becomes active; on a
    switch we buy the whole current solution of the newly active algorithm (``"catch_up"``), otherwise
    what it bought for this request. Our purchases always contain the active algorithm's solution, so
    every request is covered (a facility-location request connects to the nearest facility we own).

    Guarantee (our derivation, not the paper's): with ``k`` phases and ``c_max`` the most either
    algorithm paid for one request,
    ``cost <= ratio^3 / (ratio - 1) * min(cost_A, cost_B) + (k + 1) c_max + ratio B_0``
    (multiplier 8 at ``ratio=2``, smallest, 6.75, at ``ratio=1.5``).

    An up-front :class:`~hf_ext.online_covering.predictions.WithPredictions` cannot be robustified (its
    time-0 purchase is sunk): it is accepted with a ``UserWarning``, and its pre-bought items are
    bought at time 0 when it starts active.

    Args:
        primary: The algorithm followed first (typically ``WithPredictions(..., mode="lazy")``).
        fallback: The other one (typically the plain online algorithm with a different seed).
        ratio: Budget growth factor, ``> 1``.
        initial_budget: ``"min_item"`` (``B_0`` = the cheapest item serving the first request),
            ``"prediction"`` (``B_0 = cost(SOL(R_hat))`` of ``primary``, which must be a
            ``WithPredictions``; exact consistency, additive term ``ratio * cost(SOL(R_hat))``; falls
            back to ``"min_item"`` when that cost is 0), or a positive float.

    Attributes:
        primary_, fallback_: The simulated copies.
        ledger_: Our own purchases (a fresh copy of the problem instance).
        active_: 0 while following ``primary_``, 1 for ``fallback_``.
        phase_: Current phase index ``i`` (``phase_ + 1`` phases so far).
        budget0_, budget_: ``B_0`` and ``B_i``.
        c_max_: Largest cost either algorithm paid for a single request.
        switches_: ``(request index, new phase)`` per switch.

    Example:
        >>> from hf_ext.online_covering import OnlineSetCover, Robustify, WithPredictions
        >>> sets, costs = [[0, 1], [1, 2], [2, 3]], [1.0, 1.0, 1.0]
        >>> lazy = WithPredictions(OnlineSetCover(sets, costs, random_state=0), predicted_requests=[0, 3])
        >>> rob = Robustify(lazy, OnlineSetCover(sets, costs, random_state=1), initial_budget="prediction")
        >>> for e in [0, 3]:
        ...     _ = rob.serve(e)
        >>> rob.cost_, rob.phase_
        (2.0, 0)
    """

    _paper = paper("online_covering")

    primary_: Any
    fallback_: Any
    ledger_: OnlineCoveringAlgorithm
    active_: int
    phase_: int
    budget0_: float | None
    budget_: float | None
    c_max_: float
    switches_: list[tuple[int, int]]
    finalized_: bool
    eta_: Any

    def __init__(
        self,
        primary: OnlineCoveringAlgorithm | WithPredictions,
        fallback: OnlineCoveringAlgorithm | WithPredictions,
        ratio: float = 2.0,
        initial_budget: str | float = "min_item",
    ):
        self.primary = primary
        self.fallback = fallback
        self.ratio = ratio
        self.initial_budget = initial_budget

    def _ledger(self) -> OnlineCoveringAlgorithm:
        if not hasattr(self, "ledger_"):
            raise AttributeError(
                f"{type(self).__name__} has served nothing yet; call `reset()` or `serve()` first."
            )
        return self.ledger_

    def _ensure_reset(self) -> None:
        if not hasattr(self, "ledger_"):
            self.reset()

    def reset(self) -> Robustify:
        """Validate, reset both simulated algorithms and the ledger; returns ``self``."""
        check_float("ratio", self.ratio, low=1, low_open=True, hint="E.g. ratio=2.0.")
        budget = self.initial_budget
        if isinstance(budget, str):
            check_choice("initial_budget", budget, BUDGET_MODES, hint="Or pass a float > 0.")
            if budget == "prediction" and not isinstance(self.primary, WithPredictions):
                raise ValueError(
                    '`initial_budget="prediction"` needs `primary` to be a WithPredictions, got '
                    f"{type(self.primary).__name__}."
                )
        else:
            check_float("initial_budget", budget, low=0, low_open=True, hint='Or "min_item" / "prediction".')
        for name, alg in (("primary", self.primary), ("fallback", self.fallback)):
            if isinstance(alg, WithPredictions) and alg.mode == "upfront":
                warnings.warn(
                    f'`{name}` is WithPredictions(mode="upfront"): its time-0 purchase is sunk and cannot be '
                    'robustified; wrap mode="lazy" instead.',
                    UserWarning,
                    stacklevel=2,
                )
        self.primary_ = clone(self.primary).reset()
        self.fallback_ = clone(self.fallback).reset()
        self.ledger_ = self.primary_.new_ledger()
        self.active_ = 0
        self.phase_ = 0
        self.budget0_ = None
        if budget == "prediction" and self.primary_.prediction_cost_ > 0:
            self.budget0_ = float(self.primary_.prediction_cost_)
        elif not isinstance(budget, str):
            self.budget0_ = float(budget)
        self.budget_ = self.budget0_
        self.c_max_ = 0.0
        self.switches_ = []
        self.finalized_ = False
        self._catch_up(kind=None)  # an up-front primary's time-0 purchase
        return self

    def _algorithms(self) -> tuple[OnlineCoveringAlgorithm, OnlineCoveringAlgorithm]:
        return self.primary_, self.fallback_

    def _catch_up(self, kind: str | None) -> None:
        """Buy the active algorithm's whole solution (``kind=None`` keeps its own kinds)."""
        active = self._algorithms()[self.active_]
        for item, item_kind in active.item_kind_.items():
            self.ledger_.buy([item], kind=kind or item_kind)

    def serve(self, request: Hashable) -> list[Hashable]:
        """Serve one request irrevocably (both simulations see it); returns the items we bought for it."""
        self._ensure_reset()
        if self.finalized_:
            raise RuntimeError("Robustify was finalized; `serve` is not allowed after `finalize`.")
        bought = []
        for alg in self._algorithms():
            before = alg.cost_
            bought.append(alg.serve(request))
            self.c_max_ = max(self.c_max_, alg.cost_ - before)
        request = self.ledger_.normalize(request)
        if self.budget_ is None:
            self.budget0_ = self.budget_ = self.ledger_.min_item_cost(request)
            if not self.budget_ > 0:
                self.budget0_ = self.budget_ = max(self.c_max_, 1e-12)
        switched = False
        while self._algorithms()[self.active_].cost_ > self.budget_ * (1 + _REL_TOL):
            self.phase_ += 1
            self.budget_ *= self.ratio
            self.active_ = 1 - self.active_
            switched = True
        if switched:
            self.switches_.append((len(self.history_), self.phase_))
            logger.debug(
                "Robustify: phase %d, following %s", self.phase_, ("primary", "fallback")[self.active_]
            )
            self._catch_up(kind="catch_up")
        else:
            active = self._algorithms()[self.active_]
            for item in bought[self.active_]:
                self.ledger_.buy([item], kind=active.item_kind_[item])
        return self.ledger_.settle(request)

    def bound(self) -> float:
        """The guarantee's right-hand side for the requests served so far (see the class docstring)."""
        self._ensure_reset()
        r = float(self.ratio)
        best = min(alg.cost_ for alg in self._algorithms())
        return r**3 / (r - 1) * best + (self.phase_ + 2) * self.c_max_ + r * (self.budget0_ or 0.0)

    def finalize(self, true_requests: Iterable[Hashable] | None = None) -> Robustify:
        """Close the sequence; ``eta_`` is copied from a ``WithPredictions`` primary (else ``None``)."""
        self._ensure_reset()
        true = [h["request"] for h in self.history_] if true_requests is None else list(true_requests)
        self.primary_.finalize(true)
        self.fallback_.finalize(true)
        self.eta_ = getattr(self.primary_, "eta_", None)
        self.finalized_ = True
        return self

    def covers(self, request: Hashable) -> bool:
        """Whether the items bought so far serve ``request``."""
        self._ensure_reset()
        return self._ledger().covers(request)

    def new_ledger(self) -> OnlineCoveringAlgorithm:
        """A fresh, reset copy of the problem instance."""
        return self.primary_.new_ledger() if hasattr(self, "primary_") else clone(self.primary).new_ledger()
