"""Minimal fine-tuning loops for the recipes compared by ``hf-ext bench dem_hec``: plain, AugMix-style,
Dem-HEC.

Each loop trains a timm model in place from its current weights, with the same optimiser, schedule and data
order for every recipe, and returns the wall-clock seconds per epoch. Inputs are pixel images in [0, 1].
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from timm.loss import JsdCrossEntropy
from timm.task import ClassificationTask
from torch import nn

from hf_ext.benchmarking import Timer
from hf_ext.timm.dem_hec.config import DemHECConfig
from hf_ext.timm.dem_hec.task import DemHECTask
from hf_ext.timm.robust_eval import model_normalizer

logger = logging.getLogger(__name__)
RECIPES = ("plain", "augmix", "dem_hec")


class AugMixTask(ClassificationTask):
    """AugMix-style fine-tuning: clean + two AugMix views, ``JsdCrossEntropy(num_splits=3, alpha=12)``.

    Views use torchvision v2 ``AugMix(all_ops=False)``, the AugMix paper's op set (autocontrast, equalize,
    posterize, rotate, solarize, shear, translate), which is disjoint from the evaluation corruptions; timm's
    default op list adds colour/contrast/brightness/sharpness ops that overlap them.
    """

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        super().__init__(model, criterion=JsdCrossEntropy(num_splits=3, alpha=12, smoothing=0.0), **kwargs)
        from torchvision.transforms import v2

        self.augmix = v2.AugMix(all_ops=False)
        self.normalize = model_normalizer(model)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        as_uint8 = (input.clamp(0, 1) * 255).round().to(torch.uint8)
        views = [torch.stack([self.augmix(img) for img in as_uint8]).float() / 255 for _ in range(2)]
        output = self.trainable_module(self.normalize(torch.cat([input, *views])))
        return {"loss": self.criterion(output, target), "output": output[: input.shape[0]]}


class PlainTask(ClassificationTask):
    """Plain fine-tuning on pixel inputs (normalised inside, like the other two recipes)."""

    def __init__(self, model: nn.Module, **kwargs: Any) -> None:
        super().__init__(model, **kwargs)
        self.normalize = model_normalizer(model)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        return super().forward(self.normalize(input), target)


def make_task(recipe: str, model: nn.Module, config: DemHECConfig | None = None) -> ClassificationTask:
    """The timm task of ``recipe`` (``"plain"``, ``"augmix"`` or ``"dem_hec"``) around ``model``."""
    if recipe == "plain":
        return PlainTask(model, verbose=False)
    if recipe == "augmix":
        return AugMixTask(model, verbose=False)
    if recipe == "dem_hec":
        return DemHECTask(model, config or DemHECConfig(), verbose=False)
    raise ValueError(f"`recipe` must be one of {RECIPES}, got {recipe!r}.")


def finetune(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    recipe: str,
    *,
    epochs: int = 3,
    lr: float = 3e-4,
    weight_decay: float = 0.01,
    batch_size: int = 32,
    seed: int = 0,
    config: DemHECConfig | None = None,
    freeze_bn_stats: bool = False,
) -> float:
    """Fine-tune ``model`` in place with ``recipe`` (AdamW, cosine schedule); returns seconds per epoch.

    Args:
        model: timm classifier.
        images: ``(N, 3, H, W)`` training images in [0, 1]; labels ``(N,)``.
        recipe: ``"plain"``, ``"augmix"`` or ``"dem_hec"``.
        epochs, lr, weight_decay, batch_size: optimisation settings shared by every recipe.
        seed: seeds the data order (identical across recipes) and torchvision's AugMix sampling.
        config: Dem-HEC settings.
        freeze_bn_stats: keep BatchNorm layers in eval mode (running statistics fixed; affine parameters still
            train), the usual choice when fine-tuning a pretrained network on a small, shifted data set: batch
            statistics of the new data would otherwise replace the ones the pretrained features rely on.
    """
    task = make_task(recipe, model, config)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    steps_per_epoch = (len(images) + batch_size - 1) // batch_size
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs * steps_per_epoch)
    order_gen = torch.Generator().manual_seed(seed)
    task.train()
    if freeze_bn_stats:
        for module in model.modules():
            if isinstance(module, nn.modules.batchnorm._BatchNorm):
                module.eval()
    torch.manual_seed(seed)
    with Timer() as timer:
        for epoch in range(epochs):
            order = torch.randperm(len(images), generator=order_gen)
            for i in range(steps_per_epoch):
                idx = order[i * batch_size : (i + 1) * batch_size]
                if len(idx) < 2:
                    continue
                out = task(images[idx], labels[idx])
                opt.zero_grad(set_to_none=True)
                out["loss"].backward()
                opt.step()
                sched.step()
            logger.info("%s epoch %d: loss %.4f", recipe, epoch, out["loss"].item())
    model.eval()
    return timer.seconds / max(epochs, 1)
