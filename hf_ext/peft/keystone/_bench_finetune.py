"""Part B of the keystone benchmark: keystone-only fine-tuning vs full fine-tuning vs LoRA vs random rows.

Every arm trains on the same 48 invented facts (batch 4, AdamW without weight decay, same steps) for each
learning rate of an equal-size grid; the rate is picked on the loss over the 48 training facts, never on the
test figures.
"""

from __future__ import annotations

import logging
import math
import random
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from hf_ext.benchmarking import Timer
from hf_ext.peft.keystone.ablate import random_neuron_set
from hf_ext.peft.keystone.adapter import keystone_trainable_parameters
from hf_ext.peft.keystone.config import KeystoneConfig
from hf_ext.peft.keystone.core import text_nll
from hf_ext.peft.keystone.sets import KeystoneSet

logger = logging.getLogger(__name__)


def _encode(tok: Any, prompt: str, answer: str) -> tuple[list[int], int]:
    p = tok(prompt)["input_ids"]
    return p + tok(answer, add_special_tokens=False)["input_ids"], len(p)


def _batch(seqs: Sequence[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids, mask


@torch.no_grad()
def fact_scores(
    model: nn.Module, tok: Any, pairs: Sequence[tuple[str, str]]
) -> tuple[list[bool], list[float]]:
    """Teacher-forced exact match (every answer token is the argmax) and answer NLL (nats/token) per pair."""
    enc = [_encode(tok, p, a) for p, a in pairs]
    ids, mask = _batch([s for s, _ in enc], tok.pad_token_id)
    logits = model(input_ids=ids, attention_mask=mask).logits.float()
    hits, nlls = [], []
    for i, (seq, n_prompt) in enumerate(enc):
        pos = torch.arange(n_prompt - 1, len(seq) - 1)
        target = ids[i, n_prompt : len(seq)]
        hits.append(bool((logits[i, pos].argmax(-1) == target).all()))
        nlls.append(float(F.cross_entropy(logits[i, pos], target)))
    return hits, nlls


def _train(
    model: nn.Module, tok: Any, train: Sequence[tuple[str, str]], steps: int, lr: float, seed: int
) -> float:
    """AdamW (no weight decay), batch 4, loss on every token; returns seconds per step."""
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    order: list[int] = []
    model.train()
    with Timer() as t:
        for _ in range(steps):
            if len(order) < 4:
                order += rng.sample(range(len(train)), len(train))
            batch, order = [train[i] for i in order[:4]], order[4:]
            ids, mask = _batch([_encode(tok, p, a)[0] for p, a in batch], tok.pad_token_id)
            labels = ids.masked_fill(mask == 0, -100)
            model(input_ids=ids, attention_mask=mask, labels=labels).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    model.eval()
    return t.seconds / steps


def _adapter_bytes(model: Any) -> int:
    with tempfile.TemporaryDirectory() as d:
        model.save_pretrained(d)
        return sum(f.stat().st_size for f in Path(d).glob("*.safetensors"))


def _arms(
    keystone_set: KeystoneSet, seed: int
) -> dict[str, Callable[[nn.Module], tuple[nn.Module, int, int]]]:
    """Arm name -> wrap(model) returning (trainable model, effective trainable params, bytes of what is
    saved)."""
    from peft import LoraConfig, get_peft_model

    def full(m: nn.Module) -> tuple[nn.Module, int, int]:
        n = sum(p.numel() for p in m.parameters())
        return m, n, sum(p.numel() * p.element_size() for p in m.parameters())

    def rows(ks: KeystoneSet) -> Callable[[nn.Module], tuple[nn.Module, int, int]]:
        def wrap(m: nn.Module) -> tuple[nn.Module, int, int]:
            pm = get_peft_model(m, KeystoneConfig(model=m, keystone_set=ks))
            return pm, keystone_trainable_parameters(pm, ks), _adapter_bytes(pm)

        return wrap

    def lora(m: nn.Module) -> tuple[nn.Module, int, int]:
        pm = get_peft_model(m, LoraConfig(r=1, lora_alpha=1, target_modules=["o_proj"], lora_dropout=0.0))
        return pm, sum(p.numel() for p in pm.parameters() if p.requires_grad), _adapter_bytes(pm)

    def random_rows(m: nn.Module) -> tuple[nn.Module, int, int]:
        return rows(random_neuron_set(m, like=keystone_set, seed=seed))(m)

    return {
        "full FT": full,
        "keystone rows": rows(keystone_set),
        "random rows": random_rows,
        "LoRA r=1 o_proj": lora,
    }


def finetune_table(
    make_model: Callable[[], nn.Module],
    tok: Any,
    keystone_set: KeystoneSet,
    facts: Sequence[dict[str, str]],
    heldout: Sequence[str],
    *,
    steps: int,
    lr_grids: Mapping[str, Sequence[float]],
    seed: int,
    n_train: int = 48,
) -> list[dict[str, Any]]:
    """Rows of Part B: one per arm (plus the un-tuned model), at the learning rate with the lowest training
    loss."""
    train = [(f["prompt"], f["answer"]) for f in facts[:n_train]]
    tests = {
        "acc_train": train,
        "acc_unseen": [(f["prompt"], f["answer"]) for f in facts[n_train:]],
        "acc_para": [(f["paraphrase"], f["answer"]) for f in facts],
    }
    everything = [pair for pairs in tests.values() for pair in pairs]

    def measure(model: nn.Module) -> dict[str, float]:
        out: dict[str, float] = {}
        hits, nlls = fact_scores(model, tok, everything)
        out["task_acc"] = sum(hits) / len(hits)
        out["task_nll"] = sum(nlls) / len(nlls)
        for name, pairs in tests.items():
            if pairs:
                out[name] = sum(fact_scores(model, tok, pairs)[0]) / len(pairs)
        out["train_loss"] = sum(fact_scores(model, tok, train)[1]) / len(train)
        out["heldout_nll"] = sum(text_nll(model, tok, heldout)) / len(heldout)
        return out

    base = measure(make_model())
    rows: list[dict[str, Any]] = [
        {"system": "un-tuned", "is_baseline": True, "lr": 0.0, **base, "drift": 0.0}
    ]
    for arm, wrap in _arms(keystone_set, seed).items():
        best: dict[str, Any] | None = None
        for lr in lr_grids[arm]:
            model, n_params, n_bytes = wrap(make_model())
            torch.manual_seed(seed)
            sec = _train(model, tok, train, steps, lr, seed)
            figs = measure(model)
            logger.info("%s lr=%g train_loss=%.3f", arm, lr, figs["train_loss"])
            if best is None or figs["train_loss"] < best["train_loss"]:
                best = {"system": arm, "is_baseline": arm != "keystone rows", "lr": lr, **figs}
                best.update(trainable_params=n_params, saved_bytes=n_bytes, s_per_step=sec)
        assert best is not None
        best["drift"] = best["heldout_nll"] - base["heldout_nll"]
        rows.append(best)
    full = next(r for r in rows if r["system"] == "full FT")
    for r in rows:
        gain = full["task_acc"] - base["task_acc"]
        r["gain_vs_full"] = (r["task_acc"] - base["task_acc"]) / gain if gain > 0 else math.nan
    return rows
