"""``hf-ext bench infoflow_uq``: information-flow confidence vs probability and attention baselines on
Gemma-3-270M base, answering synthetic retrieval questions (fictional people, real cities).

Correctness is known (greedy first answer token == first token of " City") and so is each context token's
relevance (the gold fact). Every score is ranked by AUROC against correctness, overall and within context
size k (the number of facts drives both accuracy and scores), with PRR and a bootstrap 95% interval of the
within-k AUROC difference against max-prob.
"""

from __future__ import annotations

import math
import resource
import statistics
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks.harness import (
    BenchReport,
    Headline,
    Timer,
    interleaved_times,
    pinned_threads,
    progress,
    verdict,
)
from benchmarks.infoflow_uq import evaluation as E
from hf_ext.infoflow_uq.core import rank_average
from hf_ext.infoflow_uq.data import encode_rag_example, make_rag_examples
from hf_ext.infoflow_uq.scorer import InformationFlowScorer

KS = (4, 6, 8, 10, 12, 14, 16)
# data set name -> make_rag_examples(distractors=...)
DATASETS = {"fictional facts": "names", "distractor passages": "passages"}
SETTINGS = [{"model": "Gemma-3-270M base", "data": name, "num_facts": list(KS)} for name in DATASETS]
FULL: dict[str, Any] = {
    "n": 480,
    "batch": 8,
    "timing_rounds": 5,
    "resamples": 1000,
    "sets": tuple(DATASETS),
    "threads": 2,
}
QUICK: dict[str, Any] = {
    "n": 28,
    "batch": 7,
    "timing_rounds": 0,
    "resamples": 100,  # the quick intervals are indicative only; fewer draws keep it within its time
    "sets": ("fictional facts",),
    "threads": 1,
}
HEADLINE = "grounded rank avg conc+sim value-norm"
ORACLE = "gold-span attention mass (oracle)"
# system, score column, is_baseline, relevance source
SYSTEMS = (
    ("max-prob", "max_prob", True, "none"),
    ("-entropy", "neg_entropy", True, "none"),
    ("claim-conditioned probability", "ccp", True, "none"),
    ("context attention mass", "ctx_attention", True, "none"),
    ("context value-norm mass", "ctx_share_value-norm", True, "none"),
    (ORACLE, "gold_attention", True, "gold"),
    (HEADLINE, "rank_avg_mass", False, "gold"),
    ("grounded rank avg conc+sim attention", "rank_avg_mass_attention", False, "gold"),
    ("grounded rank avg top-5 conc+sim value-norm", "rank_avg_mass_top", False, "gold"),
    ("rank avg grounded sim+context mass value-norm", "rank_avg_sim_ctx_mass", False, "gold"),
    ("grounded simulatability value-norm", "msim_value-norm", False, "gold"),
    ("grounded concentration value-norm", "mconc_value-norm", False, "none"),
    ("gold flow mass value-norm", "flow_mass_value-norm", False, "gold"),
    ("grounded rank avg conc+lexical sim", "rank_avg_lexical_mass", False, "lexical"),
    ("rank avg conc+sim value-norm", "rank_avg", False, "gold"),
    ("simulatability value-norm", "sim_value-norm", False, "gold"),
    ("simulatability attention", "sim_attention", False, "gold"),
    ("simulatability rollout", "sim_rollout", False, "gold"),
    ("relevance mass value-norm", "sim_mass_value-norm", False, "gold"),
    ("simulatability value-norm, lexical", "sim_lexical_value-norm", False, "lexical"),
    ("concentration value-norm", "conc_value-norm", False, "none"),
    ("concentration attention", "conc_attention", False, "none"),
    ("concentration rollout", "conc_rollout", False, "none"),
    ("logistic CV conc+sim value-norm", "logistic", False, "gold"),
)
LABEL_FREE_BASELINES = tuple(s for s, _, base, rel in SYSTEMS if base and rel == "none")


def _load() -> tuple[Any, Any]:
    from hf_ext.assets import gemma3_270m

    model, tok = gemma3_270m()
    model.set_attn_implementation("eager")
    return model, tok


