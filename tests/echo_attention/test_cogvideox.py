"""Sparse video-video attention on a tiny CogVideoX transformer: parity, restore, sparse error, bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("diffusers")


def _dit(**kw):
    from diffusers import CogVideoXTransformer3DModel

    torch.manual_seed(0)
    cfg = dict(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=4, text_embed_dim=32,
               num_layers=2, sample_width=16, sample_height=16, sample_frames=9, patch_size=2, time_embed_dim=16,
               max_text_seq_length=8)  # fmt: skip
    return CogVideoXTransformer3DModel(**{**cfg, **kw}).eval()


def _inputs(batch=1, frames=3, side=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(batch, frames, 4, side, side, generator=g), torch.randn(batch, 8, 32, generator=g),
            torch.tensor([500] * batch))  # fmt: skip


def _cfg(**kw):
    from hf_ext.diffusers.echo_attention.config import EchoAttentionConfig

    return EchoAttentionConfig(**{"mode": "sparse", "block_size": 16, "dense_layers": (), "dense_first_steps": 0,
                                  **kw})  # fmt: skip


def _run(dit, x, txt, t, **kw):
    with torch.no_grad():
        return dit(x, txt, t, return_dict=False, **kw)[0]


@pytest.fixture
def dit():
    return _dit()


def test_identity_modes_equal_stock_and_remove_restores(dit):
    from hf_ext.diffusers.echo_attention.cogvideox import (
        SparseCogVideoXAttnProcessor,
        apply_cogvideox_sparse_attention,
    )

    x, txt, t = _inputs()
    ref = _run(dit, x, txt, t)
    before = dict(dit.attn_processors)
    for cfg in (_cfg(mode="dense"), _cfg(budget=1.0), _cfg(budget=0.3, dense_layers=(0, 1))):
        handle = apply_cogvideox_sparse_attention(dit, cfg)
        assert list(dit.attn_processors) == list(before)
        assert all(isinstance(p, SparseCogVideoXAttnProcessor) for p in dit.attn_processors.values())
        torch.testing.assert_close(_run(dit, x, txt, t), ref, rtol=0, atol=0)
        handle.remove()
        handle.remove()  # idempotent
        assert all(dit.attn_processors[k] is v for k, v in before.items())
        torch.testing.assert_close(_run(dit, x, txt, t), ref, rtol=0, atol=0)


def test_sparse_path_with_every_tile_matches_stock():
    from hf_ext.diffusers.echo_attention.cogvideox import apply_cogvideox_sparse_attention

    x, txt, t = _inputs(batch=2, side=12)  # 36 tokens per frame: padded tiles
    for rope in (False, True):
        dit = _dit(use_rotary_positional_embeddings=rope)
        kw = {}
        if rope:  # the pipeline supplies RoPE; any (cos, sin) of the video length exercises the path
            n, d = 3 * 36, 16
            ang = torch.randn(n, d)
            kw["image_rotary_emb"] = (ang.cos(), ang.sin())
        ref = _run(dit, x, txt, t, **kw)
        handle = apply_cogvideox_sparse_attention(dit, _cfg(budget=0.3))
        for proc in handle.processors.values():  # force the sparse path while keeping every tile
            proc.is_dense = lambda: False
            proc.config = _cfg(budget=0.3, max_echo_distance=1)
            orig = proc.sparse_call
            proc.sparse_call = lambda *a, _o=orig: _o(*a[:-1], 1.0)
        torch.testing.assert_close(_run(dit, x, txt, t, **kw), ref, rtol=1e-4, atol=1e-5)
        handle.remove()


def test_sparse_budget_is_finite_bounded_and_text_dense(dit):
    from hf_ext.diffusers.echo_attention.cogvideox import apply_cogvideox_sparse_attention

    x, txt, t = _inputs()
    ref = _run(dit, x, txt, t)
    handle = apply_cogvideox_sparse_attention(dit, _cfg(budget=0.4))
    out = _run(dit, x, txt, t)
    assert torch.isfinite(out).all()
    rel = ((out - ref).norm() / ref.norm()).item()
    assert 0 < rel < 0.5, rel
    for proc in handle.processors.values():
        assert proc.last_flops is not None and (proc.last_flops <= 0.4 + 1e-6).all()
        assert (proc.last_flops < 1).all()
    handle.remove()
    torch.testing.assert_close(_run(dit, x, txt, t), ref, rtol=0, atol=0)


def test_dense_first_steps_schedule(dit):
    from hf_ext.diffusers.echo_attention.cogvideox import apply_cogvideox_sparse_attention

    x, txt, t = _inputs()
    ref = _run(dit, x, txt, t)
    handle = apply_cogvideox_sparse_attention(dit, _cfg(budget=0.4, dense_first_steps=1))
    torch.testing.assert_close(_run(dit, x, txt, t), ref, rtol=0, atol=0)  # step 0: dense
    assert handle.context.step == 0
    _run(dit, x, txt, torch.tensor([400]))
    assert handle.context.step == 1
    handle.remove()


def test_bad_inputs(dit):
    from hf_ext.diffusers.echo_attention.cogvideox import apply_cogvideox_sparse_attention
    from hf_ext.diffusers.echo_attention.config import EchoAttentionConfig

    with pytest.raises(ValueError, match="budget"):
        EchoAttentionConfig(mode="sparse", budget=0.0)
    with pytest.raises(ValueError, match="block_size"):
        EchoAttentionConfig(mode="sparse", block_size=24)
    with pytest.raises(ValueError, match="Sparse operator only"):
        apply_cogvideox_sparse_attention(dit, EchoAttentionConfig(mode="echo"))
    with pytest.raises(TypeError, match="EchoAttentionConfig"):
        apply_cogvideox_sparse_attention(dit, {"mode": "sparse"})
    with pytest.raises(TypeError, match="supports"):
        apply_cogvideox_sparse_attention(torch.nn.Linear(2, 2), _cfg())
    assert all(type(p).__name__ == "CogVideoXAttnProcessor2_0" for p in dit.attn_processors.values())


def test_text_queries_stay_dense_at_processor_level(dit):
    from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0

    from hf_ext.diffusers.echo_attention.cogvideox import (
        CogVideoXContext,
        SparseCogVideoXAttnProcessor,
    )
    from hf_ext.diffusers.echo_attention.core import Layout

    attn = dit.transformer_blocks[0].attn1
    g = torch.Generator().manual_seed(1)
    video, text = torch.randn(2, 3 * 64, 32, generator=g), torch.randn(2, 8, 32, generator=g)
    ctx = CogVideoXContext(block=16, layout=Layout(3, 64, 16))
    proc = SparseCogVideoXAttnProcessor(_cfg(budget=0.3), 0, ctx)
    with torch.no_grad():
        ref_v, ref_t = CogVideoXAttnProcessor2_0()(attn, video, text)
        out_v, out_t = proc(attn, video, text)
    torch.testing.assert_close(out_t, ref_t, rtol=1e-5, atol=1e-6)  # text rows: dense over every key
    assert not torch.allclose(out_v, ref_v) and torch.isfinite(out_v).all()
    with pytest.raises(RuntimeError, match="pre-hook"):
        SparseCogVideoXAttnProcessor(_cfg(budget=0.3), 0, CogVideoXContext(block=16))(attn, video, text)
    ctx.layout = Layout(2, 64, 16)
    with pytest.raises(ValueError, match="does not match"):
        proc(attn, video, text)
