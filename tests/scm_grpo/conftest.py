"""SCM-GRPO test fixtures: a word tokenizer over a tiny claim world and a config factory."""

from __future__ import annotations

from typing import Any

import pytest

WORDS = "claim evidence e0 e1 e2 e3 r0 r1 ; <graph> </graph> <answer> </answer> SUPPORTED E1 C : ->".split()


@pytest.fixture
def tok() -> Any:
    from hf_ext.testing import word_tokenizer

    return word_tokenizer(WORDS)


@pytest.fixture
def rows() -> list[dict[str, Any]]:
    """8 prompts with gold labels and hop counts."""
    return [
        {
            "prompt": f"claim e{i % 4} r{i % 2} e{(i + 1) % 4} evidence e{i % 4} r0 e1 ;",
            "label": "SUPPORTED" if i % 2 else "NOT_SUPPORTED",
            "num_hops": 2 + i % 3,
        }
        for i in range(8)
    ]


@pytest.fixture
def make_args(tmp_path: Any) -> Any:
    def make(cls: Any = None, **overrides: Any) -> Any:
        if cls is None:
            from hf_ext import SCMGRPOConfig as cls
        from hf_ext.testing import cpu_training_args

        kw = dict(
            max_steps=2,
            per_device_train_batch_size=4,
            num_generations=4,
            max_completion_length=8,
            learning_rate=1e-3,
        )
        kw.update(overrides)
        return cls(**cpu_training_args(kw.pop("output_dir", str(tmp_path / "out")), **kw))

    return make
