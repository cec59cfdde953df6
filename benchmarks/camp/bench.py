"""``hf-ext bench camp``: does CAMP lower fabrication on unseen entities at equal helpfulness?

A config-built 2-layer Llama is SFT-trained on the synthetic knowledge-boundary task of
:mod:`benchmarks.camp.task` (with refusals), then preference-trained from that checkpoint on pairs
whose overall label leans to helpfulness, so a conflict subset rewards fabrication. Every arm gets the same
data, optimiser, batch, epochs and a tuning budget of six settings (``beta`` and the arm's own knob), chosen
on the validation unknown entities (lowest fabrication among the settings whose known-entity accuracy is
within 2 points of DPO's at its default); the chosen setting is then trained on three seeds and judged on
held-out unknown entities that no training saw.

Arms: ``sft`` (the checkpoint, no preference training), ``dpo`` (stock ``trl.DPOTrainer``), ``dpo_relabel``
(DPO on truth-relabelled pairs), ``dpo_filter`` (DPO without the conflict pairs), ``cdpo`` (conservative DPO,
label smoothing), ``modpo_margin`` (MODPO-style margin ``gamma * (w_T * t + w_H * h)`` on every pair, no
gating), ``camp`` (CAMP's default: signed margin, two-sided soft-label loss on conflict pairs),
``camp_sigmoid`` (CAMP with the one-sided conflict loss) and ``camp_weight`` (CAMP's weight mode).
"""

from __future__ import annotations

import copy
import math
import resource
import statistics
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.camp import task as T
from benchmarks.harness import BenchReport, Headline, Timer, mean_se, pinned_threads, seeded, verdict

LR = 3e-4
BATCH = 8
EPOCHS = 3
SFT: dict[str, Any] = {"steps": 300, "lr": 3e-3}
TASK: dict[str, Any] = dict(n_known=60, n_unknown=60, n_unknown_pairs=20, n_val=40, n_test=40)
SHAPE: dict[str, Any] = dict(
    hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2
)
SETTING: dict[str, Any] = {"task": "capital-of", **TASK, "model": "llama 2 layers x 64"}
SWEEP = tuple((g, w) for g in (0.5, 1.0, 2.0, 4.0) for w in ((0.5, 0.5), (0.8, 0.2), (1.0, 0.0)))
TOLERANCE = 0.02  # known-accuracy points within which two arms count as equally helpful
FIGURES = (
    "known_acc",
    "over_refusal",
    "fabrication",
    "refusal",
    "train_unknown_fabrication",
    "ece",
    "auroc",
)


Grid = tuple[tuple[str, dict[str, Any]], ...]


def _with_beta(grid: Grid) -> Grid:
    """Each of two settings at three betas (trl's default 0.1 first): six settings, like ``BETAS``."""
    return tuple((f"beta={b:g} {label}", {"beta": b, **kw}) for b in (0.1, 0.4, 1.6) for label, kw in grid)


def _margin(gamma: float, weights: tuple[float, float], **extra: Any) -> tuple[str, dict[str, Any]]:
    label = f"gamma={gamma:g} w={weights[0]:g}/{weights[1]:g}"
    return label, {"camp_gamma": gamma, "camp_weights": list(weights), **extra}


def _cdpo(eps: float) -> tuple[str, dict[str, Any]]:
    """Conservative DPO through CAMP's soft-label loss: every pair a conflict with constant label 1 - eps."""
    gamma = math.log((1 - eps) / eps)  # sigmoid(gamma * 1 * t) = 1 - eps at t = 1, weights (1, 0)
    return f"eps={eps:g}", {"conflict_key": "every_pair", "camp_gamma": gamma, "camp_weights": [1.0, 0.0]}


@dataclass(frozen=True)
class Arm:
    """One system: which trainer, which data, its six tuning settings (the first is its default)."""

    trainer: str  # "dpo" (stock trl.DPOTrainer) or "camp"
    data: str  # "pairs", "relabel", "filter" or "constant" (t = 1 on every pair, for cDPO)
    grid: Grid
    baseline: bool


