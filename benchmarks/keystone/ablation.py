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

from benchmarks.harness import Timer
from benchmarks.keystone.data import DOMAINS, GIBBERISH, GREEDY, HELDOUT, PROBE_GROUPS
from hf_ext.keystone.ablate import DEFAULT_TARGETS, ablate_neurons, pool_modules, random_neuron_set
from hf_ext.keystone.core import (
    cross_task_scores,
    keystone_iou,
    neuron_activations,
    pairwise_iou,
    text_nll,
    top_k_set,
)
from hf_ext.keystone.sets import KeystoneSet, base_linear

logger = logging.getLogger(__name__)

TEXTS = [t for d in DOMAINS for t in HELDOUT[d]]
DOWN_POOL = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj", "down_proj")
METHOD = "keystone (mean-norm, min)"


def nll_row(model: nn.Module, tok: Any, per_domain: int = 2) -> dict[str, float]:
    """Mean held-out NLL (nats/token) over the first ``per_domain`` texts of each domain, and per domain."""
    texts = [t for d in DOMAINS for t in HELDOUT[d][:per_domain]]
    per_text = text_nll(model, tok, texts)
    row = {
        f"nll_{d}": sum(per_text[i * per_domain : (i + 1) * per_domain]) / per_domain
        for i, d in enumerate(DOMAINS)
    }
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


CONTROL_SIZES = (10, 30)  # the set sizes at which the controls other than random draws are ablated


def _selections(
    model: nn.Module, tok: Any, acts: dict[str, dict[str, torch.Tensor]], *, controls: bool
) -> dict[str, tuple[dict[str, torch.Tensor], bool]]:
    """``{name: (scores, is_baseline)}``: the keystone statistic, plus the controls if ``controls``."""
    main = {t: {m: v for m, v in a.items() if m.rsplit(".", 1)[-1] != "down_proj"} for t, a in acts.items()}
    out = {METHOD: (cross_task_scores(main), False)}
    if controls:
        down = {t: {m: v for m, v in a.items() if m.rsplit(".", 1)[-1] != "o_proj"} for t, a in acts.items()}
        out["gibberish prompts"] = (cross_task_scores(neuron_activations(model, tok, GIBBERISH)), False)
        out["top activation (no norm)"] = (cross_task_scores(main, normalize="none"), True)
        out["top weight-norm rows"] = (weight_norm_scores(model), True)
        out["down_proj pool (o_proj out)"] = (cross_task_scores(down), False)
    return out


def ablation_rows(
    model: nn.Module,
    tok: Any,
    *,
    sizes: Sequence[int],
    draws: dict[int, int],
    seed: int,
    per_domain: int = 2,
) -> tuple[list[dict[str, Any]], dict]:
    """Part A rows (one per selection and ``k`` in ``sizes``, random draws, the un-ablated model).

    ``draws[k]`` random sets are ablated at each ``k``; the other controls run at the ``k`` of
    :data:`CONTROL_SIZES` in ``sizes``; the held-out NLL is over ``per_domain`` texts of each domain. The
    second value holds the base NLL, the random draws' NLL, the top-``k`` sets at the largest ``k`` and the
    costs, for the notes and for Part B.
    """
    with Timer() as probe:
        acts = neuron_activations(model, tok, PROBE_GROUPS[0], target_modules=(*DEFAULT_TARGETS, "down_proj"))
    selections = _selections(model, tok, acts, controls=any(k in CONTROL_SIZES for k in sizes))
    pool_size = sum(v.numel() for v in selections[METHOD][0].values())
    base = nll_row(model, tok, per_domain)
    rows: list[dict[str, Any]] = [
        {"table": "A", "system": "no ablation", "is_baseline": True, "k": 0, **base}
    ]
    sets: dict[tuple[str, int], KeystoneSet] = {}
    eval_seconds = []
    for name, (scores, is_baseline) in selections.items():
        for k in sizes if name == METHOD else [k for k in sizes if k in CONTROL_SIZES]:
            sets[name, k] = top_k_set(model, scores, k)
            with Timer() as t, ablate_neurons(model, sets[name, k]):
                figs = nll_row(model, tok, per_domain)
            eval_seconds.append(t.seconds)
            rows.append({"table": "A", "system": name, "is_baseline": is_baseline, "k": k, **figs})
    random_nll: dict[int, list[float]] = {}
    for k in sizes:
        n = draws[k]
        for d in range(n):
            with ablate_neurons(model, random_neuron_set(model, k, seed=seed * 1000 + d)):
                random_nll.setdefault(k, []).append(nll_row(model, tok, per_domain)["nll"])
        vals = sorted(random_nll[k])
        for label, v in (("max", vals[-1]), ("median", vals[len(vals) // 2])):
            rows.append(
                {"table": "A", "system": f"random ({label} of {n})", "is_baseline": True, "k": k, "nll": v}
            )
    for r in rows:
        r["share_%"] = 100 * r["k"] / pool_size
        r["ppl_ratio"] = math.exp(r["nll"] - base["nll"])
    info = {
        "pool_size": pool_size,
        "probe_seconds": probe.seconds,
        "seconds_per_ablation_eval": sum(eval_seconds) / len(eval_seconds),
        "random_nll": random_nll,
        "base": base,
        "sets": {name: sets[name, k] for name, k in sets if k == max(sizes)},
    }
    return rows, info


def describe_set(model: nn.Module, tok: Any, sets: dict[str, KeystoneSet], *, seed: int) -> dict[str, Any]:
    """What the keystone-30 set is and how stable: IoU over the 5 prompt groups (top-10 and top-30), IoU with
    the word-salad set, its anatomy, the massive channels and greedy samples with and without ablation.

    ``sets`` holds the top-30 set of each selection (``ablation_rows(..., sizes=(..., 30))``).
    """
    group_scores = [cross_task_scores(neuron_activations(model, tok, g)) for g in PROBE_GROUPS]
    top = sets[METHOD]
    controls = {"none": None, "keystone-30": top, "random-30": random_neuron_set(model, 30, seed=seed * 1000)}
    greedy = []
    for label, chosen in controls.items():
        for prompt in GREEDY:
            if chosen is None:
                text = _greedy(model, tok, prompt)
            else:
                with ablate_neurons(model, chosen):
                    text = _greedy(model, tok, prompt)
            greedy.append(f"{label:>12} | {prompt!r} -> {text}")
    return {
        "iou": {k: pairwise_iou([top_k_set(model, s, k) for s in group_scores]) for k in (10, 30)},
        "iou_gibberish": keystone_iou(top, sets["gibberish prompts"]),
        "anatomy": set_anatomy(top),
        "massive": massive_channels(model, tok, list(PROBE_GROUPS[0].values())),
        "greedy": greedy,
    }
