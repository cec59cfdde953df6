"""Models, training loops and no-retraining baselines used only by ``hf-ext bench seglens``."""

from __future__ import annotations

import copy
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hf_ext.seglens.activations import _forward
from hf_ext.seglens.models import TinyUNet
from hf_ext.seglens.synthetic import _blur


def segformer(seed: int) -> nn.Module:
    """The 4-stage tiny SegFormer (hidden sizes 16/32/48/64, decoder 32), one input channel."""
    import transformers as tf

    config = tf.SegformerConfig(  # type: ignore[call-arg]  # num_labels goes through PretrainedConfig kwargs
        num_channels=1,
        hidden_sizes=[16, 32, 48, 64],
        depths=[1, 1, 1, 1],
        num_attention_heads=[1, 1, 2, 2],
        sr_ratios=[8, 4, 2, 1],
        decoder_hidden_size=32,
        num_labels=3,
    )
    torch.manual_seed(seed)
    return tf.SegformerForSemanticSegmentation(config)


def unet(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return TinyUNet(in_channels=1, num_labels=3, width=8)


def train(
    model: nn.Module, images: torch.Tensor, masks: torch.Tensor, *, steps: int, lr: float, seed: int
) -> nn.Module:
    """AdamW on pixel cross-entropy (logits upsampled to the mask size), batches of 16; returns ``model``
    in eval mode."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, images.shape[0], (16,), generator=gen)
        logits = _forward(model, images[idx])
        if logits.shape[-2:] != masks.shape[-2:]:
            logits = F.interpolate(logits, size=masks.shape[-2:], mode="bilinear", align_corners=False)
        loss = F.cross_entropy(logits, masks[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
    return model.eval()


@torch.no_grad()
def adabn(model: nn.Module, images: torch.Tensor) -> nn.Module:
    """AdaBN (Li et al., 2016): a copy whose BatchNorm statistics are re-estimated on unlabelled
    ``images`` (cumulative average over batches of 16)."""
    adapted = copy.deepcopy(model)
    norms = [m for m in adapted.modules() if isinstance(m, nn.BatchNorm2d)]
    for m in norms:
        m.reset_running_stats()
        m.momentum = None
    adapted.train()
    for chunk in images.split(16):
        _forward(adapted, chunk)
    return adapted.eval()


def finetune(model: nn.Module, images: torch.Tensor, masks: torch.Tensor, *, steps: int, seed: int) -> Any:
    """A copy fine-tuned on labelled ``images`` (the upper reference: it costs labels and retraining)."""
    return train(copy.deepcopy(model), images, masks, steps=steps, lr=1e-3, seed=seed)


def match_histogram(images: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """Intensity normalisation: each image ``(1, H, W)`` of ``images`` gets the pooled intensity distribution
    of ``reference`` (quantile mapping; ranks kept)."""
    quantiles = torch.sort(reference.flatten()).values
    out = torch.empty_like(images)
    for i, image in enumerate(images):
        flat = image.flatten()
        rank = torch.argsort(torch.argsort(flat)).float() / max(1, flat.numel() - 1)
        out[i] = quantiles[(rank * (quantiles.numel() - 1)).round().long()].view_as(image)
    return out


def low_pass(images: torch.Tensor, sigma: float) -> torch.Tensor:
    """Gaussian blur of ``images`` ``(B, 1, H, W)`` with standard deviation ``sigma`` pixels."""
    return _blur(images, sigma)
