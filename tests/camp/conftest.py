"""CAMP test fixtures: a word tokenizer, a tiny Llama, a 16-row CAMP dataset, a config factory."""

from __future__ import annotations

from typing import Any

import pytest

WORDS = "capital of e0 e1 e2 e3 c0 c1 c2 c3 idk ?".split()


@pytest.fixture
def tok() -> Any:
    from hf_ext.testing import word_tokenizer

    return word_tokenizer(WORDS)


@pytest.fixture
def make_model(tok: Any) -> Any:
    from hf_ext.testing import tiny_llama

    def make(seed: int = 0) -> Any:
        return tiny_llama(
            seed, vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_attention_heads=2
        )

    return make


def camp_rows(n: int = 16) -> list[dict[str, Any]]:
    """``n`` pairs cycling through consistent, tie and conflict gaps (a quarter in conflict)."""
    gaps = [(1.0, 1.0), (0.5, 0.0), (-1.0, 1.0), (0.25, 0.75)]
    rows = []
    for i in range(n):
        t, h = gaps[i % 4]
        e = i % 4
        rows.append(
            {
                "prompt": f"capital of e{e} ?",
                "chosen": f"c{e}" if t >= 0 else f"c{(e + 1) % 4}",
                "rejected": "idk" if t < 0 else f"c{(e + 2) % 4} c{(e + 3) % 4}"[: 2 + i % 2 * 3],
                "truth_margin": t,
                "help_margin": h,
            }
        )
    return rows


@pytest.fixture
def rows() -> list[dict[str, Any]]:
    return camp_rows()


@pytest.fixture
def camp_dataset(rows: list[dict[str, Any]]) -> Any:
    from datasets import Dataset

    return Dataset.from_list(rows)


@pytest.fixture
def make_args(tmp_path: Any) -> Any:
    def make(cls: Any = None, **overrides: Any) -> Any:
        if cls is None:
            from hf_ext import CAMPConfig as cls
        from hf_ext.testing import cpu_training_args

        kw = dict(
            max_steps=2, per_device_train_batch_size=4, learning_rate=1e-2, gradient_checkpointing=False
        )
        kw.update(overrides)
        return cls(**cpu_training_args(kw.pop("output_dir", str(tmp_path / "out")), **kw))

    return make
