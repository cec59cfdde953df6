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
# the one setting of the grid; a run varies only in its number of questions and timing rounds
SETTING = {"model": "Gemma-3-270M base", "data": "synthetic RAG", "num_facts": list(KS)}
FULL = {"n": 480, "batch": 8, "timing_rounds": 5, "resamples": 1000}
QUICK = {"n": 28, "batch": 7, "timing_rounds": 0, "resamples": 200}
HEADLINE = "simulatability value-norm"
# system, score column, is_baseline, relevance source
SYSTEMS = (
    ("max-prob", "max_prob", True, "none"),
    ("-entropy", "neg_entropy", True, "none"),
    ("context attention mass", "ctx_attention", True, "none"),
    ("gold-span attention mass", "gold_attention", True, "gold"),
    (HEADLINE, "sim_value-norm", False, "gold"),
    ("simulatability attention", "sim_attention", False, "gold"),
    ("simulatability rollout", "sim_rollout", False, "gold"),
    ("relevance mass value-norm", "sim_mass_value-norm", False, "gold"),
    ("simulatability value-norm, lexical", "sim_lexical_value-norm", False, "lexical"),
    ("concentration value-norm", "conc_value-norm", False, "none"),
    ("concentration attention", "conc_attention", False, "none"),
    ("concentration rollout", "conc_rollout", False, "none"),
    ("rank avg conc+sim value-norm", "rank_avg", False, "gold"),
    ("rank avg conc+lexical sim", "rank_avg_lexical", False, "lexical"),
    ("logistic CV conc+sim value-norm", "logistic", False, "gold"),
)
THREADS = 1


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
    conc, sim = torch.from_numpy(cols["conc_value-norm"]), torch.from_numpy(cols["sim_value-norm"])
    cols["rank_avg"] = rank_average(conc, sim).numpy()
    lexical = torch.from_numpy(cols["sim_lexical_value-norm"])
    cols["rank_avg_lexical"] = rank_average(conc, lexical).numpy()
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


def _run(size: dict[str, int], seed: int, quick: bool) -> BenchReport:
    with Timer() as total, pinned_threads(THREADS):
        with Timer() as load:
            model, tok = _load()
        scorer = InformationFlowScorer(model, contribution=tuple(E.RULES.values()))
        examples = make_rag_examples(size["n"], num_facts=KS, seed=seed)
        with Timer() as scoring:
            rows: list[dict[str, float]] = []
            traces: list[Any] = []
            chunk = size["batch"] * 4
            for start in progress(range(0, len(examples), chunk), desc="infoflow_uq", unit="chunk"):
                r, t = E.score_examples(scorer, tok, examples[start : start + chunk], size["batch"])
                rows += r
                traces += t
        worked_i = next(i for i, e in enumerate(examples) if e.num_facts == 6)
        worked = _worked(
            traces[worked_i], tok, encode_rag_example(examples[worked_i], tok), examples[worked_i]
        )
        cost: dict[str, float] = {}
        if size["timing_rounds"]:
            mid = next(e for e in examples if e.num_facts == 10)
            cost = _timing(model, scorer, encode_rag_example(mid, tok), size["timing_rounds"])
    cols = _columns(rows, seed)
    return _report(cols, cost, worked, size, seed, quick, load.seconds, scoring.seconds, total.seconds)


