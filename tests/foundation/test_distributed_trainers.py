"""Trainers on two CPU processes (gloo, through accelerate's state) equal one process at one global batch.

Each rank sees ``per_device_train_batch_size = 2`` and the single process 4: accelerate hands rank ``r``
the ``r``-th of each pair of consecutive batches of the same seeded sampler, so one optimizer step sees
the same four examples. The check compares the logged losses and method statistics (gathered across
ranks by TRL) and every trainable weight after the run.

GRPO samples its completions with a per-rank seed (trl's ``set_seed(seed, device_specific=True)``), so two
processes cannot draw the same completions as one. The SCM-GRPO run therefore scripts generation: the
``k``-th copy of a prompt in a generation batch gets ``SCM_SCRIPT[k]``, the same on one process as on two,
and the check covers everything after sampling: the rewards and their ``scm/*`` statistics, the group
advantages (gathered across ranks), the loss and the update.
"""

from __future__ import annotations

import copy
import os
from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = pytest.mark.distributed

STEPS = 3


def _camp_rows() -> list[dict[str, Any]]:
    gaps = [(1.0, 1.0), (0.5, 0.0), (-1.0, 1.0), (0.25, 0.75), (1.0, -0.5), (-0.25, -0.5)]
    rows = []
    for i in range(24):
        t, h = gaps[i % len(gaps)]
        rows.append(
            {
                "prompt": f"the capital city of {'rome paris'.split()[i % 2]} is",
                "chosen": "rome" if i % 3 else "paris city",
                "rejected": "unknown" if i % 2 else "the river",
                "truth_margin": t,
                "help_margin": h,
            }
        )
    return rows


def _training_args(output_dir: str, per_device: int) -> dict[str, Any]:
    from hf_ext.testing import cpu_training_args

    return cpu_training_args(
        output_dir, max_steps=STEPS, per_device_train_batch_size=per_device, learning_rate=1e-2
    )


def _train_camp(output_dir: str, per_device: int) -> tuple[list[float], dict[str, Any]]:
    from datasets import Dataset

    from hf_ext import CAMPConfig, CAMPTrainer
    from hf_ext.testing import tiny_llama, word_tokenizer

    tok = word_tokenizer()
    model = tiny_llama(vocab_size=len(tok), hidden_size=32, intermediate_size=64)
    args = CAMPConfig(**_training_args(output_dir, per_device))
    trainer = CAMPTrainer(
        model=model,
        ref_model=copy.deepcopy(model),
        args=args,
        train_dataset=Dataset.from_list(_camp_rows()),
        processing_class=tok,
    )
    trainer.train()
    return _result(trainer)


def _train_keystone(output_dir: str, per_device: int) -> tuple[list[float], dict[str, Any]]:
    import torch
    from datasets import Dataset
    from peft import get_peft_model
    from transformers import DataCollatorForLanguageModeling, Trainer, TrainingArguments

    from hf_ext import KeystoneConfig
    from hf_ext.testing import tiny_llama, word_tokenizer

    tok = word_tokenizer()
    model = tiny_llama(vocab_size=len(tok), hidden_size=32, intermediate_size=64)
    config = KeystoneConfig(
        keystone_rows={"model.layers.0.self_attn.o_proj": [1, 5, 9], "model.layers.1.mlp.up_proj": [0, 7]}
    )
    peft_model = get_peft_model(model, config)
    texts = [f"the capital city of {w} is {w}" for w in "rome paris rome paris".split()] * 6
    data = Dataset.from_dict({"input_ids": [tok(t)["input_ids"] for t in texts]})
    args = TrainingArguments(**_training_args(output_dir, per_device))
    torch.manual_seed(0)
    trainer = Trainer(
        model=peft_model,
        args=args,
        train_dataset=data,
        data_collator=DataCollatorForLanguageModeling(tok, mlm=False),
    )
    trainer.train()
    return _result(trainer)


SCM_WORDS = "claim evidence e0 e1 e2 e3 r0 r1 ; <graph> </graph> <answer> </answer> E1 E2 C : ->".split()
SCM_WORDS += ["SUPPORTED", "NOT_SUPPORTED", "\n"]
SCM_SCRIPT = (
    "<graph> \n E1 : e0 \n C : e1 \n E1 -> C \n </graph> <answer> SUPPORTED </answer>",
    "<graph> \n E1 : e0 \n E2 : e1 \n C : e2 \n E1 -> E2 \n E2 -> C \n </graph> "
    "<answer> NOT_SUPPORTED </answer>",
)


