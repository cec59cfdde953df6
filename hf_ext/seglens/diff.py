"""Model diffing: per-cohort latent statistics, differential reliance, ablation effects, the model-diff
report, and the calibration-split choice of latent edits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float
from hf_ext.seglens import core
from hf_ext.seglens.activations import _forward, capture_site, to_rows
from hf_ext.seglens.config import InterventionConfig
from hf_ext.seglens.intervene import LatentIntervention
from hf_ext.seglens.sae import SparseAutoencoder


@torch.no_grad()
def predict_labels(model: nn.Module, images: torch.Tensor, batch_size: int = 64) -> torch.Tensor:
    """Label maps ``(B, H, W)``: logits upsampled (bilinear) to the image size, then argmax."""
    was_training = model.training
    model.eval()
    out = []
    try:
        for chunk in images.split(batch_size):
            logits = _forward(model, chunk)
            if logits.shape[-2:] != chunk.shape[-2:]:
                logits = F.interpolate(logits, size=chunk.shape[-2:], mode="bilinear", align_corners=False)
            out.append(logits.argmax(1))
    finally:
        model.train(was_training)
    return torch.cat(out)


@dataclass
class LatentStats:
    """Per-latent statistics over every position of a cohort, each ``(n_latents,)``: firing frequency,
    mean code (zeros included), mean code when firing and standard deviation."""

    freq: torch.Tensor
    mean: torch.Tensor
    mean_firing: torch.Tensor
    std: torch.Tensor


@torch.no_grad()
def latent_stats(
    model: nn.Module, sae: SparseAutoencoder, images: torch.Tensor, batch_size: int = 64
) -> LatentStats:
    """Statistics of the codes of ``sae`` at ``sae.site`` over ``images`` ``(B, C, H, W)``."""
    n, count = sae.n_latents, 0
    fired, total, sq = torch.zeros(n), torch.zeros(n), torch.zeros(n)
    was_training = model.training
    model.eval()
    try:
        with capture_site(model, sae.site) as seen:
            for chunk in images.split(batch_size):
                seen.clear()
                _forward(model, chunk)
                z = sae.encode(to_rows(seen[-1]))
                fired += (z > 0).sum(0)
                total += z.sum(0)
                sq += z.pow(2).sum(0)
                count += z.shape[0]
    finally:
        model.train(was_training)
    mean = total / count
    return LatentStats(
        freq=fired / count,
        mean=mean,
        mean_firing=total / fired.clamp_min(1),
        std=(sq / count - mean.pow(2)).clamp_min(0).sqrt(),
    )


@dataclass
class DiffReport:
    """Model-diff report of one SAE over cohorts [paper: differential reliance; statistics reconstructed].

    Attributes:
        reference: the cohort the others are compared with (the training cohort).
        stats: cohort -> :class:`LatentStats`.
        dice: cohort -> per-image lesion Dice ``(B,)`` of the unedited model.
        log_ratio: cohort -> ``log((f_c + eps) / (f_ref + eps))`` per latent (``> 0``: more on ``c``).
        mean_log_ratio: cohort -> ``log((mean_c + eps) / (mean_ref + eps))`` of the mean code per latent.
        ablation: cohort -> ``{latent: mean Dice change when ablated}`` for the top-ranked latents.
    """

    reference: str
    stats: dict[str, LatentStats]
    dice: dict[str, torch.Tensor]
    log_ratio: dict[str, torch.Tensor]
    mean_log_ratio: dict[str, torch.Tensor]
    ablation: dict[str, dict[int, float]] = field(default_factory=dict)

    _paper = paper("seglens")

    def ranking(self, cohort: str, by: str = "frequency") -> list[int]:
        """Latents by decreasing ``|log_ratio|`` (``by="frequency"``) or ``|mean_log_ratio|``
        (``by="mean"``) for ``cohort``: the most differentially relied-on first."""
        if cohort not in self.log_ratio:
            raise KeyError(f"`cohort` must be one of {sorted(self.log_ratio)}, got {cohort!r}")
        by = check_choice("by", by, ("frequency", "mean"))
        score = (self.log_ratio if by == "frequency" else self.mean_log_ratio)[cohort]
        return torch.argsort(score.abs(), descending=True, stable=True).tolist()

    def gate_latents(self, cohort: str, n: int) -> list[int]:
        """The ``n`` latents that fire most specifically on ``cohort`` (largest positive firing log-ratio
        against the reference), the gate of :class:`LatentIntervention` [reconstructed]."""
        if cohort not in self.log_ratio:
            raise KeyError(f"`cohort` must be one of {sorted(self.log_ratio)}, got {cohort!r}")
        score = self.log_ratio[cohort]
        order = torch.argsort(score, descending=True, stable=True).tolist()
        return [j for j in order if float(score[j]) > 0][:n]

    def to_markdown(self, top: int = 8) -> str:
        """A markdown summary: Dice per cohort, then the top latents of each compared cohort."""
        lines = ["| cohort | lesion Dice |", "|---|---|"]
        lines += [f"| {c} | {float(d.mean()):.3f} |" for c, d in self.dice.items()]
        ref = self.reference
        for c in self.log_ratio:
            lines += [
                "",
                f"| latent | f_{ref} | f_{c} | log ratio | dDice {ref} | dDice {c} |",
                "|---|---|---|---|---|---|",
            ]
            for j in self.ranking(c)[:top]:
                d_ref = self.ablation.get(ref, {}).get(j, float("nan"))
                d_c = self.ablation.get(c, {}).get(j, float("nan"))
                lines.append(
                    f"| {j} | {float(self.stats[ref].freq[j]):.3f} | {float(self.stats[c].freq[j]):.3f} | "
                    f"{float(self.log_ratio[c][j]):+.2f} | {d_ref:+.3f} | {d_c:+.3f} |"
                )
        return "\n".join(lines)


def diff_report(
    model: nn.Module,
    sae: SparseAutoencoder,
    cohorts: dict[str, tuple[torch.Tensor, torch.Tensor]],
    *,
    reference: str | None = None,
    eps: float = 1e-3,
    ablate_top: int = 8,
) -> DiffReport:
    """Compare how ``model`` relies on the latents of ``sae`` across cohorts.

    Args:
        model: the segmentation model (``sae`` reads ``sae.site``).
        sae: fitted SAE.
        cohorts: cohort -> ``(images (B, C, H, W), label maps (B, H, W))``.
        reference: the reference cohort (default: the first).
        eps: smoothing of the firing log-ratio.
        ablate_top: ablate the top latents of each ranking and record the Dice change on every cohort.
    """
    if not cohorts:
        raise ValueError("`cohorts` must name at least one cohort, got none")
    reference = next(iter(cohorts)) if reference is None else reference
    if reference not in cohorts:
        raise KeyError(f"`reference` must be one of {sorted(cohorts)}, got {reference!r}")
    stats = {c: latent_stats(model, sae, x) for c, (x, _) in cohorts.items()}
    dice = {c: core.lesion_dice(predict_labels(model, x), y) for c, (x, y) in cohorts.items()}
    log_ratio = {
        c: core.firing_log_ratio(stats[c].freq, stats[reference].freq, eps) for c in cohorts if c != reference
    }
    mean_log_ratio = {
        c: core.firing_log_ratio(stats[c].mean, stats[reference].mean, eps) for c in cohorts if c != reference
    }
    report = DiffReport(reference, stats, dice, log_ratio, mean_log_ratio)
    chosen = sorted({j for c in log_ratio for j in report.ranking(c)[:ablate_top]})
    for c, (x, y) in cohorts.items():
        report.ablation[c] = {
            j: float(edited_dice(model, sae, {j: "ablate"}, x, y).mean() - dice[c].mean()) for j in chosen
        }
    return report


def edited_dice(
    model: nn.Module,
    sae: SparseAutoencoder,
    edits: dict[int, Any],
    images: torch.Tensor,
    masks: torch.Tensor,
    gate: list[int] | None = None,
) -> torch.Tensor:
    """Per-image lesion Dice ``(B,)`` of ``model`` with ``edits`` applied at ``sae.site`` (only where a
    ``gate`` latent fires, when given)."""
    with LatentIntervention(model, sae.site, sae, edits, gate=gate):
        return core.lesion_dice(predict_labels(model, images), masks)


def select_intervention(
    model: nn.Module,
    sae: SparseAutoencoder,
    report: DiffReport,
    target: str,
    calibration: tuple[torch.Tensor, torch.Tensor],
    config: InterventionConfig | None = None,
    *,
    candidates: list[int] | None = None,
    reference_calibration: tuple[torch.Tensor, torch.Tensor] | None = None,
    max_reference_drop: float = 0.02,
) -> tuple[dict[int, tuple[str, float]], list[dict[str, Any]]]:
    """Choose latent edits on a calibration split of the ``target`` cohort [reconstructed].

    Latents are taken in the order of ``report.ranking(target, by=config.rank_by)`` (or of ``candidates``).
    ``strategy="joint"``: for each ``m`` of ``m_grid`` and ``s`` of ``strengths``, the top ``m`` latents
    are scaled by ``(mean_ref / mean_target) ** s``; the pair with the best mean calibration lesion Dice
    wins. ``strategy="greedy"``: each of the ``top_m`` latents in turn gets the best edit of the grid (scale
    by ``scales``; add ``shifts`` times its standard deviation on ``target``; match the reference mean) on
    top of the edits kept so far. Either way an edit set is kept only when it raises the calibration Dice by
    at least ``min_gain`` and, when ``reference_calibration`` is given, lowers the reference Dice by at
    most ``max_reference_drop``. With ``config.gate = g > 0`` every edit acts only where one of the ``g``
    most ``target``-specific latents fires (:meth:`DiffReport.gate_latents`). The evaluation images must be
    disjoint from ``calibration``.

    Returns:
        ``(edits, trace)``: the edits for :class:`LatentIntervention`, and one dict per tried setting.
    """
    cfg = config or InterventionConfig()
    max_reference_drop = check_float("max_reference_drop", max_reference_drop, low=0)
    if target not in report.log_ratio:
        raise KeyError(f"`target` must be one of {sorted(report.log_ratio)}, got {target!r}")
    order = report.ranking(target, by=cfg.rank_by) if candidates is None else list(candidates)
    st_t, st_r = report.stats[target], report.stats[report.reference]
    gate = report.gate_latents(target, cfg.gate) if cfg.gate else None
    x, y = calibration
    base = float(edited_dice(model, sae, {}, x, y).mean())
    ref_base = (
        None
        if reference_calibration is None
        else float(edited_dice(model, sae, {}, *reference_calibration).mean())
    )

    def harmless(edits: dict[int, tuple[str, float]]) -> bool:
        if reference_calibration is None or ref_base is None:
            return True
        return (
            float(edited_dice(model, sae, edits, *reference_calibration, gate).mean())
            >= ref_base - max_reference_drop
        )

    trace: list[dict[str, Any]] = []
    if cfg.strategy == "joint":
        best: tuple[float, dict[int, tuple[str, float]]] = (base + cfg.min_gain, {})
        for m in cfg.m_grid:
            for strength in cfg.strengths:
                edits = {j: matched_scale(j, st_t, st_r, strength) for j in order[:m]}
                dice = float(edited_dice(model, sae, edits, x, y, gate).mean())
                trace.append({"m": m, "strength": strength, "gain": dice - base, "kept": False})
                if dice >= best[0] and harmless(edits):
                    best = (dice, edits)
                    for t in trace:
                        t["kept"] = t is trace[-1]
        return best[1], trace
    kept: dict[int, tuple[str, float]] = {}
    for j in order[: cfg.top_m]:
        scored = []
        for rule, coef in grid_edits(cfg, match=float(st_t.mean[j]) > 0):
            edit = edit_for(rule, coef, j, st_t, st_r)
            scored.append(
                (
                    float(edited_dice(model, sae, {**kept, j: edit}, x, y, gate).mean()) - base,
                    rule,
                    coef,
                    edit,
                )
            )
        gain, rule, coef, edit = max(scored, key=lambda t: t[0])
        keep = gain >= cfg.min_gain and harmless({**kept, j: edit})
        trace.append({"latent": j, "rule": rule, "coef": coef, "gain": gain, "kept": keep})
        if keep:
            kept[j] = edit
            base += gain
    return kept, trace


def matched_scale(j: int, target: LatentStats, reference: LatentStats, strength: float) -> tuple[str, float]:
    """``("scale", (mean_ref / mean_target) ** strength)`` for latent ``j`` (1 when it never fires on the
    target cohort)."""
    mean_t = float(target.mean[j])
    return ("scale", (float(reference.mean[j]) / mean_t) ** strength if mean_t > 0 else 1.0)


def grid_edits(cfg: InterventionConfig, match: bool = True) -> list[tuple[str, float | None]]:
    """The ``(rule, coef)`` grid of :func:`select_intervention`."""
    grid: list[tuple[str, float | None]] = [("scale", g) for g in cfg.scales]
    grid += [("shift", a) for a in cfg.shifts]
    return grid + [("match", None)] if match else grid


def edit_for(
    rule: str, coef: float | None, j: int, target: LatentStats, reference: LatentStats
) -> tuple[str, float]:
    """The concrete edit of latent ``j`` for a grid entry (``shift`` in units of ``target.std[j]``)."""
    if rule == "scale":
        return ("scale", float(coef or 0.0))
    if rule == "shift":
        return ("add", float(coef or 0.0) * float(target.std[j]))
    return matched_scale(j, target, reference, 1.0)
