"""Argument checks shared by every config, estimator and entry point (torch-free).

Each check returns the value in its canonical Python type, or raises with one message form::

    `steps` must be an int >= 0, got -1.
    `eps` must be a finite float in (0, 1], got nan. E.g. eps=0.03.

``TypeError`` when the type is wrong, ``ValueError`` when the value is out of range. ``hint`` is appended as a
sentence (a suggestion for the fix).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

T = TypeVar("T")


def _fail(kind: type[Exception], name: str, need: str, value: Any, hint: str) -> Exception:
    return kind(f"`{name}` must be {need}, got {value!r}.{' ' + hint if hint else ''}")


def _interval(low: float | None, high: float | None, low_open: bool, high_open: bool) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return ""


def _outside(x: float, low: float | None, high: float | None, low_open: bool, high_open: bool) -> bool:
    if low is not None and (x < low or (low_open and x == low)):
        return True
    return high is not None and (x > high or (high_open and x == high))


def check_int(
    name: str, value: Any, *, low: int | None = None, high: int | None = None, hint: str = ""
) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (either bound optional); bools are not ints.

    >>> check_int("steps", 3, low=0)
    3
    """
    bound = _interval(low, high, False, False)
    need = f"an int {bound}".rstrip()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(TypeError, name, need, value, hint)
    if _outside(int(value), low, high, False, False):
        raise _fail(ValueError, name, need, value, hint)
    return int(value)


def check_float(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
    hint: str = "",
) -> float:
    """``value`` as a finite ``float`` within the bounds (``*_open`` excludes the bound); ints are accepted.

    >>> check_float("eps", 0.5, low=0, low_open=True)
    0.5
    """
    bound = _interval(low, high, low_open, high_open)
    need = f"a finite float {bound}".rstrip()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(TypeError, name, need, value, hint)
    x = float(value)
    if not math.isfinite(x) or _outside(x, low, high, low_open, high_open):
        raise _fail(ValueError, name, need, value, hint)
    return x


def check_probability(
    name: str, value: Any, *, low_open: bool = False, high_open: bool = False, hint: str = ""
) -> float:
    """A float in ``[0, 1]`` (ends excluded on request)."""
    return check_float(name, value, low=0, high=1, low_open=low_open, high_open=high_open, hint=hint)


def check_bool(name: str, value: Any, *, hint: str = "") -> bool:
    """``value`` if it is a ``bool`` (numpy bools included)."""
    if type(value).__name__ not in ("bool", "bool_"):
        raise _fail(TypeError, name, "a bool", value, hint)
    return bool(value)


def check_choice(name: str, value: Any, choices: Collection[T], *, hint: str = "") -> T:
    """``value`` if it is one of ``choices``; the error lists them and suggests the closest string.

    >>> check_choice("mode", "fast", ("fast", "exact"))
    'fast'
    """
    try:
        ok = value in choices
    except TypeError:  # unhashable value against a set
        ok = False
    if ok:
        return value  # type: ignore[no-any-return]
    if not hint and isinstance(value, str):
        import difflib

        close = difflib.get_close_matches(value, [c for c in choices if isinstance(c, str)], n=1)
        hint = f"Did you mean {close[0]!r}?" if close else ""
    need = "one of " + ", ".join(repr(c) for c in choices)
    raise _fail(ValueError, name, need, value, hint)


def check_n_jobs(name: str, value: Any, *, hint: str = "") -> int | None:
    """joblib's ``n_jobs``: ``None`` (one job unless a ``joblib.parallel_config`` says otherwise) or a
    nonzero int (``-1`` = every core).

    >>> check_n_jobs("n_jobs", -1)
    -1
    """
    if value is None:
        return None
    need = "None or a nonzero int (-1 = all cores)"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(TypeError, name, need, value, hint)
    if int(value) == 0:
        raise _fail(ValueError, name, need, value, hint)
    return int(value)


def check_power_of_two(name: str, value: Any, *, low: int = 1, hint: str = "") -> int:
    """An int that is a power of two and ``>= low``."""
    need = f"a power of two >= {low}" if low > 1 else "a power of two"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(TypeError, name, need, value, hint)
    v = int(value)
    if v < low or v < 1 or v & (v - 1):
        raise _fail(ValueError, name, need, value, hint)
    return v


def check_sequence(
    name: str,
    value: Any,
    item: Callable[[str, Any], T] | None = None,
    *,
    length: int | None = None,
    min_length: int = 0,
    hint: str = "",
) -> list[T]:
    """``value`` as a list, each element checked by ``item(f"{name}[i]", element)``.

    Strings and mappings are not sequences here. ``length`` demands an exact length, ``min_length`` a minimum.

    >>> check_sequence("weights", (0.5, 0.5), lambda n, v: check_float(n, v, low=0), length=2)
    [0.5, 0.5]
    """
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        try:
            import numpy as np

            if not isinstance(value, np.ndarray) or value.ndim != 1:
                raise TypeError
            value = value.tolist()
        except (ImportError, TypeError):
            raise _fail(TypeError, name, "a list", value, hint) from None
    if length is not None and len(value) != length:
        raise _fail(ValueError, name, f"a list of length {length}", value, hint)
    if len(value) < min_length:
        raise _fail(ValueError, name, f"a list of at least {min_length} item(s)", value, hint)
    if item is None:
        return list(value)
    return [item(f"{name}[{i}]", v) for i, v in enumerate(value)]
