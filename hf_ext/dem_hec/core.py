"""Dem-HEC math: normalised entropies, high-entropy sample generation and the loss terms.

Shapes: images ``x`` are ``(B, 3, H, W)`` in pixel space [0, 1]; ``logits`` ``(B, K)``; feature maps
``(B, C, h, w)``; embeddings ``(B, D)``. Every part below is [reconstructed] from the paper's abstract (the
method section is not public): the ascent objective ``J = H_pred + beta * H_feat`` on normalised entropies,
sign-gradient ascent inside an L-inf (or L2) ball, InfoNCE alignment and timm-style logit distillation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import nn

from hf_ext.dem_hec._modes import eval_mode

Tensor = torch.Tensor


def prediction_entropy(logits: Tensor) -> Tensor:
    """Shannon entropy of ``softmax(logits)`` divided by ``log K``: ``(B,)`` in [0, 1]."""
    logp = F.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1) / math.log(logits.shape[-1])


def token_entropy(features: Tensor) -> Tensor:
    """Mean over positions of the normalised channel entropy of a feature map: ``(B,)`` in [0, 1].

    Each position's channel vector is standardised (zero mean, unit std over channels), turned into a
    distribution by a softmax over channels, and its entropy divided by ``log C``. ``features`` is
    ``(B, C, h, w)`` or ``(B, C)``.
    """
    f = features.float()
    if f.ndim == 2:
        f = f[:, :, None, None]
    z = (f - f.mean(1, keepdim=True)) / f.std(1, keepdim=True).clamp_min(1e-6)
    logp = F.log_softmax(z, dim=1)
    return (-(logp.exp() * logp).sum(1) / math.log(f.shape[1])).flatten(1).mean(1)


def pooled_entropy(embedding: Tensor) -> Tensor:
    """Normalised entropy of a channel softmax of the pooled embedding ``(B, D)``: ``(B,)`` in [0, 1]."""
    return prediction_entropy(embedding)


def timm_classifier(model: nn.Module) -> Any:
    """``model``, checked for the timm classifier methods Dem-HEC calls (returned as ``Any``: ``nn.Module``
    does not type timm's ``forward_*`` methods).

    Raises:
        TypeError: ``forward_intermediates`` or ``forward_head`` is missing.
    """
    for method in ("forward_intermediates", "forward_head"):
        if not callable(getattr(model, method, None)):
            raise TypeError(f"Dem-HEC needs a timm model with `{method}`; {type(model).__name__} has none.")
    return model


def forward_with_features(
    model: nn.Module, x: Tensor, stage: int | None
) -> tuple[Tensor, Tensor | None, Tensor]:
    """Run a timm model once and return ``(logits, stage features or None, pre-logits embedding)``.

    Raises:
        TypeError: the model lacks ``forward_intermediates`` or ``forward_head``.
    """
    net = timm_classifier(model)
    if stage is None:
        final, feats = net.forward_features(x), None
    else:
        final, inter = net.forward_intermediates(x, indices=[stage])
        feats = inter[0]
    embedding = net.forward_head(final, pre_logits=True)
    return net.forward_head(final), feats, embedding


def high_entropy_objective(
    model: nn.Module,
    x: Tensor,
    *,
    feature_entropy: str | None,
    beta: float,
    stage: int,
) -> Tensor:
    """``J(x) = H_pred(f(x)) + beta * H_feat``, per sample ``(B,)``; ``x`` is already normalised for the
    model."""
    use_token = feature_entropy == "token" and beta > 0
    logits, feats, embedding = forward_with_features(model, x, stage if use_token else None)
    j = prediction_entropy(logits)
    if feats is not None:
        j = j + beta * token_entropy(feats)
    elif beta > 0 and feature_entropy == "pooled":
        j = j + beta * pooled_entropy(embedding)
    return j


def entropy_pgd(
    model: nn.Module,
    x: Tensor,
    *,
    eps: float,
    steps: int,
    step_size: float,
    norm: str = "linf",
    objective: str = "entropy",
    target: Tensor | None = None,
    feature_entropy: str | None = "token",
    beta: float = 1.0,
    stage: int = -2,
    normalize: Callable[[Tensor], Tensor] = lambda t: t,
    generator: torch.Generator | None = None,
) -> Tensor:
    """High-entropy samples inside the ``eps`` ball around ``x`` (pixel space), returned detached.

    Starting from a uniform random point of the ball, ``steps`` ascent steps on ``J``
    (``objective="entropy"``: :func:`high_entropy_objective`; ``"ce"``: cross-entropy of ``target``, i.e. PGD)
    with sign steps and box projection (``"linf"``) or normalised steps and ball projection (``"l2"``), then
    clipping to [0, 1]. The model runs in eval mode and every submodule's mode is restored; gradients never
    reach model parameters.

    Args:
        model: timm classifier (takes normalised inputs).
        x: ``(B, 3, H, W)`` images in [0, 1].
        eps: ball radius in pixel units.
        steps: ascent steps (0: the random start only).
        step_size: ascent step size.
        norm: ``"linf"`` or ``"l2"``.
        objective: ``"entropy"`` (label-free) or ``"ce"`` (PGD on ``target``).
        feature_entropy: ``"token"``, ``"pooled"`` or ``None``.
        beta: weight of the feature entropy.
        stage: ``forward_intermediates`` index for ``"token"`` entropy.
        target: ``(B,)`` labels, required for ``objective="ce"``.
        normalize: maps pixel images to model inputs.
        generator: random source of the starting point.

    Returns:
        ``(B, 3, H, W)`` tensor ``x_he`` with ``||x_he - x|| <= eps`` and values in [0, 1].
    """
    if objective == "ce" and target is None:
        raise ValueError("`objective='ce'` needs `target`.")
    x = x.detach()
    if norm == "linf":
        delta = (torch.rand(x.shape, generator=generator, device=x.device, dtype=x.dtype) * 2 - 1) * eps
    else:
        direction = torch.randn(x.shape, generator=generator, device=x.device, dtype=x.dtype)
        radius = torch.rand(x.shape[0], generator=generator, device=x.device, dtype=x.dtype) * eps
        delta = (
            direction
            / direction.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, 1, 1, 1)
            * radius.view(-1, 1, 1, 1)
        )
    delta = ((x + delta).clamp(0, 1) - x).requires_grad_(True)
    with eval_mode(model), torch.enable_grad():
        for _ in range(steps):
            inputs = normalize(x + delta)
            if objective == "entropy":
                j = high_entropy_objective(
                    model, inputs, feature_entropy=feature_entropy, beta=beta, stage=stage
                )
            else:  # "ce"; `target` is checked above
                j = F.cross_entropy(model(inputs), cast(Tensor, target), reduction="none")
            (grad,) = torch.autograd.grad(j.sum(), delta)
            with torch.no_grad():
                if norm == "linf":
                    delta += step_size * grad.sign()
                    delta.clamp_(-eps, eps)
                else:
                    g = grad / grad.flatten(1).norm(dim=1).clamp_min(1e-12).view(-1, 1, 1, 1)
                    delta += step_size * g
                    scale = (eps / delta.flatten(1).norm(dim=1).clamp_min(1e-12)).clamp(max=1.0)
                    delta *= scale.view(-1, 1, 1, 1)
                delta.copy_((x + delta).clamp(0, 1) - x)
    return (x + delta).detach()


def info_nce(anchor: Tensor, positive: Tensor, temperature: float, symmetric: bool = False) -> Tensor:
    """InfoNCE with in-batch negatives: row ``i`` of ``anchor`` should match row ``i`` of ``positive``.

    Both ``(B, D)`` embeddings are L2-normalised; logits ``anchor @ positive.T / temperature``; cross-entropy
    over rows (and over columns too, averaged, when ``symmetric``). Returns a scalar.
    """
    a, p = F.normalize(anchor.float(), dim=-1), F.normalize(positive.float(), dim=-1)
    logits = a @ p.T / temperature
    labels = torch.arange(a.shape[0], device=a.device)
    loss = F.cross_entropy(logits, labels)
    return (loss + F.cross_entropy(logits.T, labels)) / 2 if symmetric else loss


def distillation_kl(student_logits: Tensor, teacher_logits: Tensor, temperature: float) -> Tensor:
    """timm ``LogitDistillationTask``'s KD term: ``KL(teacher || student)`` at ``temperature``, times
    ``T**2``."""
    s = F.log_softmax(student_logits / temperature, dim=-1)
    t = F.log_softmax(teacher_logits / temperature, dim=-1)
    return F.kl_div(s, t, reduction="batchmean", log_target=True) * temperature**2
