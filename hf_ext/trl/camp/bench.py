"""``hf-ext bench camp``: DPO vs CAMP (and baselines) from one SFT checkpoint on the knowledge-boundary task.

Every arm starts from the same in-memory SFT checkpoint of a 2-layer Llama (hidden 64, word vocabulary of
about 200) with the same optimiser, batch, epochs and data order; only the loss differs. All data are
synthetic (:mod:`hf_ext.trl.camp._bench_task`). Arms: ``dpo`` (stock ``trl.DPOTrainer``), ``modpo_like``
(trade-off margin on every pair, no gating), ``pd_filter`` (DPO without the conflict pairs), ``camp_margin``,
``camp_weight``, and the truth-prioritised variants (``w_T, w_H = 0.7, 0.3``) of ``modpo_like`` and
``camp_margin``.
"""

from __future__ import annotations

import copy
import logging
import resource
import statistics
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from hf_ext.benchmarking import BenchReport, Headline, Timer, mean_se, pinned_threads, seeded, verdict
from hf_ext.trl.camp import _bench_task as T

logger = logging.getLogger(__name__)

BETA = 0.1
TRUTH_WEIGHTS = (0.7, 0.3)
FIGURES = (
    "known_acc",
    "over_refusal",
    "fabrication",
    "unknown_refusal",
    "margin_consistent",
    "margin_conflict",
)

# arm -> (trainer, CAMPConfig overrides, drop conflict pairs?)
ARMS: dict[str, tuple[str, dict[str, Any], bool]] = {
    "dpo": ("dpo", {}, False),
    "modpo_like": ("camp", {"conflict_key": "all_conflict"}, False),
    "pd_filter": ("dpo", {}, True),
    "camp_margin": ("camp", {}, False),
    "camp_weight": ("camp", {"camp_mode": "weight"}, False),
    "modpo_like_truth": (
        "camp",
        {"conflict_key": "all_conflict", "camp_weights": list(TRUTH_WEIGHTS)},
        False,
    ),
    "camp_margin_truth": ("camp", {"camp_weights": list(TRUTH_WEIGHTS)}, False),
}
BASELINES = ("dpo", "modpo_like", "pd_filter", "modpo_like_truth")


@contextmanager
def _quiet() -> Iterator[None]:
    """Silence the datasets progress bars of the trainers' preprocessing for the duration of the benchmark."""
    import datasets

    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def _train_arm(
    arm: str, sft_model: Any, tok: Any, task: T.Task, rows: list[dict], seed: int, epochs: int, lr: float
) -> dict:
    """Train one arm from a copy of the SFT model; its answer rates, implicit margins and timing."""
    from datasets import Dataset
    from transformers import PrinterCallback
    from trl import DPOConfig, DPOTrainer

    from hf_ext.trl.camp.config import CAMPConfig
    from hf_ext.trl.camp.trainer import CAMPTrainer

    kind, overrides, drop_conflict = ARMS[arm]
    data = [dict(r, all_conflict=1.0) for r in rows if not (drop_conflict and r["kind"] == "conflict")]
    policy, ref = copy.deepcopy(sft_model), copy.deepcopy(sft_model)
    with tempfile.TemporaryDirectory() as out:
        common: dict[str, Any] = {
            **dict(output_dir=out, num_train_epochs=epochs, per_device_train_batch_size=8, learning_rate=lr),
            **dict(beta=BETA, seed=seed, data_seed=seed, use_cpu=True, bf16=False, report_to=[]),
            **dict(gradient_checkpointing=False, save_strategy="no", logging_strategy="no"),
            **dict(disable_tqdm=True, dataloader_num_workers=0),
        }
        dataset = Dataset.from_list(data)
        if kind == "dpo":
            args: Any = DPOConfig(**common)
            trainer: Any = DPOTrainer(
                policy, ref_model=ref, args=args, train_dataset=dataset, processing_class=tok
            )
        else:
            with warnings.catch_warnings():  # modpo_like is all-conflict by construction
                warnings.filterwarnings("ignore", message="conflict fraction is 1")
                args = CAMPConfig(**common, **overrides)
                trainer = CAMPTrainer(
                    policy, ref_model=ref, args=args, train_dataset=dataset, processing_class=tok
                )
        trainer.remove_callback(PrinterCallback)  # it prints the train metrics to stdout
        out_train = trainer.train()
    steps = out_train.global_step
    result = {**T.answer_rates(policy, tok, task), **T.implicit_margins(policy, ref, tok, rows, BETA)}
    result.update(steps=steps, total_s=out_train.metrics["train_runtime"])
    result["s_per_step"] = result["total_s"] / max(steps, 1)
    return result


