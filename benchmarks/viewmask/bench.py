# mypy: disable-error-code="attr-defined"
# (diffusers exposes registered modules and config fields as dynamic attributes)
"""``hf-ext bench viewmask``: joint multi-view generation (ViewMask) vs generating each view on its own.

Everything is synthetic and CPU-sized: procedural voxel-box objects (8^3 grid, 1-3 coloured boxes) rendered
at azimuths 0, 90, 180, 270 (white background), a prompt naming the box count and colours. Two settings: 32x32
renders (64 tokens per view, 3 transformer layers) and 16x16 renders (16 tokens per view, 2 layers; the quick
run's slice, at a smaller budget). Per setting, one LFQ tokenizer (8 bits, 4x downsampling) serves every arm.
Arms, at the same step budget and batch size, the same architecture and the same prompts:

* **ViewMask (joint)**: one transformer on ``[text][view 0][view 1][view 2][view 3]`` with the mask drawn
  jointly over the three target views; the three targets are generated in one run;
* **independent per-view**: the same architecture trained on ``[text][view 0][view k]`` pairs (view id
  ``k``), each target generated in its own run from the input view. This is the fair same-budget baseline:
  one model (not three, which would each get a third of the budget) that sees exactly the input the joint
  model sees, minus the other target views;
* **ViewMask (linear sampling)**: the joint model sampled with ``AmusedScheduler(masking_schedule="linear")``;
* floors and ceiling: copy-input (every target = the input render) and the tokenizer ceiling (ground-truth
  tokens decoded).

Figures on held-out objects: target-token accuracy, PSNR and SSIM against the ground-truth renders
(torchmetrics), mean silhouette IoU against the ground-truth views, the mirror-silhouette IoU of the pairs
(0, 180) and (90, 270) (views 180 degrees apart are exact mirrors, so this is a cross-view consistency
score), the IoU of the visual hull carved from the four silhouettes with the ground-truth hull, transformer
forwards per object, attention FLOPs per step, and seconds per object at one thread. LPIPS is not reported:
it needs pretrained VGG/AlexNet weights that are not available offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from diffusers import AmusedScheduler

from benchmarks.harness import BenchReport, Headline, pinned_threads, seeded, verdict
from benchmarks.viewmask.arms import (
    DOWNSAMPLE,
    GRID,
    LEARNING_RATE,
    MIN_LR_RATIO,
    Settings,
    generate,
    intervals,
    per_object,
    prepare,
    summary,
    time_per_object,
    train_arm,
)
from hf_ext.viewmask.pipeline import ViewMaskPipeline

# The grid: render side (pixels; 8 voxels per side) -> transformer layers (width 64, 4 heads, MLP 256).
# 16 px (16 tokens per view) is the small setting the quick run can train in seconds.
LAYERS = {32: 3, 16: 2}
FULL = {
    "n_train": 2000,
    "n_eval": 128,
    "tokenizer_steps": 300,
    "steps": 600,
    "batch_size": 32,
    "inference_steps": 16,
    "timing_repeats": 3,
}
QUICK = {
    "n_train": 400,
    "n_eval": 32,
    "tokenizer_steps": 300,
    "steps": 400,
    "batch_size": 8,
    "inference_steps": 16,
    "timing_repeats": 1,
}
QUICK_IMAGE = 16
JOINT, INDEP, LINEAR = "ViewMask (joint)", "independent per-view", "ViewMask (linear sampling)"
COPY, CEILING = "copy-input", "tokenizer ceiling"


def grid() -> list[dict[str, Any]]:
    """The full run's settings: the procedural voxel boxes at each render size, with its transformer depth."""
    return [{"data": "voxel boxes 8^3", "image": px, "layers": n} for px, n in LAYERS.items()]


