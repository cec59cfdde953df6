"""``hf-ext bench keystone``: discovery and ablation, then keystone-only fine-tuning, on real Gemma-3-270M.

Part A (fp32, CPU): probe 4 prompts, ablate the top-k keystone neurons against random neurons and the
controls of :mod:`~benchmarks.keystone.ablation` (activation magnitude, weight norm, word-salad
prompts, a down_proj pool); held-out NLL per domain; IoU over 5 disjoint prompt groups; what the set is
(projections, residual channels) next to the model's massive-activation channels.

Part B: fine-tune the same Gemma on two tasks generated in code (inject invented facts; learn a JSON output
format) with five arms: full fine-tuning (tied embedding frozen), the keystone-30 rows, random rows matched by
module type and count, the top-30 rows by activation magnitude, and rank-1 LoRA on every ``o_proj`` (about
the same parameter count). Each arm's learning rate is chosen on a validation split by task accuracy; test
accuracy, held-out drift, trainable parameters and seconds per step are reported at that rate.
"""

from __future__ import annotations

import logging
import math
import resource
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import BenchReport, Headline, Timer, seeded, verdict
from benchmarks.keystone.ablation import METHOD, TEXTS, ablation_rows, describe_set
from benchmarks.keystone.finetune import Task, finetune_rows, format_task, knowledge_task
from hf_ext.keystone.ablate import random_neuron_set

logger = logging.getLogger(__name__)

ARMS = ("full FT", "keystone rows", "random rows", "top activation rows", "LoRA")
LR_GRID = {
    "full FT": (1e-5, 3e-5),
    "keystone rows": (1e-2, 3e-2),
    "random rows": (1e-2, 3e-2),
    "top activation rows": (1e-2, 3e-2),
    "LoRA": (3e-3, 1e-2),
}
STEPS, BATCH = 8, 8
MODEL = "Gemma-3-270M base"
SIZES = (3, 10, 30)  # Part A: the set sizes k ablated, smallest first
DRAWS = {3: 3, 10: 5, 30: 10}  # random sets ablated at each k (full run)
QUICK_DRAWS = 2
TEXTS_PER_DOMAIN = {"full": 2, "quick": 1}  # Part A held-out texts of each of the 4 domains
TASKS: dict[str, Callable[[], Task]] = {"knowledge": knowledge_task, "format": format_task}  # Part B
B_COLUMNS = (
    "task",
    "system",
    "is_baseline",
    "lr",
    "val_acc",
    "test_acc",
    "test_nll",
    "drift",
    "trainable_params",
    "s_per_step",
)


def grid() -> list[dict[str, Any]]:
    """The settings of the full run: Part A at each set size ``k``, Part B on each task (same model)."""
    return [_ablation_setting(k) for k in SIZES] + [_finetune_setting(task) for task in TASKS]


def _ablation_setting(k: int) -> dict[str, Any]:
    return {"part": "A ablation", "model": MODEL, "k": k}