def _seed_run(
    seed: int, arms: tuple[str, ...], size: dict[str, Any]
) -> tuple[dict[str, dict], dict[str, float]]:
    from hf_ext.testing import tiny_llama, word_tokenizer

    task = T.make_task(size["n_known"], size["n_unknown"])
    tok = word_tokenizer(task.words)
    with seeded(seed):
        shape = dict(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2)
        model = tiny_llama(seed, vocab_size=len(tok), max_position_embeddings=16, **shape)
        with Timer() as t_sft:
            sft_acc = T.sft(model, tok, task, steps=size["sft_steps"], lr=3e-3, seed=seed)
        rows = T.preference_rows(task, seed)
        sft_rates = T.answer_rates(model, tok, task)
        results = {
            arm: _train_arm(arm, model, tok, task, rows, seed, size["epochs"], size["lr"]) for arm in arms
        }
    info = {
        "sft_known_acc": sft_acc,
        "sft_fabrication": sft_rates["fabrication"],
        "sft_s": t_sft.seconds,
        "n_pairs": len(rows),
        "conflict_frac": sum(r["kind"] == "conflict" for r in rows) / len(rows),
    }
    return results, info


def _ratio(consistent: float, conflict: float) -> float:
    return consistent / conflict if conflict > 0 else float("nan")


def _weights_label(arm: str) -> str:
    """(w_T, w_H) of the arms whose loss uses them; ``-`` for DPO, the filter and weight mode."""
    kind, overrides, _ = ARMS[arm]
    if kind == "dpo" or overrides.get("camp_mode") == "weight":
        return "-"
    return "/".join(f"{w:g}" for w in overrides.get("camp_weights", (0.5, 0.5)))


def _rows(per_seed: list[dict[str, dict]], arms: tuple[str, ...]) -> list[dict[str, Any]]:
    rows = []
    dpo_step = statistics.fmean(s["dpo"]["s_per_step"] for s in per_seed)
    for arm in arms:
        runs = [s[arm] for s in per_seed]
        row: dict[str, Any] = {
            "system": arm,
            "is_baseline": arm in BASELINES,
            "weights": _weights_label(arm),
        }
        for fig in FIGURES:
            row[fig], row[f"{fig}_se"], _ = mean_se(r[fig] for r in runs)
        row["margin_ratio"] = _ratio(row["margin_consistent"], row["margin_conflict"])
        row["margin_diff"] = row["margin_consistent"] - row["margin_conflict"]
        row["steps"] = runs[0]["steps"]
        row["s_per_step"] = statistics.fmean(r["s_per_step"] for r in runs)
        row["step_time_vs_dpo"] = row["s_per_step"] / dpo_step
        row["total_s"] = statistics.fmean(r["total_s"] for r in runs)
        rows.append(row)
    dpo = next(r for r in rows if r["system"] == "dpo")
    for row in rows:
        row["margin_ratio_vs_dpo"] = (
            row["margin_ratio"] / dpo["margin_ratio"] if dpo["margin_ratio"] > 0 else float("nan")
        )
        row["fabrication_vs_dpo"] = row["fabrication"] - dpo["fabrication"]
        row["known_acc_vs_dpo"] = row["known_acc"] - dpo["known_acc"]
    return rows


