"""Sampling exactness: the speculative rejection rule reproduces the model's distribution."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_llama

pytestmark = [requires("transformers"), pytest.mark.slow]


def test_joint_of_two_speculative_tokens_matches_the_model():
    chisquare = pytest.importorskip("scipy.stats").chisquare
    from transformers import LogitsProcessor, LogitsProcessorList

    from hf_ext import VegasConfig, vegas_generate

    lm = tiny_llama(
        vocab_size=8,
        eos_token_id=None,
        hidden_size=32,
        intermediate_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    with torch.no_grad():
        lm.lm_head.weight.mul_(20)  # a non-uniform target, so draft and target distributions differ visibly
    prompt = torch.randint(3, 8, (1, 20), generator=torch.Generator().manual_seed(0))

    class ForceFirst(LogitsProcessor):  # t1 := 5, so t2 and t3 both come from one draft/verify iteration
        def __call__(self, input_ids, scores):
            if input_ids.shape[1] == 20:
                scores = torch.full_like(scores, -float("inf"))
                scores[:, 5] = 0.0
            return scores

    with torch.no_grad():
        base = torch.cat([prompt, torch.tensor([[5]])], dim=1)
        p2 = lm(base).logits[0, -1].softmax(-1)
        nxt = torch.cat([base.repeat(8, 1), torch.arange(8)[:, None]], dim=1)
        p3 = lm(nxt).logits[:, -1].softmax(-1)
    target = (p2[:, None] * p3).flatten()  # joint over (t2, t3)
    cfg = VegasConfig(num_draft_tokens=4, min_tokens=4, sparse_ratio=0.1, fallback=False)
    counts = torch.zeros(64)
    rows = 500  # 2000 samples as 4 batches of identical prompts: each row samples on its own
    for seed in range(4):
        torch.manual_seed(seed)
        out = lm.generate(
            prompt.repeat(rows, 1),
            attention_mask=torch.ones(rows, 20, dtype=torch.long),
            custom_generate=vegas_generate,
            vegas_config=cfg,
            max_new_tokens=3,
            do_sample=True,
            top_k=None,
            logits_processor=LogitsProcessorList([ForceFirst()]),
        )
        counts += torch.bincount(out[:, 21] * 8 + out[:, 22], minlength=64)
    expected = target * 2000
    big = expected >= 5
    obs, exp = counts[big], expected[big]
    if not bool(big.all()):  # pool the sparse cells into one
        obs, exp = torch.cat([obs, counts[~big].sum()[None]]), torch.cat([exp, expected[~big].sum()[None]])
    assert chisquare(obs.numpy(), exp.numpy() * obs.sum().item() / exp.sum().item()).pvalue > 1e-3
