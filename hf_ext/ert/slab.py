"""Worst-slab coverage (WSC; Cauchois, Gupta & Duchi; Romano, Sesia & Candès; definition as in
``covmetrics``).

For a unit direction v, a slab is ``{x : a <= v.x <= b}``; WSC is the lowest empirical coverage over slabs
holding at least ``ceil(delta * n)`` points, minimised over ``num_directions`` random directions (lower =
worse; compare with ``1 - alpha``). In-sample WSC is biased low; ``holdout`` chooses the slab on one part of
the data and reports its coverage on the rest [reconstructed from the older WSC literature].

Fast search [reconstructed, exact]: covmetrics scans every start index (O(M n^2)). With the coverage z ordered
by the projection v.x and prefix sums P, "some window of length >= m has mean <= t" holds iff ``min_j (P_j - t
j - max_{i <= j-m} (P_i - t i)) <= 0``. Bisecting t in [0, 1], vectorised over directions, costs O(M n (log n
+ steps)). Window means are fractions with denominators <= n, so two distinct ones differ by at least 1/n^2:
after ``min(40, 2 ceil(log2(n + 1)) + 2)`` steps the window found at the final t is the exact minimiser
(matches the brute-force scan to 1e-12).
"""

from __future__ import annotations

import math
import warnings
from typing import NamedTuple

import numpy as np

BISECTION_STEPS = 40


class Slab(NamedTuple):
    """The worst slab found: its empirical coverage, unit direction ``(d,)`` and bounds ``a <= v.x <= b``."""

    coverage: float
    direction: np.ndarray
    a: float
    b: float


def sample_directions(num_directions: int, dim: int, seed: int = 42) -> np.ndarray:
    """``(num_directions, dim)`` directions uniform on the unit sphere.

    ``RandomState(seed).randn`` is the stream covmetrics draws after ``np.random.seed(seed)``, so with the
    same seed both pick the same directions.
    """
    v = np.random.RandomState(seed).randn(num_directions, dim)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _min_window_mean(z_sorted: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of ``z_sorted`` ``(M, n)``: lowest mean over windows of length >= m and its [start, end)."""
    rows, n = z_sorted.shape
    prefix = np.concatenate([np.zeros((rows, 1)), np.cumsum(z_sorted, axis=1)], axis=1)  # (M, n + 1)
    steps = np.arange(n + 1, dtype=np.float64)

    def slack(t: np.ndarray) -> np.ndarray:  # (M, n + 1 - m): Q_j - max_{i <= j - m} Q_i for j = m..n
        q = prefix - t[:, None] * steps[None, :]
        return q[:, m:] - np.maximum.accumulate(q, axis=1)[:, : n + 1 - m]

    lo, hi = np.zeros(rows), np.ones(rows)
    for _ in range(min(BISECTION_STEPS, 2 * math.ceil(math.log2(n + 1)) + 2)):
        mid = 0.5 * (lo + hi)
        feasible = slack(mid).min(axis=1) <= 0
        hi = np.where(feasible, mid, hi)
        lo = np.where(feasible, lo, mid)
    end = np.argmin(slack(hi), axis=1) + m  # window end j (exclusive)
    q = prefix - hi[:, None] * steps[None, :]
    masked = np.where(steps[None, :] <= (end - m)[:, None], q, -np.inf)
    start = np.argmax(masked, axis=1)
    r = np.arange(rows)
    means = (prefix[r, end] - prefix[r, start]) / (end - start)
    return means, start, end


def worst_slab(features: np.ndarray, covered: np.ndarray, delta: float, directions: np.ndarray) -> Slab:
    """Worst slab over ``directions`` (``(M, d)``) for ``features`` ``(n, d)`` and ``covered`` ``(n,)``."""
    n = covered.shape[0]
    m = min(max(int(math.ceil(delta * n)), 1), n)
    proj = directions @ features.T  # (M, n)
    order = np.argsort(proj, axis=1, kind="stable")
    z_sorted = covered[order]
    means, start, end = _min_window_mean(z_sorted, m)
    k = int(np.argmin(means))
    sorted_proj = np.take_along_axis(proj[k], order[k], axis=0)
    return Slab(
        float(means[k]), directions[k].copy(), float(sorted_proj[start[k]]), float(sorted_proj[end[k] - 1])
    )


def slab_coverage(features: np.ndarray, covered: np.ndarray, slab: Slab) -> tuple[float, int]:
    """``(coverage, count)`` of the points of ``features`` inside ``slab`` (coverage NaN if it holds none)."""
    proj = features @ slab.direction
    inside = (proj >= slab.a) & (proj <= slab.b)
    count = int(inside.sum())
    return (float(covered[inside].mean()) if count else float("nan")), count


def worst_slab_coverage(
    features: np.ndarray,
    covered: np.ndarray,
    delta: float = 0.1,
    num_directions: int = 1000,
    seed: int = 42,
    holdout: float | None = None,
) -> float:
    """WSC in-sample, or with ``holdout`` in (0, 1): slab chosen on ``1 - holdout`` of the rows (random split
    with ``seed``), coverage reported on the other ``holdout`` fraction. Arrays as :func:`worst_slab`."""
    directions = sample_directions(num_directions, features.shape[1], seed)
    if holdout is None:
        return worst_slab(features, covered, delta, directions).coverage
    n = covered.shape[0]
    perm = np.random.default_rng(seed).permutation(n)
    n_eval = int(round(holdout * n))
    if n_eval < 1 or n_eval > n - 1:
        raise ValueError(
            f"`holdout`={holdout!r} leaves an empty part with n={n}; use more data or another fraction."
        )
    fit_idx, eval_idx = perm[n_eval:], perm[:n_eval]
    slab = worst_slab(features[fit_idx], covered[fit_idx], delta, directions)
    value, count = slab_coverage(features[eval_idx], covered[eval_idx], slab)
    if count == 0:
        warnings.warn("the worst slab holds no held-out point; WSC is NaN.", UserWarning, stacklevel=2)
    return value
