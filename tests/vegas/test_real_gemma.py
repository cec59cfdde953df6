"""Vegas on the real Gemma-3-270M (3 global + 15 sliding layers): greedy identity on real text."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = [requires("transformers"), requires("gemma"), pytest.mark.slow, pytest.mark.real]


def test_gemma3_270m_vegas_equals_greedy():
    from hf_ext import VegasConfig, vegas_generate
    from hf_ext.assets import english_texts, gemma3_270m

    torch.set_num_threads(2)
    lm, tok = gemma3_270m()
    ids = tok(english_texts()["code"], return_tensors="pt")["input_ids"][:, :1024]
    ref = lm.generate(ids, max_new_tokens=16, do_sample=False)
    out = lm.generate(
        ids,
        custom_generate=vegas_generate,
        vegas_config=VegasConfig(fallback=False),
        max_new_tokens=16,
        do_sample=False,
        return_dict_in_generate=True,
    )
    assert torch.equal(out.sequences, ref)
    assert out.vegas_stats.acceptance_rate > 0.3
