"""Vegas on the project's trained byte-level Llama (``benchmarks/vegas/byte_llama``): greedy identity over
32 held-out prompts, in batches (the fast in-place path)."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = [requires("transformers"), pytest.mark.slow, pytest.mark.real]


def test_32_held_out_prompts_are_token_identical_in_batches_of_8():
    from benchmarks.vegas.bench import prompts
    from benchmarks.vegas.lm import byte_llama
    from hf_ext import VegasConfig, vegas_generate

    torch.set_num_threads(2)
    lm, _ = byte_llama()
    ids = prompts(768, 32)
    cfg = VegasConfig(min_tokens=64, fallback=False)
    accepted = 0
    for batch in ids.split(8):
        ref = lm.generate(batch, max_new_tokens=24, do_sample=False)
        out = lm.generate(
            batch, custom_generate=vegas_generate, vegas_config=cfg, max_new_tokens=24, do_sample=False,
            return_dict_in_generate=True,
        )  # fmt: skip
        assert torch.equal(out.sequences, ref)
        accepted += out.vegas_stats.accepted
    assert accepted > 0  # real text: sparse drafts are accepted
