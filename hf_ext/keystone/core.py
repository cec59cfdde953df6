"""Keystone-neuron discovery: cross-task activation probing, per-module normalisation, global top-k, IoU.

The paper's method section was unavailable. The statistic below is **[reconstructed]** (see the docs page):
``a[n, t]`` = mean over tokens of ``|output channel n|`` on the prompts of task ``t`` (fp32, BOS dropped);
``â[n, t] = a[n, t] / mean_{n' in module} a[n', t]`` (or median); ``s[n] = min_t â[n, t]`` (or mean);
keystone set = global top-k of ``s`` over the pool of projections.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from itertools import combinations
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hf_ext._validation import check_choice, check_float, check_int
from hf_ext.keystone.ablate import DEFAULT_TARGETS, ablate_neurons, base_causal_lm, pool_modules
from hf_ext.keystone.sets import KeystoneSet, model_fingerprint

logger = logging.getLogger(__name__)

NORMALIZE = ("mean", "median", "none")
AGGREGATE = ("min", "mean")
Prompts = Mapping[str, str | Sequence[str]]
Activations = dict[str, dict[str, torch.Tensor]]


def _task_prompts(prompts: Prompts) -> dict[str, list[str]]:
    if not isinstance(prompts, Mapping) or not prompts:
        raise ValueError(
            f"`prompts` must be a non-empty mapping task -> prompt(s), got {type(prompts).__name__}."
        )
    return {t: [p] if isinstance(p, str) else list(p) for t, p in prompts.items()}


def prompts_sha256(prompts: Prompts) -> str:
    """SHA-256 of the probe prompts (stored in the set, so a set can be traced to its prompts)."""
    return hashlib.sha256(json.dumps(_task_prompts(prompts), sort_keys=True).encode()).hexdigest()


@torch.no_grad()
def neuron_activations(
    model: nn.Module,
    tokenizer: Any,
    prompts: Prompts,
    *,
    target_modules: Sequence[str] = DEFAULT_TARGETS,
    skip_first_token: bool = True,
) -> Activations:
    """Probe: ``a[t][module]`` = mean over the tokens of task ``t`` of ``|output|``, fp32.

    Each vector has shape ``(out_features,)``.

    One forward pass per prompt (batch 1, no padding). With ``skip_first_token`` position 0 (BOS: attention
    sinks and massive activations sit there) is dropped, so every prompt needs at least 2 tokens.
    """
    tasks = _task_prompts(prompts)
    pool = pool_modules(model, target_modules)
    sums = {t: {n: torch.zeros(()) for n in pool} for t in tasks}
    start = 1 if skip_first_token else 0
    current: dict[str, torch.Tensor] = {}

    def recorder(name: str) -> Any:
        def hook(module: nn.Module, args: Any, out: torch.Tensor) -> None:
            current[name] = out[0, start:].float().abs().sum(0).cpu()

        return hook

    handles = [m.register_forward_hook(recorder(n)) for n, m in pool.items()]
    device = next(model.parameters()).device
    try:
        for task, texts in tasks.items():
            n_tokens = 0
            for text in texts:
                ids = tokenizer(text, return_tensors="pt")["input_ids"].to(device)
                if ids.shape[1] - start < 1:
                    raise ValueError(
                        f"`prompts[{task!r}]` has {ids.shape[1]} token(s) ({text!r}); with "
                        f"skip_first_token=True "
                        "every prompt needs at least 2 tokens."
                    )
                current.clear()
                model(input_ids=ids)
                if len(current) != len(pool):
                    unused = sorted(set(pool) - set(current))[:3]
                    raise ValueError(
                        f"`target_modules` include modules the forward pass never calls: {unused}."
                    )
                n_tokens += ids.shape[1] - start
                for n in pool:
                    sums[task][n] = sums[task][n] + current[n]
            for n in pool:
                sums[task][n] = sums[task][n] / n_tokens
    finally:
        for h in handles:
            h.remove()
    return sums


def _check_settings(normalize: str, aggregate: str) -> None:
    check_choice("normalize", normalize, NORMALIZE)
    check_choice("aggregate", aggregate, AGGREGATE)


def cross_task_scores(
    acts: Activations, *, normalize: str = "mean", aggregate: str = "min"
) -> dict[str, torch.Tensor]:
    """Cross-task score ``s[module]`` (shape ``(out_features,)``) from activations ``acts[task][module]``.

    ``normalize``: ``"mean"`` divides each task's module vector by its mean, ``"median"`` by its median,
    ``"none"`` keeps raw magnitudes (documented as broken: it picks early q_proj channels that do not collapse
    the model). ``aggregate``: ``"min"`` over tasks (consistently high) or ``"mean"``.

    Example:
        >>> acts = {"a": {"m": torch.tensor([1.0, 3.0])}, "b": {"m": torch.tensor([2.0, 2.0])}}
        >>> cross_task_scores(acts)["m"]
        tensor([0.5000, 1.0000])
    """
    _check_settings(normalize, aggregate)
    if not acts:
        raise ValueError("`acts` is empty: probe at least one task.")
    modules = next(iter(acts.values())).keys()
    scores = {}
    for name in modules:
        per_task = []
        for task_acts in acts.values():
            a = task_acts[name].float()
            if normalize != "none":
                ref = a.mean() if normalize == "mean" else a.median()
                a = a / ref.clamp_min(torch.finfo(torch.float32).tiny)
            per_task.append(a)
        stacked = torch.stack(per_task)
        scores[name] = stacked.min(0).values if aggregate == "min" else stacked.mean(0)
    return scores


def _resolve_k(k: int | float, pool_size: int) -> int:
    """``k`` as a neuron count: an int in ``[1, pool_size]`` or a float fraction of the pool in ``(0, 1)``."""
    if isinstance(k, float):
        k = check_float(
            "k", k, low=0, high=1, low_open=True, high_open=True, hint="A float is a pool fraction."
        )
        return max(1, round(k * pool_size))
    return check_int("k", k, low=1, high=pool_size, hint=f"The pool has {pool_size} neurons.")


def top_k_set(
    model: nn.Module,
    scores: Mapping[str, torch.Tensor],
    k: int | float,
    *,
    settings: Mapping[str, Any] | None = None,
    prompts_hash: str = "",
) -> KeystoneSet:
    """The global top-``k`` neurons of ``scores`` (ranked across modules) as a :class:`KeystoneSet`.

    The set is bound to ``model`` (its fingerprint). ``k`` is an int or a fraction of the pool
    (``0.0002`` = 0.02%).
    """
    names = list(scores)
    flat = torch.cat([scores[n].flatten() for n in names])
    kk = _resolve_k(k, flat.numel())
    values, order = torch.topk(flat, kk)
    bounds = torch.tensor([0] + [scores[n].numel() for n in names]).cumsum(0)
    idx: dict[str, list[int]] = {}
    sc: dict[str, list[float]] = {}
    for v, f in zip(values.tolist(), order.tolist()):
        j = int(torch.searchsorted(bounds, f, right=True)) - 1
        idx.setdefault(names[j], []).append(f - int(bounds[j]))
        sc.setdefault(names[j], []).append(v)
    lm = base_causal_lm(model)
    meta = {**(settings or {}), "k": kk, "pool_size": flat.numel()}
    return KeystoneSet(
        idx, sc, getattr(lm.config, "_name_or_path", ""), model_fingerprint(lm), meta, prompts_hash
    )


def find_keystone_neurons(
    model: nn.Module,
    tokenizer: Any,
    prompts: Prompts,
    *,
    target_modules: Sequence[str] = DEFAULT_TARGETS,
    k: int | float = 30,
    normalize: str = "mean",
    aggregate: str = "min",
    skip_first_token: bool = True,
) -> KeystoneSet:
    """Find the keystone neurons of a causal LM from a few prompts, one (or a few) per capability dimension.

    [paper] Neurons strongly activated across tasks of several capability dimensions; four prompts suffice.
    [reconstructed] A neuron is one output channel (weight row) of a linear projection; the pool defaults to
    q, k, v, o, gate, up (down_proj excluded, which matches Llama-3.1-8B's 1,245,184 count); the statistic is
    the per-module-normalised mean |activation| (BOS dropped), aggregated by the minimum over tasks, ranked
    globally.

    Args:
        model: Any transformers causal LM (Llama, Qwen2, Gemma3...) whose targets are ``nn.Linear``.
        tokenizer: Its tokenizer (called as ``tokenizer(text, return_tensors="pt")``).
        prompts: Task name -> prompt or list of prompts; at least 2 tasks (cross-task scoring).
        target_modules: Last name components of the projections in the pool, defaults to q/k/v/o/gate/up.
        k: Set size, an int or a fraction of the pool, defaults to 30.
        normalize: ``"mean"`` (default), ``"median"`` or ``"none"`` (raw magnitudes; does not collapse
            models).
        aggregate: ``"min"`` (default) or ``"mean"`` over tasks.
        skip_first_token: Drop position 0 of every prompt, defaults to ``True``.

    Returns:
        A :class:`KeystoneSet` holding the scores, the settings, the prompts' hash and the model fingerprint.

    Raises:
        ValueError: fewer than 2 tasks, bad ``k`` / ``normalize`` / ``aggregate``, a target absent or an
            embedding / LM head, a prompt shorter than 2 tokens with ``skip_first_token``.
        TypeError: a targeted module is not ``nn.Linear``.

    Example:
        >>> from hf_ext.testing import tiny_llama, word_tokenizer
        >>> tok = word_tokenizer()
        >>> prompts = {"a": "the city of paris", "b": "what is true"}
        >>> ks = find_keystone_neurons(tiny_llama(vocab_size=len(tok)), tok, prompts, k=3)
        >>> len(ks), ks.settings["aggregate"]
        (3, 'min')
    """
    tasks = _task_prompts(prompts)
    if len(tasks) < 2:
        raise ValueError(
            f"`prompts` has {len(tasks)} task(s) ({list(tasks)}); cross-task scoring needs at least 2 "
            "(the paper uses one prompt per capability dimension, e.g. knowledge, math, code, reasoning)."
        )
    _check_settings(normalize, aggregate)
    acts = neuron_activations(
        model, tokenizer, tasks, target_modules=target_modules, skip_first_token=skip_first_token
    )
    settings = {
        "target_modules": list(target_modules),
        "normalize": normalize,
        "aggregate": aggregate,
        "skip_first_token": skip_first_token,
        "tasks": list(tasks),
    }
    scores = cross_task_scores(acts, normalize=normalize, aggregate=aggregate)
    return top_k_set(model, scores, k, settings=settings, prompts_hash=prompts_sha256(tasks))


@torch.no_grad()
def text_nll(model: nn.Module, tokenizer: Any, texts: Sequence[str], *, max_length: int = 256) -> list[float]:
    """Mean next-token negative log-likelihood (nats/token) of each text; right-padded batch, fp32 loss."""
    if not texts:
        raise ValueError("`texts` is empty.")
    device = next(model.parameters()).device
    enc = tokenizer(
        list(texts),
        return_tensors="pt",
        padding=True,
        truncation=True,
        max_length=max_length,
        padding_side="right",
    ).to(device)
    logits = model(**enc).logits[:, :-1].float()
    labels = enc["input_ids"][:, 1:].masked_fill(enc["attention_mask"][:, 1:] == 0, -100)
    nll = F.cross_entropy(logits.transpose(1, 2), labels, reduction="none", ignore_index=-100)
    counts = (labels != -100).sum(1).clamp_min(1)
    return (nll.sum(1) / counts).tolist()


def select_k_by_ablation(
    model: nn.Module,
    tokenizer: Any,
    keystone_set: KeystoneSet,
    texts: Sequence[str],
    *,
    sweep: Sequence[int] = (1, 2, 4, 8, 16, 32, 64, 128),
    collapse_ratio: float = 10.0,
) -> tuple[int | None, list[dict[str, float]]]:
    """The smallest ``k`` in ``sweep`` whose top-``k`` ablation multiplies perplexity by ``collapse_ratio``.

    ``keystone_set`` must be scored and hold at least ``max(sweep)`` neurons
    (``find_keystone_neurons(k=128)``). Returns ``(k or None, rows)`` with one row ``{"k", "nll",
    "ppl_ratio"}`` per evaluated ``k`` (the sweep stops at the first collapse). [reconstructed] selection
    rule.
    """
    check_float("collapse_ratio", collapse_ratio, low=1, low_open=True)
    if not sweep or max(sweep) > len(keystone_set):
        raise ValueError(
            f"`sweep` must be non-empty with max <= len(keystone_set) = {len(keystone_set)}, got "
            f"{list(sweep)}."
        )
    base = sum(text_nll(model, tokenizer, texts)) / len(texts)
    rows = []
    for k in sorted(sweep):
        with ablate_neurons(model, keystone_set.top(k)):
            nll = sum(text_nll(model, tokenizer, texts)) / len(texts)
        rows.append({"k": k, "nll": nll, "ppl_ratio": math.exp(nll - base)})
        if nll - base >= math.log(collapse_ratio):
            return k, rows
    return None, rows


def keystone_iou(a: KeystoneSet, b: KeystoneSet) -> float:
    """Intersection over union of two sets of ``(module, row)`` neurons.

    Example:
        >>> keystone_iou(KeystoneSet({"m": [0, 1, 2]}), KeystoneSet({"m": [1, 2, 3]}))
        0.5
    """
    x, y = a.neurons(), b.neurons()
    return len(x & y) / len(x | y)


def pairwise_iou(sets: Sequence[KeystoneSet]) -> dict[str, float]:
    """Stability over disjoint prompt groups: mean, min and max IoU over all pairs of ``sets`` (2 or more)."""
    if len(sets) < 2:
        raise ValueError(f"`sets` needs at least 2 keystone sets, got {len(sets)}.")
    values = [keystone_iou(a, b) for a, b in combinations(sets, 2)]
    return {"mean": sum(values) / len(values), "min": min(values), "max": max(values)}
