"""The benchmark's world tokenizer, layer 1 and (slow) the quick report."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from hf_ext.testing import requires

pytestmark = requires("trl")


def test_world_tokens_decode_to_the_output_contract() -> None:
    from benchmarks.scm_grpo import world as W
    from hf_ext.scm_grpo.core import parse_scm_graph
    from hf_ext.scm_grpo.data import make_synthetic_mhfv
    from hf_ext.testing import word_tokenizer

    tok = word_tokenizer(W.vocabulary(40, 8))
    for row in make_synthetic_mhfv(0, 50, max_pad=3):
        ids = tok.convert_tokens_to_ids(W.completion_tokens(row))
        assert tok.unk_token_id not in ids and tok.unk_token_id not in tok(W.prompt_text(row))["input_ids"]
        graph = parse_scm_graph(tok.decode(ids + [tok.eos_token_id], skip_special_tokens=True))
        assert graph.is_valid and graph.label == row["label"]
        assert graph.depth == row["num_hops"] + row["pad"] and len(ids) <= 56


def test_mutations_and_microbench() -> None:
    pytest.importorskip("networkx")
    from benchmarks.scm_grpo.bench import KINDS, microbench, mutate, random_dag
    from hf_ext.scm_grpo.core import parse_scm_graph
    from hf_ext.scm_grpo.data import make_synthetic_mhfv

    row = make_synthetic_mhfv(0, 1)[0]
    kinds = {KINDS[i]: parse_scm_graph(mutate(row, i)) for i in range(len(KINDS))}
    assert kinds["valid"].is_valid and "cycle" in kinds["cyclic"].error_kinds
    assert "undeclared_node" in kinds["dangling"].error_kinds
    assert "missing_graph" in kinds["untagged"].error_kinds and kinds["wrong_label"].is_valid
    assert kinds["wrong_label"].label != row["label"]
    text, edges, k = random_dag(random.Random(0))
    assert parse_scm_graph(text).num_evidence == k and ("E1" in text)
    out = microbench(60, 50, seed=0)
    assert out["depth_agreement"] == 1.0
    assert all(v > 0 for key, v in out.items() if key.startswith("us_"))


def test_every_world_of_the_grid_tokenizes_and_the_quick_plan_is_a_slice() -> None:
    from benchmarks.scm_grpo import bench
    from benchmarks.scm_grpo import world as W
    from hf_ext.testing import word_tokenizer

    assert [s["world"] for s in bench.grid()] == list(bench.FULL) == list(bench.SFT_BY_WORLD)
    for setting in bench.grid():
        spec = bench.WORLDS[setting["world"]]
        tok = word_tokenizer(W.vocabulary(spec["n_entities"], spec["n_relations"]))
        for row in bench.world_rows(setting["world"], 0, 30):
            ids = tok.convert_tokens_to_ids(W.completion_tokens(row))
            assert tok.unk_token_id not in ids and row["num_hops"] in spec["hops"]
            assert len(ids) <= bench.MAX_NEW
    for world, quick in bench.QUICK.items():  # fewer items, steps, seeds and arms of a full-run world
        full = bench.FULL[world]
        assert quick.n_train <= full.n_train and quick.n_test <= full.n_test
        assert quick.grpo_steps <= full.grpo_steps and quick.seeds <= full.seeds
        assert quick.sft_steps <= full.sft_steps
        assert set(quick.arms) <= set(full.arms)


@pytest.mark.slow
def test_quick_benchmark_report(quick_report: Any) -> None:
    from benchmarks.harness import check_slice
    from benchmarks.scm_grpo.bench import grid

    report = quick_report("scm_grpo")
    check_slice(report.settings, grid(), method="scm_grpo")
    assert [r["system"] for r in report.rows] == ["sft_only", "A_label_format", "B_scm"]
    assert report.headline.figure == "depth_abs_err" and not report.headline.higher_is_better
    assert all(0 <= r["format_valid"] <= 1 and 0 <= r["accuracy"] <= 1 for r in report.rows)
    assert math.isfinite(report.headline.method)
    assert any("format validity" in n for n in report.notes)
    data: dict[str, Any] = report.to_json(method="scm_grpo", quick=True, seed=0)
    assert data["config"]["microbench"]["depth_agreement"] == 1.0