def _columns(rows: list[dict[str, float]], seed: int) -> dict[str, np.ndarray]:
    cols = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]}
    for k, v in cols.items():  # an undefined score ranks as least confident
        if np.isnan(v).any():
            cols[k] = np.where(np.isnan(v), np.nanmin(v) - 1 if np.isfinite(v).any() else 0.0, v)
    t = {k: torch.from_numpy(v) for k, v in cols.items()}
    cols["rank_avg"] = rank_average(t["conc_value-norm"], t["sim_value-norm"]).numpy()
    cols["rank_avg_mass"] = rank_average(t["mconc_value-norm"], t["msim_value-norm"]).numpy()
    cols["rank_avg_mass_attention"] = rank_average(t["mconc_attention"], t["msim_attention"]).numpy()
    cols["rank_avg_mass_top"] = rank_average(t["mtop_value-norm"], t["msim_value-norm"]).numpy()
    cols["rank_avg_sim_ctx_mass"] = rank_average(t["msim_value-norm"], t["ctx_share_value-norm"]).numpy()
    cols["rank_avg_lexical_mass"] = rank_average(t["mconc_value-norm"], t["msim_lexical_value-norm"]).numpy()
    correct = cols["correct"]
    if 0 < correct.sum() < len(correct) and min(correct.sum(), len(correct) - correct.sum()) >= 5:
        features = np.column_stack([cols["conc_value-norm"], cols["sim_value-norm"]])
        cols["logistic"] = E.cross_fitted_logistic(features, correct, seed)
    else:
        cols["logistic"] = np.full(len(correct), np.nan)
    return cols


def _timing(model: Any, scorer: InformationFlowScorer, enc: dict[str, Any], rounds: int) -> dict[str, float]:
    ids = enc["input_ids"][None]

    def plain() -> None:
        model.set_attn_implementation("sdpa")
        try:
            with torch.no_grad():
                model(ids, logits_to_keep=1)
        finally:
            model.set_attn_implementation("eager")

    def traced() -> None:
        scorer.trace(enc["input_ids"], enc["context_mask"], enc["answer_positions"])

    times = interleaved_times({"sdpa": plain, "trace": traced}, repeats=rounds, warmup=1)
    return {name: statistics.median(t) for name, t in times.items()}


def _worked(trace: Any, tokenizer: Any, enc: dict[str, Any], example: Any) -> dict[str, Any]:
    """What the docs figure draws for one example: shares per layer and the traces over context tokens."""
    ids = enc["input_ids"]
    out: dict[str, Any] = {
        "tokens": tokenizer.convert_ids_to_tokens(ids[enc["context_mask"]].tolist()),
        "gold": enc["relevance"].tolist(),
        "question": example.question,
        "k": example.num_facts,
        "correct": trace.predicted_token == enc["answer_token"],
        "layers": list(trace.layers),
    }
    for name, rule in E.RULES.items():
        raw = trace.raw[rule]
        total = raw.sum(dim=-1)
        out[name] = {
            "trace": trace.traces[rule].tolist(),
            "bos_share": (raw[:, 0] / total).tolist(),
            "context_share": trace.context_mass[rule].tolist(),
        }
    return out


def _run(size: dict[str, Any], seed: int, quick: bool) -> BenchReport:
    with Timer() as total, pinned_threads(size["threads"]):
        with Timer() as load:
            model, tok = _load()
        scorer = InformationFlowScorer(model, contribution=tuple(E.RULES.values()))
        cols: dict[str, dict[str, np.ndarray]] = {}
        scoring: dict[str, float] = {}
        worked: dict[str, Any] = {}
        examples: list[Any] = []
        for data in size["sets"]:
            examples = make_rag_examples(size["n"], num_facts=KS, distractors=DATASETS[data], seed=seed)
            with Timer() as t:
                rows: list[dict[str, float]] = []
                traces: list[Any] = []
                chunk = size["batch"] * 4
                for start in progress(
                    range(0, len(examples), chunk), desc=f"infoflow_uq {data}", unit="chunk"
                ):
                    r, tr = E.score_examples(scorer, tok, examples[start : start + chunk], size["batch"])
                    rows += r
                    traces += tr
            scoring[data] = t.seconds
            cols[data] = _columns(rows, seed)
            if not worked:
                i = next(i for i, e in enumerate(examples) if e.num_facts == 6)
                worked = _worked(traces[i], tok, encode_rag_example(examples[i], tok), examples[i])
        cost: dict[str, float] = {}
        if size["timing_rounds"]:
            mid = next(e for e in examples if e.num_facts == 10)
            cost = _timing(model, scorer, encode_rag_example(mid, tok), size["timing_rounds"])
    return _report(cols, cost, worked, size, seed, quick, load.seconds, scoring, total.seconds)


def _table(data: str, cols: dict[str, np.ndarray], cost: dict[str, float], seed: int, resamples: int) -> list:
    correct, k = cols["correct"], cols["k"]
    table: list[dict[str, Any]] = []
    for system, key, is_baseline, relevance in SYSTEMS:
        score = cols[key]
        if np.isnan(score).all():
            continue
        d, lo, hi = E.diff_ci(score, cols["max_prob"], correct, k, seed, resamples)
        prob_only = key in ("max_prob", "neg_entropy", "ccp")
        table.append(
            {
                "data": data,
                "system": system,
                "is_baseline": is_baseline,
                "relevance": relevance,
                "auroc": E.auroc(score, correct),
                "within_k_auroc": E.within_auroc(score, correct, k),
                "prr": _prr(score, correct),
                "d_vs_maxprob": d if key != "max_prob" else math.nan,
                "d_lo": lo if key != "max_prob" else math.nan,
                "d_hi": hi if key != "max_prob" else math.nan,
                "s_per_example": cost.get("sdpa" if prob_only else "trace", math.nan),
            }
        )
    return table


