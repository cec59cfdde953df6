"""Functional ERT (excess risk of the target coverage; arXiv 2512.11779), its held-out test and its
prediction-only form.

Math in :mod:`hf_ext.ert.core`; the class form is :class:`hf_ext.metrics.ert.ExcessRiskTargetCoverage`, which
computes through :func:`hf_ext.ert.core.cross_fit_ert` as :func:`excess_risk_target_coverage` does, so both
give the same value on the same rows.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor

from hf_ext._validation import check_choice, check_int, check_n_jobs, check_probability
from hf_ext.ert.classifiers import allows_nan, check_classifier
from hf_ext.ert.core import (
    FOLD_ORDERS,
    LOSSES,
    NULLS,
    SIDES,
    HeldOutTest,
    cross_fit_ert,
    per_sample_excess_risk,
    split_test,
)
from hf_ext.ert.inputs import as_numpy, check_covered, check_features, resolve_coverage, target_vector


def _ert_arg_validation(
    alpha: float, loss: str, side: str, classifier: Any, n_splits: int, random_state: int, n_jobs: int | None
) -> None:
    check_probability("alpha", alpha, low_open=True, high_open=True)
    check_choice("loss", loss, LOSSES)
    check_choice("side", side, SIDES)
    check_classifier(classifier)
    check_int("n_splits", n_splits, low=2)
    check_int("random_state", random_state, low=0)
    check_n_jobs("n_jobs", n_jobs)


def _excess_risk_target_coverage_update(
    features: Any,
    covered: Any = None,
    alpha: float = 0.1,
    target_coverage: Any = None,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
    allow_nan: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated float64 ``(features (n, d), covered (n,), tau (n,))`` from one batch."""
    cov = resolve_coverage(covered, y, prediction_sets, intervals, alpha_index).covered
    feats = check_features(features, cov.shape[0], allow_nan=allow_nan)
    return feats, cov, target_vector(alpha, target_coverage, cov.shape[0])


def excess_risk_target_coverage(
    features: Any,
    covered: Any = None,
    alpha: float = 0.1,
    target_coverage: Any = None,
    loss: str = "l1",
    side: str = "both",
    classifier: Any = "hgb",
    n_splits: int = 5,
    random_state: int = 42,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
    n_jobs: int | None = None,
    fold_order: str = "canonical",
) -> Tensor:
    """Cross-fitted ERT: how much a classifier of the coverage beats the constant target coverage.

    ``KFold(n_splits, shuffle=True, random_state)``; per fold a fresh classifier is fitted on the training
    part and the fold value is ``mean l(tau, Z) - mean l(h, Z)`` on the held-out part; the result is the mean
    of fold values [paper, as ``covmetrics.ERT.evaluate``]. Lower is better for the audited conformal method
    (0 means no detectable conditional miscoverage); finite-sample values can be negative and are not clipped.
    The folds are drawn over the rows in a canonical order, so the value depends on the rows, not on their
    order; :class:`~hf_ext.metrics.ert.ExcessRiskTargetCoverage` gives the same value
    (``fold_order="as_given"`` draws them over the rows as passed, as ``covmetrics``). For a p-value, see
    :func:`ert_test`.

    Args:
        features: Features X of shape ``(n, d)`` (numpy, torch or pandas). NaN is allowed with the default
            gradient-boosting classifier only.
        covered: Coverage indicator 1{y in C(x)}, shape ``(n,)``. Alternatively pass ``y`` with
            ``prediction_sets``/``intervals`` (see :func:`hf_ext.ert.inputs.coverage_indicator`).
        alpha: Miscoverage level; the target coverage is ``1 - alpha``. Must lie in (0, 1).
        target_coverage: Optional per-sample target tau, scalar or shape ``(n,)`` in (0, 1); overrides
            ``alpha``.
        loss: ``"l1"`` (default; lower bound on E|p - tau|), ``"l2"`` (Brier) or ``"kl"`` (log-loss).
        side: ``"both"``, ``"over"`` (over-coverage part) or ``"under"``; over + under = both.
        classifier: ``"hgb"`` (calibrated HistGradientBoosting, an hf-ext choice [reconstructed]),
            ``"covmetrics"`` (the paper's LightGBM recipe, optional dependencies) or any scikit-learn
            classifier.
        n_splits: Number of cross-fitting folds (int in ``[2, n]``).
        random_state: Seed of the fold shuffle and the default classifier.
        y: Labels, with ``prediction_sets`` or ``intervals``, instead of ``covered``.
        prediction_sets: Boolean set masks ``(n, n_classes)`` or MAPIE ``y_pss`` ``(n, n_classes, n_alpha)``.
        intervals: ``(n, 2)`` or MAPIE ``y_pis`` ``(n, 2, n_alpha)`` (closed intervals).
        alpha_index: Which confidence level of a MAPIE array to use.
        n_jobs: Folds fitted at once through joblib (``-1``: every core); the value does not depend on it.
        fold_order: ``"canonical"`` (the value does not depend on the row order) or ``"as_given"``
            (``KFold`` over the rows as passed: equals ``covmetrics.ERT.evaluate`` on the same rows).

    Returns:
        0-d float64 tensor.

    Example:
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(-1, 1, size=(2000, 2))
        >>> covered = rng.random(2000) < np.where(X[:, 0] > 0.3, 0.75, 0.98)
        >>> ert = excess_risk_target_coverage(X, covered, alpha=0.1, classifier=LogisticRegression())
        >>> bool(ert > 0.05)
        True
    """
    _ert_arg_validation(alpha, loss, side, classifier, n_splits, random_state, n_jobs)
    feats, cov, tau = _excess_risk_target_coverage_update(
        features,
        covered,
        alpha,
        target_coverage,
        y=y,
        prediction_sets=prediction_sets,
        intervals=intervals,
        alpha_index=alpha_index,
        allow_nan=allows_nan(classifier),
    )
    check_choice("fold_order", fold_order, FOLD_ORDERS)
    table = cross_fit_ert(feats, cov, tau, classifier, n_splits, random_state, n_jobs, fold_order)
    key = loss if side == "both" else f"{loss}_{side}"
    return torch.tensor(table[key], dtype=torch.float64)


