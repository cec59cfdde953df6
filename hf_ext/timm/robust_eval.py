"""Robustness evaluation of timm classifiers on the corruption suite.

* :func:`evaluate_corruptions`: accuracy per corruption and severity, per family, and mCE via
  :class:`~hf_ext.metrics.corruption.MeanCorruptionError`.
* :func:`feature_entropy_profile`: the paper's observation, measured: how prediction entropy and intermediate
  "token" feature entropy move with corruption severity, with top-1 agreement with the clean prediction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from torch import nn

from hf_ext.metrics.corruption import MeanCorruptionError
from hf_ext.timm.corruptions import CORRUPTIONS, IMAGENET_C, corrupt
from hf_ext.timm.dem_hec.core import eval_mode, forward_with_features, prediction_entropy, token_entropy

Tensor = torch.Tensor


def model_normalizer(model: nn.Module) -> Callable[[Tensor], Tensor]:
    """Pixel [0, 1] -> model input, with the mean/std of the model's timm data config."""
    from timm.data import resolve_data_config

    cfg = resolve_data_config({}, model=model)
    mean, std = torch.tensor(cfg["mean"]).view(1, -1, 1, 1), torch.tensor(cfg["std"]).view(1, -1, 1, 1)
    return lambda x: (x - mean.to(x)) / std.to(x)


def _names(corruptions: str | Sequence[str]) -> list[str]:
    names = (
        list(IMAGENET_C)
        if corruptions == "imagenet_c"
        else [corruptions]
        if isinstance(corruptions, str)
        else list(corruptions)
    )
    unknown = [n for n in names if n not in CORRUPTIONS]
    if unknown:
        raise KeyError(f"unknown corruptions {unknown}; valid names: {', '.join(CORRUPTIONS)}")
    return names


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
        "mean_corruption_accuracy": float, "error": (C, S) tensor, "clean_error": float}`` plus ``mCE``, ``CE`` and
        ``relative_mCE`` when a reference allows them.
    """
    names = _names(corruptions)
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


@torch.no_grad()
def feature_entropy_profile(
    model: nn.Module,
    images: Tensor,
    corruptions: str | Sequence[str] = ("gaussian_noise", "defocus_blur"),
    severities: Sequence[int] = (1, 2, 3, 4, 5),
    stages: Sequence[int] = (-2,),
    normalize: Callable[[Tensor], Tensor] | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Prediction entropy, token feature entropy per stage and top-1 agreement, clean vs corrupted.

    Args:
        model: a timm classifier with ``forward_intermediates``.
        images: ``(N, 3, H, W)`` in [0, 1]; labels are not needed.
        corruptions: ``"imagenet_c"`` or a list of corruption names.
        severities: severities to apply.
        stages: ``forward_intermediates`` indices whose token entropy is measured.
        normalize: pixel -> model input, *optional*, defaults to the model's timm data config.
        seed: corruption seed.

    Returns:
        One row per (corruption, severity, stage): ``corruption`` (``"clean"`` with ``severity`` 0 for the
        clean pass), ``severity``, ``stage``, ``token_entropy`` (normalised, mean over images),
        ``prediction_entropy_nats`` (mean), ``top1_agreement`` (share of images whose top-1 class equals the clean
        one).
    """
    names = _names(corruptions)
    normalize = normalize or model_normalizer(model)

    def measure(x: Tensor) -> tuple[Tensor, Tensor, dict[int, float]]:
        final, inter = model.forward_intermediates(normalize(x), indices=list(stages))
        logits = model.forward_head(final)
        ent = prediction_entropy(logits) * torch.log(torch.tensor(float(logits.shape[-1])))
        return (
            logits.argmax(-1),
            ent.mean(),
            {s: float(token_entropy(f).mean()) for s, f in zip(stages, inter)},
        )

    rows: list[dict[str, Any]] = []
    with eval_mode(model):
        forward_with_features(model, images[:1], None)  # validates the model's interface
        clean_top1, clean_ent, clean_tok = measure(images)
        cells = [("clean", 0, images)]
        for name in names:
            for s in severities:
                g = torch.Generator(device=images.device).manual_seed(seed)
                cells.append((name, s, corrupt(images, name, s, g)))
        for name, s, x in cells:
            top1, ent, tok = (clean_top1, clean_ent, clean_tok) if name == "clean" else measure(x)
            for stage in stages:
                rows.append({
                    "corruption": name, "severity": s, "stage": stage, "token_entropy": tok[stage],
                    "prediction_entropy_nats": float(ent), "top1_agreement": float((top1 == clean_top1).float().mean()),
                })  # fmt: skip
    return rows