def _report(
    cols: dict[str, dict[str, np.ndarray]],
    cost: dict[str, float],
    worked: dict[str, Any],
    size: dict[str, Any],
    seed: int,
    quick: bool,
    load_s: float,
    scoring_s: dict[str, float],
    total_s: float,
) -> BenchReport:
    table = [row for data in cols for row in _table(data, cols[data], cost, seed, size["resamples"])]
    first = size["sets"][0]
    headline = Headline.from_rows(
        table, "within_k_auroc", higher_is_better=True, method_system=HEADLINE, where={"data": first}
    )
    acc = {
        data: {int(v): float(c["correct"][c["k"] == v].mean()) for v in np.unique(c["k"])}
        for data, c in cols.items()
    }
    context_share = {n: float(cols[first][f"ctx_share_{n}"].mean()) for n in E.RULES}
    n_total = size["n"] * len(cols)
    config: dict[str, Any] = {
        "model": "Gemma-3-270M base (fp32, eager attention)",
        "n": size["n"],
        "data_sets": list(cols),
        "batch": size["batch"],
        "bootstrap_resamples": size["resamples"],
        "num_facts": list(KS),
        "threads": size["threads"],
        "accuracy": {data: float(c["correct"].mean()) for data, c in cols.items()},
        "accuracy_per_k": acc,
        "context_share": context_share,
        "seconds": {"load": load_s, "scoring": scoring_s, "total": total_s},
        "s_per_example_scoring": sum(scoring_s.values()) / n_total,
        "cost": cost,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worked_example": worked,
    }
    notes = [
        f"Gemma-3-270M base, {size['n']} questions per set (k in {list(KS)} facts, seed {seed}); "
        + "; ".join(
            f"{data}: accuracy {c['correct'].mean():.2f} ("
            + ", ".join(f"k={a}: {b:.2f}" for a, b in acc[data].items())
            + ")"
            for data, c in cols.items()
        )
        + ".",
        "Scores are information-flow style reconstructions (the paper's exact definitions are not public); "
        "'gold' relevance = the gold fact's tokens (oracle labels), 'lexical' = context tokens sharing an id "
        "with the asked name; 'grounded' = each layer weighted by its share on the context before "
        "renormalising.",
        "Sinks: before renormalising onto the context, the answer row's share on the context was "
        + ", ".join(f"{n} {v:.2f}" for n, v in context_share.items())
        + f" (layer mean, {first}); the rest sat on BOS, the prompt and the question.",
    ]
    met = 0
    for data in cols:
        lines, ok = _comparison_notes(data, table, cols[data], seed, size["resamples"])
        notes += lines
        met += ok
    notes.append(
        verdict(
            "Target: on >= 2 RAG sets the headline beats the best label-free baseline (95% CI clear of 0) "
            "and is within 0.02 of the oracle or above it",
            met >= 2,
            f"met on {met} of {len(cols)} set(s)",
        )
    )
    if cost:
        notes.append(
            f"Cost ({size['threads']} threads, median of {size['timing_rounds']} interleaved rounds, k=10 "
            f"prompt): max-prob alone (sdpa forward) {cost['sdpa']:.3f} s, eager forward + three "
            f"traced rules {cost['trace']:.3f} s ({cost['trace'] / cost['sdpa']:.2f}x); peak RSS "
            f"{config['peak_rss_mb']:.0f} MB; run {total_s:.0f} s (load {load_s:.0f} s)."
        )
    if quick:
        notes.append(
            f"--quick: {size['n']} of the full run's {FULL['n']} questions, the {first} set only, no timing "
            f"rounds, {size['resamples']} bootstrap draws; a k with one class only drops out of the within-k "
            "AUROC; the intervals are wide, not the comparison."
        )
    what = (
        f"Gemma-3-270M, {size['n']} RAG questions x {len(cols)} set(s), k=4..16 "
        f"(full: {FULL['n']} x {len(FULL['sets'])} sets + timing)"
    )
    settings = [s for s in SETTINGS if s["data"] in cols]
    return BenchReport(
        rows=table, headline=headline, config=config, what=what, notes=notes, settings=settings
    )


