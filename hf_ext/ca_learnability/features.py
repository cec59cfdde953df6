"""Learnability predictors of a rule's k-step map: exact from the truth table, or Monte-Carlo estimates.

The Monte-Carlo path [reconstructed] serves functions too large for a truth table (``k >= 3``: 49 bits).
Every estimate is unbiased and comes with a standard error from ``n_batches`` independent batches.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from hf_ext._validation import check_choice, check_float, check_int, check_sequence
from hf_ext.ca_learnability.automata import CARule, as_rule, ca_truth_table, window_function
from hf_ext.ca_learnability.core import (
    MAX_EXACT_INPUTS,
    fourier_spectrum,
    spectral_features,
    window_mask,
    window_side,
)

METHODS = ("auto", "exact", "monte_carlo")


def _u_weight(correlations: np.ndarray, m: int) -> np.ndarray:
    """Unbiased ``E[f chi_S]**2`` per column from the sums ``sum_s f(x_s) chi_S(x_s)`` of ``m`` samples.

    ``(sum)**2 = sum_s 1 + sum_{s != t} f_s chi_s f_t chi_t`` because ``(f chi_S)**2 = 1``.
    """
    return (np.square(correlations) - m) / (m * (m - 1))


def mc_spectrum(
    f: Callable[[np.ndarray], np.ndarray],
    n: int,
    *,
    n_samples: int = 4000,
    n_batches: int = 20,
    rhos: tuple[float, ...] = (0.25, 0.5, 0.75),
    seed: int = 0,
) -> dict[str, tuple[float, float]]:
    """Monte-Carlo estimates of the spectral quantities of ``f`` on ``n`` uniform random bits [reconstructed].

    Args:
        f: Maps 0/1 rows ``[m, n]`` to outputs ``[m]`` in {0, 1} (e.g. :func:`window_function`).
        n: Number of input bits (bit order as in the truth tables).
        n_samples: Samples per batch (each costs ``n + 1`` evaluations of ``f`` for the sensitivity).
        n_batches: Independent batches; the estimate is their mean and the SE their spread.
        rhos: Correlations of the noise stabilities ``Stab_rho = E[f(x) f(y)] = sum_d rho**d W^{=d}``.
        seed: Seed of a numpy ``default_rng``.

    Returns:
        ``{name: (estimate, standard error)}`` with ``as`` (flip counting), ``w0``, ``w1``, ``w2``
        (U-statistics of ``f(x) chi_S(x)``), ``w_ge3 = 1 - w0 - w1 - w2``, ``stab_<rho>``, and
        ``junta_weight_r<r>`` (the weight ``sum_{S ⊆ B_r} f̂(S)**2``, from pairs of inputs that agree on
        ``B_r``) when ``n`` is an odd square.
    """
    n = check_int("n", n, low=1)
    m = check_int("n_samples", n_samples, low=2)
    n_batches = check_int("n_batches", n_batches, low=2)
    rho_list = check_sequence("rhos", rhos, lambda k, v: check_float(k, v, low=-1, high=1))
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    side = window_side(n) if _is_odd_square(n) else None
    batches: dict[str, list[float]] = {}

    def add(name: str, value: float) -> None:
        batches.setdefault(name, []).append(float(value))

    for _ in range(n_batches):
        x = rng.integers(0, 2, size=(m, n), dtype=np.uint8)
        fx = np.asarray(f(x), dtype=np.int64)
        flips = np.repeat(x[None], n, axis=0)
        flips[np.arange(n), :, np.arange(n)] ^= 1
        fflip = np.asarray(f(flips.reshape(n * m, n)), dtype=np.int64).reshape(n, m)
        add("as", (fflip != fx).sum(0).mean())
        sign = (1 - 2 * fx).astype(np.float64)
        chi = (1 - 2 * x.astype(np.float64)) * sign[:, None]  # f(x) chi_{i}(x)
        add("w0", _u_weight(np.array([sign.sum()]), m)[0])
        add("w1", _u_weight(chi.sum(0), m).sum())
        pairs = (1 - 2 * x.astype(np.float64)).T @ chi  # [n, n]: sum_s f chi_{i, j}
        add("w2", _u_weight(pairs[np.triu_indices(n, 1)], m).sum())
        for rho in rho_list:
            keep = rng.random((m, n)) < (1 + rho) / 2  # y_i = x_i w.p. (1 + rho) / 2
            y = np.where(keep, x, 1 - x)
            add(f"stab_{rho:g}", (sign * (1 - 2 * np.asarray(f(y), dtype=np.float64))).mean())
        if side is not None:
            for r in range(side // 2 + 1):
                inner = np.array([(window_mask(side, r) >> i) & 1 for i in range(n)], dtype=bool)
                y = np.where(inner, x, rng.integers(0, 2, size=(m, n), dtype=np.uint8))
                add(f"junta_weight_r{r}", (sign * (1 - 2 * np.asarray(f(y), dtype=np.float64))).mean())
    for parts in zip(batches["w0"], batches["w1"], batches["w2"]):
        add("w_ge3", 1.0 - sum(parts))
    return {k: (float(np.mean(v)), float(np.std(v, ddof=1) / np.sqrt(len(v)))) for k, v in batches.items()}


def _is_odd_square(n: int) -> bool:
    side = int(np.sqrt(n))
    return side * side == n and side % 2 == 1


def rule_features(
    rule: CARule | Any,
    steps: int = 1,
    *,
    method: str = "auto",
    dtype: Any = np.float32,
    **mc_kwargs: Any,
) -> dict[str, float]:
    """Learnability predictors of the k-step map ``F^k`` of ``rule`` (see :func:`spectral_features`).

    Args:
        rule: A :class:`CARule` or a 512-entry table.
        steps: ``k``; the map has ``(2k+1)**2`` inputs.
        method: ``"exact"`` (truth table and fast transform; ``k <= 2``), ``"monte_carlo"``
            (:func:`mc_spectrum`) or ``"auto"`` (exact when it fits, else Monte Carlo with a warning).
        dtype: Float dtype of the exact spectrum (float32 keeps ``k = 2`` at 128 MB).
        **mc_kwargs: Passed to :func:`mc_spectrum`.

    Returns:
        Exact: the keys of :func:`spectral_features`. Monte Carlo: ``n``, ``as``, ``as_norm``, ``w0``,
        ``w_le2``, ``w_ge3`` (shares of the non-constant weight), ``junta_r<r>`` and each estimate's
        ``<key>_se``.
    """
    rule = as_rule(rule)
    steps = check_int("steps", steps, low=1)
    method = check_choice("method", method, METHODS)
    n = (2 * steps + 1) ** 2
    if method == "auto" and n > MAX_EXACT_INPUTS:
        warnings.warn(
            f"steps={steps} has n={n} window bits, beyond the exact path (n <= {MAX_EXACT_INPUTS}); "
            "using Monte-Carlo estimates.",
            UserWarning,
            stacklevel=2,
        )
        method = "monte_carlo"
    if method != "monte_carlo":
        return spectral_features(fourier_spectrum(ca_truth_table(rule, steps), dtype=dtype))
    est = mc_spectrum(window_function(rule, steps), n, **mc_kwargs)
    w0, w0_se = est["w0"]
    rest = max(1.0 - w0, 1e-12)
    out: dict[str, float] = {"n": n, "as": est["as"][0], "as_norm": est["as"][0] / n, "w0": w0}
    out |= {"as_se": est["as"][1], "as_norm_se": est["as"][1] / n, "w0_se": w0_se}
    out["w_le2"] = (est["w1"][0] + est["w2"][0]) / rest
    out["w_ge3"] = est["w_ge3"][0] / rest
    for r in range(steps):
        out[f"junta_r{r}"] = (est[f"junta_weight_r{r}"][0] - w0) / rest
    return out
