# mypy: disable-error-code="attr-defined"
# (diffusers exposes registered modules and config fields as dynamic attributes)
"""Small training loops for the LFQ tokenizer and the multi-view masked-token transformer (CPU-sized).

[reconstructed] Tokenizer: ``L1 + MSE`` reconstruction plus the LFQ auxiliary loss (no GAN or perceptual
loss). Transformer: per object, :func:`~hf_ext.viewmask.core.viewmask_masking` masks a
``cos(pi/2 r)`` share of the target tokens jointly across the target views, and the loss is cross-entropy on
the masked positions only (:func:`~hf_ext.viewmask.core.viewmask_loss`). AdamW with a 5% linear
warm-up and cosine decay to a floor: 10% of the peak learning rate for the tokenizer,
``ViewMaskTrainingConfig.min_lr_ratio`` for the transformer.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from hf_ext.viewmask.autoencoder_lfq import LFQAutoencoder
from hf_ext.viewmask.config import LFQTrainingConfig, ViewMaskTrainingConfig
from hf_ext.viewmask.core import viewmask_loss, viewmask_masking
from hf_ext.viewmask.transformer_viewmask import ViewMaskTransformer


def _lr_lambda(steps: int, floor: float) -> object:
    """Learning-rate factor of each step: linear warm-up over 5% of ``steps``, then cosine decay from 1 to
    ``floor``."""
    warm = max(1, steps // 20)

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        progress = (step - warm) / max(1, steps - warm)
        return floor + (1 - floor) / 2 * (1 + math.cos(math.pi * progress))

    return factor


def _optimiser(
    model: torch.nn.Module, lr: float, weight_decay: float, steps: int, floor: float
) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LambdaLR]:
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(steps, floor))  # type: ignore[arg-type]


def train_lfq_autoencoder(
    model: LFQAutoencoder, images: torch.Tensor, config: LFQTrainingConfig | None = None
) -> list[float]:
    """Train ``model`` on ``images`` ``[N, 3, H, W]`` in ``[-1, 1]``; returns the loss of every step.

    Loss per step: ``L1 + MSE`` of the reconstruction plus the model's LFQ auxiliary loss.
    """
    config = config or LFQTrainingConfig()
    model.check_images(images, "images")
    gen = torch.Generator().manual_seed(config.seed)
    opt, sched = _optimiser(model, config.learning_rate, config.weight_decay, config.steps, 0.1)
    model.train()
    losses = []
    for _ in range(config.steps):
        idx = torch.randint(0, images.shape[0], (config.batch_size,), generator=gen)
        x = images[idx].to(model.device)
        out = model(x)
        loss = F.l1_loss(out.sample, x) + F.mse_loss(out.sample, x) + out.aux_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    model.eval()
    return losses


@torch.no_grad()
def tokenize_views(model: LFQAutoencoder, images: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
    """Code indices ``[N, V, P]`` of multi-view images ``[N, V, 3, H, W]`` in ``[-1, 1]``."""
    if images.ndim != 5:
        raise ValueError(f"`images` must be [N, V, 3, H, W], got shape {tuple(images.shape)}.")
    flat = images.flatten(0, 1)
    codes = [
        model.tokenize(flat[i : i + batch_size].to(model.device)).flatten(1)
        for i in range(0, len(flat), batch_size)
    ]
    return torch.cat(codes).view(images.shape[0], images.shape[1], -1)


def _batch(
    view_tokens: torch.Tensor, idx: torch.Tensor, sampling: str, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Tokens ``[b, n, P]`` and view ids (``None`` = all views in order) of one batch."""
    tokens = view_tokens[idx]
    if sampling == "joint":
        return tokens, None
    k = torch.randint(1, view_tokens.shape[1], (len(idx),), generator=gen)
    pair = torch.stack([tokens[:, 0], tokens[torch.arange(len(idx)), k]], dim=1)
    return pair, torch.stack([torch.zeros_like(k), k], dim=1)


def train_viewmask(
    transformer: ViewMaskTransformer,
    view_tokens: torch.Tensor,
    config: ViewMaskTrainingConfig | None = None,
    *,
    text_ids: torch.Tensor | None = None,
    text_attention_mask: torch.Tensor | None = None,
) -> list[float]:
    """Train ``transformer`` on multi-view codes ``view_tokens`` ``[N, V, P]`` (view 0 = the input view).

    ``config.view_sampling="joint"`` trains ViewMask (one sequence of all views, masks drawn jointly over
    the targets); ``"independent"`` trains the per-view baseline on ``[view 0][view k]`` pairs. Optional
    ``text_ids`` / ``text_attention_mask`` ``[N, L]`` condition each object on its prompt. Returns the loss
    (nats per masked token) of every step.
    """
    config = config or ViewMaskTrainingConfig()
    cfg = transformer.config
    if view_tokens.ndim != 3 or view_tokens.shape[1:] != (cfg.num_views, cfg.tokens_per_view):
        raise ValueError(
            f"`view_tokens` must be [N, {cfg.num_views}, {cfg.tokens_per_view}], got shape "
            f"{tuple(view_tokens.shape)}."
        )
    gen = torch.Generator().manual_seed(config.seed)
    opt, sched = _optimiser(
        transformer, config.learning_rate, config.weight_decay, config.steps, config.min_lr_ratio
    )
    dev = transformer.device
    transformer.train()
    losses = []
    for _ in range(config.steps):
        idx = torch.randint(0, view_tokens.shape[0], (config.batch_size,), generator=gen)
        tokens, view_ids = _batch(view_tokens, idx, config.view_sampling, gen)
        ids, loss_mask = viewmask_masking(
            tokens,
            mask_token_id=transformer.mask_token_id,
            schedule=config.masking_schedule,
            cond_drop_prob=config.cond_drop_prob,
            generator=gen,
        )
        text = {}
        if text_ids is not None:
            text["text_ids"] = text_ids[idx].to(dev)
            if text_attention_mask is not None:
                text["text_attention_mask"] = text_attention_mask[idx].to(dev)
        logits = transformer(
            ids.to(dev), view_ids=None if view_ids is None else view_ids.to(dev), **text
        ).logits
        loss = viewmask_loss(logits, tokens.flatten(1).to(dev), loss_mask.to(dev))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(transformer.parameters(), config.grad_clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    transformer.eval()
    return losses