def sizes(setting: dict[str, Any], budget: dict[str, int]) -> Settings:
    """The run sizes of one grid ``setting`` at ``budget`` (:data:`FULL` or :data:`QUICK`)."""
    return Settings(
        pixels_per_voxel=setting["image"] // GRID,
        hidden_size=64,
        num_layers=setting["layers"],
        num_heads=4,
        mlp_size=256,
        **budget,
    )


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """For each setting: train the tokenizer and both transformers, generate the held-out objects' views,
    score every arm. The quick run measures the 16 px setting at the :data:`QUICK` budget."""
    settings = [g for g in grid() if g["image"] == QUICK_IMAGE] if quick else grid()
    budget = QUICK if quick else FULL
    rows: list[dict[str, Any]] = []
    notes = [
        "Synthetic data (procedural voxel boxes); GSO / 3D-FUTURE and pretrained MAGVIT-v2 weights are not "
        "available offline, so the paper's numbers are out of reach. LPIPS is not reported (it needs "
        "pretrained VGG/AlexNet weights). The tokenizer skips MAGVIT-v2's GAN and perceptual losses.",
    ]
    losses: dict[str, dict[str, float]] = {}
    with pinned_threads(1), seeded(seed):
        for setting in settings:
            r, figures, losses[f"{setting['image']}px"] = _measure(sizes(setting, budget), seed)
            rows += r
            notes += _notes(r, figures, seed, setting=f"{setting['image']} px")
    headline = Headline.from_rows(
        rows,
        "mirror_iou_90_270",
        higher_is_better=True,
        method_system=JOINT,
        where={"image": settings[0]["image"]},
    )
    config = {
        **budget,
        "settings": settings,
        "views": 4,
        "codebook_bits": 8,
        "hidden_size": 64,
        "learning_rate": LEARNING_RATE,
        "min_lr_ratio": MIN_LR_RATIO,
        "threads": 1,
        "final_train_loss": losses,
    }
    return BenchReport(
        rows=rows,
        headline=headline,
        config=config,
        what=_what(settings, budget),
        notes=notes,
        settings=settings,
    )


def _what(settings: list[dict[str, Any]], budget: dict[str, int]) -> str:
    """The tour's one line: render sizes, objects and training budget; the full run's when this is a slice."""

    def line(chosen: list[dict[str, Any]], b: dict[str, int]) -> str:
        px = "/".join(str(g["image"]) for g in chosen)
        return f"{px} px, {b['n_train']} objects, {b['steps']} steps x {b['batch_size']}"

    text = f"voxel boxes, 4 views at {line(settings, budget)}"
    return text if budget == FULL else f"{text} (full: {line(grid(), FULL)})"


def _measure(
    s: Settings, seed: int
) -> tuple[list[dict[str, Any]], dict[str, dict[str, np.ndarray]], dict[str, float]]:
    """One setting: the rows of every arm, their per-object figures, and the final training losses."""
    p = prepare(s, seed)
    truth = (p.eval_images.permute(0, 1, 3, 4, 2).numpy() + 1) / 2
    joint, joint_losses = train_arm(p, s, "joint", seed)
    indep, indep_losses = train_arm(p, s, "independent", seed)
    linear = ViewMaskPipeline(
        vqvae=joint.vqvae,
        transformer=joint.transformer,
        scheduler=AmusedScheduler(mask_token_id=256, masking_schedule="linear"),
        tokenizer=joint.tokenizer,
    )
    linear.set_progress_bar_config(disable=True)
    arms = {JOINT: (joint, "joint"), INDEP: (indep, "independent"), LINEAR: (linear, "joint")}
    figures: dict[str, dict[str, np.ndarray]] = {}
    accuracy: dict[str, float] = {}
    for name, (pipe, mode) in arms.items():
        views, tokens = generate(pipe, p.eval_images[:, 0], p.eval_prompts, mode, s.inference_steps, seed)
        figures[name] = per_object(views, truth, p.eval_objects)
        accuracy[name] = float((tokens[:, 1:] == p.eval_tokens[:, 1:]).float().mean())
    figures[COPY] = per_object(np.repeat(truth[:, :1], 4, axis=1), truth, p.eval_objects)
    side = s.image // DOWNSAMPLE
    with torch.no_grad():
        ceiling = joint.vqvae.decode_indices(p.eval_tokens.reshape(-1, side, side)).clamp(-1, 1)
    figures[CEILING] = per_object(
        ((ceiling.permute(0, 2, 3, 1).numpy() + 1) / 2).reshape(truth.shape), truth, p.eval_objects
    )
    seconds = time_per_object(
        {JOINT: arms[JOINT], INDEP: arms[INDEP]}, p, s.inference_steps, s.timing_repeats
    )
    t, per_view = s.inference_steps, s.tokens_per_view
    cost = {
        JOINT: {"forwards": t, "attn_flops_per_step": (4 * per_view) ** 2},
        INDEP: {"forwards": 3 * t, "attn_flops_per_step": 3 * (2 * per_view) ** 2},
        LINEAR: {"forwards": t, "attn_flops_per_step": (4 * per_view) ** 2},
    }
    rows = []
    for name in (JOINT, INDEP, LINEAR, COPY, CEILING):
        extra: dict[str, Any] = {"is_baseline": name in (INDEP, COPY), "image": s.image}
        extra["token_acc"] = accuracy.get(name, float("nan") if name == COPY else 1.0)
        extra.update(cost.get(name, {"forwards": 0, "attn_flops_per_step": 0}))
        extra["s_per_object"] = seconds.get(name, float("nan"))
        rows.append(summary(name, figures[name], **extra))
    losses = {
        "tokenizer": float(np.mean(p.tokenizer_losses[-10:])),
        JOINT: float(np.mean(joint_losses[-10:])),
        INDEP: float(np.mean(indep_losses[-10:])),
    }
    return rows, figures, losses


