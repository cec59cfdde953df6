"""Part B of ``hf-ext bench keystone``: keystone-only fine-tuning against full fine-tuning and controls.

Every arm trains the same model on the same batches (AdamW without weight decay, answer-only loss, constant
learning rate) once per rate of its grid. The rate is chosen per arm on a validation split by task accuracy
(ties: lower answer NLL); test accuracy and the held-out NLL drift are reported at that rate, and every grid
point is kept as a row for the score-vs-drift front. The model is restored in place between runs (PEFT arms
are unloaded, full fine-tuning copies its weights back), so it is loaded once.
"""

from __future__ import annotations

import logging
import random
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.harness import Timer
from benchmarks.keystone.data import format_examples, invented_facts
from hf_ext.keystone.core import text_nll
from hf_ext.keystone.sets import KeystoneSet

logger = logging.getLogger(__name__)

Pairs = list[tuple[str, str]]


@dataclass
class Task:
    """A fine-tuning task: (prompt, answer) pairs to train on, to choose the rate on and to report."""

    name: str
    train: Pairs
    val: Pairs
    test: Pairs
    extra: dict[str, Pairs] = field(default_factory=dict)


def knowledge_task(n: int = 24) -> Task:
    """Inject ``n`` invented facts; the rate is chosen on recall of the first half, reported on the second.

    ``extra["para"]`` asks the reported facts in other words (does the knowledge generalise?).
    """
    facts = invented_facts(n)
    pairs = [(f["prompt"], f["answer"]) for f in facts]
    half = n // 2
    para = [(f["paraphrase"], f["answer"]) for f in facts[half:]]
    return Task("knowledge", pairs, pairs[:half], pairs[half:], {"para": para})


def format_task(n_train: int = 24, n_val: int = 12, n_test: int = 12) -> Task:
    """Learn a one-line JSON output format; validation and test items are unseen in training."""
    ex = [(e["prompt"], e["answer"]) for e in format_examples(n_train + n_val + n_test)]
    return Task("format", ex[:n_train], ex[n_train : n_train + n_val], ex[n_train + n_val :])


def _batch(tok: Any, pairs: Sequence[tuple[str, str]]) -> dict[str, torch.Tensor]:
    """Left-padded ``input_ids``/``attention_mask``/``position_ids`` plus right-aligned answer ``targets``.

    ``targets`` has shape ``(B, A)`` (``A`` the longest answer); positions before an answer hold -100.
    """
    seqs, answers = [], []
    for prompt, answer in pairs:
        a = tok(answer, add_special_tokens=False)["input_ids"]
        seqs.append(tok(prompt)["input_ids"] + a)
        answers.append(len(a))
    width, longest = max(len(s) for s in seqs), max(answers)
    ids = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    targets = torch.full((len(seqs), longest), -100, dtype=torch.long)
    for i, (s, a) in enumerate(zip(seqs, answers)):
        ids[i, width - len(s) :] = torch.tensor(s)
        mask[i, width - len(s) :] = 1
        targets[i, longest - a :] = torch.tensor(s[len(s) - a :])
    positions = (mask.cumsum(1) - 1).clamp_min(0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "targets": targets}


