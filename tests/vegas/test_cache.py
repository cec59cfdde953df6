"""``InPlaceCache``: preallocated K/V with per-row lengths (rollback = moving a length, no copy)."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_gemma3, tiny_llama

pytestmark = requires("transformers")

ARCH = dict(
    hidden_size=32,
    intermediate_size=64,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
)


def _prompts(b: int = 2, n: int = 40) -> torch.Tensor:
    return torch.randint(3, 64, (b, n), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
def test_plain_generate_on_the_in_place_cache_equals_the_default(arch):
    from hf_ext.vegas.cache import InPlaceCache

    lm = tiny_llama(**ARCH) if arch == "llama" else tiny_gemma3(num_hidden_layers=3, head_dim=8, **ARCH)
    ids = _prompts()
    cache = InPlaceCache(lm.config, batch_size=2, max_cache_len=60)
    out = lm.generate(ids, cache=cache, max_new_tokens=10, do_sample=False)
    assert torch.equal(out, lm.generate(ids, max_new_tokens=10, do_sample=False))
    assert cache.lengths == [49, 49]  # the last emitted token is never fed back


def test_update_writes_in_place_and_rollback_moves_lengths_only():
    from hf_ext.vegas.cache import InPlaceLayer

    keys, values = torch.zeros(2, 1, 8, 1), torch.zeros(2, 1, 8, 1)
    layer = InPlaceLayer(keys, values, [2, 4])
    k, _ = layer.update(torch.ones(2, 1, 2, 1), torch.ones(2, 1, 2, 1))
    assert layer.lengths == [4, 6] and k.shape == (2, 1, 6, 1)
    assert keys[:, 0, :, 0].tolist() == [[0, 0, 1, 1, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 0, 0]]  # per-row slots
    assert k.data_ptr() == keys.data_ptr()  # a view of the buffer, no copy
    layer.crop(-3)
    assert layer.lengths == [1, 3]
    layer.crop(2)
    assert layer.lengths == [1, 2]
    with pytest.raises(ValueError, match="InPlaceCache is full"):
        layer.update(torch.ones(2, 1, 7, 1), torch.ones(2, 1, 7, 1))


def test_rows_view_a_slice_of_the_buffers_with_fresh_lengths():
    from hf_ext.testing import tiny_llama
    from hf_ext.vegas.cache import InPlaceCache

    lm = tiny_llama()
    cache = InPlaceCache(lm.config, batch_size=3, max_cache_len=8)
    view = cache.rows(2, 5, first=1)
    layer, inner = cache.slots[0], view.slots[0]
    assert inner.lengths == [5, 5] and inner.keys.shape[0] == 2
    assert inner.keys.data_ptr() == layer.keys[1].data_ptr()  # row 1's buffer, no copy
    inner.update(torch.ones_like(inner.keys[:, :, :1]), torch.ones_like(inner.values[:, :, :1]))
    assert layer.keys[1:, :, 5].eq(1).all() and layer.keys[0].eq(0).all() and layer.lengths == [0, 0, 0]
    for first, count in ((2, 2), (-1, 1), (0, 0)):
        with pytest.raises(ValueError, match=f"`first`={first} and `count`={count}"):
            cache.rows(count, 0, first=first)


def test_from_cache_copies_a_prefilled_dynamic_cache():
    from transformers import DynamicCache

    from hf_ext.vegas.cache import InPlaceCache

    lm, ids = tiny_llama(**ARCH), _prompts()
    dyn = DynamicCache(config=lm.config)
    with torch.no_grad():
        lm(ids, cache=dyn)
    cache = InPlaceCache.from_cache(dyn, lm.config, 50)
    assert cache.lengths == [40, 40]
    torch.testing.assert_close(cache.layers[1].keys[:, :, :40], dyn.layers[1].keys)
    with pytest.raises(ValueError, match="holds nothing"):
        InPlaceCache.from_cache(DynamicCache(config=lm.config), lm.config, 50)


def test_unknown_layer_types_are_refused():
    from hf_ext.vegas.cache import InPlaceCache

    lm = tiny_llama(**ARCH)
    lm.config.layer_types = ["full_attention", "chunked_attention"]
    with pytest.raises(ValueError, match="chunked_attention"):
        InPlaceCache(lm.config, batch_size=1, max_cache_len=8)
