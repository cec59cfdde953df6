"""Functional forms of the AI-grading agreement metrics: error, bias, agreement rates, quadratic weighted
kappa and rank/linear correlation between AI scores ``a`` and reference (TA) scores ``g``, with
percentile-bootstrap intervals; run-to-run stability; the deferral (risk-coverage) curve.

Scores are points, ``0 <= score <= max_points``. The statistics follow the paper's reference-agreement
perspective; their exact set, the QWK binning and the bootstrap are [reconstructed]. Rows are put in a
canonical order before resampling, so every value is independent of the row order (and of DDP sharding).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor

from hf_ext._validation import check_float, check_int, check_probability, check_sequence

EXACT = 1e-6


def _vector(name: str, value: Any) -> np.ndarray:
    arr = (
        torch.as_tensor(value).detach().cpu().double().numpy() if not isinstance(value, np.ndarray) else value
    )
    arr = np.asarray(arr, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"`{name}` must be a non-empty 1-D tensor, got shape {tuple(arr.shape)}.")
    if not np.isfinite(arr).all():
        raise ValueError(f"`{name}` must hold finite values, got {arr[~np.isfinite(arr)][:3].tolist()}.")
    return arr


def check_scores(preds: Any, target: Any, max_points: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated float64 ``(a, g, M)`` of shape ``(n,)``; ``max_points`` may be a scalar or ``(n,)``.

    Raises:
        ValueError: shapes differ, a value is NaN/inf or negative, ``max_points <= 0``, or a score exceeds
            its ``max_points`` by more than 1e-6. The message names the argument.
    """
    a, g = _vector("preds", preds), _vector("target", target)
    if a.shape != g.shape:
        raise ValueError(f"`target` must have the shape of `preds` {a.shape}, got {g.shape}.")
    m = np.asarray(torch.as_tensor(max_points).detach().cpu().double().numpy(), dtype=np.float64)
    if m.ndim == 0:
        m = np.full_like(a, float(m))
    if m.shape != a.shape:
        raise ValueError(f"`max_points` must be a scalar or have shape {a.shape}, got {m.shape}.")
    if not np.isfinite(m).all() or (m <= 0).any():
        raise ValueError(f"`max_points` must be finite and > 0, got {m[~(np.isfinite(m) & (m > 0))][:3]}.")
    for name, x in (("preds", a), ("target", g)):
        if (x < 0).any():
            raise ValueError(f"`{name}` must be >= 0, got {x[x < 0][:3].tolist()}.")
        if (x > m + EXACT).any():
            bad = np.flatnonzero(x > m + EXACT)[:3]
            raise ValueError(f"`{name}` must be <= max_points, got {x[bad].tolist()} > {m[bad].tolist()}.")
    return a, g, m