def _comparison_notes(
    data: str, table: list[dict[str, Any]], cols: dict[str, np.ndarray], seed: int, resamples: int
) -> tuple[list[str], bool]:
    """The headline's within-k difference against the best label-free baseline and against the oracle on
    one set (bootstrap intervals of ``resamples`` paired draws), and whether the target is met there."""
    correct, k = cols["correct"], cols["k"]
    key_of = {s: key for s, key, _, _ in SYSTEMS}
    rows = {r["system"]: r for r in table if r["data"] == data}
    bases = [rows[s] for s in LABEL_FREE_BASELINES if s in rows and math.isfinite(rows[s]["within_k_auroc"])]
    mine = rows[HEADLINE]["within_k_auroc"]
    if not bases or not math.isfinite(mine):
        return [f"{data}: no finite within-k AUROC to compare at this size."], False
    base = max(bases, key=lambda r: r["within_k_auroc"])["system"]
    d, lo, hi = E.diff_ci(cols[key_of[HEADLINE]], cols[key_of[base]], correct, k, seed, resamples)
    od, olo, ohi = E.diff_ci(cols[key_of[HEADLINE]], cols[key_of[ORACLE]], correct, k, seed, resamples)
    ok = lo > 0 and od >= -0.02
    return [
        f"{data}: {HEADLINE} {mine:.3f} within-k AUROC vs best label-free baseline {base} "
        f"{rows[base]['within_k_auroc']:.3f}: {d:+.3f} [95% CI {lo:+.3f}, {hi:+.3f}]; vs the oracle "
        f"{rows[ORACLE]['within_k_auroc']:.3f}: {od:+.3f} [95% CI {olo:+.3f}, {ohi:+.3f}].",
        verdict(
            f"Target on {data}", ok, "CI vs best label-free baseline clear of 0 and within 0.02 of oracle"
        ),
    ], ok


def _row(table: list[dict[str, Any]], system: str) -> dict[str, Any]:
    return next(r for r in table if r["system"] == system)


def _prr(score: np.ndarray, correct: np.ndarray) -> float:
    import warnings

    from hf_ext.metrics.functional.infoflow import prediction_rejection_ratio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(prediction_rejection_ratio(torch.from_numpy(score), torch.from_numpy(correct)))


def grid() -> list[dict[str, Any]]:
    """The full run's settings: one model on two question sets, each mixing every context size k."""
    return [dict(s) for s in SETTINGS]


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Score 480 questions of each set (``quick``: 28 of the fictional-facts set, 4 per k, no timing
    rounds) with every rule and baseline on Gemma-3-270M."""
    return _run(QUICK if quick else FULL, seed, quick)


def plot(report: BenchReport, directory: Path) -> dict[str, str]:
    """The worked example's flow: share on BOS and on the context per layer for each rule, and the
    value-norm and rollout traces over the context tokens (gold fact marked).

    Returns ``{"flow": path}`` of ``infoflow_uq_flow.png`` in ``directory``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    w = report.config["worked_example"]
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fig = plt.figure(figsize=(12, 8))
    grid = fig.add_gridspec(3, 2, width_ratios=(1, 2.6), height_ratios=(1, 1, 1))
    ax = fig.add_subplot(grid[:, 0])
    for i, name in enumerate(E.RULES):
        color = plt.get_cmap("tab10")(i)
        ax.plot(w["layers"], w[name]["bos_share"], "--", color=color, label=f"{name}: on BOS")
        ax.plot(w["layers"], w[name]["context_share"], "-", color=color, label=f"{name}: on context")
    ax.set_xlabel("layer")
    ax.set_ylabel("share of the answer row (before renormalising)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    ax.set_title("attention sinks", fontsize=9)
    gold = np.array(w["gold"]) > 0
    for row, name in enumerate(E.RULES):
        hm = fig.add_subplot(grid[row, 1])
        image = np.nan_to_num(np.array(w[name]["trace"]))
        hm.imshow(image, aspect="auto", cmap="viridis", interpolation="nearest")
        hm.set_yticks(range(0, len(w["layers"]), 3))
        hm.set_ylabel("layer", fontsize=8)
        hm.set_title(f"{name} trace over the context (renormalised)", fontsize=9)
        hm.set_xticks(range(len(w["tokens"])))
        hm.set_xticklabels([t.replace("\u2581", "") for t in w["tokens"]], rotation=90, fontsize=5)
        for j in np.flatnonzero(gold):
            hm.get_xticklabels()[j].set_color("red")
        if row < len(E.RULES) - 1:
            hm.set_xticklabels([])
    fig.suptitle(
        f"Gemma-3-270M, k={w['k']} facts, question about {w['question']} "
        f"(gold fact in red, answer {'correct' if w['correct'] else 'wrong'})",
        fontsize=10,
    )
    fig.tight_layout()
    path = directory / "infoflow_uq_flow.png"
    fig.savefig(path, dpi=130)
    plt.close(fig)
    return {"flow": str(path)}