def _finetune_setting(task: str) -> dict[str, Any]:
    return {"part": "B fine-tuning", "model": MODEL, "task": task}


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Part A and Part B on Gemma-3-270M (see the module docstring).

    ``quick``: Part A at the smallest set size (k = 3) only, keystone against 2 random draws, one held-out
    text per domain; no controls, no set description, no Part B.
    """
    from hf_ext.assets import gemma3_270m

    sizes = SIZES[:1] if quick else SIZES
    draws = {k: QUICK_DRAWS for k in sizes} if quick else DRAWS
    tasks = () if quick else tuple(TASKS)
    with seeded(seed):
        with Timer() as load:
            model, tok = gemma3_270m()
        model.eval()
        per_domain = TEXTS_PER_DOMAIN["quick" if quick else "full"]
        a_rows, info = ablation_rows(model, tok, sizes=sizes, draws=draws, seed=seed, per_domain=per_domain)
        if not quick:
            info.update(describe_set(model, tok, info["sets"], seed=seed))
        grid_rows = [] if quick else _finetune(model, tok, info["sets"], seed)
    b_rows = _chosen_rows(grid_rows)
    rows = a_rows + b_rows
    headline = Headline.from_rows(
        [r for r in a_rows if r["k"] == sizes[-1]], "ppl_ratio", higher_is_better=True, method_system=METHOD
    )
    config = {
        "model": f"{MODEL} (fp32, CPU)",
        "pool": "q, k, v, o, gate, up projections",
        "pool_size": info["pool_size"],
        "heldout_texts": 4 * per_domain,
        "sizes": list(sizes),
        "random_draws": draws,
        "arms": [] if quick else list(ARMS),
        "lr_grid": {} if quick else {a: list(g) for a, g in LR_GRID.items()},
        "steps": STEPS,
        "batch_size": BATCH,
        "keystone_set": info["sets"][METHOD].indices,
        "grid": grid_rows,
        "load_seconds": load.seconds,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if not quick:
        config.update(
            anatomy=info["anatomy"],
            massive_channels=info["massive"],
            iou=info["iou"],
            iou_gibberish_vs_keystone=info["iou_gibberish"],
        )
    what = (
        f"{MODEL}: ablate {sizes[0]} keystone neurons vs {QUICK_DRAWS} random draws (full: k=3/10/30 + "
        "controls, fine-tuning on 2 tasks)"
        if quick
        else f"{MODEL}: ablate 3/10/30 keystone neurons vs controls; keystone-only fine-tuning vs full FT"
    )
    notes = _quick_notes(a_rows, info, config) if quick else _notes(a_rows, b_rows, info, config)
    settings = [_ablation_setting(k) for k in sizes] + [_finetune_setting(t) for t in tasks]
    return BenchReport(rows, headline, config, what, notes, settings=settings)


def _finetune(model: Any, tok: Any, top30: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """Part B: every arm at every rate of its grid on each task; ``top30`` holds the top-30 sets of Part A."""
    top = top30[METHOD]
    sets = {
        "keystone rows": top,
        "random rows": random_neuron_set(model, like=top, seed=seed),
        "top activation rows": top30["top activation (no norm)"],
    }
    rows: list[dict[str, Any]] = []
    for make_task in TASKS.values():
        rows += finetune_rows(
            model,
            tok,
            make_task(),
            sets,
            arms=ARMS,
            lr_grid=LR_GRID,
            heldout=TEXTS,
            steps=STEPS,
            batch_size=BATCH,
            seed=seed,
        )
    return rows


def _chosen_rows(grid_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Table B: each arm at its chosen rate, with the gain over the un-tuned model as a share of full FT's
    and the step time as a ratio to full FT's."""
    out = []
    for r in grid_rows:
        if not r["chosen"]:
            continue
        same = [x for x in grid_rows if x["task"] == r["task"] and x["chosen"]]
        base = next(x for x in same if x["system"] == "un-tuned")
        full = next(x for x in same if x["system"] == "full FT")
        gain = full["test_acc"] - base["test_acc"]
        row = {"table": "B", **{c: r[c] for c in B_COLUMNS if c in r}}
        if "para_acc" in r:
            row["para_acc"] = r["para_acc"]
        row["gain_vs_full"] = (r["test_acc"] - base["test_acc"]) / gain if gain > 0 else math.nan
        if "s_per_step" in r:
            row["step_ratio"] = r["s_per_step"] / full["s_per_step"]
        out.append(row)
    return out


