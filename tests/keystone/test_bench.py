"""Benchmark helpers: answer alignment checked by a look-ahead oracle, one tiny end-to-end fine-tuning grid
that leaves the model as it found it, the set anatomy and the weight-norm control by hand, and both runs of
the benchmark on a tiny model."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from hf_ext.testing import requires, word_tokenizer

pytestmark = requires("peft", "transformers")


def _task_tokenizer(task):
    pairs = [*task.train, *task.val, *task.test, *[p for ps in task.extra.values() for p in ps]]
    words = sorted({w for p, a in pairs for w in re.findall(r"\w+|[^\w\s]+", p + " " + a)})
    return word_tokenizer(words)


class _Oracle(nn.Module):
    """Logits at position t are one-hot of token t + 1 (it reads ahead): exact match is 1 iff aligned."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab

    def forward(self, input_ids, attention_mask, position_ids, logits_to_keep):
        nxt = torch.cat([input_ids[:, 1:], input_ids[:, :1]], 1)
        logits = nn.functional.one_hot(nxt, self.vocab).float()
        return SimpleNamespace(logits=logits[:, -logits_to_keep:])


def test_answer_positions_are_aligned():
    from benchmarks.keystone.finetune import _batch, knowledge_task, task_scores

    task = knowledge_task(6)
    tok = _task_tokenizer(task)
    acc, nll = task_scores(_Oracle(len(tok)), tok, task.train)
    assert acc == 1.0
    batch = _batch(tok, task.train[:2])
    answer = tok(task.train[0][1], add_special_tokens=False)["input_ids"]
    assert batch["targets"][0, -len(answer) :].tolist() == answer
    assert batch["position_ids"][0, -1] == batch["attention_mask"][0].sum() - 1


def test_tiny_grid_end_to_end_restores_the_model(make_lm):
    from benchmarks.keystone.finetune import finetune_rows, format_task
    from hf_ext.keystone import find_keystone_neurons

    task = format_task(4, 2, 2)
    tok = _task_tokenizer(task)
    lm = make_lm(vocab_size=len(tok))
    before = {n: p.detach().clone() for n, p in lm.named_parameters()}
    ks = find_keystone_neurons(lm, tok, {"a": task.train[0][0], "b": task.train[1][0]}, k=4)
    rows = finetune_rows(
        lm,
        tok,
        task,
        {"keystone rows": ks},
        arms=("full FT", "keystone rows", "LoRA"),
        lr_grid={"full FT": (1e-3,), "keystone rows": (1e-2, 1e-1), "LoRA": (1e-2,)},
        heldout=["item : apple , 3"],
        steps=2,
        batch_size=2,
        seed=0,
    )
    assert [r["system"] for r in rows] == ["un-tuned", "full FT", "keystone rows", "keystone rows", "LoRA"]
    assert sum(r["chosen"] for r in rows if r["system"] == "keystone rows") == 1
    counts = {r["system"]: r.get("trainable_params") for r in rows}
    assert counts["keystone rows"] == sum(len(v) * 16 for v in ks.indices.values())
    assert counts["full FT"] == sum(p.numel() for n, p in lm.named_parameters() if "embed_tokens" not in n)
    for n, p in lm.named_parameters():
        assert torch.equal(p, before[n]), n
    assert not hasattr(lm, "peft_config")


def test_set_anatomy_and_weight_norms_by_hand(make_lm):
    from benchmarks.keystone.ablation import set_anatomy, weight_norm_scores
    from hf_ext.keystone import KeystoneSet

    ks = KeystoneSet(
        {
            "model.layers.1.self_attn.o_proj": [3, 7],
            "model.layers.5.self_attn.o_proj": [3],
            "model.layers.2.self_attn.q_proj": [0],
        }
    )
    anatomy = set_anatomy(ks)
    assert anatomy["by_projection"] == {"o_proj": 3, "q_proj": 1}
    assert anatomy["by_layer"] == {1: 2, 2: 1, 5: 1}
    assert anatomy["o_proj_channels"] == {3: [1, 5], 7: [1]} and anatomy["recurring"] == {3: [1, 5]}
    lm = make_lm()
    with torch.no_grad():
        lm.model.layers[0].self_attn.o_proj.weight.fill_(0.5)  # 16 inputs: norm 0.5 * 4 = 2
    scores = weight_norm_scores(lm, ("o_proj",))
    assert set(scores) == {"model.layers.0.self_attn.o_proj", "model.layers.1.self_attn.o_proj"}
    torch.testing.assert_close(scores["model.layers.0.self_attn.o_proj"], torch.full((16,), 2.0))


def _bench_tokenizer():
    from benchmarks.keystone.data import GIBBERISH, GREEDY, HELDOUT, PROBE_GROUPS
    from benchmarks.keystone.finetune import format_task, knowledge_task

    texts = [*GIBBERISH.values(), *GREEDY, *(t for g in PROBE_GROUPS for t in g.values())]
    texts += [t for pair in HELDOUT.values() for t in pair]
    for task in (knowledge_task(), format_task()):
        texts += [p + " " + a for p, a in [*task.train, *task.val, *task.test]]
    return word_tokenizer(sorted({w for t in texts for w in re.findall(r"\w+|[^\w\s]+", t)}))


@pytest.mark.slow
def test_full_and_quick_runs_on_a_tiny_model(make_lm, monkeypatch, tmp_path):
    """Every code path of the benchmark, with a tiny Llama in place of Gemma-3-270M: the full run measures
    exactly its grid, the quick run a slice of it (Part A at the smallest k), and both plot."""
    from benchmarks.harness import check_slice
    from benchmarks.keystone import bench

    tok = _bench_tokenizer()
    monkeypatch.setattr("hf_ext.assets.gemma3_270m", lambda: (make_lm(vocab_size=len(tok)), tok))
    full = bench.run(quick=False, seed=0)
    assert full.settings == bench.grid()
    assert {r["task"] for r in full.rows if r["table"] == "B"} == set(bench.TASKS)
    assert {r["k"] for r in full.rows if r["table"] == "A"} == {0, *bench.SIZES}
    assert full.headline.figure == "ppl_ratio" and len(full.config["iou"]) == 2
    assert set(bench.plot(full, tmp_path / "full")) == {"ablation", "finetune", "front"}
    quick = bench.run(quick=True, seed=1)
    check_slice(quick.settings, bench.grid(), method="keystone")
    assert quick.settings == [{"part": "A ablation", "model": bench.MODEL, "k": min(bench.SIZES)}]
    assert [r["system"] for r in quick.rows] == [
        "no ablation",
        "keystone (mean-norm, min)",
        f"random (max of {bench.QUICK_DRAWS})",
        f"random (median of {bench.QUICK_DRAWS})",
    ]
    assert quick.headline.verdict in {"ahead", "behind", "level", "no comparison"}
    assert set(bench.plot(quick, tmp_path / "quick")) == {"ablation"}
