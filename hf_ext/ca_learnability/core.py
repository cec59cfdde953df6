"""Exact Boolean-function analysis of a truth table: Walsh-Fourier spectrum, influences, average sensitivity,
degree weights and the spatial junta profile (pure numpy).

Conventions (O'Donnell, *Analysis of Boolean Functions*) [paper]: a function of ``n`` bits is a truth table
of length ``2**n`` whose entry ``t`` is the output on the input with bit ``i`` equal to ``(t >> i) & 1``.
Inputs and output are read in the ``±1`` encoding (bit 0 -> +1, bit 1 -> -1), so that Parseval holds:
``f̂(S) = E_x[f(x) prod_{i in S} x_i]`` and ``sum_S f̂(S)**2 = 1``. A spectrum is an array of length ``2**n``
indexed by the subset ``S`` written as a bit mask.

For a cellular-automaton window of side ``L = 2k + 1`` (``n = L**2`` inputs), bit ``L * dy + dx`` is the
cell in row ``dy`` and column ``dx`` of the window (top-left = bit 0). The spatial junta profile
[reconstructed reading of the paper's "junta coefficients"] measures how much of the non-constant Fourier
weight lives on the centred radius-``r`` sub-window.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np

MAX_EXACT_INPUTS = 26
"""Largest ``n`` the exact path accepts (a ``2**26`` table is 64 MB of bits, 256 MB as int32)."""
ENCODINGS = ("01", "pm1")
_CHUNK = 1 << 20


def as_pm1(table: Any, *, encoding: str = "01", name: str = "table") -> np.ndarray:
    """Validate a truth table and return it in the ``±1`` encoding as ``int32``, shape ``[2**n]``.

    Args:
        table: 1-D array-like of length ``2**n``, ``1 <= n <= 26``.
        encoding: ``"01"`` (entries in {0, 1}, 0 -> +1) or ``"pm1"`` (entries in {+1, -1}).
        name: Argument name used in error messages.

    Raises:
        ValueError: wrong length, entries outside the encoding, or ``n > 26``.
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"`encoding` must be one of {ENCODINGS}, got {encoding!r}.")
    t = np.asarray(table)
    if t.ndim != 1 or t.size < 2 or t.size & (t.size - 1):
        raise ValueError(
            f"`{name}` must be a 1-D truth table whose length is a power of two >= 2, got shape {t.shape}."
        )
    n = t.size.bit_length() - 1
    if n > MAX_EXACT_INPUTS:
        raise ValueError(
            f"`{name}` has n={n} inputs; the exact path handles n <= {MAX_EXACT_INPUTS}. "
            'Use method="monte_carlo" (hf_ext.ca_learnability.mc_spectrum) for larger functions.'
        )
    allowed = (0, 1) if encoding == "01" else (1, -1)
    bad = ~np.isin(t, allowed)
    if bad.any():
        raise ValueError(
            f"`{name}` entries must be in {set(allowed)} for encoding={encoding!r}, got {t[bad][0].item()!r} "
            f"at index {int(np.flatnonzero(bad)[0])}."
        )
    if encoding == "01":
        return (1 - 2 * t.astype(np.int32)).astype(np.int32)
    return t.astype(np.int32)


