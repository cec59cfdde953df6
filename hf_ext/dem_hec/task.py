"""``DemHECTask``: Dem-HEC as a ``timm.task.ClassificationTask``."""

from __future__ import annotations

import copy
import dataclasses
import logging
from typing import Any, cast

import torch
from timm.task import ClassificationTask
from timm.utils import unwrap_model
from torch import nn

from hf_ext._registry import paper
from hf_ext.dem_hec._pixels import PixelInput, mean_std
from hf_ext.dem_hec.config import DemHECConfig
from hf_ext.dem_hec.core import (
    distillation_kl,
    entropy_pgd,
    info_nce,
    prediction_entropy,
    timm_classifier,
)

logger = logging.getLogger(__name__)


class DemHECTask(ClassificationTask):
    """Entropy-guided robust fine-tuning (Dem-HEC) as a timm training task.

    Per step: generate high-entropy (HE) samples inside an ``eps`` ball around each clean image (label-free
    ascent on normalised prediction + feature entropy, model in eval mode), then train on
    ``CE(f(x), y) + he_ce_weight * CE(f(x_he), y) + contrastive_weight * InfoNCE(g(x_he), g(x))
    + distill_weight * tau^2 * KL(T(x) || f(x))`` where ``g`` is the pre-logits embedding and ``T`` a frozen
    deep copy of the model taken at construction (the teacher snapshot).

    [reconstructed] Only the paper's abstract is public: the ascent objective, the loss forms, the weights and
    the defaults are hf-ext's reconstruction (see the docs page).

    It keeps timm's task contract: ``forward(input, target)`` returns a dict with ``loss`` and ``output``
    (clean logits) plus ``ce_clean``, ``ce_he``, ``con_loss``, ``kd_loss`` and ``he_entropy``;
    ``get_trainable_module()`` is the student only; ``prepare_distributed`` wraps only the student; the
    teacher snapshot travels in ``get_checkpoint_state()["task_state"]``. With timm's loaders, which normalise
    with a data config, pass that ``data_config``: the task then takes normalised inputs and
    ``get_eval_model()`` is the student, as timm's evaluator expects; with pixel inputs ``get_eval_model()``
    normalises first.

    Args:
        model: a timm classifier (needs ``forward_intermediates`` and ``forward_head``).
        config: a :class:`DemHECConfig`; or pass its fields as keyword arguments.
        teacher: a frozen teacher module, *optional*, defaults to a deep copy of ``model``.
        criterion: loss for the CE terms, *optional*; built by timm from ``criterion_kwargs`` when ``None``.
        criterion_kwargs: arguments of ``timm.loss.create_classification_loss`` (e.g. ``smoothing``).
        device: device of task buffers, as in ``ClassificationTask``.
        dtype: dtype of task buffers, as in ``ClassificationTask``.
        verbose: log the configuration.
        data_config: timm data config of the loader (``timm.data.resolve_data_config(...)``), whose
            ``mean``/``std`` map pixels to model inputs, *optional*, defaults to the model's own.

    Examples:
        >>> import torch
        >>> from hf_ext.testing import tiny_timm_model
        >>> task = DemHECTask(tiny_timm_model("test_efficientnet", num_classes=3), steps=1, verbose=False)
        >>> out = task(torch.rand(4, 3, 32, 32), torch.tensor([0, 1, 2, 0]))
        >>> sorted(out)
        ['ce_clean', 'ce_he', 'con_loss', 'he_entropy', 'kd_loss', 'loss', 'output']
    """

    _paper = paper("dem_hec")
    mean: torch.Tensor
    std: torch.Tensor

    def __init__(
        self,
        model: nn.Module,
        config: DemHECConfig | None = None,
        *,
        teacher: nn.Module | None = None,
        criterion: Any = None,
        criterion_kwargs: dict[str, Any] | None = None,
        device: torch.device | None = None,
        dtype: torch.dtype | None = None,
        verbose: bool = True,
        data_config: dict[str, Any] | None = None,
        **config_kwargs: Any,
    ) -> None:
        if config is not None and config_kwargs:
            raise ValueError(
                f"pass either `config` or its fields as keywords, not both: {sorted(config_kwargs)}."
            )
        self.config = config if config is not None else DemHECConfig(**config_kwargs)
        timm_classifier(unwrap_model(model))
        super().__init__(model, criterion, criterion_kwargs, device=device, dtype=dtype, verbose=verbose)
        if teacher is None:
            teacher = copy.deepcopy(unwrap_model(model))
        else:
            student_ptrs = {p.data_ptr() for p in model.parameters()}
            if any(p.data_ptr() in student_ptrs for p in teacher.parameters()):
                raise ValueError(
                    "`teacher` shares parameters with the student; pass a frozen copy (copy.deepcopy)."
                )
        self.teacher = teacher.eval().requires_grad_(False)
        mean, std = mean_std(unwrap_model(model), data_config)
        self.register_buffer("mean", mean, persistent=False)
        self.register_buffer("std", std, persistent=False)
        default_space = "pixel" if data_config is None else "normalized"
        self.input_space: str = self.config.input_space or default_space
        if self.verbose:
            logger.info("DemHECTask: %s", self.config)

    def normalize(self, x01: torch.Tensor) -> torch.Tensor:
        """Pixel images in [0, 1] to model inputs (the data config's mean/std)."""
        return (x01 - self.mean) / self.std

    def get_eval_model(self, module: nn.Module | None = None, ema: bool = False) -> nn.Module | None:
        """The model timm's evaluator runs on the loader's batches: the student itself for normalised inputs,
        the student behind the task's normalisation for pixel inputs."""
        model = super().get_eval_model(module, ema)
        if model is None or self.input_space == "normalized":
            return model
        return PixelInput(model, self.mean, self.std)

    def train(self, mode: bool = True) -> DemHECTask:
        """Set training mode while keeping the teacher in eval mode."""
        super().train(mode)
        self.teacher.eval()
        return self

    def get_task_state(self, module: nn.Module | None = None, ema: bool = False) -> dict[str, Any]:
        return {"teacher": self.teacher.state_dict(), "config": dataclasses.asdict(self.config)}

    def load_task_state(
        self,
        state: dict[str, Any] | None,
        strict: bool = True,
        module: nn.Module | None = None,
        ema: bool = False,
    ) -> None:
        if state and "teacher" in state:
            self.teacher.load_state_dict(state["teacher"], strict=strict)

    def _pixels(self, input: torch.Tensor) -> torch.Tensor:
        if self.input_space == "normalized":
            return (input * self.std + self.mean).clamp(0, 1)
        lo, hi = float(input.min()), float(input.max())
        if lo < -1e-3 or hi > 1 + 1e-3:
            raise ValueError(
                f"`input_space='pixel'` expects images in [0, 1], found values in [{lo:.3g}, {hi:.3g}]. "
                "Pass unnormalised pixels, or set input_space='normalized' (timm's loaders normalise; pass "
                "their data_config)."
            )
        return input.clamp(0, 1)

    def forward(self, input: torch.Tensor, target: torch.Tensor) -> dict[str, torch.Tensor]:
        """Generate HE samples and compute the Dem-HEC loss.

        Args:
            input: ``(B, 3, H, W)`` images (pixel [0, 1] or normalised, per ``input_space``).
            target: ``(B,)`` integer class ids.
        """
        cfg = self.config
        if target.ndim != 1 or target.is_floating_point():
            raise ValueError(
                f"soft or multi-label targets (shape {tuple(target.shape)}, {target.dtype}, e.g. from Mixup) "
                "are not supported with Dem-HEC; pass integer class ids of shape (B,)."
            )
        x01 = self._pixels(input)
        batch = x01.shape[0]
        if batch < 2 and cfg.contrastive_weight > 0:
            raise ValueError(
                f"the contrastive term needs a batch of at least 2, got {batch}; or set contrastive_weight=0."
            )
        use_he = (
            cfg.he_ce_weight > 0
            or cfg.contrastive_weight > 0
            or (cfg.distill_weight > 0 and cfg.distill_on == "both")
        )
        student = self.trainable_module
        zero = x01.new_zeros(())
        if use_he:
            x_he = entropy_pgd(
                unwrap_model(student),
                x01,
                eps=cfg.eps,
                steps=cfg.steps,
                step_size=cast(float, cfg.step_size),  # resolved by DemHECConfig
                norm=cfg.norm,
                objective=cfg.objective,
                target=target,
                feature_entropy=cfg.feature_entropy,
                beta=cfg.feature_entropy_weight,
                stage=cfg.feature_stage,
                normalize=self.normalize,
            )
            inputs = torch.cat([x01, x_he])
        else:
            inputs = x01
        captured: list[torch.Tensor] = []
        hook = (
            unwrap_model(student)
            .get_classifier()
            .register_forward_pre_hook(lambda m, a: captured.append(a[0]))
        )
        try:
            logits = student(self.normalize(inputs))  # through the (possibly DDP-wrapped) module
        finally:
            hook.remove()
        logits_clean = logits[:batch]
        ce_clean = self.criterion(logits_clean, target)
        loss, ce_he, con, kd, he_entropy = ce_clean, zero, zero, zero, zero
        if use_he:
            logits_he = logits[batch:]
            embedding = captured[0].flatten(1)
            he_entropy = prediction_entropy(logits_he.detach()).mean()
            if cfg.he_ce_weight > 0:
                ce_he = self.criterion(logits_he, target)
                loss = loss + cfg.he_ce_weight * ce_he
            if cfg.contrastive_weight > 0:
                con = info_nce(
                    embedding[batch:],
                    embedding[:batch],
                    cfg.contrastive_temperature,
                    cfg.symmetric_contrastive,
                )
                loss = loss + cfg.contrastive_weight * con
        if cfg.distill_weight > 0:
            distilled = inputs if cfg.distill_on == "both" else x01
            with torch.no_grad():
                teacher_logits = self.teacher(self.normalize(distilled))
            kd = distillation_kl(logits[: distilled.shape[0]], teacher_logits, cfg.distill_temperature)
            loss = loss + cfg.distill_weight * kd
        return {
            "loss": loss,
            "output": logits_clean,
            "ce_clean": ce_clean.detach(),
            "ce_he": ce_he.detach(),
            "con_loss": con.detach(),
            "kd_loss": kd.detach(),
            "he_entropy": he_entropy,
        }