def ert_test(
    features: Any,
    covered: Any = None,
    alpha: float = 0.1,
    target_coverage: Any = None,
    classifier: Any = "hgb",
    test_size: float = 0.5,
    random_state: int = 42,
    *,
    y: Any = None,
    prediction_sets: Any = None,
    intervals: Any = None,
    alpha_index: int | None = None,
    null: str = "uniform",
) -> HeldOutTest:
    """p-value of conditional miscoverage: an exact held-out test of ERT-L1 [reconstructed].

    The classifier is fitted on a random ``1 - test_size`` of the rows; on the other rows its predictions h
    are fixed, so the held-out ERT-L1 has an exact null distribution: no asymptotics, no simulation, and a
    false-positive rate at most the level at every n. Two null hypotheses:

    * ``null="uniform"`` (default): coverage does not depend on x, p(x) = c for an unknown constant c. The
      statistic is ERT-L1 against the held-out marginal coverage c, ``mean(sign(h - c) (Z - c))``; its
      p-value is a one-sided Fisher exact (hypergeometric) tail given the number of covered rows
      (:func:`hf_ext.ert.core.uniformity_test`). A well-specified split-conformal predictor is in this null
      whatever marginal coverage its finite calibration set gave it.
    * ``null="target"``: p(x) = tau(x). The statistic is ``mean(sign(h - tau) (Z - tau))`` and every Z is
      Bernoulli(tau(X)) under the null (:func:`hf_ext.ert.core.held_out_test`); it also rejects a marginal
      coverage off tau, e.g. the deviation a finite calibration set allows split conformal.

    The cross-fitted value of :func:`excess_risk_target_coverage` uses every row for the
    estimate, but its folds share training data, so a normal approximation on it is liberal (the docs page
    measures it); the test spends half of the rows on fitting instead.

    Args:
        features: Features X of shape ``(n, d)``, as :func:`excess_risk_target_coverage`.
        covered: Coverage indicator ``(n,)``, or ``y`` with ``prediction_sets`` / ``intervals``.
        alpha: Miscoverage level in (0, 1); the target coverage is ``1 - alpha``.
        target_coverage: Optional per-sample target tau, scalar or ``(n,)`` in (0, 1); overrides ``alpha``.
        classifier: ``"hgb"``, ``"covmetrics"`` or any scikit-learn classifier.
        test_size: Fraction of the rows held out for the test, in (0, 1).
        random_state: Seed of the split and of the default classifier.
        y: Labels, with ``prediction_sets`` or ``intervals``, instead of ``covered``.
        prediction_sets: Boolean set masks or MAPIE ``y_pss``.
        intervals: ``(n, 2)`` intervals or MAPIE ``y_pis``.
        alpha_index: Which confidence level of a MAPIE array to use.
        null: ``"uniform"`` (coverage does not depend on x) or ``"target"`` (coverage equals tau everywhere).

    Returns:
        ``HeldOutTest(statistic, p_value, n, n_above, n_below)``: the held-out ERT-L1, its one-sided p-value,
        the number of held-out rows, and how many of them h puts above / below the constant (c or tau; rows
        at it carry no evidence).

    Example:
        >>> import numpy as np
        >>> from sklearn.linear_model import LogisticRegression
        >>> rng = np.random.default_rng(0)
        >>> X = rng.uniform(-1, 1, size=(2000, 2))
        >>> covered = rng.random(2000) < np.where(X[:, 0] > 0.3, 0.75, 0.98)
        >>> ert_test(X, covered, alpha=0.1, classifier=LogisticRegression()).p_value < 1e-6
        True
    """
    _ert_arg_validation(alpha, "l1", "both", classifier, 2, random_state, None)
    check_choice("null", null, NULLS)
    check_probability("test_size", test_size, low_open=True, high_open=True)
    feats, cov, tau = _excess_risk_target_coverage_update(
        features,
        covered,
        alpha,
        target_coverage,
        y=y,
        prediction_sets=prediction_sets,
        intervals=intervals,
        alpha_index=alpha_index,
        allow_nan=allows_nan(classifier),
    )
    return split_test(feats, cov, tau, classifier, test_size, random_state, null)


