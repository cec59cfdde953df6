"""Pixel images in [0, 1] and the normalised tensors timm models and loaders use."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

Tensor = torch.Tensor


def mean_std(
    model: nn.Module | None = None, data_config: dict[str, Any] | None = None
) -> tuple[Tensor, Tensor]:
    """``(mean, std)`` as ``(1, C, 1, 1)`` tensors from timm's data config (default: the model's own, as
    ``timm.data.resolve_data_config({}, model=model)`` gives it, which is what timm's loaders normalise with).

    Raises:
        ValueError: neither ``model`` nor ``data_config`` is given, or the config lacks ``mean``/``std``.
    """
    if data_config is None:
        if model is None:
            raise ValueError("pass `model` or `data_config` to know the normalisation.")
        from timm.data import resolve_data_config

        data_config = resolve_data_config({}, model=model)
    if "mean" not in data_config or "std" not in data_config:
        raise ValueError(f"`data_config` must hold 'mean' and 'std', got keys {sorted(data_config)}.")
    mean = torch.tensor(data_config["mean"], dtype=torch.float32).view(1, -1, 1, 1)
    std = torch.tensor(data_config["std"], dtype=torch.float32).view(1, -1, 1, 1)
    return mean, std


class PixelInput(nn.Module):
    """``model`` behind its normalisation: takes pixel images in [0, 1] (a model for pixel-space loaders).

    The model sits in ``.module``, as in ``DistributedDataParallel``, so ``timm.utils.unwrap_model`` returns
    it and timm's checkpoints hold the model's own state dict.

    Args:
        model: a classifier taking normalised inputs.
        mean: ``(1, C, 1, 1)`` channel means.
        std: ``(1, C, 1, 1)`` channel standard deviations.
    """

    mean: Tensor
    std: Tensor

    def __init__(self, model: nn.Module, mean: Tensor, std: Tensor) -> None:
        super().__init__()
        self.module = model
        self.register_buffer("mean", mean.clone(), persistent=False)
        self.register_buffer("std", std.clone(), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.module((x - self.mean.to(x)) / self.std.to(x))