def _avg_ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (1-based, ties share their mean rank) along the last axis of ``(B, n)``."""
    b, n = x.shape
    order = np.argsort(x, axis=1, kind="stable")
    xs = np.take_along_axis(x, order, 1)
    new = np.ones_like(xs, dtype=bool)
    new[:, 1:] = xs[:, 1:] != xs[:, :-1]
    flat = (np.cumsum(new, axis=1) - 1 + np.arange(b)[:, None] * n).ravel()
    pos = np.broadcast_to(np.arange(1, n + 1, dtype=np.float64), (b, n)).ravel()
    sums = np.bincount(flat, weights=pos, minlength=b * n)
    counts = np.bincount(flat, minlength=b * n)
    sorted_ranks = (sums / np.maximum(counts, 1))[flat].reshape(b, n)
    ranks = np.empty_like(sorted_ranks)
    np.put_along_axis(ranks, order, sorted_ranks, 1)
    return ranks


def _pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    xc, yc = x - x.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
    den = np.sqrt((xc**2).sum(1) * (yc**2).sum(1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (xc * yc).sum(1) / np.where(den > 0, den, 1), np.nan)


def _bins(x: np.ndarray, bin_width: float) -> np.ndarray:
    return np.floor(x / bin_width + 0.5).astype(np.int64)  # round half up


def _qwk(ca: np.ndarray, cg: np.ndarray, k: int) -> np.ndarray:
    """QWK of each row of class arrays ``(B, n)`` over the full class range ``0..k-1``."""
    b, n = ca.shape
    flat = (np.arange(b)[:, None] * k * k + ca * k + cg).ravel()
    obs = np.bincount(flat, minlength=b * k * k).reshape(b, k, k).astype(np.float64)
    exp = obs.sum(2)[:, :, None] * obs.sum(1)[:, None, :] / n
    w = (np.arange(k)[:, None] - np.arange(k)[None, :]) ** 2.0
    num, den = (w * obs).sum((1, 2)), (w * exp).sum((1, 2))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, 1 - num / np.where(den > 0, den, 1), np.nan)


def _stats(
    a: np.ndarray,
    g: np.ndarray,
    m: np.ndarray,
    idx: np.ndarray,
    tolerances: Sequence[float],
    bin_width: float,
) -> dict[str, np.ndarray]:
    """Every statistic for each resample ``idx`` ``(B, n)``: arrays of shape ``(B,)``."""
    ai, gi, mi = a[idx], g[idx], m[idx]
    diff = ai - gi
    out = {
        "mae": np.abs(diff).mean(1),
        "nmae": (np.abs(diff) / mi).mean(1),
        "bias": diff.mean(1),
        "harsher": (diff < -EXACT).mean(1),
        "lenient": (diff > EXACT).mean(1),
        "exact": (np.abs(diff) <= EXACT).mean(1),
    }
    for tol in tolerances:
        out[f"within_{float(tol)}"] = (np.abs(diff) <= tol + EXACT).mean(1)
    k = int(round(float(m.max()) / bin_width)) + 1
    out["qwk"] = _qwk(_bins(ai, bin_width), _bins(gi, bin_width), k)
    out["spearman"] = _pearson(_avg_ranks(ai), _avg_ranks(gi))
    out["pearson"] = _pearson(ai, gi)
    return out


def _canonical(*cols: np.ndarray) -> np.ndarray:
    return np.lexsort(cols[::-1])


def grading_agreement(
    preds: Any,
    target: Any,
    max_points: Any,
    *,
    tolerances: Sequence[float] = (0.5, 1.0),
    bin_width: float = 0.5,
    n_bootstrap: int = 0,
    level: float = 0.95,
    seed: int = 0,
) -> dict[str, Tensor]:
    """Agreement of AI scores ``preds`` ``(n,)`` with reference scores ``target`` ``(n,)``.

    Returns 0-d float64 tensors: ``mae`` = mean|a-g|, ``nmae`` = mean(|a-g|/M), ``bias`` = mean(a-g),
    ``harsher`` = mean 1[a<g], ``lenient`` = mean 1[a>g], ``exact`` = mean 1[|a-g| <= 1e-6],
    ``within_<t>`` = mean 1[|a-g| <= t] per tolerance, ``qwk``, ``spearman``, ``pearson`` and ``n``. With
    ``n_bootstrap > 0``, each statistic ``s`` also gets ``s_lo`` and ``s_hi``: the percentile-bootstrap
    interval at ``level`` (rows resampled with replacement, ``seed`` fixed).

    QWK bins scores as ``c = round(score / bin_width)`` over the full class range ``0..K-1`` with
    ``K = round(max M / bin_width) + 1``; see :func:`quadratic_weighted_kappa`. QWK, Spearman and Pearson are
    NaN (with a warning) when undefined (a single class or a constant input).

    Example:
        >>> a = torch.tensor([2, 3, 1, 0, 2.5, 1.5]); g = torch.tensor([2, 2, 1, 1, 3, 1.5])
        >>> out = grading_agreement(a, g, 3.0)
        >>> round(float(out["mae"]), 5), round(float(out["qwk"]), 6)
        (0.41667, 0.742857)
    """
    a, g, m = check_scores(preds, target, max_points)
    tols = check_sequence("tolerances", tolerances, lambda n, v: check_float(n, v, low=0))
    bin_width = check_float("bin_width", bin_width, low=0, low_open=True)
    n_bootstrap = check_int("n_bootstrap", n_bootstrap, low=0)
    level = check_probability("level", level, low_open=True, high_open=True)
    seed = check_int("seed", seed)
    order = _canonical(m, g, a)
    a, g, m = a[order], g[order], m[order]
    point = _stats(a, g, m, np.arange(a.size)[None], tols, bin_width)
    for name in ("qwk", "spearman", "pearson"):
        if not np.isfinite(point[name][0]):
            warnings.warn(
                f"{name} is undefined (a single class or a constant input); returning NaN.", stacklevel=2
            )
    out = {k: torch.tensor(float(v[0]), dtype=torch.float64) for k, v in point.items()}
    if n_bootstrap:
        idx = np.random.default_rng(seed).integers(0, a.size, size=(n_bootstrap, a.size))
        draws = _stats(a, g, m, idx, tols, bin_width)
        tail = (1 - level) / 2
        for k, v in draws.items():
            v = v[np.isfinite(v)]
            lo, hi = (np.quantile(v, tail), np.quantile(v, 1 - tail)) if v.size else (math.nan, math.nan)
            out[f"{k}_lo"] = torch.tensor(float(lo), dtype=torch.float64)
            out[f"{k}_hi"] = torch.tensor(float(hi), dtype=torch.float64)
    out["n"] = torch.tensor(float(a.size), dtype=torch.float64)
    return out


def quadratic_weighted_kappa(
    preds: Any, target: Any, *, max_points: Any = None, bin_width: float = 0.5
) -> Tensor:
    """Cohen's kappa with quadratic weights on binned scores, over the full class range.

    ``c = round(score / bin_width)`` (half up), ``K = round(max M / bin_width) + 1`` (``max_points``
    defaults to the largest score), ``kappa = 1 - sum w O / sum w E`` with ``w_ij = (i-j)^2``, ``O`` the
    ``K x K`` confusion matrix and ``E`` the outer product of its margins over ``n``. Equal to
    ``sklearn.metrics.cohen_kappa_score(cg, ca, weights="quadratic", labels=np.arange(K))`` and to
    torchmetrics ``multiclass_cohen_kappa(..., num_classes=K, weights="quadratic")``; without ``labels``
    sklearn re-indexes to the classes present, which differs when they are not contiguous.

    Example:
        >>> quadratic_weighted_kappa(torch.tensor([2, 3, 1, 0, 2.5, 1.5]), torch.tensor([2, 2, 1, 1, 3, 1.5]),
        ...                          max_points=3)
        tensor(0.7429, dtype=torch.float64)
    """
    a, g = _vector("preds", preds), _vector("target", target)
    top = max(a.max(), g.max(), EXACT) if max_points is None else max_points
    a, g, m = check_scores(a, g, top)
    bin_width = check_float("bin_width", bin_width, low=0, low_open=True)
    k = int(round(float(m.max()) / bin_width)) + 1
    value = float(_qwk(_bins(a, bin_width)[None], _bins(g, bin_width)[None], k)[0])
    if not math.isfinite(value):
        warnings.warn("qwk is undefined (a single class); returning NaN.", stacklevel=2)
    return torch.tensor(value, dtype=torch.float64)


def qwk_scorer(*, bin_width: float = 0.5, max_points: float | None = None) -> Any:
    """A scikit-learn scorer (greater is better) of :func:`quadratic_weighted_kappa` between the targets and
    the predictions clipped to ``[0, max_points]`` (``max_points`` defaults to the largest target of each
    split), for ``cross_val_score`` or ``GridSearchCV`` on score regressors.

    Example:
        >>> from sklearn.dummy import DummyRegressor
        >>> from sklearn.model_selection import cross_val_score
        >>> X, y = np.arange(12.0)[:, None], np.arange(12) % 4 * 1.0
        >>> cross_val_score(DummyRegressor(), X, y, scoring=qwk_scorer(max_points=3.0), cv=3).tolist()
        [0.0, 0.0, 0.0]
    """
    from sklearn.metrics import make_scorer

    bin_width = check_float("bin_width", bin_width, low=0, low_open=True)
    top = None if max_points is None else check_float("max_points", max_points, low=0, low_open=True)

    def qwk(y_true: Any, y_pred: Any) -> float:
        g = np.asarray(y_true, dtype=np.float64)
        m = top if top is not None else max(float(g.max()), EXACT)
        a = np.clip(np.asarray(y_pred, dtype=np.float64), 0, m)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return float(quadratic_weighted_kappa(a, g, max_points=m, bin_width=bin_width))

    return make_scorer(qwk)


def check_runs(runs: Any) -> np.ndarray:
    """Validated float64 ``(n, R)`` run scores."""
    arr = np.asarray(torch.as_tensor(runs).detach().cpu().double().numpy(), dtype=np.float64)
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"`runs` must be a non-empty 2-D tensor (answers, runs), got shape {arr.shape}.")
    if not np.isfinite(arr).all():
        raise ValueError("`runs` must hold finite values.")
    return arr


def run_stability(runs: Any, *, tau: float = 1.0) -> dict[str, Tensor]:
    """Run-to-run stability of ``R`` runs per answer, ``runs`` ``(n, R)`` in points.

    Returns ``sd`` (mean per-answer SD, ddof=1; NaN for R=1), ``range`` (mean max - min),
    ``frac_range_gt_tau`` (share of answers whose range exceeds ``tau``) and ``n``.

    Example:
        >>> run_stability(torch.tensor([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]]))["range"]
        tensor(1., dtype=torch.float64)
    """
    r = check_runs(runs)
    tau = check_float("tau", tau, low=0)
    spread = r.max(1) - r.min(1)
    sd = r.std(1, ddof=1).mean() if r.shape[1] > 1 else math.nan
    values = {"sd": sd, "range": spread.mean(), "frac_range_gt_tau": (spread > tau).mean(), "n": r.shape[0]}
    return {k: torch.tensor(float(v), dtype=torch.float64) for k, v in values.items()}


def deferral_curve(
    preds: Any,
    target: Any,
    risk: Any,
    *,
    budgets: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.5),
    large: float = 1.0,
) -> dict[str, Tensor]:
    """Defer the highest-``risk`` answers to a human and score the rest.

    For each budget ``q``, the ``floor(q n)`` riskiest answers (ties: earlier rows first) are deferred.
    Returns ``budget`` ``(B,)``, ``mae_kept`` ``(B,)`` (MAE on the kept answers, NaN when none),
    ``large_captured`` ``(B,)`` (share of answers with ``|a-g| >= large`` that were deferred, NaN when there
    are none) and ``aurc``: the mean, over coverages ``k/n``, of the MAE of the ``k`` lowest-risk answers.

    Example:
        >>> out = deferral_curve(torch.tensor([0.0, 2.0]), torch.tensor([0.0, 0.0]), torch.tensor([0.1, 0.9]),
        ...                      budgets=(0.5,))
        >>> out["mae_kept"], out["large_captured"]
        (tensor([0.], dtype=torch.float64), tensor([1.], dtype=torch.float64))
    """
    a, g = _vector("preds", preds), _vector("target", target)
    r = _vector("risk", risk)
    if not a.shape == g.shape == r.shape:
        raise ValueError(
            f"`preds`, `target` and `risk` must share one shape, got {a.shape}, {g.shape}, {r.shape}."
        )
    qs = check_sequence("budgets", budgets, lambda n, v: check_probability(n, v), min_length=1)
    large = check_float("large", large, low=0, low_open=True)
    err = np.abs(a - g)
    order = np.lexsort((np.arange(r.size), -r))  # riskiest first
    is_large = err >= large
    mae, captured = [], []
    for q in qs:
        cut = int(math.floor(q * r.size + EXACT))
        kept = order[cut:]
        mae.append(err[kept].mean() if kept.size else math.nan)
        captured.append(is_large[order[:cut]].sum() / is_large.sum() if is_large.any() else math.nan)
    safest = err[order[::-1]]
    aurc = float(np.mean(np.cumsum(safest) / np.arange(1, r.size + 1)))
    f64 = torch.float64
    return {
        "budget": torch.tensor(qs, dtype=f64),
        "mae_kept": torch.tensor(mae, dtype=f64),
        "large_captured": torch.tensor(captured, dtype=f64),
        "aurc": torch.tensor(aurc, dtype=f64),
    }