def ert_from_predictions(
    pred: Any, covered: Any, target: Any, loss: str = "l1", side: str = "both"
) -> Tensor:
    """ERT of given coverage predictions, with no fitting: ``mean l(tau, Z) - mean l(pred, Z)``.

    Use it with predictions from held-out data (an in-sample h overfits and inflates ERT) or as a
    training-time monitor: differentiable in ``pred`` for ``"l2"`` and ``"kl"`` (zero gradient for ``"l1"``).

    Args:
        pred: Predicted coverage probabilities h(x) in [0, 1], shape ``(n,)``; a tensor keeps its autograd
            graph.
        covered: Coverage indicator, shape ``(n,)``.
        target: Target coverage tau (``1 - alpha``), scalar or shape ``(n,)``, in (0, 1).
        loss: ``"l1"``, ``"l2"`` or ``"kl"``.
        side: ``"both"``, ``"over"`` or ``"under"``.

    Returns:
        0-d tensor (dtype of ``pred`` if it is a floating tensor, else float64).

    Example:
        >>> ert_from_predictions(torch.tensor([0.95, 0.5, 0.95, 0.8]), torch.tensor([1, 0, 1, 1]), 0.9)
        tensor(0.2500)
    """
    check_choice("loss", loss, LOSSES)
    check_choice("side", side, SIDES)
    if isinstance(pred, Tensor) and pred.is_floating_point():
        h = pred
    else:
        h = torch.as_tensor(as_numpy(pred, "pred"), dtype=torch.float64)
    if h.ndim != 1:
        raise ValueError(f"`pred` must be 1-D of shape (n,), got shape {tuple(h.shape)}.")
    if h.numel() and (h.min() < 0 or h.max() > 1 or torch.isnan(h).any()):
        raise ValueError(
            f"`pred` must hold probabilities in [0, 1], got range [{h.min().item()}, {h.max().item()}]."
        )
    cov = check_covered(covered)
    if cov.shape[0] != h.shape[0]:
        raise ValueError(
            f"`pred` has {h.shape[0]} entries but `covered` has {cov.shape[0]}; they must match."
        )
    if target is None:
        raise ValueError("`target` (the target coverage tau, e.g. 0.9) is required, got None.")
    tau = target_vector(0.5, target, cov.shape[0])
    z = torch.as_tensor(cov, dtype=h.dtype, device=h.device)
    return per_sample_excess_risk(
        h, z, torch.as_tensor(tau, dtype=h.dtype, device=h.device), loss, side
    ).mean()