def _scripted_generate(tok: Any) -> Any:
    """A ``generate`` that appends ``SCM_SCRIPT[k]``, then EOS padding, to the ``k``-th copy of a prompt."""
    import torch

    vocab = tok.get_vocab()
    script = [[vocab[w] for w in text.split(" ")] for text in SCM_SCRIPT]
    width = max(map(len, script)) + 1

    def generate(input_ids: Any, **_: Any) -> Any:
        seen: dict[tuple[int, ...], int] = {}
        rows = []
        for prompt in input_ids.tolist():
            k = seen[tuple(prompt)] = seen.get(tuple(prompt), -1) + 1
            completion = script[k % len(script)]
            rows.append(prompt + completion + [tok.eos_token_id] * (width - len(completion)))
        return torch.tensor(rows, device=input_ids.device)

    return generate


def _train_scm_grpo(output_dir: str, per_device: int) -> tuple[list[float], dict[str, Any]]:
    from datasets import Dataset

    from hf_ext import SCMGRPOConfig, SCMGRPOTrainer
    from hf_ext.testing import tiny_llama, word_tokenizer

    tok = word_tokenizer(SCM_WORDS)
    model = tiny_llama(vocab_size=len(tok), hidden_size=32, intermediate_size=64)
    model.generate = _scripted_generate(tok)
    rows = [  # every prompt has the same length, so no run pads one prompt against another
        {
            "prompt": f"claim e{i % 4} r{i % 2} e{(i + 1) % 4} evidence e{i % 4} r0 e1 ;",
            "label": "SUPPORTED" if i % 3 else "NOT_SUPPORTED",
            "num_hops": 1 + i % 2,
        }
        for i in range(12)
    ]
    # SGD, not Adam: the scripted completions leave many weights with gradients at float-noise level, which
    # Adam's per-weight normalisation would turn into steps of the full learning rate on either run
    kw = {**_training_args(output_dir, per_device), "optim": "sgd", "learning_rate": 1.0}
    args = SCMGRPOConfig(**kw, num_generations=2, max_completion_length=32)
    trainer = SCMGRPOTrainer(model, args=args, train_dataset=Dataset.from_list(rows), processing_class=tok)
    trainer.train()
    return _result(trainer)


def _result(trainer: Any) -> tuple[list[float], dict[str, Any]]:
    """The logged loss and method statistics (``camp/...``, ``rewards/...``, ``scm/...``) per step, and every
    trainable weight."""
    logs = [
        v
        for log in trainer.state.log_history
        if "loss" in log
        for k, v in sorted(log.items())
        if k == "loss" or k.startswith(("camp/", "rewards/", "scm/"))
    ]
    weights = {n: p.detach().numpy().copy() for n, p in trainer.model.named_parameters() if p.requires_grad}
    return logs, weights


TRAINERS = {
    "camp": (("trl",), _train_camp),
    "keystone": (("peft",), _train_keystone),
    "scm_grpo": (("trl",), _train_scm_grpo),
}


def _train_on_rank(rank: int, name: str, output_dir: str) -> tuple[list[float], dict[str, Any]]:
    os.environ.update(ACCELERATE_USE_CPU="true", HF_HUB_OFFLINE="1")
    result = TRAINERS[name][1](output_dir, per_device=2)
    from accelerate import PartialState

    assert PartialState().num_processes == 2, "the trainer did not join the process group"
    return result


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [pytest.param(name, marks=requires(*extras)) for name, (extras, _) in sorted(TRAINERS.items())]
)
def test_two_processes_equal_one_at_the_same_global_batch(name, tmp_path):
    import numpy as np

    train = TRAINERS[name][1]
    from hf_ext.testing.distributed import run_on_processes

    ranks = run_on_processes(_train_on_rank, name, str(tmp_path / "ddp"), init_group=False)
    losses, weights = train(str(tmp_path / "single"), per_device=4)
    for rank in (0, 1):
        rank_losses, rank_weights = ranks[rank]
        # abs: GRPO's logged loss is float noise around 0 (the advantages of a group sum to zero)
        assert rank_losses == pytest.approx(losses, rel=1e-4, abs=1e-6), f"rank {rank} logs"
        assert rank_weights.keys() == weights.keys() and weights
        for key in weights:
            np.testing.assert_allclose(rank_weights[key], weights[key], atol=1e-5, rtol=1e-4, err_msg=key)
