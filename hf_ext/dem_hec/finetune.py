"""Robust fine-tuning recipes as timm tasks, and the ``hf-ext timm-finetune`` command.

Recipes, all on the batches timm's loaders yield (normalised with the data config):

* ``plain``: timm's own ``ClassificationTask`` (cross-entropy).
* ``augmix``: clean + two AugMix views with ``JsdCrossEntropy(num_splits=3, alpha=12)``. The views use
  torchvision's ``AugMix(all_ops=False)``, the AugMix paper's op set (autocontrast, equalize, posterize,
  rotate, solarize, shear, translate), disjoint from the evaluation corruptions; timm's default AugMix op list
  adds colour, contrast, brightness and sharpness ops that overlap them.
* ``dem-hec``: :class:`~hf_ext.dem_hec.task.DemHECTask` (the method).
* ``pgd-ce``: the same task with the samples from PGD on the true label's cross-entropy
  (``objective="ce"``), i.e. adversarial-training-style samples with Dem-HEC's loss.
* ``random-ball``: the same task with uniform random samples in the ball (``steps=0``).

``hf-ext timm-finetune`` takes timm ``train.py``'s flag names for what it shares with it (``--model``,
``--pretrained``, ``--initial-checkpoint``, ``--num-classes``, ``--data-dir``, ``--dataset``,
``--train-split``, ``--val-split``, ``--img-size``, ``--batch-size``, ``--lr``, ``--weight-decay``,
``--epochs``, ``--smoothing``, ``--seed``, ``--workers``, ``--no-aug``, ``--output``, ``--device``) and writes
checkpoints with timm's ``CheckpointSaver`` (``last.pth.tar``, ``model_best.pth.tar``), which
``timm.create_model(name, num_classes=..., checkpoint_path=...)`` loads.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from timm.loss import JsdCrossEntropy
from timm.task import ClassificationTask
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_choice
from hf_ext.dem_hec._pixels import mean_std
from hf_ext.dem_hec.config import DemHECConfig
from hf_ext.dem_hec.task import DemHECTask

logger = logging.getLogger(__name__)
RECIPES = ("plain", "augmix", "dem-hec", "pgd-ce", "random-ball")
PRETRAINED_OFFLINE = {"efficientnet_lite0"}  # ImageNet weights that hf_ext.assets loads without the Hub


class AugMixTask(ClassificationTask):
    """AugMix fine-tuning: clean + two AugMix views, ``JsdCrossEntropy(num_splits=3, alpha=12)``.

    Inputs are normalised with ``data_config`` (timm's loaders); views are drawn per image with torchvision's
    ``AugMix(all_ops=False)`` on 8-bit pixels.

    Args:
        model: a timm classifier.
        data_config: timm data config of the inputs, *optional*, defaults to the model's.
        smoothing: label smoothing of the JSD loss's cross-entropy.
        **kwargs: passed to ``ClassificationTask``.
    """

    _paper = paper("dem_hec")
    mean: torch.Tensor
    std: torch.Tensor

    def __init__(
        self,
        model: nn.Module,
        data_config: dict[str, Any] | None = None,
        smoothing: float = 0.0,
        **kwargs: Any,
    ) -> None:
        from torchvision.transforms import v2

        criterion = JsdCrossEntropy(num_splits=3, alpha=12, smoothing=smoothing)
        super().__init__(model, criterion=criterion, **kwargs)
        mean, std = mean_std(model, data_config)
        self.register_buffer("mean", mean, persistent=False)
        self.register_buffer("std", std, persistent=False)
        self.augmix = v2.AugMix(all_ops=False)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        pixels = (input * self.std + self.mean).clamp(0, 1)
        as_uint8 = (pixels * 255).round().to(torch.uint8)
        views = [torch.stack([self.augmix(img) for img in as_uint8]).to(input) / 255 for _ in range(2)]
        views = [(v - self.mean) / self.std for v in views]
        output = self.trainable_module(torch.cat([input, *views]))
        return {"loss": self.criterion(output, target), "output": output[: input.shape[0]]}


def make_task(
    recipe: str,
    model: nn.Module,
    *,
    data_config: dict[str, Any] | None = None,
    config: DemHECConfig | None = None,
    smoothing: float = 0.0,
) -> ClassificationTask:
    """The timm task of ``recipe`` (one of ``RECIPES``) around ``model``, taking normalised inputs.

    Args:
        recipe: ``"plain"``, ``"augmix"``, ``"dem-hec"``, ``"pgd-ce"`` or ``"random-ball"``.
        model: a timm classifier.
        data_config: timm data config of the inputs, *optional*, defaults to the model's.
        config: Dem-HEC settings of the last three recipes, *optional*, defaults to ``DemHECConfig()``.
        smoothing: label smoothing of the cross-entropy terms.

    Raises:
        ValueError: unknown ``recipe``.
    """
    check_choice("recipe", recipe, RECIPES)
    if data_config is None:
        from timm.data import resolve_data_config

        data_config = resolve_data_config({}, model=model)
    criterion_kwargs = {"smoothing": smoothing} if smoothing else None
    if recipe == "plain":
        return ClassificationTask(model, criterion_kwargs=criterion_kwargs, verbose=False)
    if recipe == "augmix":
        return AugMixTask(model, data_config, smoothing=smoothing, verbose=False)
    config = config or DemHECConfig()
    if recipe == "pgd-ce":
        config = dataclasses.replace(config, objective="ce")
    elif recipe == "random-ball":
        config = dataclasses.replace(config, steps=0, allow_random=True)
    return DemHECTask(
        model, config, data_config=data_config, criterion_kwargs=criterion_kwargs, verbose=False
    )


def freeze_bn_stats(model: nn.Module) -> None:
    """Put every BatchNorm layer in eval mode (running statistics fixed; affine parameters still train), the
    usual choice when fine-tuning a pretrained network on a small, shifted data set."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.eval()


def train_epoch(
    task: ClassificationTask,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    *,
    frozen_bn: bool = False,
    device: torch.device | str | None = None,
) -> float:
    """One epoch of ``task`` over ``batches`` (``(input, target)``, stepping ``scheduler`` per batch); returns
    the mean loss. Batches of one image are skipped (the contrastive term needs two)."""
    task.train()
    if frozen_bn:
        freeze_bn_stats(task.get_trainable_module() or task)
    total, steps = 0.0, 0
    for input, target in batches:
        if len(target) < 2:
            continue
        if device is not None:
            input, target = input.to(device), target.to(device)
        loss = task(input, target)["loss"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        total, steps = total + loss.item(), steps + 1
    return total / max(steps, 1)


@torch.no_grad()
def validate(
    task: ClassificationTask,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    device: torch.device | str | None = None,
) -> dict[str, float]:
    """timm's evaluation: ``task.get_eval_model()`` on the batches, scored by ``task.create_evaluator()``
    (``loss``, ``top1``, ``top5`` in percent)."""
    model = task.get_eval_model()
    if model is None:
        raise RuntimeError("the task has no eval model.")
    evaluator = task.create_evaluator()
    was_training = model.training
    model.eval()
    for input, target in batches:
        if device is not None:
            input, target = input.to(device), target.to(device)
        evaluator.update(model(input), target)
    model.train(was_training)
    return dict(evaluator.compute())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="hf-ext timm-finetune",
        description="Fine-tune a timm model with a robustness recipe (timm train.py flag names).",
    )
    p.add_argument("--model", default="efficientnet_lite0", help="timm model name")
    p.add_argument("--pretrained", action="store_true", help="start from ImageNet weights")
    p.add_argument("--initial-checkpoint", default="", help="load this checkpoint into the model first")
    p.add_argument("--num-classes", type=int, default=None, help="classes (default: the training set's)")
    p.add_argument(
        "--data-dir", required=True, help="dataset root (e.g. an image folder with train/ and val/)"
    )
    p.add_argument("--dataset", default="", help="timm dataset name ('' = image folder)")
    p.add_argument("--train-split", default="train")
    p.add_argument("--val-split", default="validation")
    p.add_argument("--img-size", type=int, default=None, help="input image size (default: the model's)")
    p.add_argument("-b", "--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-5, help="AdamW learning rate (fine-tuning: keep it low)")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--smoothing", type=float, default=0.0, help="label smoothing")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("-j", "--workers", type=int, default=0)
    p.add_argument("--no-aug", action="store_true", help="no training augmentation (resize and crop only)")
    p.add_argument("--output", default="output", help="checkpoint directory")
    p.add_argument("--device", default="cpu")
    p.add_argument("--recipe", choices=RECIPES, default="dem-hec", help="fine-tuning recipe")
    p.add_argument("--eps", type=float, default=4 / 255, help="Dem-HEC ball radius in pixel units")
    p.add_argument("--steps", type=int, default=3, help="Dem-HEC ascent steps")
    p.add_argument("--freeze-bn-stats", action="store_true", help="keep BatchNorm running statistics fixed")
    return p


def _create_model(args: argparse.Namespace, num_classes: int) -> nn.Module:
    import timm

    if args.pretrained and args.model in PRETRAINED_OFFLINE:
        from hf_ext import assets

        model = getattr(assets, args.model)()
        model.reset_classifier(num_classes)
        if args.initial_checkpoint:
            timm.models.load_checkpoint(model, args.initial_checkpoint)
        return model
    return timm.create_model(
        args.model,
        pretrained=args.pretrained,
        num_classes=num_classes,
        checkpoint_path=args.initial_checkpoint or None,
    )


def main(argv: list[str] | None = None) -> int:
    """``hf-ext timm-finetune``: fine-tune, validate each epoch, save timm checkpoints; returns an exit
    code."""
    from timm.data import create_dataset, create_loader, resolve_data_config
    from timm.utils import CheckpointSaver

    args = _parser().parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    train_set = create_dataset(args.dataset, root=args.data_dir, split=args.train_split, is_training=True)
    val_set = create_dataset(args.dataset, root=args.data_dir, split=args.val_split)
    num_classes = args.num_classes or len(getattr(train_set.reader, "class_to_idx", {}))
    if num_classes < 2:
        print("hf-ext timm-finetune: pass --num-classes (the training set does not name its classes).")
        return 2
    model = _create_model(args, num_classes).to(device)
    data_config = resolve_data_config({"img_size": args.img_size} if args.img_size else {}, model=model)
    loader_kw = dict(
        input_size=data_config["input_size"],
        batch_size=args.batch_size,
        interpolation=data_config["interpolation"],
        mean=data_config["mean"],
        std=data_config["std"],
        num_workers=args.workers,
        crop_pct=data_config["crop_pct"],
        use_prefetcher=False,
        device=device,
        persistent_workers=False,
    )
    train_loader = create_loader(train_set, is_training=True, no_aug=args.no_aug, **loader_kw)
    val_loader = create_loader(val_set, is_training=False, **loader_kw)
    config = DemHECConfig(eps=args.eps, steps=args.steps, allow_random=args.steps == 0)
    task = make_task(args.recipe, model, data_config=data_config, config=config, smoothing=args.smoothing)
    task.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)
    steps = max(1, args.epochs * len(train_loader))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    saver = CheckpointSaver(
        model,
        optimizer,
        args=args,
        checkpoint_dir=str(output),
        recovery_dir=str(output),
        max_history=1,
        task=task,
    )
    for epoch in range(args.epochs):
        loss = train_epoch(
            task, train_loader, optimizer, scheduler, frozen_bn=args.freeze_bn_stats, device=device
        )
        metrics = validate(task, val_loader, device)
        saver.save_checkpoint(epoch, metric=metrics["top1"])
        print(
            f"epoch {epoch}: train loss {loss:.4f}, "
            f"val top-1 {metrics['top1']:.2f}%, loss {metrics['loss']:.4f}"
        )
    print(f"checkpoints in {output}: last.pth.tar, model_best.pth.tar")
    return 0