def _notes(
    rows: list[dict[str, Any]], figures: dict[str, dict[str, np.ndarray]], seed: int, setting: str
) -> list[str]:
    """Verdict lines of one ``setting`` (its name starts each line), from its rows and per-object figures."""
    by = {r["system"]: r for r in rows}
    a, b, c = by[JOINT], by[INDEP], by[COPY]
    ci_a, ci_b = intervals(figures[JOINT], seed), intervals(figures[INDEP], seed)
    notes = []
    for key, label in (("mirror_iou_90_270", "(90, 270) mirror IoU"), ("hull_iou", "visual-hull IoU")):
        lo_a, hi_a = ci_a[key]
        lo_b, hi_b = ci_b[key]
        notes.append(
            verdict(
                f"{setting}: joint beats independent on {label}, bootstrap 95% intervals apart",
                lo_a > hi_b,
                f"{a[key]:.3f} [{lo_a:.3f}, {hi_a:.3f}] vs {b[key]:.3f} [{lo_b:.3f}, {hi_b:.3f}]",
            )
        )
    notes.append(
        verdict(
            f"{setting}: joint beats independent on silhouette IoU vs ground truth",
            a["sil_iou"] > b["sil_iou"],
            f"{a['sil_iou']:.3f} vs {b['sil_iou']:.3f}",
        )
    )
    notes.append(
        verdict(
            f"{setting}: joint beats copy-input on held-out silhouette IoU and visual-hull IoU",
            a["sil_iou"] > c["sil_iou"] and a["hull_iou"] > c["hull_iou"],
            f"silhouette {a['sil_iou']:.3f} vs {c['sil_iou']:.3f}, hull {a['hull_iou']:.3f} vs "
            f"{c['hull_iou']:.3f}",
        )
    )
    worst = max(abs(a[f"psnr_{az}"] - b[f"psnr_{az}"]) for az in (90, 180, 270))
    notes.append(
        verdict(
            f"{setting}: per-view PSNR within 1 dB of independent",
            worst <= 1.0,
            f"largest gap {worst:.2f} dB",
        )
    )
    beats = all(min(a[f"psnr_{az}"], b[f"psnr_{az}"]) > c[f"psnr_{az}"] for az in (90, 180, 270))
    notes.append(
        verdict(
            f"{setting}: joint and independent both beat copy-input on PSNR at 90, 180, 270",
            beats,
            ", ".join(
                f"{az}: {a[f'psnr_{az}']:.2f}/{b[f'psnr_{az}']:.2f} vs {c[f'psnr_{az}']:.2f}"
                for az in (90, 180, 270)
            ),
        )
    )
    notes.append(
        f"{setting}: cost: joint {a['forwards']} forwards over 4P tokens per object, independent "
        f"{b['forwards']} over 2P; attention FLOPs per step (4P)^2 vs 3(2P)^2 = "
        f"x{a['attn_flops_per_step'] / b['attn_flops_per_step']:.2f}; "
        f"s/object {a['s_per_object']:.3f} vs {b['s_per_object']:.3f} (one thread, interleaved medians)."
    )
    return notes


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """``viewmask_bench.png``: consistency and quality figures of every arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    keys = ("sil_iou", "mirror_iou_90_270", "hull_iou", "ssim")
    fig, ax = plt.subplots(figsize=(9, 3.5))
    width = 0.8 / len(report.rows)
    for i, row in enumerate(report.rows):
        label = f"{row['system']} ({row['image']} px)"
        ax.bar(np.arange(len(keys)) + i * width, [row[k] for k in keys], width, label=label)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2, keys)
    ax.set(ylim=(0, 1.05), title="ViewMask bench: held-out procedural objects")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    path = directory / "viewmask_bench.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return {"bench": str(path)}