def _answer_logits(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Logits ``(B, A, vocab)`` at the positions that predict answer tokens (the LM head runs there only)."""
    longest = batch["targets"].shape[1]
    out = model(
        input_ids=batch["input_ids"],
        attention_mask=batch["attention_mask"],
        position_ids=batch["position_ids"],
        logits_to_keep=longest + 1,
    )
    return out.logits[:, :-1].float()


@torch.no_grad()
def task_scores(model: nn.Module, tok: Any, pairs: Sequence[tuple[str, str]]) -> tuple[float, float]:
    """Teacher-forced exact match (every answer token is the argmax) and answer NLL (nats/token)."""
    batch = _batch(tok, pairs)
    logits, targets = _answer_logits(model, batch), batch["targets"]
    valid = targets != -100
    hit = ((logits.argmax(-1) == targets) | ~valid).all(1)
    nll = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=-100)
    return float(hit.float().mean()), float(nll)


def train(
    model: nn.Module, tok: Any, pairs: Pairs, *, steps: int, lr: float, batch_size: int, seed: int
) -> list[float]:
    """AdamW (no weight decay) on the answer tokens; the batch order depends on ``seed`` only.

    Returns:
        Seconds per optimiser step.
    """
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    rng = random.Random(seed)
    order: list[int] = []
    seconds = []
    model.train()
    for _ in range(steps):
        if len(order) < batch_size:
            order += rng.sample(range(len(pairs)), len(pairs))
        batch = _batch(tok, [pairs[i] for i in order[:batch_size]])
        order = order[batch_size:]
        with Timer() as t:
            logits = _answer_logits(model, batch)
            F.cross_entropy(logits.transpose(1, 2), batch["targets"], ignore_index=-100).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        seconds.append(t.seconds)
    model.eval()
    return seconds


Wrapped = tuple[nn.Module, int, Callable[[], None]]


def wrap_arm(
    model: nn.Module,
    arm: str,
    sets: dict[str, KeystoneSet],
    lora_modules: Sequence[str],
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> Wrapped:
    """Prepare ``model`` for ``arm``: ``(trainable model, trainable parameter count, restore)``.

    ``"full FT"`` trains every parameter but the (tied) embedding and restores the weights by copying them
    back; ``"LoRA"`` is rank 1 on ``lora_modules``; any other arm is a ``KeystoneConfig`` of ``sets[arm]``
    with the keyword options ``options[arm]`` (``parameterisation``, ``delta_scale``, ``frozen_channels``).
    PEFT arms restore by unloading the adapter.
    """
    from peft import LoraConfig, get_peft_model

    from hf_ext.keystone.tuner.config import KeystoneConfig

    if arm == "full FT":
        for name, p in model.named_parameters():
            p.requires_grad_("embed_tokens" not in name)
        trained = {n: p for n, p in model.named_parameters() if p.requires_grad}
        saved = {n: p.detach().clone() for n, p in trained.items()}

        def restore_weights() -> None:
            with torch.no_grad():
                for n, p in trained.items():
                    p.copy_(saved[n])
            model.requires_grad_(False)

        return model, sum(p.numel() for p in trained.values()), restore_weights
    if arm == "LoRA":
        config: Any = LoraConfig(r=1, lora_alpha=1, lora_dropout=0.0, target_modules=list(lora_modules))
    else:
        config = KeystoneConfig(keystone_set=sets[arm], **(options or {}).get(arm, {}))
    peft_model = get_peft_model(model, config)

    def unload() -> None:
        peft_model.unload()
        vars(model).pop("peft_config", None)  # left on the base model by PEFT; a next adapter would join it

    return peft_model, peft_model.get_nb_trainable_parameters()[0], unload


def measure(model: nn.Module, tok: Any, task: Task, heldout: Sequence[str]) -> dict[str, float]:
    """Validation and test accuracy / answer NLL, extra splits' accuracy, and held-out text NLL."""
    out: dict[str, float] = {}
    for split, pairs in {"val": task.val, "test": task.test, **task.extra}.items():
        out[f"{split}_acc"], out[f"{split}_nll"] = task_scores(model, tok, pairs)
    out["heldout_nll"] = sum(text_nll(model, tok, heldout)) / len(heldout)
    return out


def finetune_rows(
    model: nn.Module,
    tok: Any,
    task: Task,
    sets: dict[str, KeystoneSet],
    *,
    arms: Sequence[str],
    lr_grid: Mapping[str, Sequence[float]],
    heldout: Sequence[str],
    steps: int,
    batch_size: int,
    seed: int,
    lora_modules: Sequence[str] = ("o_proj",),
    options: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """One row per (arm, rate) plus the un-tuned model; ``chosen`` marks each arm's rate picked on ``val``.

    ``options[arm]``: ``KeystoneConfig`` keywords of a keystone arm (see :func:`wrap_arm`). Arms whose name
    starts with ``"keystone"`` are the method's, every other arm is a baseline.
    """
    base = measure(model, tok, task, heldout)
    rows: list[dict[str, Any]] = [
        {"task": task.name, "system": "un-tuned", "is_baseline": True, "chosen": True, "lr": 0.0, **base}
    ]
    for arm in arms:
        grid_rows: list[dict[str, Any]] = []
        for lr in lr_grid[arm]:
            torch.manual_seed(seed)
            trainable, n_params, restore = wrap_arm(model, arm, sets, lora_modules, options)
            seconds = train(trainable, tok, task.train, steps=steps, lr=lr, batch_size=batch_size, seed=seed)
            figs = measure(trainable, tok, task, heldout)
            restore()
            logger.info("%s %s lr=%g val_acc=%.3f", task.name, arm, lr, figs["val_acc"])
            grid_rows.append(
                {
                    "task": task.name,
                    "system": arm,
                    "is_baseline": not arm.startswith("keystone"),
                    "chosen": False,
                    "lr": lr,
                    **figs,
                    "trainable_params": n_params,
                    "s_per_step": statistics.median(seconds),
                }
            )
        best = max(grid_rows, key=lambda r: (r["val_acc"], -r["val_nll"]))
        best["chosen"] = True
        rows += grid_rows
    for r in rows:
        r["drift"] = r["heldout_nll"] - base["heldout_nll"]
    return rows
