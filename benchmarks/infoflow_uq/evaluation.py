"""Benchmark-only helpers: score every example with the tracer and rank the scores by AUROC with bootstrap
intervals (fast numpy rank AUROC for the resamples)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from benchmarks.harness import bootstrap_ci
from hf_ext.infoflow_uq import core
from hf_ext.infoflow_uq.data import RAGExample, encode_rag_example
from hf_ext.infoflow_uq.scorer import FlowTrace, InformationFlowScorer

RULES = {"value-norm": "attention_value_norm", "attention": "attention", "rollout": "rollout"}


def auroc(score: np.ndarray, correct: np.ndarray) -> float:
    """Mann-Whitney AUROC (ties count one half); NaN with one class."""
    pos = correct > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return math.nan
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    sorted_s = score[order]
    _, first, counts = np.unique(sorted_s, return_index=True, return_counts=True)
    avg = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(avg, counts)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def within_auroc(score: np.ndarray, correct: np.ndarray, groups: np.ndarray) -> float:
    """Group-size-weighted mean AUROC within groups that hold both classes."""
    total = weight = 0.0
    for g in np.unique(groups):
        sel = groups == g
        a = auroc(score[sel], correct[sel])
        if math.isfinite(a):
            total += a * sel.sum()
            weight += sel.sum()
    return total / weight if weight else math.nan


def diff_ci(
    a: np.ndarray, b: np.ndarray, correct: np.ndarray, groups: np.ndarray, seed: int, resamples: int = 1000
) -> tuple[float, float, float]:
    """Within-group AUROC(a) - AUROC(b) and its 95% percentile bootstrap interval over examples
    (``resamples`` draws)."""
    data = np.column_stack([a, b, correct, groups])

    def stat(x: np.ndarray) -> float:
        return within_auroc(x[:, 0], x[:, 2], x[:, 3]) - within_auroc(x[:, 1], x[:, 2], x[:, 3])

    return stat(data), *bootstrap_ci(data, stat, n_resamples=resamples, seed=seed)


def score_examples(
    scorer: InformationFlowScorer, tokenizer: Any, examples: Sequence[RAGExample], batch: int
) -> tuple[list[dict[str, float]], list[FlowTrace]]:
    """Every per-example score, traced in left-padded batches of examples with the same context size."""
    encs = [encode_rag_example(e, tokenizer) for e in examples]
    order = sorted(range(len(examples)), key=lambda i: (examples[i].num_facts, i))
    rows: list[dict[str, float]] = [{} for _ in examples]
    traces: list[Any] = [None] * len(examples)
    for start in range(0, len(order), batch):
        chunk = order[start : start + batch]
        width = max(len(encs[i]["input_ids"]) for i in chunk)
        ids = torch.full((len(chunk), width), tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        ctx = torch.zeros_like(ids, dtype=torch.bool)
        for j, i in enumerate(chunk):
            n = len(encs[i]["input_ids"])
            ids[j, width - n :], mask[j, width - n :] = encs[i]["input_ids"], 1
            ctx[j, width - n :] = encs[i]["context_mask"]
        for i, res in zip(chunk, scorer.trace_batch(ids, ctx, [[width - 1]] * len(chunk), mask)):
            rows[i] = _scores(res, encs[i], examples[i], tokenizer)
            traces[i] = res
    return rows, traces


def _scores(res: FlowTrace, enc: dict[str, Any], example: RAGExample, tokenizer: Any) -> dict[str, float]:
    gold = enc["relevance"]
    ids = enc["input_ids"]
    lexical = core.lexical_relevance(ids[enc["context_mask"]], ids[enc["question_mask"]])
    vn = "attention_value_norm"
    out = {
        "k": float(example.num_facts),
        "correct": float(res.predicted_token == enc["answer_token"]),
        "max_prob": res.max_probability,
        "neg_entropy": -res.entropy,
        "ccp": res.claim_conditioned_probability(tokenizer),
        "ctx_attention": res.attention_mass(),
        "gold_attention": res.attention_mass(gold),
        "sim_mass_value-norm": res.simulatability(gold, "relevance_mass", vn),
        "flow_mass_value-norm": res.simulatability(gold, "relevance_mass", vn, context_mass=True),
        "sim_lexical_value-norm": res.simulatability(lexical, "pearson", vn),
        "msim_lexical_value-norm": res.simulatability(lexical, "pearson", vn, context_mass=True),
    }
    for name, rule in RULES.items():
        out[f"conc_{name}"] = res.concentration("entropy", rule)
        out[f"sim_{name}"] = res.simulatability(gold, "pearson", rule)
        out[f"mconc_{name}"] = res.concentration("entropy", rule, context_mass=True)
        out[f"mtop_{name}"] = res.concentration("topk_mass", rule, context_mass=True)
        out[f"msim_{name}"] = res.simulatability(gold, "pearson", rule, context_mass=True)
        out[f"ctx_share_{name}"] = float(res.context_mass[rule].mean())
    return out


def cross_fitted_logistic(features: np.ndarray, correct: np.ndarray, seed: int) -> np.ndarray:
    """Out-of-fold probability of a logistic regression on standardised ``features`` (5 stratified folds)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    model = make_pipeline(StandardScaler(), LogisticRegression())
    return np.asarray(cross_val_predict(model, features, correct, cv=folds, method="predict_proba")[:, 1])
