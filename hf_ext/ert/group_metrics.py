"""Earlier conditional-coverage metrics ERT is compared with (definitions as in ``covmetrics`` 0.1.2) [paper].

Convention: ``alpha`` is the miscoverage level, the target coverage is ``1 - alpha``. Inputs are float64 numpy
arrays of shape ``(n,)`` (``covered`` in {0, 1}) validated by :mod:`hf_ext.ert.inputs`.

* CovGap: mean over non-empty groups g of ``|mean(Z_g) - (1 - alpha)|``; weighted: ``sum_g n_g/n |...|``.
* FSC: ``min_g mean(Z_g)`` (higher is better).
* SSC / EOC: CovGap (or the min variant) with groups = set sizes / labels, clustered into ``num_groups`` by
  1-D k-means when there are at least ``num_groups`` distinct values (always seeded here; covmetrics is
  unseeded).
* Size-coverage Pearson correlation and HSIC (Gaussian kernels ``exp(-d^2 / sigma)``, sigma = 1,
  ``HSIC = tr(L H K H) / (m - 1)^2`` on a random subsample of at most ``max_samples`` points).
"""

from __future__ import annotations

import warnings

import numpy as np

REDUCTIONS = ("gap", "min")


def group_sums(groups: np.ndarray, covered: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(counts, covered_counts)`` per distinct group id, in sorted id order (empty groups dropped)."""
    _, inverse = np.unique(groups, return_inverse=True)
    return np.bincount(inverse).astype(np.float64), np.bincount(inverse, weights=covered)


def gap_from_sums(counts: np.ndarray, hits: np.ndarray, alpha: float, weighted: bool = False) -> float:
    """CovGap from per-group counts and covered counts (groups with count 0 are ignored)."""
    keep = counts > 0
    counts, hits = counts[keep], hits[keep]
    gaps = np.abs(hits / counts - (1.0 - alpha))
    return float(np.sum(counts / counts.sum() * gaps)) if weighted else float(gaps.mean())


def min_from_sums(counts: np.ndarray, hits: np.ndarray) -> float:
    """FSC (worst group coverage) from per-group counts and covered counts."""
    keep = counts > 0
    return float(np.min(hits[keep] / counts[keep]))


def coverage_gap(groups: np.ndarray, covered: np.ndarray, alpha: float, weighted: bool = False) -> float:
    """CovGap of integer ``groups`` ``(n,)``; lower is better, 0 is exact group-conditional coverage."""
    return gap_from_sums(*group_sums(groups, covered), alpha, weighted)


def feature_stratified_coverage(groups: np.ndarray, covered: np.ndarray) -> float:
    """FSC: the smallest empirical coverage over the groups; compare with ``1 - alpha``."""
    return min_from_sums(*group_sums(groups, covered))


def kmeans_1d(values: np.ndarray, num_groups: int, seed: int = 0) -> np.ndarray:
    """Centroids (sorted, shape ``(num_groups,)``) of 1-D k-means with k-means++ initialisation."""
    from sklearn.cluster import KMeans

    km = KMeans(n_clusters=num_groups, n_init=1, random_state=seed).fit(values.reshape(-1, 1))
    return np.sort(km.cluster_centers_.ravel())


def discretize(values: np.ndarray, num_groups: int, seed: int = 0) -> np.ndarray:
    """Group ids for set sizes or labels: their distinct values, or 1-D k-means clusters when there are at
    least ``num_groups`` distinct values (covmetrics' rule). Returns int64 of shape ``(n,)``."""
    uniq, inverse = np.unique(values, return_inverse=True)
    if uniq.size < num_groups:
        return inverse.astype(np.int64)
    return assign_1d(values, kmeans_1d(values, num_groups, seed))


def assign_1d(values: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """Index of the nearest centroid for each value (ties go to the lower centroid)."""
    return np.argmin(np.abs(values[:, None] - centroids[None, :]), axis=1).astype(np.int64)


def stratified(
    groups: np.ndarray, covered: np.ndarray, alpha: float, reduction: str, weighted: bool
) -> float:
    """``coverage_gap`` (``reduction="gap"``) or ``feature_stratified_coverage`` (``"min"``) of ``groups``."""
    if reduction == "min":
        return feature_stratified_coverage(groups, covered)
    return coverage_gap(groups, covered, alpha, weighted)


def pearson(sizes: np.ndarray, covered: np.ndarray) -> float:
    """Pearson correlation of set size and coverage; NaN (with a warning) when either is constant."""
    s, c = sizes - sizes.mean(), covered - covered.mean()
    denom = np.sqrt((s * s).sum() * (c * c).sum())
    if denom == 0:
        warnings.warn(
            "set sizes or coverage are constant; the size-coverage correlation is undefined (NaN).",
            UserWarning,
            stacklevel=3,
        )
        return float("nan")
    return float((s * c).sum() / denom)


def hsic(
    sizes: np.ndarray,
    covered: np.ndarray,
    max_samples: int = 5000,
    seed: int = 0,
    sigma: float = 1.0,
    chunk: int = 1024,
) -> float:
    """HSIC between size and coverage with Gaussian kernels, in O(m^2) time and O(chunk * m) memory.

    Uses ``tr(L H K H) = sum(L * K) - (2/m) r.l + (sum r)(sum l)/m^2`` with ``r``, ``l`` the row sums of K, L
    (both symmetric), which equals covmetrics' dense ``np.trace(L @ H @ K @ H)``.
    """
    n = sizes.shape[0]
    idx = np.random.default_rng(seed).permutation(n)[:max_samples] if n > max_samples else np.arange(n)
    x, y = sizes[idx], covered[idx]
    m = x.shape[0]
    if m < 2:
        raise ValueError(f"HSIC needs at least 2 samples, got {m}.")
    r, l_row = np.zeros(m), np.zeros(m)
    cross = 0.0
    for start in range(0, m, chunk):
        sl = slice(start, start + chunk)
        k = np.exp(-((x[sl, None] - x[None, :]) ** 2) / sigma)
        ll = np.exp(-((y[sl, None] - y[None, :]) ** 2) / sigma)
        r[sl], l_row[sl] = k.sum(axis=1), ll.sum(axis=1)
        cross += float((k * ll).sum())
    trace = cross - 2.0 / m * float(r @ l_row) + r.sum() * l_row.sum() / m**2
    return trace / (m - 1) ** 2
