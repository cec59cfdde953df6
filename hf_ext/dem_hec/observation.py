"""The paper's observation, measured: how prediction entropy and intermediate "token" feature entropy move
with corruption severity, with the share of images whose top-1 class is unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hf_ext.dem_hec._modes import eval_mode
from hf_ext.dem_hec._pixels import mean_std
from hf_ext.dem_hec.core import prediction_entropy, timm_classifier, token_entropy
from hf_ext.dem_hec.corruptions import corrupt, corruption_names

Tensor = torch.Tensor


@torch.no_grad()
def feature_entropy_profile(
    model: nn.Module,
    images: Tensor,
    corruptions: str | Sequence[str] = ("gaussian_noise", "defocus_blur"),
    severities: Sequence[int] = (1, 2, 3, 4, 5),
    stages: Sequence[int] = (-2,),
    data_config: dict[str, Any] | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """Prediction entropy, token feature entropy per stage and top-1 agreement, clean vs corrupted.

    Args:
        model: a timm classifier with ``forward_intermediates``.
        images: ``(N, 3, H, W)`` in [0, 1]; labels are not needed.
        corruptions: ``"imagenet_c"`` or a list of corruption names.
        severities: severities to apply.
        stages: ``forward_intermediates`` indices whose token entropy is measured.
        data_config: timm data config whose ``mean``/``std`` normalise the images, *optional*, defaults to the
            model's.
        seed: corruption seed.

    Returns:
        One row per (corruption, severity, stage): ``corruption`` (``"clean"`` with ``severity`` 0 for the
        clean pass), ``severity``, ``stage``, ``token_entropy`` (normalised, mean over images),
        ``prediction_entropy_nats`` (mean), ``top1_agreement`` (share of images whose top-1 class equals the
        clean one).
    """
    names = corruption_names(corruptions)
    net = timm_classifier(model)
    mean, std = mean_std(model, data_config)

    def measure(x: Tensor) -> tuple[Tensor, Tensor, dict[int, float]]:
        final, inter = net.forward_intermediates((x - mean.to(x)) / std.to(x), indices=list(stages))
        logits = net.forward_head(final)
        ent = prediction_entropy(logits) * torch.log(torch.tensor(float(logits.shape[-1])))
        return (
            logits.argmax(-1),
            ent.mean(),
            {s: float(token_entropy(f).mean()) for s, f in zip(stages, inter)},
        )

    rows: list[dict[str, Any]] = []
    with eval_mode(model):
        clean_top1, clean_ent, clean_tok = measure(images)
        cells = [("clean", 0, images)]
        for name in names:
            for s in severities:
                g = torch.Generator(device=images.device).manual_seed(seed)
                cells.append((name, s, corrupt(images, name, s, g)))
        for name, s, x in cells:
            top1, ent, tok = (clean_top1, clean_ent, clean_tok) if name == "clean" else measure(x)
            for stage in stages:
                rows.append(
                    {
                        "corruption": name,
                        "severity": s,
                        "stage": stage,
                        "token_entropy": tok[stage],
                        "prediction_entropy_nats": float(ent),
                        "top1_agreement": float((top1 == clean_top1).float().mean()),
                    }
                )
    return rows
