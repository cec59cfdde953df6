"""Functional forms of the uncertainty-evaluation metrics: AUROC of confidence vs correctness, its mean
within strata (e.g. context sizes), and the prediction-rejection ratio (PRR).

A confidence score is good when it ranks correct answers above incorrect ones. Every function takes
``confidence`` ``(n,)`` (finite floats, higher = more confident) and ``correct`` ``(n,)`` (0/1 or bool) and
returns a 0-d float64 tensor.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from torch import Tensor


def _check(confidence: Any, correct: Any) -> tuple[Tensor, Tensor]:
    """Validated ``(confidence float64 (n,), correct float64 (n,))``."""
    conf = torch.as_tensor(confidence).detach()
    corr = torch.as_tensor(correct).detach()
    if conf.ndim != 1 or conf.numel() == 0:
        raise ValueError(f"`confidence` must be a non-empty 1-D tensor, got shape {tuple(conf.shape)}.")
    if tuple(corr.shape) != tuple(conf.shape):
        raise ValueError(
            f"`correct` must have the shape of `confidence` {tuple(conf.shape)}, got {tuple(corr.shape)}."
        )
    if conf.dtype == torch.bool or not torch.isfinite(conf.double()).all():
        raise ValueError("`confidence` must hold finite real numbers (drop or impute NaN scores first).")
    corr = corr.double()
    if not bool(((corr == 0) | (corr == 1)).all()):
        raise ValueError(f"`correct` must hold 0/1 values, got {sorted(set(corr.unique().tolist()))[:5]}.")
    return conf.double(), corr


def _one_class(name: str) -> Tensor:
    warnings.warn(
        f"{name} is undefined when every answer is correct or every answer is wrong; returning 0.",
        UserWarning,
        stacklevel=3,
    )
    return torch.tensor(0.0, dtype=torch.float64)


def uncertainty_auroc(confidence: Any, correct: Any) -> Tensor:
    """AUROC of ``confidence`` separating correct (positive) from incorrect answers.

    Delegates to ``torchmetrics.functional.classification.binary_auroc`` (exact, ties count one half).
    With one class only it warns and returns 0, as ``binary_auroc`` does.

    Example:
        >>> uncertainty_auroc(torch.tensor([0.9, 0.2, 0.6, 0.4]), torch.tensor([1, 0, 0, 1]))
        tensor(0.7500, dtype=torch.float64)
    """
    from torchmetrics.functional.classification import binary_auroc

    conf, corr = _check(confidence, correct)
    if corr.min() == corr.max():
        return _one_class("AUROC")
    return binary_auroc(conf, corr.long()).to(torch.float64)


def stratified_auroc(confidence: Any, correct: Any, groups: Any) -> Tensor:
    """Mean AUROC within groups (e.g. context sizes), weighted by group size; groups with one class are
    skipped. NaN when every group has one class.

    Example:
        >>> conf = torch.tensor([0.9, 0.1, 0.2, 0.8, 0.5])
        >>> stratified_auroc(conf, torch.tensor([1, 0, 1, 0, 1]), torch.tensor([0, 0, 1, 1, 1]))
        tensor(0.4000, dtype=torch.float64)
    """
    from torchmetrics.functional.classification import binary_auroc

    conf, corr = _check(confidence, correct)
    g = torch.as_tensor(groups)
    if tuple(g.shape) != tuple(conf.shape):
        raise ValueError(
            f"`groups` must have the shape of `confidence` {tuple(conf.shape)}, got {tuple(g.shape)}."
        )
    total, weight = 0.0, 0
    for value in g.unique():
        sel = g == value
        c = corr[sel]
        if c.min() == c.max():
            continue
        total += float(binary_auroc(conf[sel], c.long())) * int(sel.sum())
        weight += int(sel.sum())
    return torch.tensor(total / weight if weight else float("nan"), dtype=torch.float64)


def _rejection_area(corr_sorted: Tensor) -> Tensor:
    """Mean over rejection rates ``i / n`` (``i = 0..n-1``) of the mean correctness of the ``n - i`` kept."""
    n = corr_sorted.numel()
    kept = torch.arange(n, 0, -1, dtype=torch.float64)
    return (corr_sorted.cumsum(0).flip(0) / kept).mean() if n else corr_sorted.new_tensor(0.0)


def prediction_rejection_ratio(confidence: Any, correct: Any) -> Tensor:
    """PRR: area between the confidence-ordered and the random rejection curves of mean correctness,
    divided by the same area for the oracle ordering (1 perfect, 0 random, negative worse than random).

    The least confident answers are rejected first; tied confidences are scored by their expected order
    (each tie group's correctness replaced by its mean), so the result does not depend on the input order.
    With one class only it warns and returns 0.

    Example:
        >>> prediction_rejection_ratio(torch.tensor([0.9, 0.8, 0.2, 0.1]), torch.tensor([1, 1, 0, 0]))
        tensor(1., dtype=torch.float64)
    """
    conf, corr = _check(confidence, correct)
    if corr.min() == corr.max():
        return _one_class("PRR")
    order = torch.argsort(conf, descending=True, stable=True)
    c, v = conf[order], corr[order]
    _, group = torch.unique_consecutive(c, return_inverse=True)
    means = torch.zeros(int(group.max()) + 1, dtype=torch.float64).index_add_(0, group, v)
    means /= torch.bincount(group).double()
    model = _rejection_area(means[group])
    oracle = _rejection_area(corr.sort(descending=True).values)
    random = corr.mean()
    return (model - random) / (oracle - random)
