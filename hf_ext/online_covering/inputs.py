"""Input checks shared by the online algorithms, the offline solvers and the instance builders.

Every check raises with the house message form ("`costs[1]` must be a finite float > 0, got 0.0.").
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from hf_ext._validation import check_float, check_int, check_sequence


def check_costs(costs: Any, n: int, per: str, name: str = "costs") -> np.ndarray:
    """``costs`` as a float array of ``n`` finite, positive prices (one per ``per``).

    Raises:
        ValueError: wrong length, or a cost that is not finite and > 0 (primal-dual rules divide by costs).
        TypeError: ``costs`` is not a list or 1-D array of numbers.
    """
    values: list[Any] = check_sequence(name, costs)
    if len(values) != n:
        raise ValueError(f"`{name}` must hold one cost per {per} ({n}), got {len(values)} cost(s).")
    positive = [
        check_float(f"{name}[{i}]", v, low=0, low_open=True, hint="Costs are prices; rules divide by them.")
        for i, v in enumerate(values)
    ]
    return np.asarray(positive, dtype=float)


def check_sets(sets: Any) -> list[frozenset[Hashable]]:
    """A non-empty list of sets of hashable elements, as frozensets."""
    family: list[Any] = check_sequence("sets", sets, min_length=1)
    try:
        return [frozenset(s) for s in family]
    except TypeError:
        raise TypeError(f"`sets` must be a list of sets of hashable elements, got {sets!r}.") from None


def check_permits(durations: Any, costs: Any) -> tuple[list[int], np.ndarray]:
    """Parking permit types: nested, aligned durations (strictly increasing, each dividing the next) and
    one finite, positive cost per duration."""
    d = check_sequence("durations", durations, lambda n, v: check_int(n, v, low=1), min_length=1)
    for a, b in zip(d, d[1:]):
        if b <= a or b % a:
            raise ValueError(
                "`durations` must be nested and aligned (strictly increasing, each dividing the next), "
                f"got {durations!r}: {b} does not follow {a}. E.g. durations=(1, 2, 4, 8)."
            )
    return d, check_costs(costs, len(d), "duration")


def check_points(points: Any, name: str = "points") -> np.ndarray:
    """A finite ``(n, dim)`` float array with ``n >= 1``."""
    try:
        pts = np.asarray(points, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be an (n, dim) array of numbers, got {points!r}.") from None
    if pts.ndim != 2 or pts.shape[0] == 0 or not np.isfinite(pts).all():
        raise ValueError(
            f"`{name}` must be a finite (n, dim) array with n >= 1, got shape {pts.shape}. "
            "E.g. points=np.random.rand(80, 2)."
        )
    return pts


def check_weight_matrix(weights: Any, name: str = "weights") -> np.ndarray:
    """A square, finite, non-negative weight matrix (0 = no edge), symmetrised by the larger direction."""
    try:
        w = np.asarray(weights, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"`{name}` must be an (n, n) array of edge weights, got {weights!r}.") from None
    if w.ndim != 2 or w.shape[0] != w.shape[1] or w.shape[0] == 0:
        raise ValueError(f"`{name}` must be a square (n, n) weight matrix with n >= 1, got shape {w.shape}.")
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError(f"`{name}` weights must be finite and >= 0 (0 = no edge).")
    return np.maximum(w, w.T)


def check_indices(name: str, values: Any, n: int) -> list[int]:
    """A list of ints in ``[0, n - 1]`` (request or site indices of an instance with ``n`` points)."""
    return check_sequence(name, values, lambda k, v: check_int(k, v, low=0, high=n - 1))


def check_requests(requests: Any) -> list[Hashable]:
    """A list of hashable requests."""
    items: list[Any] = check_sequence("requests", requests)
    for i, r in enumerate(items):
        if not isinstance(r, Hashable):
            raise TypeError(f"`requests[{i}]` must be hashable (an element id), got {r!r}.")
    return items


def check_rng(rng: Any) -> np.random.Generator:
    """``rng`` if it is a ``numpy.random.Generator``."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"`rng` must be a numpy.random.Generator (np.random.default_rng(seed)), got {rng!r}.")
    return rng


def check_range(name: str, value: Any, *, low: float, integer: bool = False, low_open: bool = False) -> tuple:
    """A pair ``(lo, hi)`` with ``low <= lo <= hi`` (``low < lo`` when ``low_open``)."""

    def item(k: str, v: Any) -> Any:
        if integer:
            return check_int(k, v, low=int(low))
        return check_float(k, v, low=low, low_open=low_open)

    lo, hi = check_sequence(name, value, item, length=2)
    if lo > hi:
        raise ValueError(f"`{name}` must be a pair (lo, hi) with lo <= hi, got {value!r}.")
    return lo, hi
