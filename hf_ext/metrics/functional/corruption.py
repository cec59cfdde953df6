"""Functional mean corruption error (mCE) and relative mCE, ImageNet-C style.

[reconstructed] The standard ImageNet-C definition (Hendrycks & Dietterich, 2019); the Dem-HEC paper's exact
metric is unconfirmed. For corruption ``c``, severities ``s`` and top-1 error ``E``:

* ``CE_c = sum_s E^f_{s,c} / sum_s E^ref_{s,c}`` and ``mCE = 100 * mean_c CE_c``;
* ``rCE_c = sum_s (E^f_{s,c} - E^f_clean) / sum_s (E^ref_{s,c} - E^ref_clean)`` and
  ``rmCE = 100 * mean_c rCE_c``.

With AlexNet as the reference (``ALEXNET_CE``: its mean error over the five severities of each canonical
corruption, and ``ALEXNET_CLEAN_ERROR``), the sums over severities become means over the same five severities.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

Tensor = torch.Tensor

# AlexNet's mean top-1 error over severities on ImageNet-C, in the canonical corruption order.
ALEXNET_CE = {
    "gaussian_noise": 0.886428,
    "shot_noise": 0.894468,
    "impulse_noise": 0.922640,
    "defocus_blur": 0.819880,
    "glass_blur": 0.826268,
    "motion_blur": 0.785948,
    "zoom_blur": 0.798360,
    "snow": 0.866816,
    "frost": 0.826572,
    "fog": 0.819324,
    "brightness": 0.564592,
    "contrast": 0.853204,
    "elastic_transform": 0.646056,
    "pixelate": 0.717840,
    "jpeg_compression": 0.606500,
}
ALEXNET_CLEAN_ERROR = 0.4348  # AlexNet top-1 error on clean ImageNet validation


def _mean_corruption_error_update(preds: Tensor, target: Tensor) -> tuple[Tensor, Tensor]:
    """Count correct predictions and samples for one cell (corruption, severity) or the clean set.

    Args:
        preds: ``(N, num_classes)`` logits or probabilities, or ``(N,)`` predicted class ids.
        target: ``(N,)`` integer class ids.

    Returns:
        ``(correct, total)`` as 0-d int64 tensors.
    """
    if target.ndim != 1 or target.is_floating_point():
        raise ValueError(
            "`target` must be a 1-D integer tensor of class ids, "
            f"got shape {tuple(target.shape)} {target.dtype}."
        )
    if preds.ndim == 2:
        preds = preds.argmax(-1)
    if preds.ndim != 1 or preds.shape[0] != target.shape[0]:
        raise ValueError(
            f"`preds` must be (N,) ids or (N, C) scores matching `target` (N={target.shape[0]}), "
            f"got {tuple(preds.shape)}."
        )
    return (preds == target).sum(), torch.tensor(target.shape[0], device=target.device)


def _mean_corruption_error_compute(
    error: Tensor,
    clean_error: Tensor,
    reference_error: Tensor,
    reference_clean_error: Tensor | None = None,
) -> dict[str, Tensor]:
    """mCE from error tables.

    Args:
        error: ``(C, S)`` top-1 error of the model per corruption and severity, in [0, 1].
        clean_error: 0-d clean error of the model.
        reference_error: ``(C, S)`` error of the reference model, or ``(C,)`` its mean error over severities
            (AlexNet-style constants; ``error`` then averages over the same severities).
        reference_clean_error: 0-d clean error of the reference (needed for relative mCE).

    Returns:
        ``{"mCE", "relative_mCE" (if computable), "CE" (C,), "corruption_accuracy", "clean_accuracy"}`` with
        mCE values in percent (reference = 100).
    """
    if reference_error.ndim == 1:
        ce = error.mean(1) / reference_error
        rce = None
        if reference_clean_error is not None:
            rce = (error.mean(1) - clean_error) / (reference_error - reference_clean_error)
    else:
        if reference_error.shape != error.shape:
            raise ValueError(
                f"`reference_error` has shape {tuple(reference_error.shape)}, expected {tuple(error.shape)}."
            )
        ce = error.sum(1) / reference_error.sum(1)
        rce = None
        if reference_clean_error is not None:
            rce = (error - clean_error).sum(1) / (reference_error - reference_clean_error).sum(1)
    out = {
        "mCE": 100 * ce.mean(),
        "CE": 100 * ce,
        "corruption_accuracy": 1 - error.mean(),
        "clean_accuracy": 1 - clean_error,
    }
    if rce is not None:
        out["relative_mCE"] = 100 * rce.mean()
    return out


def mean_corruption_error(
    error: Tensor,
    clean_error: Tensor | float,
    reference_error: Tensor | Sequence[float],
    reference_clean_error: Tensor | float | None = None,
) -> dict[str, Tensor]:
    """Mean corruption error (percent; the reference model scores 100) from per-cell top-1 errors.

    Args:
        error: ``(C, S)`` model error per corruption and severity, in [0, 1].
        clean_error: model error on clean data.
        reference_error: ``(C, S)`` reference-model errors, or ``(C,)`` mean errors over severities (e.g. the
            AlexNet constants ``ALEXNET_CE``, meaningful only on real ImageNet-C).
        reference_clean_error: reference clean error, for the relative mCE (``ALEXNET_CLEAN_ERROR`` for
            AlexNet).

    Examples:
        >>> import torch
        >>> ref = torch.tensor([[0.4, 0.6], [0.2, 0.4]])
        >>> out = mean_corruption_error(ref / 2, 0.05, ref, 0.1)
        >>> round(float(out["mCE"]), 4), round(float(out["relative_mCE"]), 4)
        (50.0, 50.0)
    """
    error = torch.as_tensor(error, dtype=torch.float64)
    reference_error = torch.as_tensor(reference_error, dtype=torch.float64)
    if error.ndim != 2:
        raise ValueError(
            f"`error` must be (num_corruptions, num_severities), got shape {tuple(error.shape)}."
        )
    for name, value in (("error", error), ("reference_error", reference_error)):
        if not torch.isfinite(value).all() or value.min() < 0 or value.max() > 1:
            raise ValueError(f"`{name}` must hold error rates in [0, 1].")
    if reference_error.ndim == 1 and reference_error.shape[0] != error.shape[0]:
        raise ValueError(
            f"`reference_error` has {reference_error.shape[0]} corruptions, `error` has {error.shape[0]}."
        )
    ref_clean = (
        None if reference_clean_error is None else torch.as_tensor(reference_clean_error, dtype=torch.float64)
    )
    return _mean_corruption_error_compute(
        error, torch.as_tensor(clean_error, dtype=torch.float64), reference_error, ref_clean
    )
