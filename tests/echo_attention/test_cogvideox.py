"""EchoAttention on a tiny CogVideoX transformer (joint text-video attention, text kept dense): the exact text
merge, parity with the stock processor, restore, save/load, calibration, bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_cogvideox_transformer

pytestmark = requires("diffusers")


def _inputs(batch=1, frames=3, side=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, frames, 4, side, side, generator=g),
        torch.randn(batch, 8, 32, generator=g),
        torch.tensor([500] * batch),
    )


def _cfg(**kw):
    from hf_ext import EchoAttentionConfig

    return EchoAttentionConfig(**{"block_size": 16, "dense_layers": (), "dense_first_steps": 0, **kw})


def _run(dit, x, txt, t, **kw):
    with torch.no_grad():
        return dit(x, txt, t, return_dict=False, **kw)[0]


def _rope(frames, side, head_dim=32):
    """Any (cos, sin) of the video length exercises the RoPE path (the pipeline supplies the real one)."""
    ang = torch.randn(frames * (side // 2) ** 2, head_dim, generator=torch.Generator().manual_seed(3))
    return ang.cos(), ang.sin()


@pytest.fixture
def dit():
    return tiny_cogvideox_transformer()


def _text_case(seed, frames=4, tokens=32, heads=2, d=16, text=5, identical=False):
    g = torch.Generator().manual_seed(seed)
    if identical:
        frame = [torch.randn(1, heads, 1, tokens, d, generator=g) for _ in range(3)]
        q, k, v = (x.expand(1, heads, frames, tokens, d).reshape(1, heads, frames * tokens, d) for x in frame)
    else:
        q, k, v = (torch.randn(1, heads, frames * tokens, d, generator=g) for _ in range(3))
    tk, tv = (torch.randn(1, heads, text, d, generator=g) for _ in range(2))
    dense = torch.nn.functional.scaled_dot_product_attention(q, torch.cat([tk, k], 2), torch.cat([tv, v], 2))
    return q, k, v, tk, tv, dense


def test_text_partial_merges_exactly_with_all_tiles_and_with_identity_echo():
    from hf_ext.echo_attention.core import dense_partial, identity_theta, sparse_echo_attention
    from hf_ext.echo_attention.layout import Layout

    # every video tile kept, padded tiles (P = 40, b = 16): exact dense over [text, video] keys
    q, k, v, tk, tv, dense = _text_case(1, frames=2, tokens=40)
    lay = Layout(2, 40, 16)
    theta = identity_theta(2, lay, 16)
    kw = {"model": "band", "backend": "torch", "extra": dense_partial(q, tk, tv)}
    out, _ = sparse_echo_attention(q, k, v, lay, [1.0] * 2, [0.0] * 2, theta, **kw)
    torch.testing.assert_close(out, dense, atol=1e-5, rtol=1e-5)
    # identical frames, theta identity: echoed tiles plus the merged text part reproduce dense exactly
    q, k, v, tk, tv, dense = _text_case(0, identical=True)
    lay = Layout(4, 32, 16)
    kw["extra"] = dense_partial(q, tk, tv)
    out, alloc = sparse_echo_attention(q, k, v, lay, [0.3] * 2, [0.7] * 2, identity_theta(2, lay, 16), **kw)
    assert alloc.echoed.any() and (alloc.exact | alloc.echoed).all()
    torch.testing.assert_close(out, dense, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("rope", [False, True])
def test_dense_routes_and_full_sparse_budget_match_stock(rope, route_all):
    from hf_ext import apply_echo_attention

    dit = tiny_cogvideox_transformer(use_rotary_positional_embeddings=rope)
    x, txt, t = _inputs(batch=2, side=12)  # 36 tokens per frame: padded tiles at b = 16
    kw = {"image_rotary_emb": _rope(3, 12)} if rope else {}
    ref = _run(dit, x, txt, t, **kw)
    handle = apply_echo_attention(dit, _cfg())
    route_all(handle, 3, 36)  # every head routed dense, through qkv() and the joint SDPA
    handle.context.record = {}
    torch.testing.assert_close(_run(dit, x, txt, t, **kw), ref, atol=1e-5, rtol=1e-5)
    rec = handle.context.record[1][0]
    assert rec.q.shape == (2, 3 * 36, 2, 32) and rec.text_k.shape == (2, 8, 2, 32)
    handle.remove()
    for cfg in (_cfg(mode="sparse", budget=1.0), _cfg(mode="echo", budget=0.25, dense_layers=(0, 1))):
        handle = apply_echo_attention(dit, cfg)
        torch.testing.assert_close(_run(dit, x, txt, t, **kw), ref, atol=1e-5, rtol=1e-5)
        handle.remove()


def test_echo_runs_keys_kept_and_remove_restores(dit):
    from hf_ext import EchoCogVideoXAttnProcessor, apply_echo_attention

    x, txt, t = _inputs()
    ref = _run(dit, x, txt, t)
    before = dict(dit.attn_processors)
    n_hooks = len(dit._forward_pre_hooks)
    handle = apply_echo_attention(dit, _cfg(mode="echo", budget=0.25))
    after = dit.attn_processors
    assert list(after) == list(before)
    assert all(after[k] is before[k] for k in before if ".attn1." not in k)
    assert all(isinstance(after[k], EchoCogVideoXAttnProcessor) for k in before if ".attn1." in k)
    out = _run(dit, x, txt, t)
    err = float((out - ref).norm() / ref.norm())
    assert torch.isfinite(out).all() and 0 < err < 1
    stats = handle.stats()
    assert len(stats) == 4 and all(r["operator"] == "echo" and 0 < r["flops"] < 1 for r in stats)
    handle.remove()
    handle.remove()  # idempotent
    assert all(dit.attn_processors[k] is before[k] for k in before)
    assert all(type(dit.attn_processors[k]) is type(before[k]) for k in before)
    assert len(dit._forward_pre_hooks) == n_hooks
    assert torch.equal(_run(dit, x, txt, t), ref)


def test_batch_two_and_cfg_calls_share_one_step_index(dit):
    from hf_ext import apply_echo_attention

    x, txt, _ = _inputs(batch=2)
    handle = apply_echo_attention(dit, _cfg(dense_first_steps=1))
    steps = []
    for tt in (900, 900, 600, 600, 900):
        out = _run(dit, x, txt, torch.tensor([tt, tt]))
        steps.append(handle.context.step)
    assert steps == [0, 0, 1, 1, 0]
    assert torch.isfinite(out).all()
    _run(dit, x, txt, torch.tensor([600, 600]))  # step 1 -> past dense_first_steps: echo on batch 2
    assert handle.stats()[0]["operator"] == "echo"
    handle.remove()


@pytest.mark.parametrize("routing", ["static", "learned"])
def test_calibrate_save_and_reload_bit_identical(dit, tmp_path, routing, caplog):
    from hf_ext import apply_echo_attention, calibrate_echo
    from hf_ext.echo_attention.layout import Layout

    x, txt, t = _inputs()
    calls = [
        {"hidden_states": _inputs(seed=1)[0], "timestep": torch.tensor([300]), "encoder_hidden_states": txt}
    ]
    handle = apply_echo_attention(dit, _cfg(budget=0.25, routing=routing, echo_share=0.25))
    report = calibrate_echo(handle, calls, stage3_steps=2)
    assert report["layout"] == (3, 64) and len(report["routes"]) == 4
    assert ("errors" in report) == (routing == "static") and ("logits" in report) == (routing == "learned")
    fit = handle.params.fit(Layout(3, 64, 16))
    assert fit is not None and not torch.all(fit.w == 0)
    assert len(report["stage3_loss"]) == 2 or all(r["operator"] != "echo" for r in report["routes"])
    out = _run(dit, x, txt, t)
    handle.save_pretrained(tmp_path)
    handle.remove()
    again = apply_echo_attention(dit, calibration=tmp_path)
    assert torch.equal(_run(dit, x, txt, t), out)
    with caplog.at_level("WARNING"):  # an unseen layout falls back to uncalibrated sparse, warning once
        for _ in range(2):
            assert torch.isfinite(_run(dit, *_inputs(frames=2))).all()
    assert sum("no calibration for (F, P) = (2, 64)" in r.message for r in caplog.records) == 1
    again.remove()
    with pytest.raises(RuntimeError, match="was removed"):
        calibrate_echo(again, calls)


def test_stage2_error_includes_the_text_keys(dit):
    from hf_ext.echo_attention.calibrate import _dense_outputs, _option_outputs
    from hf_ext.echo_attention.config import EchoAttentionConfig
    from hf_ext.echo_attention.layout import Layout
    from hf_ext.echo_attention.params import EchoParams
    from hf_ext.echo_attention.routed import SPARSE, AttnRecord

    q, k, v, tk, tv, dense = _text_case(2, frames=2, tokens=32)
    lay = Layout(2, 32, 16)
    rec = AttnRecord(*(x.transpose(1, 2) for x in (q, k, v, tk, tv)))
    torch.testing.assert_close(_dense_outputs([rec])[0], dense, atol=1e-5, rtol=1e-5)
    fit = EchoParams(1, 2, 16).bind(lay)
    outs, _ = _option_outputs(fit, 0, [rec], SPARSE, 1.0, EchoAttentionConfig(block_size=16))
    torch.testing.assert_close(outs[0], dense, atol=1e-5, rtol=1e-5)
    video_only = _dense_outputs([tuple(rec[:3])])[0]  # Wan records: no text part
    assert not torch.allclose(video_only, dense, atol=1e-3)


def test_bad_inputs(dit):
    from diffusers.models.attention_processor import AttnProcessor2_0

    from hf_ext import apply_echo_attention
    from hf_ext.testing import tiny_unet

    with pytest.raises(
        TypeError,
        match="must be one of .*WanTransformer3DModel.*CogVideoXTransformer3DModel.*got UNet2DCondition",
    ):
        apply_echo_attention(tiny_unet(), _cfg())
    with pytest.raises(ValueError, match=r"`dense_layers` must index blocks in \[0, 2\), got \(2,\)"):
        apply_echo_attention(dit, _cfg(dense_layers=(2,)))
    handle = apply_echo_attention(dit, _cfg())
    with pytest.raises(ValueError, match="already has a EchoCogVideoXAttnProcessor"):
        apply_echo_attention(dit, _cfg())
    proc = dit.attn_processors["transformer_blocks.0.attn1.processor"]
    handle._hook.remove()
    with pytest.raises(
        RuntimeError, match="EchoCogVideoXAttnProcessor was called without the layout pre-hook"
    ):
        proc(dit.transformer_blocks[0].attn1, torch.randn(1, 64, 64), torch.randn(1, 8, 64))
    fresh = tiny_cogvideox_transformer()
    fresh.transformer_blocks[1].attn1.set_processor(AttnProcessor2_0())
    with pytest.raises(
        TypeError,
        match="transformer_blocks.1.attn1.processor must be a CogVideoXAttnProcessor2_0.*AttnProcessor2_0",
    ):
        apply_echo_attention(fresh, _cfg())


@pytest.mark.triton_interpret
@pytest.mark.parametrize("model", ["pooled", "band"])
def test_triton_path_with_text_merge_matches_torch(dit, model):
    from hf_ext.kernels._dispatch import interpret_mode, triton_installed

    if not triton_installed() or not interpret_mode():
        pytest.skip("run with TRITON_INTERPRET=1 in a separate process (needs triton)")
    from hf_ext import apply_echo_attention

    x, txt, t = _inputs()
    outs = []
    for backend in ("torch", "triton"):
        cfg = _cfg(mode="echo", budget=0.25, echo_share=0.25, echo_model=model, backend=backend)
        handle = apply_echo_attention(dit, cfg)
        outs.append(_run(dit, x, txt, t))
        assert handle.stats()[0]["echoed"] > 0
        handle.remove()
    torch.testing.assert_close(outs[1], outs[0], atol=1e-4, rtol=1e-4)


def test_attention_mask_runs_stock_with_one_warning(dit, caplog):
    from diffusers.models.attention_processor import CogVideoXAttnProcessor2_0

    from hf_ext import apply_echo_attention

    handle = apply_echo_attention(dit, _cfg(mode="echo"))
    _run(dit, *_inputs())  # the hook records the layout
    attn = dit.transformer_blocks[0].attn1
    proc = attn.processor
    hs, enc, mask = torch.randn(1, 192, 64), torch.randn(1, 8, 64), torch.zeros(1, 200)
    ref = CogVideoXAttnProcessor2_0()(attn, hs, enc, attention_mask=mask)
    with caplog.at_level("WARNING"):
        for _ in range(2):
            out = proc(attn, hs, enc, attention_mask=mask)
            assert all(torch.equal(a, b) for a, b in zip(out, ref))
    assert sum("attention_mask" in r.message for r in caplog.records) == 1
    handle.remove()