def _quick_notes(a_rows: list[dict[str, Any]], info: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The notes of a quick run: the smallest set size against random draws, and the costs."""
    base = info["base"]
    k = config["sizes"][0]
    key = next(r for r in a_rows if r["system"] == METHOD and r["k"] == k)
    worst = max(info["random_nll"][k]) - base["nll"]
    return [
        "Real: Gemma-3-270M base weights; hand-written English probe and held-out text (4 domains).",
        f"Ablation at k={k} of {info['pool_size']} neurons: keystone x{key['ppl_ratio']:.3g} perplexity "
        f"(+{key['nll'] - base['nll']:.3f} nats over base {base['nll']:.3f}); largest of "
        f"{len(info['random_nll'][k])} random draws +{worst:.3f} nats.",
        _cost(info, config),
        f"--quick: Part A at k={k} only, {len(info['random_nll'][k])} random draws, one held-out text per "
        "domain; the full run uses two per domain and adds k=10 and 30 with 5 and 10 draws, the controls "
        "(activation magnitude, weight norm, word salad, down_proj pool), IoU over 5 prompt groups and "
        "Part B (fine-tuning, 5 arms, 2 tasks).",
    ]


def _cost(info: dict[str, Any], config: dict[str, Any]) -> str:
    return (
        f"Cost: probe 4 forwards in {info['probe_seconds']:.2f} s; {info['seconds_per_ablation_eval']:.2f} s "
        f"per ablation evaluation ({config['heldout_texts']} texts); model load {config['load_seconds']:.1f} "
        f"s; peak RSS {config['peak_rss_mb']:.0f} MB."
    )


def _notes(
    a_rows: list[dict[str, Any]],
    b_rows: list[dict[str, Any]],
    info: dict[str, Any],
    config: dict[str, Any],
) -> list[str]:
    base = info["base"]
    key = next(r for r in a_rows if r["system"] == METHOD and r["k"] == 30)
    worst = {k: max(v) - base["nll"] for k, v in info["random_nll"].items()}
    inc = key["nll"] - base["nll"]
    iou30, iou10 = info["iou"][30], info["iou"][10]
    anatomy = info["anatomy"]
    salad = next(r for r in a_rows if r["system"] == "gibberish prompts" and r["k"] == 30)
    massive = [m["channel"] for m in info["massive"]]
    in_massive = {c: ls for c, ls in anatomy["o_proj_channels"].items() if c in massive}
    lines = [
        "Real: Gemma-3-270M base weights; hand-written English probe and held-out text (4 domains). "
        "Synthetic: the word-salad prompts, the invented facts and the JSON-format items of Part B.",
        f"Set size 30 of {info['pool_size']} neurons ({100 * 30 / info['pool_size']:.4f}% of the pool); base "
        f"mean NLL {base['nll']:.3f}.",
        verdict(
            "Ablation: keystone-30 multiplies perplexity by >= 100 while every random draw stays < 1.5x",
            inc >= math.log(100) and all(w < math.log(1.5) for w in worst.values()),
            f"keystone x{math.exp(inc):.3g} (+{inc:.2f} nats); largest random increase per k: "
            + ", ".join(f"k={k}: +{w:.3f} nats" for k, w in worst.items()),
        ),
        verdict(
            "Every domain collapses (NLL >= 2x base)",
            all(key[f"nll_{d}"] >= 2 * base[f"nll_{d}"] for d in ("knowledge", "math", "code", "reasoning")),
            ", ".join(f"{d} {key[f'nll_{d}']:.1f}" for d in ("knowledge", "math", "code", "reasoning")),
        ),
        verdict(
            "Top-30 IoU over 5 disjoint prompt groups >= 0.7",
            iou30["mean"] >= 0.7,
            f"mean {iou30['mean']:.3f} (min {iou30['min']:.3f}); top-10 mean {iou10['mean']:.3f}",
        ),
        f"Word-salad probe: its top-30 set has IoU {info['iou_gibberish']:.2f} with the keystone-30 set; "
        f"ablated, held-out NLL {salad['nll']:.2f} (keystone {key['nll']:.2f}, base {base['nll']:.2f}).",
        f"What the set is: {anatomy['by_projection']} rows; o_proj rows write residual channels "
        f"{dict(anatomy['o_proj_channels'])} (channel: layers); channels written in several layers: "
        f"{dict(anatomy['recurring']) or 'none'}.",
        "Massive-activation channels of the residual stream (largest |h| over layers and tokens): "
        + ", ".join(f"{m['channel']} ({m['ratio_to_median']:.0f}x median)" for m in info["massive"])
        + f"; keystone o_proj rows writing one of them: {in_massive or 'none'}.",
        _cost(info, config),
    ]
    for task in dict.fromkeys(r["task"] for r in b_rows):
        rows = {r["system"]: r for r in b_rows if r["task"] == task}
        kst, full = rows["keystone rows"], rows["full FT"]
        lines.append(
            verdict(
                f"Fine-tuning ({task}): keystone rows reach >= 90% of full FT's test gain with less drift",
                kst["gain_vs_full"] >= 0.9 and kst["drift"] < full["drift"],
                f"gain share {kst['gain_vs_full']:.2f} (acc {kst['test_acc']:.2f} vs "
                f"{full['test_acc']:.2f}), drift {kst['drift']:+.3f} vs {full['drift']:+.3f} nats",
            )
        )
        rnd = rows.get("random rows")
        if rnd is None:
            continue
        lines.append(
            verdict(
                f"Fine-tuning ({task}): keystone rows beat random rows of equal count",
                kst["test_acc"] > rnd["test_acc"],
                f"acc {kst['test_acc']:.2f} vs {rnd['test_acc']:.2f}, drift {kst['drift']:+.3f} vs "
                f"{rnd['drift']:+.3f}",
            )
        )
    lines += [f"greedy {g}" for g in info["greedy"]]
    return lines


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """Draw ``keystone_ablation.png`` in ``directory``; after a full run also ``keystone_finetune.png`` and
    ``keystone_front.png``.

    Returns ``{"ablation": path}``, plus ``"finetune"`` and ``"front"`` after a full run.
    """
    from benchmarks.keystone.plots import plot_ablation, plot_finetune, plot_front

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    files = {"ablation": plot_ablation(report.rows, directory / "keystone_ablation.png")}
    if report.config["grid"]:  # a quick run has no Part B
        files["finetune"] = plot_finetune(report.rows, directory / "keystone_finetune.png")
        files["front"] = plot_front(report.config["grid"], directory / "keystone_front.png")
    return files
