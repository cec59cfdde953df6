"""Follow the cheaper of two online covering algorithms, with hysteresis [reconstructed]."""

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

BUDGET_MODES = ("prediction", "min_item")
_REL_TOL = 1e-9


class Robustify(LedgerView, BaseEstimator):
    """Run two online algorithms in simulation and follow the cheaper one, with hysteresis [reconstructed].

    Both algorithms serve every request (in simulation); we follow the *active* one. After both have served
    the current request, if the active one's simulated cost exceeds ``ratio`` times the other's plus
    ``B_0`` (the initial budget, relative tolerance 1e-9), the other becomes active and we buy its whole
    current solution (``"catch_up"``); otherwise we buy what the active one bought for this request. Our
    purchases always contain the active algorithm's solution, so every request is covered (a
    facility-location request connects to the nearest facility we own).

    Guarantee (our derivation; the paper body is not available): ``cost <= (1 + ratio) min(cost_A, cost_B)
    + B_0`` for every request sequence. Everything bought while following an algorithm belongs to its
    solution (catch-up buys its solution, later purchases are its own items, and a request connects no
    further than in that algorithm), so we pay at most the final cost of the algorithm active now plus the
    cost the other one had reached just before the last switch away from it, which the switch rule kept
    below ``ratio`` times the first plus ``B_0``. With no switch we pay exactly what ``primary`` pays.

    ``B_0`` lets the primary run ahead of ``ratio`` times the fallback. With ``initial_budget="prediction"``
    it is the price of the most expensive item of ``SOL(R_hat)``: a prediction-following algorithm that pays
    a large predicted item before the fallback has spent much is not abandoned for that one item, while
    spurious predictions that make it pay item after item beyond ``ratio`` times the fallback trigger a
    switch. The whole ``cost(SOL(R_hat))`` as ``B_0`` (the earlier rule) never switches on the adversarial
    family: the lazy cost stays below it.

    Primary and fallback must be built for the same instance (same problem and parameters apart from
    ``random_state``). An up-front :class:`~hf_ext.online_covering.predictions.WithPredictions` cannot be
    robustified (its time-0 purchase is sunk): it is accepted with a ``UserWarning``, and its pre-bought
    items are bought at time 0 since it starts active.

    Args:
        primary: The algorithm followed first (typically ``WithPredictions(..., mode="lazy")``).
        fallback: The other one (typically the plain online algorithm with a different seed).
        ratio: Hysteresis factor, ``> 1``: switch when the active cost exceeds ``ratio`` times the other's
            plus ``B_0``. Larger values follow the primary longer and weaken the guarantee.
        initial_budget: ``B_0``: ``"prediction"`` (the costliest item of ``SOL(R_hat)``; ``primary`` must be
            a ``WithPredictions``), ``"min_item"`` (the cheapest item serving the first request), or a float
            ``>= 0``.

    Attributes:
        primary_, fallback_: The simulated copies.
        ledger_: Our own purchases (a fresh copy of the problem instance).
        active_: 0 while following ``primary_``, 1 for ``fallback_``.
        phase_: Number of switches so far.
        budget0_: ``B_0`` (``None`` before the first request with ``"min_item"``).
        switches_: ``(request index, phase)`` per switch.

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
            check_choice("initial_budget", budget, BUDGET_MODES, hint="Or pass a float >= 0.")
            if budget == "prediction" and not isinstance(self.primary, WithPredictions):
                raise ValueError(
                    '`initial_budget="prediction"` needs `primary` to be a WithPredictions, got '
                    f"{type(self.primary).__name__}."
                )
        else:
            check_float("initial_budget", budget, low=0, hint='Or "prediction" / "min_item".')
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
        base_p, base_f = (_problem(alg) for alg in self._algorithms())
        if not base_p.same_instance(base_f):
            raise ValueError(
                "`primary` and `fallback` must be built for the same instance (same problem and parameters "
                f"apart from random_state), got {base_p!r} and {base_f!r}."
            )
        self.ledger_ = self.primary_.new_ledger()
        self.active_ = 0
        self.phase_ = 0
        if budget == "prediction":
            sol = self.primary_.prediction_solution_.solution
            self.budget0_ = max((base_p.item_cost(item) for item in sol), default=0.0)
        else:
            self.budget0_ = None if budget == "min_item" else float(budget)
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
            bought.append(alg.serve(request))
        request = self.ledger_.normalize(request)
        if self.budget0_ is None:
            self.budget0_ = self.ledger_.min_item_cost(request)
        active, other = self._algorithms()[self.active_], self._algorithms()[1 - self.active_]
        limit = float(self.ratio) * other.cost_ + self.budget0_
        if active.cost_ > limit * (1 + _REL_TOL):
            self.active_ = 1 - self.active_
            self.phase_ += 1
            self.switches_.append((len(self.history_), self.phase_))
            logger.debug(
                "Robustify: switch %d, following %s", self.phase_, ("primary", "fallback")[self.active_]
            )
            self._catch_up(kind="catch_up")
        else:
            for item in bought[self.active_]:
                self.ledger_.buy([item], kind=active.item_kind_[item])
        return self.ledger_.settle(request)

    def bound(self) -> float:
        """The guarantee's right-hand side for the requests served so far (see the class docstring)."""
        self._ensure_reset()
        r = float(self.ratio)
        best = min(alg.cost_ for alg in self._algorithms())
        return (1 + _REL_TOL) * ((1 + r) * best + (self.budget0_ or 0.0))

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


def _problem(alg: Any) -> OnlineCoveringAlgorithm:
    """The reset problem instance behind ``alg`` (a wrapper's residual algorithm, or ``alg`` itself)."""
    return alg.online_ if isinstance(alg, WithPredictions) else alg
