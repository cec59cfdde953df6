"""Configuration of the Dem-HEC task (all defaults [reconstructed])."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hf_ext._registry import paper


@dataclass
class DemHECConfig:
    """Settings of :class:`~hf_ext.timm.dem_hec.DemHECTask`. Defaults are [reconstructed] (ImageNet scale).

    Args:
        eps: radius of the perturbation ball in pixel units ([0, 1] images), *optional*, defaults to ``4/255``
            (use ``8/255`` at CIFAR scale; ``0.5`` is typical for ``norm="l2"``).
        steps: ascent steps ``K``; ``0`` means random noise in the ball only and needs ``allow_random=True``.
        step_size: ascent step ``alpha``, *optional*, defaults to ``eps / 2``.
        norm: ``"linf"`` (sign steps, box projection) or ``"l2"`` (normalised gradient, ball projection).
        objective: ``"entropy"`` (label-free high-entropy ascent, the method) or ``"ce"`` (PGD on the true label's
            cross-entropy, the adversarial-training ablation).
        feature_entropy: ``"token"`` (per-position channel softmax at an intermediate stage), ``"pooled"`` (channel
            softmax of the pooled embedding) or ``None`` (prediction entropy only).
        feature_entropy_weight: ``beta``, weight of the feature entropy in the ascent objective.
        feature_stage: ``forward_intermediates`` index of the stage for ``"token"`` entropy (negative counts from
            the end), *optional*, defaults to ``-2``.
        he_ce_weight: ``lambda_he``, weight of the cross-entropy on high-entropy samples.
        contrastive_weight: ``lambda_con``, weight of the InfoNCE alignment of high-entropy and clean embeddings.
        contrastive_temperature: ``tau_c`` of InfoNCE.
        symmetric_contrastive: average InfoNCE over both directions.
        distill_weight: ``lambda_kd``, weight of distillation from the frozen teacher snapshot.
        distill_temperature: ``tau`` of distillation (the KD term is scaled by ``tau**2``).
        distill_on: ``"clean"`` (teacher on clean inputs) or ``"both"`` (clean and high-entropy inputs).
        input_space: ``"pixel"`` (inputs in [0, 1]; normalised inside the task) or ``"normalized"`` (inputs
            already normalised with the model's mean/std; converted back to pixels for the ball).
        allow_random: allow ``steps=0``.
    """

    eps: float = 4 / 255
    steps: int = 3
    step_size: float | None = None
    norm: str = "linf"
    objective: str = "entropy"
    feature_entropy: str | None = "token"
    feature_entropy_weight: float = 1.0
    feature_stage: int = -2
    he_ce_weight: float = 1.0
    contrastive_weight: float = 0.5
    contrastive_temperature: float = 0.2
    symmetric_contrastive: bool = False
    distill_weight: float = 1.0
    distill_temperature: float = 2.0
    distill_on: str = "clean"
    input_space: str = "pixel"
    allow_random: bool = False
    _paper: ClassVar[dict[str, Any]] = paper("dem_hec")

    def __post_init__(self) -> None:
        if not self.eps > 0:
            raise ValueError(f"`eps` must be > 0 (pixel units), got {self.eps!r}.")
        if not isinstance(self.steps, int) or self.steps < 0:
            raise ValueError(f"`steps` must be an int >= 0, got {self.steps!r}.")
        if self.steps == 0 and not self.allow_random:
            raise ValueError(
                "`steps=0` draws random noise in the ball only; pass allow_random=True to ask for it explicitly."
            )
        if self.step_size is None:
            self.step_size = self.eps / 2
        if not self.step_size > 0:
            raise ValueError(f"`step_size` must be > 0, got {self.step_size!r}.")
        choices = {
            "norm": ("linf", "l2"),
            "objective": ("entropy", "ce"),
            "feature_entropy": ("token", "pooled", None),
            "distill_on": ("clean", "both"),
            "input_space": ("pixel", "normalized"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ValueError(f"`{name}` must be one of {allowed}, got {getattr(self, name)!r}.")
        for name in ("feature_entropy_weight", "he_ce_weight", "contrastive_weight", "distill_weight"):
            if getattr(self, name) < 0:
                raise ValueError(f"`{name}` must be >= 0, got {getattr(self, name)!r}.")
        for name in ("contrastive_temperature", "distill_temperature"):
            if not getattr(self, name) > 0:
                raise ValueError(f"`{name}` must be > 0, got {getattr(self, name)!r}.")
