"""HoVer format end to end: a small hand-written file in HoVer's release layout, read by ``load_hover``,
scored by the rewards and trained for two steps in stock ``trl.GRPOTrainer``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from hf_ext.testing import requires

DATA = Path(__file__).parent / "data"


@pytest.fixture
def hover_rows() -> list[dict[str, Any]]:
    from hf_ext import load_hover

    return load_hover(DATA / "hover_mini.json", wiki=DATA / "hover_mini_wiki.json")


def _gold(row: dict[str, Any], label: str | None = None) -> str:
    from hf_ext.scm_grpo.data import gold_graph

    return gold_graph(row["evidence"], row["claim"], label or row["label"])


def test_loader_reads_the_hand_written_file(hover_rows: list[dict[str, Any]]) -> None:
    from hf_ext import check_scm_dataset

    assert [r["id"] for r in hover_rows] == [f"mini-000{i}" for i in range(1, 7)]
    assert hover_rows[0]["evidence"] == [
        "Its keeper from 1901 to 1930 was Tomas Brede.",
        "Tomas Brede was born in Holm, the town of the Orla Bridge.",
    ]
    assert all("[" not in e for r in hover_rows for e in r["evidence"])  # every title and index resolved
    assert all(len(r["evidence"]) == r["num_hops"] for r in hover_rows)
    assert check_scm_dataset(hover_rows) == {
        "n": 6,
        "labels": {"SUPPORTED": 4, "NOT_SUPPORTED": 2},
        "targets": {2: 2, 3: 2, 4: 2},
    }


def test_rewards_on_hand_written_completions(hover_rows: list[dict[str, Any]]) -> None:
    from hf_ext import SCMCombinedReward, SCMDepthReward, SCMGraphFormatReward, SCMLabelReward

    columns = {"label": [r["label"] for r in hover_rows], "num_hops": [r["num_hops"] for r in hover_rows]}
    gold = [_gold(r) for r in hover_rows]
    other = {"SUPPORTED": "NOT_SUPPORTED", "NOT_SUPPORTED": "SUPPORTED"}
    flipped = [_gold(r, other[r["label"]]) for r in hover_rows]
    assert SCMLabelReward()(completions=gold, **columns) == [1.0] * 6
    assert SCMGraphFormatReward()(completions=gold, **columns) == [1.0] * 6
    assert SCMDepthReward()(completions=gold, **columns) == [1.0] * 6  # one fact per hop: d = d*
    assert SCMCombinedReward()(completions=gold, **columns) == [2.0] * 6
    assert SCMDepthReward()(completions=flipped, **columns) == [0.0] * 6  # the correctness gate
    assert SCMGraphFormatReward()(completions=flipped, **columns) == [1.0] * 6


def test_verdict_weights_on_a_hover_completion(hover_rows: list[dict[str, Any]]) -> None:
    from hf_ext.scm_grpo.warm_start import verdict_token_weights
    from hf_ext.testing import word_tokenizer

    text = _gold(hover_rows[1])
    tok = word_tokenizer(sorted(set(text.replace("<", " ").replace(">", " ").split())))
    offsets = tok(text, return_offsets_mapping=True)["offset_mapping"]
    weights = verdict_token_weights(text, offsets, verdict_weight=8.0)
    verdict = [text[a:b] for (a, b), w in zip(offsets, weights) if w == 8.0]
    assert verdict == ["NOT_SUPPORTED"] and weights.count(1.0) == len(weights) - 1


@pytest.mark.slow
@requires("trl")
def test_two_grpo_steps_on_the_hover_file(hover_rows: list[dict[str, Any]], make_args: Any) -> None:
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from hf_ext import SCMDepthReward, SCMGraphFormatReward, SCMLabelReward, SCMPromptBuilder
    from hf_ext.testing import tiny_llama, word_tokenizer

    builder = SCMPromptBuilder(label_set="hover", instruction="Verify ({labels}).")  # short prompts: fast
    ds = Dataset.from_list(hover_rows).map(builder.as_map_fn())
    words = {w for p in ds["prompt"] for w in p.replace(".", " ").replace(",", " ").split()}
    tok = word_tokenizer(sorted(words))
    model = tiny_llama(0, vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_attention_heads=2)
    args = make_args(
        GRPOConfig, reward_weights=[1.0, 0.5, 0.5], per_device_train_batch_size=6, num_generations=3
    )
    trainer = GRPOTrainer(
        model,
        reward_funcs=[SCMLabelReward(), SCMGraphFormatReward(), SCMDepthReward()],
        args=args,
        train_dataset=ds,
        processing_class=tok,
    )
    trainer.train()
    assert trainer.state.global_step == 2
    logged = {k for entry in trainer.state.log_history for k in entry}
    assert {"rewards/scm_label/mean", "rewards/scm_format/mean", "rewards/scm_depth/mean"} <= logged
