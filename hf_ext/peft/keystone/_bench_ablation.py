"""Part A of ``hf-ext bench keystone``: ablate the keystone set and its controls, describe what the set is.

Controls at each ``k``: random neurons from the same pool (many draws), the top rows by raw activation
magnitude (the massive-activation control), the top rows by weight norm, a set found with word-salad prompts
(does the probe need capability prompts at all?), and a pool with down_proj instead of o_proj.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from hf_ext.benchmarking import Timer
from hf_ext.peft.keystone._bench_data import DOMAINS, GIBBERISH, GREEDY, HELDOUT, PROBE_GROUPS
from hf_ext.peft.keystone.ablate import DEFAULT_TARGETS, ablate_neurons, pool_modules, random_neuron_set
from hf_ext.peft.keystone.core import (
    cross_task_scores,
    keystone_iou,
    neuron_activations,
    pairwise_iou,
    text_nll,
    top_k_set,
)
from hf_ext.peft.keystone.sets import KeystoneSet, base_linear

logger = logging.getLogger(__name__)

TEXTS = [t for d in DOMAINS for t in HELDOUT[d]]
DOWN_POOL = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj")
METHOD = "keystone (mean-norm, min)"


def nll_row(model: nn.Module, tok: Any) -> dict[str, float]:
    """Mean held-out NLL (nats/token) over the 8 texts and per domain (2 texts each)."""
    per_text = text_nll(model, tok, TEXTS)
    row = {f"nll_{d}": (per_text[2 * i] + per_text[2 * i + 1]) / 2 for i, d in enumerate(DOMAINS)}
    return {"nll": sum(per_text) / len(per_text), **row}


def weight_norm_scores(
    model: nn.Module, target_modules: Sequence[str] = DEFAULT_TARGETS
) -> dict[str, torch.Tensor]:
    """L2 norm of every weight row of the pool, ``{module: (out_features,)}``: a data-free control."""
    return {
        name: base_linear(m).weight.detach().float().norm(dim=1)
        for name, m in pool_modules(model, target_modules).items()
    }


@torch.no_grad()
def massive_channels(
    model: nn.Module, tok: Any, prompts: Sequence[str], top: int = 5
) -> list[dict[str, Any]]:
    """The residual-stream channels with the largest ``|hidden state|`` over layers and tokens (BOS included).

    Returns ``top`` rows ``{"channel", "max_abs", "ratio_to_median"}``: the massive activations of Sun et al.
    (2024) show as a few channels hundreds of times larger than the median.
    """
    peak: torch.Tensor | None = None
    for prompt in prompts:
        ids = tok(prompt, return_tensors="pt")["input_ids"]
        hidden = torch.stack(model(input_ids=ids, output_hidden_states=True).hidden_states[1:]).abs()
        here = hidden.flatten(0, -2).max(0).values.float()
        peak = here if peak is None else torch.maximum(peak, here)
    assert peak is not None
    median = float(peak.median())
    values, channels = peak.topk(top)
    return [
        {"channel": int(c), "max_abs": float(v), "ratio_to_median": float(v) / median}
        for v, c in zip(values, channels)
    ]


def set_anatomy(keystone_set: KeystoneSet) -> dict[str, Any]:
    """Which projections and layers a set holds, and which residual channels its ``o_proj`` rows write.

    ``o_proj`` rows write the residual stream directly, so their row index is a residual channel;
    ``recurring`` lists channels written in two or more layers.
    """
    kinds: Counter[str] = Counter()
    layers: Counter[int] = Counter()
    written: dict[int, list[int]] = {}
    for name, rows in keystone_set.indices.items():
        parts = name.split(".")
        kind = parts[-1]
        layer = next((int(p) for p in parts if p.isdigit()), -1)
        kinds[kind] += len(rows)
        layers[layer] += len(rows)
        if kind == "o_proj":
            for r in rows:
                written.setdefault(r, []).append(layer)
    return {
        "by_projection": dict(kinds.most_common()),
        "by_layer": dict(sorted(layers.items())),
        "o_proj_channels": {c: sorted(ls) for c, ls in sorted(written.items())},
        "recurring": {c: sorted(ls) for c, ls in sorted(written.items()) if len(ls) > 1},
    }


def _greedy(model: nn.Module, tok: Any, prompt: str) -> str:
    enc = tok(prompt, return_tensors="pt")
    out = model.generate(**enc, max_new_tokens=12, do_sample=False)  # type: ignore[operator]
    return repr(tok.decode(out[0, enc["input_ids"].shape[1] :], skip_special_tokens=True))


def ablation_rows(model: nn.Module, tok: Any, *, quick: bool, seed: int) -> tuple[list[dict[str, Any]], dict]:
    """Part A rows (one per selection and ``k``, random draws, the un-ablated model) and what is behind them.

    The second value holds the top-30 sets, IoU, the set's anatomy, the massive channels, greedy samples and
    costs, for the notes and the docs.
    """
    method_sizes, control_sizes = ((30,), (30,)) if quick else ((3, 10, 30), (10, 30))
    draws = {30: 3} if quick else {3: 3, 10: 5, 30: 10}
    with Timer() as probe:
        acts = neuron_activations(model, tok, PROBE_GROUPS[0], target_modules=(*DEFAULT_TARGETS, "down_proj"))
    main = {t: {m: v for m, v in a.items() if m.rsplit(".", 1)[-1] != "down_proj"} for t, a in acts.items()}
    down = {t: {m: v for m, v in a.items() if m.rsplit(".", 1)[-1] != "o_proj"} for t, a in acts.items()}
    salad = neuron_activations(model, tok, GIBBERISH)
    selections: dict[str, tuple[dict[str, torch.Tensor], bool]] = {
        METHOD: (cross_task_scores(main), False),
        "gibberish prompts": (cross_task_scores(salad), False),
        "top activation (no norm)": (cross_task_scores(main, normalize="none"), True),
        "top weight-norm rows": (weight_norm_scores(model), True),
    }
    if not quick:
        selections["down_proj pool (o_proj out)"] = (cross_task_scores(down), False)
    pool_size = sum(v.numel() for v in selections[METHOD][0].values())
    base = nll_row(model, tok)
    rows: list[dict[str, Any]] = [
        {"table": "A", "system": "no ablation", "is_baseline": True, "k": 0, **base}
    ]
    sets: dict[tuple[str, int], KeystoneSet] = {}
    eval_seconds = []
    for name, (scores, is_baseline) in selections.items():
        for k in method_sizes if name == METHOD else control_sizes:
            sets[name, k] = top_k_set(model, scores, k)
            with Timer() as t, ablate_neurons(model, sets[name, k]):
                figs = nll_row(model, tok)
            eval_seconds.append(t.seconds)
            rows.append({"table": "A", "system": name, "is_baseline": is_baseline, "k": k, **figs})
    random_nll: dict[int, list[float]] = {}
    for k, n in draws.items():
        for d in range(n):
            with ablate_neurons(model, random_neuron_set(model, k, seed=seed * 1000 + d)):
                random_nll.setdefault(k, []).append(nll_row(model, tok)["nll"])
        vals = sorted(random_nll[k])
        for label, v in (("max", vals[-1]), ("median", vals[len(vals) // 2])):
            rows.append(
                {"table": "A", "system": f"random ({label} of {n})", "is_baseline": True, "k": k, "nll": v}
            )
    for r in rows:
        r["share_%"] = 100 * r["k"] / pool_size
        r["ppl_ratio"] = math.exp(r["nll"] - base["nll"])
    groups = PROBE_GROUPS[:2] if quick else PROBE_GROUPS
    group_scores = [cross_task_scores(neuron_activations(model, tok, g)) for g in groups]
    iou = {k: pairwise_iou([top_k_set(model, s, k) for s in group_scores]) for k in (10, 30)}
    top = sets[METHOD, 30]
    greedy = []
    if not quick:
        controls = {
            "none": None,
            "keystone-30": top,
            "random-30": random_neuron_set(model, 30, seed=seed * 1000),
        }
        for label, chosen in controls.items():
            for prompt in GREEDY:
                if chosen is None:
                    text = _greedy(model, tok, prompt)
                else:
                    with ablate_neurons(model, chosen):
                        text = _greedy(model, tok, prompt)
                greedy.append(f"{label:>12} | {prompt!r} -> {text}")
    info = {
        "pool_size": pool_size,
        "probe_seconds": probe.seconds,
        "seconds_per_ablation_eval": sum(eval_seconds) / len(eval_seconds),
        "iou": iou,
        "iou_gibberish": keystone_iou(top, sets["gibberish prompts", 30]),
        "random_nll": random_nll,
        "base": base,
        "sets": {name: sets[name, 30] for name in selections},
        "anatomy": set_anatomy(top),
        "massive": massive_channels(model, tok, list(PROBE_GROUPS[0].values())),
        "greedy": greedy,
    }
    return rows, info