BETAS: Grid = tuple((f"beta={b:g}", {"beta": b}) for b in (0.1, 0.05, 0.2, 0.4, 0.8, 1.6))
EVERY = {"conflict_key": "every_pair", "camp_conflict_loss": "sigmoid"}
ARMS: dict[str, Arm] = {
    "dpo": Arm("dpo", "pairs", BETAS, True),
    "dpo_relabel": Arm("dpo", "relabel", BETAS, True),
    "dpo_filter": Arm("dpo", "filter", BETAS, True),
    "cdpo": Arm("camp", "constant", _with_beta((_cdpo(0.1), _cdpo(0.3))), True),
    "modpo_margin": Arm(
        "camp", "pairs", _with_beta((_margin(1, (0.5, 0.5), **EVERY), _margin(1, (1, 0), **EVERY))), True
    ),
    "camp": Arm("camp", "pairs", _with_beta((_margin(1, (0.5, 0.5)), _margin(1, (1, 0)))), False),
    "camp_sigmoid": Arm(
        "camp",
        "pairs",
        _with_beta(tuple(_margin(1, w, camp_conflict_loss="sigmoid") for w in ((0.5, 0.5), (1, 0)))),
        False,
    ),
    "camp_weight": Arm(
        "camp",
        "pairs",
        _with_beta(
            tuple((f"omega={w:g}", {"camp_mode": "weight", "camp_conflict_weight": w}) for w in (0.5, 0))
        ),
        False,
    ),
}


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence the datasets progress bars of the trainers' preprocessing for the duration of the benchmark."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        with warnings.catch_warnings():  # every pair is a conflict by construction in cdpo / modpo_margin
            warnings.filterwarnings("ignore", message="conflict fraction is 1")
            yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


@dataclass
class _Seed:
    """One seed's task, tokenizer, SFT checkpoint and preference pairs."""

    task: T.Task
    tok: Any
    model: Any
    rows: list[dict[str, Any]]
    sft_s: float


def _setup(seed: int) -> _Seed:
    from hf_ext.testing import tiny_llama, word_tokenizer

    task = T.make_task(seed, **TASK)
    tok = word_tokenizer(task.words)
    with seeded(seed):
        model = tiny_llama(seed, vocab_size=len(tok), max_position_embeddings=16, **SHAPE)
        with Timer() as timer:
            T.sft(model, tok, task, seed=seed, **SFT)
    return _Seed(task, tok, model, T.preference_rows(task, seed), timer.seconds)


