"""``"hf_ext_chunk"``: plain decoding with the verify's kernel in place of SDPA (a benchmark plain arm)."""

from __future__ import annotations

import types

import pytest
import torch

from hf_ext.testing import requires, tiny_gemma3, tiny_llama

pytestmark = requires("transformers")

ARCH = dict(
    hidden_size=64,
    intermediate_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
)


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, ...]]:
    """Record the query shape of every ``chunk_attention`` call the attention function makes."""
    from hf_ext.vegas import attention

    calls: list[tuple[int, ...]] = []
    real = attention.chunk_attention

    def spy(q, *args, **kwargs):
        calls.append(tuple(q.shape))
        return real(q, *args, **kwargs)

    monkeypatch.setattr(attention, "chunk_attention", spy)
    return calls


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@pytest.mark.parametrize("cache", ["in_place", "dynamic"])
def test_plain_greedy_with_the_kernel_equals_sdpa(arch, cache, monkeypatch):
    from hf_ext.vegas.attention import register_chunk_attention
    from hf_ext.vegas.cache import InPlaceCache

    lm = tiny_llama(**ARCH) if arch == "llama" else tiny_gemma3(num_hidden_layers=3, head_dim=16, **ARCH)
    ids = torch.randint(3, 64, (2, 40), generator=torch.Generator().manual_seed(0))
    want = lm.generate(ids, max_new_tokens=10, do_sample=False)
    calls = _spy(monkeypatch)
    lm.set_attn_implementation(register_chunk_attention())
    kw = {"cache": InPlaceCache(lm.config, batch_size=2, max_cache_len=60)} if cache == "in_place" else {}
    got = lm.generate(ids, max_new_tokens=10, do_sample=False, **kw)
    assert torch.equal(got, want)
    if arch == "llama":  # every layer's 9 decode steps ran the kernel (Gemma's layers get masks: SDPA)
        assert len([c for c in calls if c[2] == 1]) == 9 * lm.config.num_hidden_layers


def test_a_host_mask_goes_to_sdpa(monkeypatch):
    from hf_ext.vegas.attention import register_chunk_attention

    lm = tiny_llama(**ARCH)
    ids = torch.randint(3, 64, (2, 30), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, :5] = 0  # a left-padded row: the host builds a mask, which the kernel does not read
    want = lm.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
    calls = _spy(monkeypatch)
    lm.set_attn_implementation(register_chunk_attention())
    got = lm.generate(ids, attention_mask=mask, max_new_tokens=6, do_sample=False)
    assert torch.equal(got, want)
    assert calls == []


@pytest.mark.parametrize("q", [1, 5, 40])
def test_without_a_mask_query_j_sees_the_slots_up_to_n_minus_q_plus_j(q):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from hf_ext.vegas.attention import chunk_attention_forward

    g = torch.Generator().manual_seed(q)
    module = types.SimpleNamespace(is_causal=True, num_key_value_groups=2, training=False)
    query = torch.randn(3, 4, q, 16, generator=g)
    key, value = torch.randn(3, 2, 40, 16, generator=g), torch.randn(3, 2, 40, 16, generator=g)
    mask = torch.ones(q, 40, dtype=torch.bool).tril(40 - q)  # a decode step (q = 1) or a prefill (q = N) too
    want, _ = sdpa_attention_forward(module, query, key, value, mask[None, None], scaling=0.3)
    got, _ = chunk_attention_forward(module, query, key, value, None, scaling=0.3)
    torch.testing.assert_close(got, want, atol=2e-6, rtol=2e-5)
