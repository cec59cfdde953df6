"""Robustness evaluation of timm classifiers on the corruption suite.

:func:`evaluate_corruptions` reports accuracy per corruption and severity, per family, and mCE via
:class:`~hf_ext.metrics.corruption.MeanCorruptionError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from hf_ext.metrics.corruption import MeanCorruptionError
from hf_ext.timm._modes import eval_mode
from hf_ext.timm.corruptions import CORRUPTIONS, corrupt, corruption_names

Tensor = torch.Tensor


def model_normalizer(model: nn.Module) -> Callable[[Tensor], Tensor]:
    """Pixel [0, 1] -> model input, with the mean/std of the model's timm data config."""
    from timm.data import resolve_data_config

    cfg = resolve_data_config({}, model=model)
    mean, std = torch.tensor(cfg["mean"]).view(1, -1, 1, 1), torch.tensor(cfg["std"]).view(1, -1, 1, 1)
    return lambda x: (x - mean.to(x)) / std.to(x)


@torch.no_grad()
def evaluate_corruptions(
    model: nn.Module,
    data: Iterable[tuple[Tensor, Tensor]],
    corruptions: str | Sequence[str] = "imagenet_c",
    severities: Sequence[int] = (1, 2, 3, 4, 5),
    reference: str | Tensor | None = None,
    reference_clean_error: float | None = None,
    normalize: Callable[[Tensor], Tensor] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Top-1 accuracy of ``model`` on clean and corrupted copies of ``data``.

    Args:
        model: a classifier taking normalised inputs (run in eval mode; modes restored).
        data: batches of ``(images (B, 3, H, W) in [0, 1], labels (B,))``, e.g. a ``DataLoader``.
        corruptions: ``"imagenet_c"`` (the 15 canonical ones) or a list of names.
        severities: severities to evaluate.
        reference: mCE reference, as in :class:`MeanCorruptionError` (``None``: no mCE).
        reference_clean_error: the reference's clean error, for the relative mCE.
        normalize: pixel -> model input, *optional*, defaults to the model's timm data config.
        seed: the corruption of batch ``b`` uses a generator seeded ``seed + b``, identical across models.

    Returns:
        ``{"clean_accuracy": float, "accuracy": {name: {severity: float}}, "family_accuracy": {family: float},
        "mean_corruption_accuracy": float, "error": (C, S) tensor, "clean_error": float}`` plus ``mCE``,
        ``CE`` and ``relative_mCE`` when a reference allows them.
    """
    names = corruption_names(corruptions)
    normalize = normalize or model_normalizer(model)
    metric = MeanCorruptionError(
        names, severities, reference=reference, reference_clean_error=reference_clean_error
    )
    with eval_mode(model):
        for b, (x, y) in enumerate(data):
            metric.update(model(normalize(x)), y)
            for name in names:
                for s in severities:
                    g = torch.Generator(device=x.device).manual_seed(seed + b)
                    metric.update(model(normalize(corrupt(x, name, s, g))), y, name, s)
    out = metric.compute()
    error = out["error"].reshape(len(names), len(severities))  # torchmetrics squeezes a 1x1 table
    acc = 1 - error
    families: dict[str, list[float]] = {}
    for i, name in enumerate(names):
        families.setdefault(CORRUPTIONS[name].family, []).append(float(acc[i].mean()))
    report: dict[str, Any] = {
        "clean_accuracy": float(out["clean_accuracy"]),
        "accuracy": {
            name: {s: float(acc[i, j]) for j, s in enumerate(severities)} for i, name in enumerate(names)
        },
        "family_accuracy": {f: sum(v) / len(v) for f, v in families.items()},
        "mean_corruption_accuracy": float(out["corruption_accuracy"]),
        "error": error,
        "clean_error": float(out["clean_error"]),
    }
    for key in ("mCE", "relative_mCE"):
        if key in out:
            report[key] = float(out[key])
    if "CE" in out:
        report["CE"] = out["CE"]
    return report
