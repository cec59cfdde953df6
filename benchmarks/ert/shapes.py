"""Synthetic miscoverage shapes with known conditional coverage p(x), for the ERT power benchmark.

X ~ U(-1, 1)^d and Z ~ Bernoulli(p(X)); every shape has marginal coverage tau = 0.9 (the compensating levels
are chosen so), so only *conditional* miscoverage can be detected.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

TAU = 0.9


class Shape(NamedTuple):
    """A design: feature dimension and conditional coverage function ``p(X (n, d)) -> (n,)``."""

    dim: int
    p: Callable[[np.ndarray], np.ndarray]
    what: str


def _localized(x: np.ndarray) -> np.ndarray:
    return np.where((x[:, 0] > 0.2) & (x[:, 1] > 0.2), 0.75, (TAU - 0.16 * 0.75) / 0.84)


def _oblique(x: np.ndarray) -> np.ndarray:
    return TAU + 0.05 * np.tanh(4.0 * x.sum(axis=1) / np.sqrt(x.shape[1]))


def _step(x: np.ndarray) -> np.ndarray:
    return np.where(x[:, 0] > 0.3, 0.75, (TAU - 0.35 * 0.75) / 0.65)


def _xor(x: np.ndarray) -> np.ndarray:
    return TAU + 0.06 * np.sign(x[:, 0] * x[:, 1])


def exact(x: np.ndarray) -> np.ndarray:
    """The null design: p == tau everywhere."""
    return np.full(x.shape[0], TAU)


SHAPES: dict[str, Shape] = {
    "localized": Shape(10, _localized, "p=0.75 on {x0>0.2, x1>0.2} (mass 0.16), 0.9286 elsewhere"),
    "oblique": Shape(6, _oblique, "p=0.9+0.05 tanh(4 sum(x)/sqrt(d))"),
    "step": Shape(4, _step, "p=0.75 on {x0>0.3}, 0.9808 elsewhere"),
    "xor": Shape(4, _xor, "p=0.9+0.06 sign(x0 x1)"),
    "sparse": Shape(50, _step, "axis step on x0 + 49 irrelevant features"),
}


def sample(
    p: Callable[[np.ndarray], np.ndarray], dim: int, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``(X (n, dim), covered (n,))`` with X ~ U(-1, 1)^dim and covered ~ Bernoulli(p(X))."""
    x = rng.uniform(-1.0, 1.0, size=(n, dim))
    return x, (rng.random(n) < p(x)).astype(np.float64)


def split_conformal(
    dim: int, n: int, rng: np.random.Generator, *, n_fit: int = 1000, n_cal: int = 500
) -> tuple[np.ndarray, np.ndarray]:
    """A well-specified split-conformal predictor and ``(X (n, dim), covered (n,))`` on ``n`` test rows.

    y = X beta + N(0, 1) noise (homoscedastic, beta evenly spaced in [-1, 1]); ordinary least squares fitted
    on ``n_fit`` rows; absolute-residual scores on ``n_cal`` calibration rows, interval half-width = the
    ceil((n_cal + 1)(1 - alpha))-th smallest score, alpha = 1 - TAU. Coverage is then (up to the least-squares
    error, sd about sqrt(dim / n_fit) against the unit noise) constant in x, but its level is set by the
    calibration draw: Beta-distributed around TAU with sd about sqrt(TAU (1 - TAU) / n_cal) = 0.013.
    """
    beta = np.linspace(1.0, -1.0, dim)

    def draw(m: int) -> tuple[np.ndarray, np.ndarray]:
        x = rng.uniform(-1.0, 1.0, size=(m, dim))
        return x, x @ beta + rng.normal(size=m)

    def design(x: np.ndarray) -> np.ndarray:
        return np.c_[np.ones(x.shape[0]), x]

    x_fit, y_fit = draw(n_fit)
    coef = np.linalg.lstsq(design(x_fit), y_fit, rcond=None)[0]
    x_cal, y_cal = draw(n_cal)
    scores = np.sort(np.abs(y_cal - design(x_cal) @ coef))
    width = scores[min(int(np.ceil((n_cal + 1) * TAU)), n_cal) - 1]
    x, y = draw(n)
    return x, (np.abs(y - design(x) @ coef) <= width).astype(np.float64)


def truth(p: Callable[[np.ndarray], np.ndarray], dim: int, draws: int, seed: int = 12345) -> dict[str, float]:
    """Monte-Carlo ``E|p - tau|``, ``E(p - tau)^2`` and ``E KL(Ber p || Ber tau)`` (natural log)."""
    q = p(np.random.default_rng(seed).uniform(-1.0, 1.0, size=(draws, dim)))
    kl = q * np.log(q / TAU) + (1 - q) * np.log((1 - q) / (1 - TAU))
    return {
        "l1": float(np.mean(np.abs(q - TAU))),
        "l2": float(np.mean((q - TAU) ** 2)),
        "kl": float(np.mean(kl)),
    }