def fwht(x: Any) -> np.ndarray:
    """Unnormalised fast Walsh-Hadamard transform along the last axis, ``O(n 2**n)``.

    ``fwht(x)[..., S] = sum_t x[..., t] * (-1) ** popcount(S & t)``. Integer inputs stay integers (exact),
    so the transform of a ``±1`` table divided by ``2**n`` is its Fourier spectrum.

    Args:
        x: Array of shape ``[..., 2**n]`` (any numeric dtype); not modified.

    Returns:
        Array of the same shape and dtype.

    Example:
        >>> fwht(np.array([1, 1, 1, -1]))
        array([ 2,  2,  2, -2])
    """
    y = np.array(x, copy=True)
    size = y.shape[-1]
    if size & (size - 1):
        raise ValueError(f"`x` must have a power-of-two last dimension, got {size}.")
    h = 1
    while h < size:
        v = y.reshape(*y.shape[:-1], size // (2 * h), 2, h)
        low = v[..., 0, :].copy()
        v[..., 0, :] += v[..., 1, :]
        np.subtract(low, v[..., 1, :], out=v[..., 1, :])
        h *= 2
    return y


def fourier_spectrum(table: Any, *, encoding: str = "01", dtype: Any = np.float64) -> np.ndarray:
    """Exact Fourier coefficients ``f̂(S)`` of a Boolean function [paper].

    Args:
        table: Truth table of length ``2**n`` (see :func:`as_pm1`).
        encoding: ``"01"`` or ``"pm1"``.
        dtype: Float dtype of the result; the transform itself is exact integer arithmetic. ``np.float32``
            halves the memory for ``n = 25`` (128 MB).

    Returns:
        ``[2**n]`` array, ``f̂[S]`` for the subset with bit mask ``S``; ``sum(f̂**2) == 1``.

    Example:
        >>> fourier_spectrum([0, 0, 0, 1])  # AND of two bits, 1 = True
        array([ 0.5,  0.5,  0.5, -0.5])
    """
    pm1 = as_pm1(table, encoding=encoding)
    coeffs = fwht(pm1).astype(dtype)
    coeffs /= pm1.size
    return coeffs


def n_inputs(spectrum: np.ndarray) -> int:
    """``n`` of a spectrum of length ``2**n``."""
    size = np.shape(spectrum)[-1]
    if np.ndim(spectrum) != 1 or size < 2 or size & (size - 1):
        raise ValueError(f"`spectrum` must be a 1-D array of length 2**n, got shape {np.shape(spectrum)}.")
    return int(size).bit_length() - 1


def _squares(spectrum: np.ndarray) -> np.ndarray:
    n_inputs(spectrum)
    return np.square(np.asarray(spectrum, dtype=np.result_type(spectrum, np.float32)))


def influences(spectrum: np.ndarray) -> np.ndarray:
    """``Inf_i = P_x[f(x) != f(x ^ e_i)] = sum_{S contains i} f̂(S)**2`` for each input ``i`` [paper].

    Returns:
        ``[n]`` float64 array.

    Example:
        >>> influences(fourier_spectrum([0, 1, 1, 0]))  # XOR: every bit flips the output
        array([1., 1.])
    """
    sq = _squares(spectrum)
    n = n_inputs(spectrum)
    return np.array([sq.reshape(-1, 2, 1 << i)[:, 1, :].sum(dtype=np.float64) for i in range(n)])


def degree_weights(spectrum: np.ndarray, *, normalize: bool = False) -> np.ndarray:
    """Fourier weight by degree, ``W^{=d} = sum_{|S| = d} f̂(S)**2`` for ``d = 0..n`` [paper].

    Args:
        spectrum: ``[2**n]`` Fourier coefficients.
        normalize: Divide by the non-constant weight ``1 - W^{=0}`` and set entry 0 to 0, so the profile
            sums to 1 over ``d >= 1`` [reconstructed normalisation]. A constant function has no non-constant
            weight: the profile is then NaN, with a warning.

    Returns:
        ``[n + 1]`` float64 array.

    Example:
        >>> degree_weights(fourier_spectrum([0, 0, 0, 1]))
        array([0.25, 0.5 , 0.25])
    """
    sq = _squares(spectrum)
    n = n_inputs(spectrum)
    weights = np.zeros(n + 1)
    for start in range(0, sq.size, _CHUNK):
        part = sq[start : start + _CHUNK]
        degree = np.bitwise_count(np.arange(start, start + part.size, dtype=np.uint32))
        weights += np.bincount(degree, weights=part, minlength=n + 1)
    return _normalized(weights, weights[0]) if normalize else weights


def _normalized(weights: np.ndarray, w0: float) -> np.ndarray:
    rest = 1.0 - w0
    if rest <= 1e-12:
        warnings.warn(
            "the function is constant (W^{=0} = 1): its normalised Fourier profile is undefined (NaN).",
            RuntimeWarning,
            stacklevel=3,
        )
        return np.full_like(weights, np.nan)
    out = weights / rest
    out[0] = 0.0
    return out


def average_sensitivity(spectrum: np.ndarray, *, normalize: bool = False) -> float:
    """Average sensitivity ``AS = sum_i Inf_i = sum_S |S| f̂(S)**2`` [paper], or ``AS / n`` with ``normalize``.

    Example:
        >>> average_sensitivity(fourier_spectrum([0, 1, 1, 0, 1, 0, 0, 1]))  # 3-bit parity
        3.0
    """
    weights = degree_weights(spectrum)
    total = float(np.arange(weights.size) @ weights)
    return total / (weights.size - 1) if normalize else total


def window_side(n: int) -> int:
    """Side ``L`` of the square window with ``n = L**2`` inputs (``L`` odd)."""
    side = math.isqrt(n)
    if side * side != n or side % 2 == 0:
        raise ValueError(f"the junta profile needs n = L**2 inputs with L odd (a centred window), got n={n}.")
    return side


def window_mask(side: int, radius: int) -> int:
    """Bit mask of the centred ``(2 * radius + 1)``-square inside a window of side ``side``."""
    centre = side // 2
    bits = [
        side * dy + dx
        for dy in range(centre - radius, centre + radius + 1)
        for dx in range(centre - radius, centre + radius + 1)
    ]
    return sum(1 << b for b in bits)


def junta_profile(spectrum: np.ndarray) -> np.ndarray:
    """Spatial junta profile ``Ĵ_r = sum_{∅ != S ⊆ B_r} f̂(S)**2 / (1 - W^{=0})``, ``r = 0..k``
    [reconstructed].

    ``B_r`` is the centred ``(2r+1)``-square of the ``(2k+1)``-window; ``Ĵ_k = 1`` and ``Ĵ_r`` is the share of
    the non-constant weight carried by a junta on the inner cells (for ``r = 0``: the centre cell alone). The
    number of inputs must be an odd square (9, 25, ...). NaN with a warning for a constant function.

    Returns:
        ``[k + 1]`` float64 array, non-decreasing in ``r``.
    """
    sq = _squares(spectrum)
    side = window_side(n_inputs(spectrum))
    outside = [~window_mask(side, r) & (sq.size - 1) for r in range(side // 2 + 1)]
    inside = np.zeros(len(outside))
    for start in range(0, sq.size, _CHUNK):
        part = sq[start : start + _CHUNK]
        index = np.arange(start, start + part.size, dtype=np.int64)
        for r, mask in enumerate(outside):
            inside[r] += part[(index & mask) == 0].sum(dtype=np.float64)
    w0 = float(sq[0])
    return _normalized(np.concatenate([[0.0], inside - w0]), w0)[1:]


def spectral_features(spectrum: np.ndarray) -> dict[str, float]:
    """The learnability predictors of one spectrum, as a flat dict.

    Keys: ``n``, ``as`` (average sensitivity), ``as_norm`` (AS / n), ``w0`` (``W^{=0}``, output balance:
    1 for a constant, 0 for a balanced function), ``w_le2`` (``Ŵ^{≤2}``, low-degree share of the non-constant
    weight), ``w_ge4`` (``Ŵ^{≥4}``, tail share), ``w_eq<d>`` (``Ŵ^{=d}`` for each degree), and ``junta_r<r>``
    (``Ĵ_r`` for ``r < k``) when ``n`` is an odd square.
    """
    n = n_inputs(spectrum)
    weights = degree_weights(spectrum)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        share = _normalized(weights.copy(), weights[0])
    out: dict[str, float] = {
        "n": n,
        "as": float(np.arange(n + 1) @ weights),
        "as_norm": float(np.arange(n + 1) @ weights) / n,
        "w0": float(weights[0]),
        "w_le2": float(share[1:3].sum()),
        "w_ge4": float(share[4:].sum()),
    }
    out |= {f"w_eq{d}": float(share[d]) for d in range(1, n + 1)}
    side = math.isqrt(n)
    if side * side == n and side % 2:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            profile = junta_profile(spectrum)
        out |= {f"junta_r{r}": float(v) for r, v in enumerate(profile[:-1])}
    return out