def _data(arm: Arm, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    if arm.data == "relabel":
        rows = T.relabel_by_truth(rows)
    elif arm.data == "filter":
        rows = T.drop_conflicts(rows)
    elif arm.data == "constant":
        rows = [{**r, "truth_margin": 1.0, "help_margin": 0.0} for r in rows]
    return [{**r, "every_pair": 1.0} for r in rows]


def _train(arm: Arm, overrides: dict[str, Any], ctx: _Seed, seed: int) -> tuple[Any, dict]:
    """Train a copy of the SFT checkpoint with one arm's setting; the policy and trl's step count/runtime."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import DPOConfig, DPOTrainer

    from hf_ext.camp.config import CAMPConfig
    from hf_ext.camp.trainer import CAMPTrainer

    policy, ref = copy.deepcopy(ctx.model), copy.deepcopy(ctx.model)
    dataset = Dataset.from_list(_data(arm, ctx.rows))
    with tempfile.TemporaryDirectory() as out:
        common: dict[str, Any] = {
            **dict(output_dir=out, num_train_epochs=EPOCHS, per_device_train_batch_size=BATCH),
            **dict(learning_rate=LR, seed=seed, data_seed=seed, use_cpu=True, bf16=False, report_to=[]),
            **dict(save_strategy="no", logging_strategy="no", disable_tqdm=True, dataloader_num_workers=0),
        }
        trainer_cls: Any = DPOTrainer if arm.trainer == "dpo" else CAMPTrainer
        # CAMP arms keep trl's LM head, so the step-time ratio to stock DPO is the CAMP loss's own cost.
        camp_only: dict[str, Any] = {} if arm.trainer == "dpo" else {"completion_only_lm_head": False}
        config_cls: Any = DPOConfig if arm.trainer == "dpo" else CAMPConfig
        args = config_cls(**common, **camp_only, **overrides)
        trainer = trainer_cls(
            policy, ref_model=ref, args=args, train_dataset=dataset, processing_class=ctx.tok
        )
        trainer.remove_callback(PrinterCallback)  # it prints the train metrics to stdout
        result = trainer.train()
    return policy, {"steps": result.global_step, "train_s": result.metrics["train_runtime"]}


def _run_arm(arm: Arm, setting: int, ctx: _Seed, seed: int, splits: tuple[str, ...]) -> dict[str, Any]:
    policy, cost = _train(arm, arm.grid[setting][1], ctx, seed)
    out: dict[str, Any] = {"setting": arm.grid[setting][0], **cost}
    for split in splits:
        out[split] = T.evaluate(policy, ctx.tok, ctx.task, split)
    return out


def _sweep(beta: float, ctx: _Seed, seed: int) -> list[dict[str, Any]]:
    """CAMP's gamma x weight sweep at the chosen beta (one seed; reported and plotted, not used to choose)."""
    grid = tuple(_margin(g, w) for g, w in SWEEP)
    arm = Arm("camp", "pairs", tuple((label, {"beta": beta, **kw}) for label, kw in grid), False)
    out = []
    for i, (label, kw) in enumerate(arm.grid):
        result = _run_arm(arm, i, ctx, seed, ("test",))
        out.append(
            {"setting": label, "camp_gamma": kw["camp_gamma"], "w_T": kw["camp_weights"][0], **result["test"]}
        )
    return out


def _choose(candidates: list[dict[str, Any]], floor: float) -> int:
    """Lowest validation fabrication among settings with known_acc >= ``floor``; else the most helpful."""
    ok = [i for i, c in enumerate(candidates) if c["val"]["known_acc"] >= floor]
    if not ok:
        return max(range(len(candidates)), key=lambda i: candidates[i]["val"]["known_acc"])
    return min(ok, key=lambda i: candidates[i]["val"]["fabrication"])


def _row(system: str, baseline: bool, runs: list[dict[str, Any]], setting: str) -> dict[str, Any]:
    row: dict[str, Any] = {"system": system, "is_baseline": baseline, "setting": setting}
    for fig in FIGURES:
        row[fig], row[f"{fig}_se"], _ = mean_se(r["test"][fig] for r in runs)
    row["steps"] = runs[0].get("steps", 0)
    row["s_per_step"] = statistics.fmean(r["train_s"] / r["steps"] for r in runs) if row["steps"] else 0.0
    return row


def grid() -> list[dict[str, Any]]:
    """The settings of the full run: one task (entity counts) and one model; arms are systems."""
    return [dict(SETTING)]


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Tune every arm on seed ``seed``'s validation entities, then train the chosen settings on three seeds.

    ``quick``: the same task, model, SFT and epochs on one seed, ``dpo`` vs ``camp`` at their defaults (no
    tuning, no sweep).
    """
    arms = {k: ARMS[k] for k in (("dpo", "camp") if quick else ARMS)}
    seeds = [seed] if quick else [seed, seed + 1, seed + 2]
    candidates: dict[str, list[dict[str, Any]]] = {}
    runs: dict[str, list[dict[str, Any]]] = {"sft": []}
    sft_s = []
    sweep: list[dict[str, Any]] = []
    with Timer() as total, _quiet(), pinned_threads(1):
        for s in seeds:
            ctx = _setup(s)
            sft_s.append(ctx.sft_s)
            runs["sft"].append({s_: T.evaluate(ctx.model, ctx.tok, ctx.task, s_) for s_ in ("val", "test")})
            if s == seed:
                for name, arm in arms.items():
                    tried = range(1 if quick else len(arm.grid))
                    candidates[name] = [_run_arm(arm, i, ctx, s, ("val", "test")) for i in tried]
                floor = candidates["dpo"][0]["val"]["known_acc"] - TOLERANCE
                chosen = {name: _choose(c, floor) for name, c in candidates.items()}
                for name in arms:
                    runs[name] = [candidates[name][chosen[name]]]
                if not quick:
                    sweep = _sweep(arms["camp"].grid[chosen["camp"]][1]["beta"], ctx, s)
            else:
                for name, arm in arms.items():
                    runs[name].append(_run_arm(arm, chosen[name], ctx, s, ("test",)))
    rows = [_row("sft", True, runs["sft"], "no preference training")]
    rows += [_row(n, a.baseline, runs[n], a.grid[chosen[n]][0]) for n, a in arms.items()]
    dpo_step = next(r for r in rows if r["system"] == "dpo")["s_per_step"]
    for row in rows:
        row["step_time_vs_dpo"] = row["s_per_step"] / dpo_step if row["steps"] else float("nan")
    camp = next(r for r in rows if r["system"] == "camp")
    pool = [camp] + [r for r in rows if r["is_baseline"] and r["known_acc"] >= camp["known_acc"] - TOLERANCE]
    if len(pool) == 1:  # CAMP is more helpful than every baseline: compare with the most helpful one
        pool.append(max((r for r in rows if r["is_baseline"]), key=lambda r: r["known_acc"]))
    headline = Headline.from_rows(pool, "fabrication", higher_is_better=False, method_system="camp")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    config = {
        "seeds": seeds,
        "floor_known_acc": floor,
        "lr": LR,
        "batch": BATCH,
        "sft": SFT,
        "epochs": EPOCHS,
        "task": TASK,
        "n_pairs": len(ctx.rows),
        "conflict_frac": sum(r["kind"] == "conflict" for r in ctx.rows) / len(ctx.rows),
        "sft_s": statistics.fmean(sft_s),
        "total_s": total.seconds,
        "peak_rss_mb": peak_mb,
        "sweep": sweep,
        "candidates": [
            {"system": n, "setting": c["setting"], "chosen": i == chosen[n], **c["val"]}
            for n, cs in candidates.items()
            for i, c in enumerate(cs)
        ],
    }
    notes = _notes(rows, pool, headline, config, quick)
    what = f"capital-of task, {len(ctx.rows)} pairs: " + (
        f"dpo vs camp at defaults, 1 seed (full: {len(ARMS)} arms tuned x 3 seeds)"
        if quick
        else f"{len(arms)} arms tuned x {len(seeds)} seeds"
    )
    return BenchReport(
        rows=rows, headline=headline, config=config, what=what, notes=notes, settings=[dict(SETTING)]
    )


def _fmt(row: dict[str, Any], fig: str) -> str:
    return f"{row[fig]:.3f} +- {row[f'{fig}_se']:.3f}"


def _notes(
    rows: list[dict[str, Any]],
    pool: list[dict[str, Any]],
    headline: Headline,
    config: dict[str, Any],
    quick: bool,
) -> list[str]:
    by = {r["system"]: r for r in rows}
    camp, dpo = by["camp"], by["dpo"]
    excluded = [r["system"] for r in rows if r["is_baseline"] and r not in pool]
    notes = [
        "All data synthetic: known vs unknown 'capital of' questions (two-syllable names) on a config-built "
        "2-layer Llama, SFT with refusals, then preference pairs whose overall label rewards a confident "
        f"fabrication on {config['conflict_frac']:.1%} of the pairs (the conflict subset). CAMP's loss is "
        "a reconstruction from the paper's abstract.",
        f"{config['n_pairs']} pairs, seeds {config['seeds']}; fabrication / refusal = probability mass on "
        "any city / on idk for held-out unknown entities never trained on; known_acc = mass on the right "
        "city for known entities; ece / auroc = calibration of the top city's probability over known + "
        "held-out questions; means +- standard error over seeds.",
        _verdict(camp, by.get(headline.best_baseline_system), headline, excluded),
        f"DPO raises held-out fabrication from {by['sft']['fabrication']:.3f} (SFT) to "
        f"{dpo['fabrication']:.3f}; CAMP reaches {camp['fabrication']:.3f}. Calibration (auroc, higher "
        f"better / ece, lower better): sft {by['sft']['auroc']:.3f}/{by['sft']['ece']:.3f}, dpo "
        f"{dpo['auroc']:.3f}/{dpo['ece']:.3f}, camp {camp['auroc']:.3f}/{camp['ece']:.3f}.",
    ]
    if "camp_sigmoid" in by:
        sig = by["camp_sigmoid"]
        notes.append(
            f"Conflict loss: two-sided soft label (camp) {_fmt(camp, 'fabrication')} vs one-sided sigmoid "
            f"(camp_sigmoid) {_fmt(sig, 'fabrication')} held-out fabrication, known_acc "
            f"{camp['known_acc']:.3f} vs {sig['known_acc']:.3f}."
        )
    if not quick:
        notes.append(
            f"Tuning: six settings per arm on seed {config['seeds'][0]}'s validation entities, floor "
            f"known_acc >= {config['floor_known_acc']:.3f} (DPO's default minus {100 * TOLERANCE:.0f} "
            "points); chosen: "
            + ", ".join(f"{r['system']} {r['setting']}" for r in rows if r["system"] != "sft")
            + "."
        )
    overhead = 100 * (max(r["step_time_vs_dpo"] for r in rows if r["system"].startswith("camp")) - 1)
    notes.append(
        f"Step time: CAMP arms at most {overhead:+.0f}% vs DPO (s_per_step = trl train_runtime / steps, one "
        f"thread, a shared 2-core CPU); run time {config['total_s']:.0f} s, peak RSS "
        f"{config['peak_rss_mb']:.0f} MB."
    )
    if quick:
        notes.append(
            "--quick: the full run's task, model and epochs on one seed, dpo vs camp at their defaults (no "
            "tuning); the full run tunes every arm and averages 3 seeds."
        )
    return notes


def _verdict(
    camp: dict[str, Any], best: dict[str, Any] | None, headline: Headline, excluded: list[str]
) -> str:
    """The target line: CAMP vs the best baseline as helpful, ``best`` (``None``: no baseline figure)."""
    target = "CAMP lowers held-out fabrication at equal known-entity accuracy"
    mine = f"camp {_fmt(camp, 'fabrication')} at known_acc {camp['known_acc']:.3f}"
    if best is None or not headline.comparable:
        return verdict(target, False, f"{mine}; no baseline figure to compare")
    detail = (
        f"{mine} vs the best baseline as helpful (within {100 * TOLERANCE:.0f} points), {best['system']} "
        f"{_fmt(best, 'fabrication')} at {best['known_acc']:.3f}"
    )
    return verdict(
        target,
        headline.beats_baseline,
        detail + (f"; less helpful, so not compared: {', '.join(excluded)}" if excluded else ""),
    )


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """The truthfulness-vs-helpfulness front: every tuning setting (validation) and the chosen arms (test).

    Returns ``{"front": path}`` of ``camp_front.png`` in ``directory``, and ``{"sweep": path}`` of
    ``camp_sweep.png`` (CAMP's gamma x weight sweep) after a full run.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7.5, 5))
    colors = plt.get_cmap("tab10")
    systems = [r["system"] for r in report.rows]
    for i, system in enumerate(systems):
        color = colors(i % 10)
        sweep = [c for c in report.config["candidates"] if c["system"] == system]
        if sweep:
            xs, ys = [c["known_acc"] for c in sweep], [c["fabrication"] for c in sweep]
            ax.plot(xs, ys, ":", marker="o", ms=4, color=color, alpha=0.5)
            for c in sweep:
                ax.annotate(c["setting"], (c["known_acc"], c["fabrication"]), fontsize=6, color=color)
        row = report.rows[i]
        ax.errorbar(
            row["known_acc"],
            row["fabrication"],
            xerr=row["known_acc_se"],
            yerr=row["fabrication_se"],
            fmt="*" if system == "camp" else "s",
            ms=12 if system == "camp" else 7,
            color=color,
            label=f"{system} ({row['setting']})",
        )
    ax.set_xlabel("known-entity accuracy (helpfulness)  ->")
    ax.set_ylabel("held-out fabrication (lower is more truthful)")
    ax.set_title("CAMP benchmark: small dots = tuning settings (validation), big = chosen (test, seed mean)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    files = {"front": directory / "camp_front.png"}
    fig.tight_layout()
    fig.savefig(files["front"], dpi=120)
    plt.close(fig)
    if report.config.get("sweep"):
        files["sweep"] = directory / "camp_sweep.png"
        _plot_sweep(report, files["sweep"])
    return {name: str(path) for name, path in files.items()}


def _plot_sweep(report: BenchReport, path: Path) -> None:
    """CAMP's gamma x weight sweep (held-out, one seed) with the chosen arms' seed means for reference."""
    import matplotlib.pyplot as plt

    sweep = report.config["sweep"]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for w_t in sorted({c["w_T"] for c in sweep}):
        points = sorted((c for c in sweep if c["w_T"] == w_t), key=lambda c: c["camp_gamma"])
        xs, ys = [c["known_acc"] for c in points], [c["fabrication"] for c in points]
        ax.plot(
            xs,
            ys,
            "-o",
            label=f"camp, w_T={w_t:g}, w_H={1 - w_t:g} (numbers: gamma)",
        )
        for c in points:
            ax.annotate(f"{c['camp_gamma']:g}", (c["known_acc"], c["fabrication"]), fontsize=7)
    for row in report.rows:
        if row["system"] != "camp":
            ax.plot(row["known_acc"], row["fabrication"], "s", ms=6, alpha=0.6)
            ax.annotate(row["system"], (row["known_acc"], row["fabrication"]), fontsize=7, alpha=0.8)
    ax.set_xlabel("known-entity accuracy (helpfulness)  ->")
    ax.set_ylabel("held-out fabrication (lower is more truthful)")
    ax.set_title("CAMP gamma x weight sweep (one seed, held-out); squares: chosen arms (seed means)")
    ax.title.set_fontsize(9)
    ax.legend(fontsize=7, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
