"""A Wan self-attention layer with EchoAttention traces whole under ``torch.compile`` (no host reads)."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_wan_transformer

pytestmark = requires("diffusers")


@pytest.mark.parametrize("mode", ["echo", "sparse"])
def test_layer_compiles_fullgraph_on_cpu(mode):
    from hf_ext import EchoAttentionConfig, apply_echo_attention

    dit = tiny_wan_transformer()
    g = torch.Generator().manual_seed(0)
    x, t, txt = (
        torch.randn(1, 4, 4, 16, 16, generator=g),
        torch.tensor([500]),
        torch.randn(1, 8, 32, generator=g),
    )
    cfg = EchoAttentionConfig(block_size=16, dense_layers=(), dense_first_steps=0, mode=mode, backend="torch")
    handle = apply_echo_attention(dit, cfg)
    attn = dit.blocks[0].attn1
    seen = {}
    hook = attn.register_forward_pre_hook(lambda m, a: seen.update(x=a[0], rotary_emb=a[3]))
    with torch.no_grad():
        dit(x, t, txt)  # the pre-hook records the layout; the layer hook its inputs
    hook.remove()

    def layer(hidden, rotary):
        return attn(hidden, rotary_emb=rotary)

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, backend="aot_eager")  # a graph break or host read raises
    with torch.no_grad():
        eager = layer(seen["x"], seen["rotary_emb"])
        torch.testing.assert_close(compiled(seen["x"], seen["rotary_emb"]), eager, atol=1e-5, rtol=1e-5)
    assert handle.stats()[0]["operator"] == mode
    handle.remove()
