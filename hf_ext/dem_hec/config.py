"""Configuration of the Dem-HEC task (all defaults [reconstructed])."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_float, check_int


@dataclass
class DemHECConfig:
    """Settings of :class:`~hf_ext.dem_hec.DemHECTask`. Defaults are [reconstructed] (ImageNet scale).

    Args:
        eps: radius of the perturbation ball in pixel units ([0, 1] images), *optional*, defaults to ``4/255``
            (use ``8/255`` at CIFAR scale; ``0.5`` is typical for ``norm="l2"``).
        steps: ascent steps ``K``; ``0`` means random noise in the ball only and needs ``allow_random=True``.
        step_size: ascent step ``alpha``, *optional*, defaults to ``eps / 2``.
        norm: ``"linf"`` (sign steps, box projection) or ``"l2"`` (normalised gradient, ball projection).
        objective: ``"entropy"`` (label-free high-entropy ascent, the method) or ``"ce"`` (PGD on the true
            label's cross-entropy, the adversarial-training ablation).
        feature_entropy: ``"token"`` (per-position channel softmax at an intermediate stage), ``"pooled"``
            (channel softmax of the pooled embedding) or ``None`` (prediction entropy only).
        feature_entropy_weight: ``beta``, weight of the feature entropy in the ascent objective.
        feature_stage: ``forward_intermediates`` index of the stage for ``"token"`` entropy (negative counts
            from the end), *optional*, defaults to ``-2``.
        he_ce_weight: ``lambda_he``, weight of the cross-entropy on high-entropy samples.
        contrastive_weight: ``lambda_con``, weight of the InfoNCE alignment of high-entropy and clean
            embeddings.
        contrastive_temperature: ``tau_c`` of InfoNCE.
        symmetric_contrastive: average InfoNCE over both directions.
        distill_weight: ``lambda_kd``, weight of distillation from the frozen teacher snapshot.
        distill_temperature: ``tau`` of distillation (the KD term is scaled by ``tau**2``).
        distill_on: ``"clean"`` (teacher on clean inputs) or ``"both"`` (clean and high-entropy inputs).
        input_space: ``"pixel"`` (inputs in [0, 1]; normalised inside the task), ``"normalized"`` (inputs
            normalised with the data config's mean/std, as timm's loaders yield them; turned back into pixels
            for the ball) or ``None``: ``"normalized"`` when the task is given timm's ``data_config``, else
            ``"pixel"``.
        allow_random: allow ``steps=0``.
    """

    eps: float = field(default=4 / 255, metadata={"help": "Radius of the perturbation ball in pixel units."})
    steps: int = field(default=3, metadata={"help": "Ascent steps K; 0 needs allow_random=True."})
    step_size: float | None = field(default=None, metadata={"help": "Ascent step alpha; None means eps / 2."})
    norm: str = field(default="linf", metadata={"help": "Ball: 'linf' (sign steps) or 'l2'."})
    objective: str = field(
        default="entropy",
        metadata={"help": "Ascent objective: 'entropy' (the method) or 'ce' (PGD ablation)."},
    )
    feature_entropy: str | None = field(
        default="token", metadata={"help": "Feature entropy in the objective: 'token', 'pooled' or None."}
    )
    feature_entropy_weight: float = field(
        default=1.0, metadata={"help": "beta, weight of the feature entropy."}
    )
    feature_stage: int = field(
        default=-2, metadata={"help": "forward_intermediates index of the 'token' entropy stage."}
    )
    he_ce_weight: float = field(
        default=1.0, metadata={"help": "lambda_he, CE weight on high-entropy samples."}
    )
    contrastive_weight: float = field(
        default=0.5, metadata={"help": "lambda_con, weight of the InfoNCE term."}
    )
    contrastive_temperature: float = field(default=0.2, metadata={"help": "tau_c of InfoNCE."})
    symmetric_contrastive: bool = field(default=False, metadata={"help": "InfoNCE over both directions."})
    distill_weight: float = field(
        default=1.0, metadata={"help": "lambda_kd, weight of teacher distillation."}
    )
    distill_temperature: float = field(
        default=2.0, metadata={"help": "tau of distillation (KD scaled by tau^2)."}
    )
    distill_on: str = field(default="clean", metadata={"help": "Teacher inputs: 'clean' or 'both'."})
    input_space: str | None = field(
        default=None,
        metadata={
            "help": "Task inputs: 'pixel' ([0, 1]), 'normalized' or None (from the task's data_config)."
        },
    )
    allow_random: bool = field(default=False, metadata={"help": "Allow steps=0 (random noise in the ball)."})
    _paper: ClassVar[dict[str, Any]] = paper("dem_hec")

    def __post_init__(self) -> None:
        self.eps = check_float("eps", self.eps, low=0, low_open=True, hint="The radius is in pixel units.")
        self.steps = check_int("steps", self.steps, low=0)
        self.allow_random = check_bool("allow_random", self.allow_random)
        if self.steps == 0 and not self.allow_random:
            raise ValueError(
                "`steps=0` draws random noise in the ball only; pass allow_random=True to ask for it "
                "explicitly."
            )
        step = self.eps / 2 if self.step_size is None else self.step_size
        self.step_size = check_float("step_size", step, low=0, low_open=True)
        check_choice("norm", self.norm, ("linf", "l2"))
        check_choice("objective", self.objective, ("entropy", "ce"))
        check_choice("feature_entropy", self.feature_entropy, ("token", "pooled", None))
        check_choice("distill_on", self.distill_on, ("clean", "both"))
        check_choice("input_space", self.input_space, ("pixel", "normalized", None))
        self.feature_stage = check_int("feature_stage", self.feature_stage)
        self.symmetric_contrastive = check_bool("symmetric_contrastive", self.symmetric_contrastive)
        for name in ("feature_entropy_weight", "he_ce_weight", "contrastive_weight", "distill_weight"):
            setattr(self, name, check_float(name, getattr(self, name), low=0))
        for name in ("contrastive_temperature", "distill_temperature"):
            setattr(self, name, check_float(name, getattr(self, name), low=0, low_open=True))