def _verdicts(rows: list[dict[str, Any]], per_seed: list[dict[str, dict]]) -> list[str]:
    by = {r["system"]: r for r in rows}
    dpo = by["dpo"]
    notes = []
    for arm in [a for a in ("camp_margin", "camp_margin_truth", "camp_weight") if a in by]:
        r = by[arm]
        if r["margin_conflict"] > 0 and dpo["margin_conflict"] > 0:
            met = r["margin_ratio"] >= 2 * dpo["margin_ratio"]
            how = f"ratio {r['margin_ratio']:.2f} vs DPO {dpo['margin_ratio']:.2f} (need >= 2x)"
        else:
            met = r["margin_diff"] > dpo["margin_diff"]
            how = (
                f"a conflict mean is <= 0, so differences: {r['margin_diff']:.3f} "
                f"vs DPO {dpo['margin_diff']:.3f}"
            )
        behaviour = (
            r["fabrication"] <= dpo["fabrication"]
            and r["known_acc"] >= dpo["known_acc"] - 0.02
            and r["over_refusal"] <= dpo["over_refusal"] + 0.02
        )
        fewer_fab = sum(s[arm]["fabrication"] <= s["dpo"]["fabrication"] for s in per_seed)
        notes.append(verdict(f"{arm}: mechanism target", met, how))
        detail = (
            f"seed means: fabrication {r['fabrication']:.3f} vs DPO {dpo['fabrication']:.3f}, "
            f"lower or equal in {fewer_fab}/{len(per_seed)} seeds; "
            f"known acc {r['known_acc']:.3f} vs {dpo['known_acc']:.3f}; "
            f"over-refusal {r['over_refusal']:.3f} vs {dpo['over_refusal']:.3f}; 2-point tolerance"
        )
        notes.append(verdict(f"{arm}: behaviour target", behaviour, detail))
    camp_arms = [a for a in ("camp_margin", "camp_margin_truth", "camp_weight") if a in by]
    best = min(camp_arms, key=lambda a: by[a]["fabrication"])
    line = (
        f"Fabrication on unknown questions: DPO {dpo['fabrication']:.3f}; the best CAMP arm ({best}) "
        f"lowers it by {100 * (dpo['fabrication'] - by[best]['fabrication']):.1f} points"
    )
    if "pd_filter" in by:
        drop = 100 * -by["pd_filter"]["fabrication_vs_dpo"]
        line += f", dropping the conflict pairs (pd_filter) by {drop:.1f} points"
    notes.append(line + ".")
    worst = max(camp_arms, key=lambda a: by[a]["step_time_vs_dpo"])
    overhead = 100 * (by[worst]["step_time_vs_dpo"] - 1)
    notes.append(
        f"Step-time overhead over DPO (expected <= 5%): at most {overhead:+.0f}% ({worst}); "
        f"{'within' if overhead <= 5 else 'above'} the expectation, on a noisy shared CPU."
    )
    if "modpo_like" in by and "camp_margin" in by:
        same = all(abs(by["modpo_like"][f] - by["camp_margin"][f]) < 1e-9 for f in FIGURES)
        if same:
            notes.append(
                "camp_margin equals modpo_like at w_T = w_H: on pairs with t, h >= 0 the consistent margin "
                "(|t|+|h|)/2 equals the trade-off 0.5t+0.5h, and conflict pairs get the trade-off in both, "
                "so gating only matters when the weights differ (the 0.7/0.3 rows)."
            )
    return notes


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Run the arms over seeds ``seed, seed+1, seed+2`` (``quick``: one seed, ``dpo`` vs ``camp_margin``)."""
    size = (
        dict(n_known=30, n_unknown=20, sft_steps=200, epochs=2, lr=5e-3)
        if quick
        else dict(n_known=60, n_unknown=40, sft_steps=300, epochs=3, lr=5e-3)
    )
    arms = ("dpo", "camp_margin") if quick else tuple(ARMS)
    seeds = [seed] if quick else [seed, seed + 1, seed + 2]
    per_seed, infos = [], []
    with _quiet(), pinned_threads(1):
        for s in seeds:
            results, info = _seed_run(s, arms, size)
            per_seed.append(results)
            infos.append(info)
    rows = _rows(per_seed, arms)
    pool = [r for r in rows if r["system"] in ("camp_margin", "dpo", "modpo_like", "pd_filter")]
    # compare ratios, or differences when a conflict-pair mean is <= 0 (a ratio is then undefined)
    figure = "margin_ratio" if all(r["margin_conflict"] > 0 for r in pool) else "margin_diff"
    headline = Headline.from_rows(pool, figure, higher_is_better=True, method_system="camp_margin")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    info = {k: statistics.fmean(i[k] for i in infos) for k in infos[0]}
    notes = [
        "All data synthetic: a word-level knowledge-boundary task (known vs unknown 'capital of' questions) "
        "on a config-built 2-layer Llama; no real model, no UltraFeedback. CAMP's loss is a reconstruction "
        "from the abstract.",
        f"SFT checkpoint: known accuracy {info['sft_known_acc']:.3f}, fabrication on unknown "
        f"{info['sft_fabrication']:.3f}; {info['n_pairs']:.0f} pairs, "
        f"{info['conflict_frac']:.1%} in conflict; seeds {seeds}; peak RSS {peak_mb:.0f} MB.",
        *_verdicts(rows, per_seed),
        f"Headline figure: {figure} (margin_ratio = mean consistent / mean conflict beta*delta, undefined "
        "when a conflict mean is <= 0; then margin_diff = consistent - conflict).",
        "Rates are expected first-answer-token rates under temperature-1 sampling (probability mass of the "
        "right city, of idk, of any city), means over seeds (*_se: standard error over seeds). Margins are "
        "beta*delta on the training pairs after training. s_per_step = trl train_runtime / steps on a shared "
        "2-core CPU (noisy).",
    ]
    if quick:
        notes.append("--quick: one seed, dpo vs camp_margin, 50 entities, 2 epochs; not the full comparison.")
    config = {
        "seeds": seeds,
        "beta": BETA,
        "truth_weights": list(TRUTH_WEIGHTS),
        **size,
        "peak_rss_mb": peak_mb,
        **info,
    }
    what = f"{len(arms)} arms x {len(seeds)} seeds, {info['n_pairs']:.0f} synthetic pairs, tiny Llama"
    return BenchReport(rows=rows, headline=headline, config=config, what=what, notes=notes)