def _report(
    cols: dict[str, np.ndarray],
    cost: dict[str, float],
    worked: dict[str, Any],
    size: dict[str, int],
    seed: int,
    quick: bool,
    load_s: float,
    scoring_s: float,
    total_s: float,
) -> BenchReport:
    correct, k = cols["correct"], cols["k"]
    table: list[dict[str, Any]] = []
    for system, key, is_baseline, relevance in SYSTEMS:
        score = cols[key]
        if np.isnan(score).all():
            continue
        d, lo, hi = E.diff_ci(score, cols["max_prob"], correct, k, seed, size["resamples"])
        prob_only = key in ("max_prob", "neg_entropy")
        table.append(
            {
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
    headline = Headline.from_rows(table, "within_k_auroc", higher_is_better=True, method_system=HEADLINE)
    acc = {int(v): float(correct[k == v].mean()) for v in np.unique(k)}
    context_share = {n: float(cols[f"ctx_share_{n}"].mean()) for n in E.RULES}
    config: dict[str, Any] = {
        "model": "Gemma-3-270M base (fp32, eager attention)",
        "n": size["n"],
        "batch": size["batch"],
        "bootstrap_resamples": size["resamples"],
        "num_facts": list(KS),
        "threads": THREADS,
        "accuracy": float(correct.mean()),
        "accuracy_per_k": acc,
        "context_share": context_share,
        "seconds": {"load": load_s, "scoring": scoring_s, "total": total_s},
        "s_per_example_scoring": scoring_s / size["n"],
        "cost": cost,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worked_example": worked,
    }
    notes = [
        f"Gemma-3-270M base on {size['n']} synthetic RAG questions (k in {list(KS)} facts, seed {seed}); "
        f"accuracy {correct.mean():.2f} (" + ", ".join(f"k={a}: {b:.2f}" for a, b in acc.items()) + ").",
        "Scores are information-flow style reconstructions (the paper's exact definitions are not public); "
        "'gold' relevance = the gold fact's tokens (oracle labels), 'lexical' = context tokens sharing an id "
        "with the asked name.",
        "Sinks: before renormalising onto the context, the answer row's share on the context was "
        + ", ".join(f"{n} {v:.2f}" for n, v in context_share.items())
        + " (layer mean); the rest sat on BOS, the prompt and the question.",
        *_comparison_notes(table, cols, headline, seed, size["resamples"]),
        verdict(
            "Target: within-k AUROC(simulatability value-norm, gold) >= max-prob + 0.05",
            _row(table, HEADLINE)["d_vs_maxprob"] >= 0.05,
            f"{_row(table, HEADLINE)['d_vs_maxprob']:+.3f} [95% CI {_row(table, HEADLINE)['d_lo']:+.3f}, "
            f"{_row(table, HEADLINE)['d_hi']:+.3f}]",
        ),
    ]
    if cost:
        notes.append(
            f"Cost (one thread, median of {size['timing_rounds']} interleaved rounds, k=10 prompt): max-prob "
            f"alone (sdpa forward) {cost['sdpa']:.3f} s, eager forward + three traced rules "
            f"{cost['trace']:.3f} s ({cost['trace'] / cost['sdpa']:.2f}x); peak RSS "
            f"{config['peak_rss_mb']:.0f} MB; run {total_s:.0f} s (load {load_s:.0f} s)."
        )
    if quick:
        notes.append(
            f"--quick: {size['n']} of the full run's {FULL['n']} questions, no timing rounds, "
            f"{size['resamples']} bootstrap draws; a k with one class only drops out of the within-k AUROC; "
            "the intervals are wide, not the comparison."
        )
    what = f"Gemma-3-270M, {size['n']} RAG questions, k=4..16 (full: {FULL['n']} + timing)"
    return BenchReport(
        rows=table, headline=headline, config=config, what=what, notes=notes, settings=[dict(SETTING)]
    )


def _comparison_notes(
    table: list[dict[str, Any]], cols: dict[str, np.ndarray], headline: Headline, seed: int, resamples: int
) -> list[str]:
    """The headline's within-k difference against the best baseline and the best-variant target line
    (bootstrap intervals of ``resamples`` draws)."""
    if not headline.comparable:
        return [f"Headline {HEADLINE}: no baseline has a finite within-k AUROC at this size."]
    correct, k = cols["correct"], cols["k"]
    key_of = {s: key for s, key, _, _ in SYSTEMS}
    base = headline.best_baseline_system
    d, lo, hi = E.diff_ci(cols[key_of[HEADLINE]], cols[key_of[base]], correct, k, seed, resamples)
    flows = [r for r in table if not r["is_baseline"]]
    best = max(flows, key=lambda r: np.nan_to_num(r["within_k_auroc"], nan=-np.inf))
    bd, blo, bhi = E.diff_ci(cols[key_of[best["system"]]], cols[key_of[base]], correct, k, seed, resamples)
    return [
        f"Headline {HEADLINE} vs best baseline {base}: within-k AUROC {headline.method:.3f} vs "
        f"{headline.best_baseline:.3f}, difference {d:+.3f} [95% CI {lo:+.3f}, {hi:+.3f}].",
        verdict(
            "Target: best info-flow score beats the best baseline (within-k AUROC)",
            bd > 0,
            f"{best['system']} {best['within_k_auroc']:.3f} vs {base} {headline.best_baseline:.3f}, "
            f"{bd:+.3f} [95% CI {blo:+.3f}, {bhi:+.3f}]; best of {len(flows)} info-flow variants, so the "
            "margin is optimistic",
        ),
    ]


def _row(table: list[dict[str, Any]], system: str) -> dict[str, Any]:
    return next(r for r in table if r["system"] == system)


def _prr(score: np.ndarray, correct: np.ndarray) -> float:
    import warnings

    from hf_ext.metrics.functional.infoflow import prediction_rejection_ratio

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(prediction_rejection_ratio(torch.from_numpy(score), torch.from_numpy(correct)))


def grid() -> list[dict[str, Any]]:
    """The full run's settings: one model on one question set mixing every context size k."""
    return [dict(SETTING)]


def run(*, quick: bool = False, seed: int = 0) -> BenchReport:
    """Score 480 questions (28 with ``quick``, 4 per k, no timing rounds) with every rule and baseline on
    Gemma-3-270M."""
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
