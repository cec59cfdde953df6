"""Seeded tiny models and tokenizers built from configs, offline, in well under a second each.

Shared by the tests, the docstring examples, the tour and the benchmarks. Every builder takes ``seed``,
calls ``torch.manual_seed(seed)`` right before construction and returns the model in ``eval()`` mode.
Host libraries are imported inside each builder, so importing this module stays cheap.
"""

from __future__ import annotations

from hf_ext.testing.models import (
    tiny_causal_lm,
    tiny_cogvideox_transformer,
    tiny_gemma3,
    tiny_llama,
    tiny_llava,
    tiny_qwen2,
    tiny_segformer,
    tiny_timm_model,
    tiny_unet,
    tiny_wan_pipeline,
    tiny_wan_transformer,
)
from hf_ext.testing.skips import requires
from hf_ext.testing.tokenizers import DEFAULT_WORDS, word_tokenizer
from hf_ext.testing.training import cpu_training_args

__all__ = [
    "DEFAULT_WORDS",
    "cpu_training_args",
    "requires",
    "tiny_causal_lm",
    "tiny_cogvideox_transformer",
    "tiny_gemma3",
    "tiny_llama",
    "tiny_llava",
    "tiny_qwen2",
    "tiny_segformer",
    "tiny_timm_model",
    "tiny_unet",
    "tiny_wan_pipeline",
    "tiny_wan_transformer",
    "word_tokenizer",
]
