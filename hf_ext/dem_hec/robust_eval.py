"""Robustness evaluation of timm classifiers on the corruption suite or on ImageNet-C / CIFAR-10-C files.

:func:`evaluate_corruptions` reports accuracy per corruption and severity, per family, and mCE via
:class:`~hf_ext.metrics.corruption.MeanCorruptionError`; :func:`robustness_table` ranks several models in the
style of the RobustBench common-corruptions leaderboard.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from typing import Any

import torch
from torch import nn

from hf_ext._validation import check_choice, check_int, check_sequence
from hf_ext.dem_hec._modes import eval_mode
from hf_ext.dem_hec._pixels import mean_std
from hf_ext.dem_hec.corruptions import CORRUPTIONS, corrupt, corruption_names
from hf_ext.metrics.corruption import MeanCorruptionError

Tensor = torch.Tensor
Batches = Iterable[tuple[Tensor, Tensor]]


@torch.no_grad()
def evaluate_corruptions(
    model: nn.Module | Mapping[str, nn.Module],
    data: Batches,
    corruptions: str | Sequence[str] = "imagenet_c",
    severities: Sequence[int] = (1, 2, 3, 4, 5),
    reference: str | Tensor | None = None,
    reference_clean_error: float | None = None,
    *,
    data_config: dict[str, Any] | None = None,
    input_space: str = "pixel",
    corrupted: Callable[[str, int], Batches] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Top-1 accuracy of ``model`` on clean and corrupted copies of ``data``.

    Args:
        model: a classifier taking normalised inputs (run in eval mode; modes restored), or a mapping of names
            to classifiers, all evaluated on the same corrupted batches.
        data: clean batches of ``(images (B, 3, H, W), labels (B,))``, e.g. a ``DataLoader`` or the eval
            loader of ``timm.data.create_loader``.
        corruptions: ``"imagenet_c"`` (the 15 canonical ones) or a list of names.
        severities: severities to evaluate.
        reference: mCE reference, as in :class:`MeanCorruptionError` (``None``: no mCE).
        reference_clean_error: the reference's clean error, for the relative mCE.
        data_config: timm data config whose ``mean``/``std`` normalise the images, *optional*, defaults to the
            (first) model's, ``timm.data.resolve_data_config({}, model=model)``.
        input_space: what the batches hold: ``"pixel"`` (images in [0, 1]; normalised here) or
            ``"normalized"`` (already normalised with ``data_config``, as timm's loaders yield them; turned
            back into pixels to corrupt them).
        corrupted: ``(name, severity) -> batches`` of a pre-rendered corrupted set in the same ``input_space``
            (e.g. ``lambda c, s: DataLoader(ImageNetC(root, c, s, transform))``); ``None`` corrupts ``data``
            on the fly.
        seed: on-the-fly corruption of batch ``b`` uses a generator seeded ``seed + b``, identical across
            models.

    Returns:
        ``{"clean_accuracy": float, "accuracy": {name: {severity: float}}, "family_accuracy": {family: float},
        "mean_corruption_accuracy": float, "error": (C, S) tensor, "clean_error": float}`` plus ``mCE``,
        ``CE`` and ``relative_mCE`` when a reference allows them; for a mapping of models, ``{model name:
        that}``.

    Raises:
        KeyError: an unknown corruption name.
        ValueError: a bad ``input_space``, ``severities`` or ``seed``.
    """
    models = dict(model) if isinstance(model, Mapping) else {"model": model}
    if not models:
        raise ValueError("`model` must be a classifier or a non-empty mapping of them, got an empty mapping.")
    names = corruption_names(corruptions)
    severities = check_sequence("severities", severities, lambda n, v: check_int(n, v, low=1, high=5))
    check_choice("input_space", input_space, ("pixel", "normalized"))
    seed = check_int("seed", seed, low=0)
    mean, std = mean_std(next(iter(models.values())), data_config)

    def model_input(x: Tensor) -> Tensor:
        return x if input_space == "normalized" else (x - mean.to(x)) / std.to(x)

    def pixels(x: Tensor) -> Tensor:
        return x if input_space == "pixel" else (x * std.to(x) + mean.to(x)).clamp(0, 1)

    def normalize(x01: Tensor) -> Tensor:
        return (x01 - mean.to(x01)) / std.to(x01)

    metrics = {k: MeanCorruptionError(names, severities, reference, reference_clean_error) for k in models}
    with ExitStack() as stack:
        for m in models.values():
            stack.enter_context(eval_mode(m))
        for b, (x, y) in enumerate(data):
            for k, m in models.items():
                metrics[k].update(m(model_input(x)), y)
            if corrupted is not None:
                continue
            clean = pixels(x)
            for name in names:
                for s in severities:
                    g = torch.Generator(device=x.device).manual_seed(seed + b)
                    xc = normalize(corrupt(clean, name, s, g))
                    for k, m in models.items():
                        metrics[k].update(m(xc), y, name, s)
        if corrupted is not None:
            for name in names:
                for s in severities:
                    for xc, y in corrupted(name, s):
                        for k, m in models.items():
                            metrics[k].update(m(model_input(xc)), y, name, s)
    reports = {k: _report(metric.compute(), names, severities) for k, metric in metrics.items()}
    return reports if isinstance(model, Mapping) else reports["model"]


def _report(out: dict[str, Tensor], names: list[str], severities: list[int]) -> dict[str, Any]:
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


def robustness_summary(reports: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Rows ranked by robust accuracy, as the RobustBench common-corruptions leaderboard ranks models.

    Args:
        reports: model name -> a report of :func:`evaluate_corruptions` (all on the same corruptions).

    Returns:
        One row per model: ``rank``, ``model``, ``clean_accuracy`` and ``robust_accuracy`` (mean over
        corruptions and severities) in percent, and ``mCE`` / ``relative_mCE`` when the reports have them.
    """
    rows = []
    for name, rep in reports.items():
        row: dict[str, Any] = {
            "model": name,
            "clean_accuracy": 100 * rep["clean_accuracy"],
            "robust_accuracy": 100 * rep["mean_corruption_accuracy"],
        }
        row.update({k: rep[k] for k in ("mCE", "relative_mCE") if k in rep})
        rows.append(row)
    rows.sort(key=lambda r: -r["robust_accuracy"])
    return [{"rank": i, **row} for i, row in enumerate(rows, 1)]


def robustness_table(reports: Mapping[str, Mapping[str, Any]]) -> str:
    """:func:`robustness_summary` as a Markdown table (percentages to two decimals)."""
    rows = robustness_summary(reports)
    titles = {
        "rank": "Rank",
        "model": "Model",
        "clean_accuracy": "Clean accuracy",
        "robust_accuracy": "Robust accuracy",
        "mCE": "mCE",
        "relative_mCE": "Relative mCE",
    }
    cols = [c for c in titles if any(c in r for r in rows)]
    lines = ["| " + " | ".join(titles[c] for c in cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [f"{r[c]:.2f}" if isinstance(r.get(c), float) else str(r.get(c, "")) for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
