"""The contract every online covering algorithm follows: irrevocable purchases, a cost ledger, a history.

An algorithm serves requests one at a time, in order, with no look-ahead. Each ``serve(request)`` buys
items (a set index, a facility site, a ``(k, start)`` permit, an ``(u, v)`` edge) that can never be sold
back, then pays the request's connection cost (non-zero only for facility location). The ledger keeps
the bought items with the reason they were bought (the ``kind``), so wrappers can report where the
money went: ``"prebuy"`` (predictions bought at time 0), ``"lazy"`` (predictions bought on arrival),
``"online"`` (the classical rule), ``"catch_up"`` (a :class:`~hf_ext.online_covering.robust.Robustify`
switch) and ``"connection"``.

Parameters follow scikit-learn: ``__init__`` only stores them, validation happens in :meth:`reset` (the
analogue of ``fit``), state ends in ``_``. ``serve`` calls ``reset`` on first use, so ``clone(alg)`` is a
fresh, unserved copy.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from hf_ext._registry import paper
from hf_ext.online_covering.offline import OfflineResult

logger = logging.getLogger(__name__)

KINDS = ("prebuy", "lazy", "online", "catch_up", "connection")
"""Cost categories of ``cost_breakdown_``."""


class LedgerView:
    """Read-only ledger attributes, delegated to the object returned by ``_ledger()``."""

    def _ledger(self) -> OnlineCoveringAlgorithm:
        raise NotImplementedError

    @property
    def cost_(self) -> float:
        """Total cost paid so far: purchases plus connections."""
        return self._ledger().cost_

    @property
    def solution_(self) -> list[Hashable]:
        """Items bought so far, in purchase order."""
        return self._ledger().solution_

    @property
    def item_kind_(self) -> dict[Hashable, str]:
        """Item -> the kind of purchase that bought it."""
        return self._ledger().item_kind_

    @property
    def history_(self) -> list[dict[str, Any]]:
        """One dict per served request: ``request``, ``bought`` (items) and ``cost`` (paid for it)."""
        return self._ledger().history_

    @property
    def cost_breakdown_(self) -> dict[str, float]:
        """Cost per kind: ``prebuy``, ``lazy``, ``online``, ``catch_up``, ``connection``."""
        return self._ledger().cost_breakdown_


class OnlineCoveringAlgorithm:
    """Base of the classical online algorithms: one subclass per problem, each also a ``BaseEstimator``.

    Subclasses implement the problem hooks: ``_setup`` (validate parameters, build structures),
    ``_normalize`` (canonical request or ``ValueError`` when it cannot be covered), ``item_cost``,
    ``covers``, ``_decide`` (the online rule), ``offline`` (SOL of a request multiset), ``lazy_items``
    and ``min_item_cost``; optionally ``_connection_cost``, ``_on_buy`` and ``_check_order``.
    """

    _paper = paper("online_covering")
    _instance_attrs: tuple[str, ...] = ()
    """Attributes set by ``_setup`` that define the instance (compared by :meth:`same_instance`)."""

    # ------------------------------------------------------------------ lifecycle
    def reset(self) -> OnlineCoveringAlgorithm:
        """Validate the parameters and forget everything served; returns ``self``."""
        self._setup()
        self.item_kind_: dict[Any, str] = {}
        self.cost_breakdown_: dict[str, float] = dict.fromkeys(KINDS, 0.0)
        self.history_: list[dict[str, Any]] = []
        self.finalized_ = False
        self._pending: list[Hashable] = []
        self._settled_cost = 0.0
        return self

    def _ensure_reset(self) -> None:
        if not hasattr(self, "item_kind_"):
            self.reset()

    def _check_open(self) -> None:
        self._ensure_reset()
        if self.finalized_:
            raise RuntimeError(
                f"{type(self).__name__} was finalized; `serve` is not allowed after `finalize`. "
                "Call `reset()` to start a new request sequence."
            )

    def finalize(self, true_requests: Iterable[Hashable] | None = None) -> OnlineCoveringAlgorithm:
        """Close the sequence: later ``serve`` calls raise ``RuntimeError``. Returns ``self``."""
        self._ensure_reset()
        self.finalized_ = True
        return self

    def same_instance(self, other: Any) -> bool:
        """Whether ``other`` is the same problem instance: same class, same validated structures (the
        ``_instance_attrs`` built by :meth:`reset`), whatever the ``random_state``."""
        if type(self) is not type(other):
            return False
        self._ensure_reset()
        other._ensure_reset()
        return all(_equal(getattr(self, k), getattr(other, k)) for k in self._instance_attrs)

    def new_ledger(self) -> OnlineCoveringAlgorithm:
        """A fresh, reset copy of this problem instance, used as a purchase ledger by wrappers."""
        from sklearn.base import clone

        return clone(self).reset()

    # ------------------------------------------------------------------ serving
    def serve(self, request: Any) -> list[Any]:
        """Serve one request irrevocably and return the items bought for it.

        Raises:
            ValueError: the request cannot be covered by this instance.
            RuntimeError: called after :meth:`finalize`.
        """
        self._check_open()
        request = self._check_request(request)
        self.buy(self._decide(request), kind="online")
        return self.settle(request)

    def buy(self, items: Iterable[Any], kind: str = "online") -> list[Any]:
        """Buy ``items`` (already-owned ones are skipped) and return the newly bought ones."""
        self._ensure_reset()
        if kind not in KINDS or kind == "connection":
            raise ValueError(f"`kind` must be one of {KINDS[:-1]}, got {kind!r}.")
        new = []
        for item in items:
            if item in self.item_kind_:
                continue
            self.item_kind_[item] = kind
            self.cost_breakdown_[kind] += float(self.item_cost(item))
            self._on_buy(item)
            new.append(item)
        self._pending += new
        return new

    def settle(self, request: Any) -> list[Any]:
        """Finish serving ``request`` with what is owned now: pay its connection, log it.

        Returns the items bought since the previous ``settle``. Raises ``RuntimeError`` if the owned
        items do not cover the request (a broken invariant, never a user error).
        """
        if not self.covers(request):
            raise RuntimeError(f"internal error: request {request!r} is not covered after serving it")
        self.cost_breakdown_["connection"] += float(self._connection_cost(request))
        self._on_settle(request)
        bought, self._pending = self._pending, []
        cost = self.cost_
        self.history_.append({"request": request, "bought": bought, "cost": cost - self._settled_cost})
        self._settled_cost = cost
        return bought

    def _check_request(self, request: Any) -> Any:
        """Canonical form of an arriving request; raises ``ValueError`` when it cannot be served."""
        request = self._normalize(request)
        self._check_order(request)
        return request

    def in_universe(self, request: Any) -> bool:
        """Whether ``request`` could be covered by this instance."""
        self._ensure_reset()
        try:
            self._normalize(request)
        except ValueError:
            return False
        return True

    def normalize(self, request: Any) -> Any:
        """Canonical form of ``request`` (e.g. ``numpy.int64(3)`` -> ``3``); ``ValueError`` if uncoverable."""
        self._ensure_reset()
        return self._normalize(request)

    # ------------------------------------------------------------------ ledger
    @property
    def cost_(self) -> float:
        """Total cost paid so far: purchases plus connections."""
        return float(sum(self.cost_breakdown_.values()))

    @property
    def solution_(self) -> list[Any]:
        """Items bought so far, in purchase order."""
        return list(self.item_kind_)

    # ------------------------------------------------------------------ problem hooks
    def _setup(self) -> None:
        raise NotImplementedError

    def _normalize(self, request: Any) -> Any:
        raise NotImplementedError

    def _check_order(self, request: Any) -> None:
        """Raise ``ValueError`` if ``request`` may not follow the requests served so far."""

    def item_cost(self, item: Any) -> float:
        """Price of one item."""
        raise NotImplementedError

    def covers(self, request: Any) -> bool:
        """Whether the items owned now serve ``request``."""
        raise NotImplementedError

    def _decide(self, request: Any) -> list[Any]:
        raise NotImplementedError

    def _connection_cost(self, request: Any) -> float:
        return 0.0

    def _on_buy(self, item: Any) -> None:
        """Update derived structures after ``item`` was bought."""

    def _on_settle(self, request: Any) -> None:
        """Update derived structures after ``request`` was served."""

    def offline(
        self, requests: Sequence[Any], *, method: str = "exact", time_limit: float = 20.0
    ) -> OfflineResult:
        """Offline solution of the request multiset ``requests`` (``method``: ``"exact"`` or ``"approx"``)."""
        raise NotImplementedError

    def lazy_items(self, request: Any, solution: Sequence[Any]) -> list[Any]:
        """The cheapest part of an offline ``solution`` that serves ``request`` now (empty if covered)."""
        raise NotImplementedError

    def min_item_cost(self, request: Any) -> float:
        """Price of the cheapest item that serves ``request`` (the ``"min_item"`` initial budget)."""
        raise NotImplementedError


def _equal(a: Any, b: Any) -> bool:
    """Equality that compares numpy arrays element-wise (and lists of them)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.shape(a) == np.shape(b) and np.array_equal(a, b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    return bool(a == b)
