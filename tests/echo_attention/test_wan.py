"""EchoAttention on a tiny Wan transformer: parity, restore, save/load, schedule, calibration, bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_wan_transformer

pytestmark = requires("diffusers")


def _inputs(batch=1, frames=4, side=16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (
        torch.randn(batch, 4, frames, side, side, generator=g),
        torch.tensor([500] * batch),
        torch.randn(batch, 8, 32, generator=g),
    )


def _cfg(**kw):
    from hf_ext import EchoAttentionConfig

    return EchoAttentionConfig(**{"block_size": 16, "dense_layers": (), "dense_first_steps": 0, **kw})


@pytest.fixture
def dit():
    return tiny_wan_transformer()


def routes_fitted(handle, layout=None):
    """Whether every layer of ``handle`` has routes at ``layout`` (default: its last call's)."""
    fit = handle.params.fit(layout or handle.context.layout)
    return fit is not None and all(fit.routes(i) is not None for i in range(handle.params.num_layers))


def _run(dit, x, t, txt):
    with torch.no_grad():
        return dit(x, t, txt).sample


def test_dense_routing_and_full_budget_match_stock(dit):
    from hf_ext import apply_echo_attention

    x, t, txt = _inputs()
    ref = _run(dit, x, t, txt)
    for cfg in (_cfg(mode="dense"), _cfg(mode="sparse", budget=1.0)):
        handle = apply_echo_attention(dit, cfg)
        torch.testing.assert_close(_run(dit, x, t, txt), ref, atol=1e-5, rtol=1e-5)
        handle.remove()


def test_forced_dense_heads_through_the_module_projections_match_stock(dit, route_all):
    from hf_ext import apply_echo_attention

    x, t, txt = _inputs()
    ref = _run(dit, x, t, txt)
    handle = apply_echo_attention(dit, _cfg())
    route_all(handle, 4, 64)  # every head routed dense, through qkv() + dispatch_attention_fn
    handle.context.record = {}
    torch.testing.assert_close(_run(dit, x, t, txt), ref, atol=1e-5, rtol=1e-5)
    assert set(handle.context.record) == {0, 1}


def test_echo_runs_keys_kept_attn2_untouched_and_remove_restores(dit):
    from hf_ext import EchoWanAttnProcessor, apply_echo_attention

    x, t, txt = _inputs()
    ref = _run(dit, x, t, txt)
    before = dict(dit.attn_processors)
    n_hooks = len(dit._forward_pre_hooks)
    handle = apply_echo_attention(dit, _cfg(mode="echo", budget=0.25))
    after = dit.attn_processors
    assert list(after) == list(before)
    assert all(after[k] is before[k] for k in before if ".attn2." in k)
    assert all(isinstance(after[k], EchoWanAttnProcessor) for k in before if ".attn1." in k)
    out = _run(dit, x, t, txt)
    err = float((out - ref).norm() / ref.norm())
    assert torch.isfinite(out).all() and 0 < err < 1
    stats = handle.stats()
    assert len(stats) == 4 and all(r["operator"] == "echo" and 0 < r["flops"] < 1 for r in stats)
    handle.remove()
    assert all(dit.attn_processors[k] is before[k] for k in before)
    assert len(dit._forward_pre_hooks) == n_hooks
    assert torch.equal(_run(dit, x, t, txt), ref)


def test_native_backend_still_reaches_dense_heads(dit, route_all):
    from hf_ext import apply_echo_attention

    x, t, txt = _inputs()
    ref = _run(dit, x, t, txt)
    dit.set_attention_backend("native")
    handle = apply_echo_attention(dit, _cfg())
    route_all(handle, 4, 64)
    procs = [p for k, p in dit.attn_processors.items() if ".attn1." in k]
    assert all(p._attention_backend is not None for p in procs)  # the user's backend reaches the dense heads
    torch.testing.assert_close(_run(dit, x, t, txt), ref, atol=1e-5, rtol=1e-5)
    handle.remove()


def test_batch_two_and_cfg_calls_share_one_step_index(dit):
    from hf_ext import apply_echo_attention

    x, t, txt = _inputs(batch=2)
    handle = apply_echo_attention(dit, _cfg(dense_first_steps=1))
    ctx = handle.context
    steps = []
    for tt in (900, 900, 600, 600, 300, 900):
        _run(dit, x, torch.tensor([tt, tt]), txt)
        steps.append(ctx.step)
    assert steps == [0, 0, 1, 1, 2, 0]  # CFG's two calls share a step; a larger t starts a new run
    assert handle.stats()[0]["operator"] == "echo"  # step 2 -> past dense_first_steps


def test_calibrate_save_and_reload_bit_identical(dit, tmp_path, caplog):
    from hf_ext import apply_echo_attention, calibrate_echo
    from hf_ext.echo_attention.layout import Layout

    x, t, txt = _inputs()
    calls = [
        {"hidden_states": _inputs(seed=1)[0], "timestep": torch.tensor([300]), "encoder_hidden_states": txt}
    ]
    handle = apply_echo_attention(dit, _cfg(budget=0.25))
    report = calibrate_echo(handle, calls, stage3_steps=1)
    assert report["layout"] == (4, 64) and len(report["routes"]) == 4
    fit = handle.params.fit(Layout(4, 64, 16))
    assert fit is not None and not torch.all(fit.w == 0)
    out = _run(dit, x, t, txt)
    handle.save_pretrained(tmp_path)
    handle.remove()
    again = apply_echo_attention(dit, calibration=tmp_path)
    assert torch.equal(_run(dit, x, t, txt), out)
    with caplog.at_level("WARNING"):  # an unseen layout falls back to uncalibrated sparse, warning once
        fallback = _run(dit, *_inputs(frames=2)[:1], t, txt)
    assert torch.isfinite(fallback).all()
    assert any("no calibration for (F, P) = (2, 64)" in r.message for r in caplog.records)
    assert {r["operator"] for r in again.stats()} == {"sparse"}
    again.remove()
    with pytest.raises(RuntimeError, match="was removed"):
        calibrate_echo(again, calls)


def test_calibrate_on_padded_tiles(dit):
    from hf_ext import apply_echo_attention, calibrate_echo

    x, t, txt = _inputs(frames=3, side=12)  # 36 tokens per frame: the last tile of a frame holds 4
    calls = [
        {"hidden_states": _inputs(frames=3, side=12, seed=1)[0], "timestep": t, "encoder_hidden_states": txt}
    ]
    handle = apply_echo_attention(dit, _cfg(budget=0.5))
    report = calibrate_echo(handle, calls, stage3_steps=1)
    assert report["layout"] == (3, 36)
    fit = handle.params.fit(handle.context.layout)
    assert fit is not None and all(torch.isfinite(p).all() for p in (fit.a, fit.c, fit.w))
    assert torch.isfinite(_run(dit, x, t, txt)).all()


@pytest.mark.slow
def test_learned_routing_calibrates(dit):
    from hf_ext import apply_echo_attention, calibrate_echo

    calls = [
        {
            "hidden_states": _inputs(seed=1)[0],
            "timestep": torch.tensor([500]),
            "encoder_hidden_states": _inputs()[2],
        }
    ]
    handle = apply_echo_attention(dit, _cfg(routing="learned"))
    report = calibrate_echo(handle, calls, stages=(1, 2))
    assert report["logits"].shape == (2, 2, 3)
    assert routes_fitted(handle)


@pytest.mark.slow
def test_pipeline_calibration_and_run():
    from hf_ext import apply_echo_attention, calibrate_echo
    from hf_ext.testing import tiny_wan_pipeline

    pipe = tiny_wan_pipeline()
    pipe.set_progress_bar_config(disable=True)
    kw = {"height": 16, "width": 16, "num_frames": 9, "guidance_scale": 1.0, "max_sequence_length": 16}
    handle = apply_echo_attention(pipe.transformer, _cfg(dense_first_steps=1))
    calibrate_echo(handle, pipe, prompts=["a red car"], num_inference_steps=2, stage3_steps=1, **kw)
    frames = pipe("a cat", num_inference_steps=2, output_type="latent", **kw).frames
    assert torch.isfinite(frames).all()
    handle.remove()


def test_wan22_pair_shares_the_step_index_and_calibrates_each_transformer():
    from diffusers import WanPipeline

    from hf_ext import apply_echo_attention, calibrate_echo
    from hf_ext.testing import tiny_wan_pipeline

    one = tiny_wan_pipeline()
    small = {"attention_head_dim": 12, "text_dim": 16, "freq_dim": 16, "ffn_dim": 32, "rope_max_seq_len": 32}
    parts = {k: getattr(one, k) for k in ("tokenizer", "text_encoder", "vae", "scheduler", "transformer")}
    pipe = WanPipeline(**parts, transformer_2=tiny_wan_transformer(1, **small), boundary_ratio=0.95)
    pipe.set_progress_bar_config(disable=True)
    kw = {"height": 16, "width": 16, "num_frames": 9, "guidance_scale": 1.0, "max_sequence_length": 16}

    def run():
        gen = torch.Generator().manual_seed(0)
        return pipe("a cat", num_inference_steps=4, output_type="latent", generator=gen, **kw).frames

    ref = run()
    first = apply_echo_attention(pipe.transformer, _cfg(dense_first_steps=1))
    second = apply_echo_attention(pipe.transformer_2, _cfg(dense_first_steps=1), share_context_with=first)
    assert second.context is first.context
    seen = []
    hooks = [
        tr.register_forward_pre_hook(
            lambda m, a, k, i=i: seen.append((i, first.context.step)), with_kwargs=True
        )
        for i, tr in enumerate((pipe.transformer, pipe.transformer_2))
    ]
    for handle in (first, second):
        report = calibrate_echo(
            handle, pipe, prompts=["a red car"], num_inference_steps=4, stage3_steps=1, **kw
        )
        assert report["calls"] > 0
    seen.clear()
    assert torch.isfinite(run()).all()
    assert [step for _, step in seen] == [0, 1, 2, 3]  # one step count for the pair
    assert {i for i, _ in seen} == {0, 1}
    assert all(routes_fitted(h) for h in (first, second))  # routes fitted per transformer
    for h in hooks:
        h.remove()
    first.remove()
    with pytest.raises(ValueError, match="`share_context_with` must be an installed handle"):
        apply_echo_attention(pipe.transformer, _cfg(), share_context_with=first)
    second.remove()
    torch.testing.assert_close(run(), ref, rtol=0, atol=0)


def test_apply_to_a_pipeline_patches_every_transformer(tmp_path):
    from diffusers import WanPipeline

    from hf_ext import apply_echo_attention, calibrate_echo
    from hf_ext.echo_attention.handle import EchoPipelineHandle
    from hf_ext.testing import tiny_wan_pipeline

    one = tiny_wan_pipeline()
    small = {"attention_head_dim": 12, "text_dim": 16, "freq_dim": 16, "ffn_dim": 32, "rope_max_seq_len": 32}
    parts = {k: getattr(one, k) for k in ("tokenizer", "text_encoder", "vae", "scheduler", "transformer")}
    pipe = WanPipeline(**parts, transformer_2=tiny_wan_transformer(1, **small), boundary_ratio=0.95)
    pipe.set_progress_bar_config(disable=True)
    kw = {"height": 16, "width": 16, "num_frames": 9, "guidance_scale": 1.0, "max_sequence_length": 16}

    def run():
        gen = torch.Generator().manual_seed(0)
        return pipe("a cat", num_inference_steps=2, output_type="latent", generator=gen, **kw).frames

    ref = run()
    stock = {n: dict(getattr(pipe, n).attn_processors) for n in ("transformer", "transformer_2")}
    handle = apply_echo_attention(pipe, _cfg(dense_first_steps=1))
    assert isinstance(handle, EchoPipelineHandle) and set(handle.handles) == {"transformer", "transformer_2"}
    first, second = handle.handles["transformer"], handle.handles["transformer_2"]
    assert second.context is first.context
    for name in ("transformer", "transformer_2"):
        procs = getattr(pipe, name).attn_processors
        assert type(procs["blocks.0.attn1.processor"]).__name__ == "EchoWanAttnProcessor"
        assert procs["blocks.0.attn2.processor"] is stock[name]["blocks.0.attn2.processor"]
    reports = calibrate_echo(handle, pipe, prompts=["a red car"], num_inference_steps=4, stages=(1,), **kw)
    assert set(reports) == {"transformer", "transformer_2"}
    out = run()
    assert torch.isfinite(out).all()
    handle.save_pretrained(tmp_path)
    handle.remove()
    torch.testing.assert_close(run(), ref, rtol=0, atol=0)
    reloaded = apply_echo_attention(pipe, calibration=tmp_path)
    torch.testing.assert_close(run(), out, rtol=0, atol=0)
    reloaded.remove()


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"budget": 0.0}, "`budget` must be a finite float in"),
        ({"budget": 1.5}, "`budget` must be a finite float in"),
        ({"echo_share": 1.0}, "`echo_share` must be a finite float in"),
        ({"block_size": 8}, "`block_size` must be a power of two"),
        ({"block_size": 48}, "`block_size` must be a power of two"),
        ({"mode": "fast"}, "`mode` must be one of"),
        ({"routing": "random"}, "`routing` must be one of"),
        ({"dense_layers": (-1,)}, r"`dense_layers\[0\]` must be an int >= 0"),
    ],
)
def test_config_bad_inputs(kw, match):
    with pytest.raises(ValueError, match=match):
        _cfg(**kw)


def test_apply_bad_inputs(dit, tmp_path):
    from diffusers.models.attention_processor import AttnProcessor2_0

    from hf_ext import apply_echo_attention
    from hf_ext.testing import tiny_unet

    with pytest.raises(ValueError, match=r"`dense_layers` must index blocks in \[0, 2\), got \(5,\)"):
        apply_echo_attention(dit, _cfg(dense_layers=(5,)))
    with pytest.raises(
        TypeError, match="`transformer` must be one of .*WanTransformer3DModel.*got UNet2DConditionModel"
    ):
        apply_echo_attention(tiny_unet(), _cfg())
    dit.blocks[0].attn1.set_processor(AttnProcessor2_0())
    with pytest.raises(TypeError, match="blocks.0.attn1.processor must be a WanAttnProcessor"):
        apply_echo_attention(dit, _cfg())
    with pytest.raises(ValueError, match="has no echo_attention_config.json"):
        apply_echo_attention(tiny_wan_transformer(), calibration=tmp_path)


def test_missing_tensors_and_missing_hook(dit, tmp_path):
    from safetensors.torch import save_file

    from hf_ext import apply_echo_attention
    from hf_ext.echo_attention.handle import TENSORS_NAME

    handle = apply_echo_attention(dit, _cfg())
    calls = [
        {
            "hidden_states": _inputs()[0],
            "timestep": torch.tensor([500]),
            "encoder_hidden_states": _inputs()[2],
        }
    ]
    from hf_ext import calibrate_echo

    calibrate_echo(handle, calls, stages=(1,))
    handle.save_pretrained(tmp_path)
    handle.remove()
    save_file({"route_op": torch.zeros(2, 2, dtype=torch.long)}, str(tmp_path / TENSORS_NAME))
    with pytest.raises(ValueError, match=r"missing tensors \['4x64.theta_a'"):
        apply_echo_attention(dit, calibration=tmp_path)
    fresh = tiny_wan_transformer()
    handle = apply_echo_attention(fresh, _cfg())
    proc = fresh.attn_processors["blocks.0.attn1.processor"]
    handle._hook.remove()
    with pytest.raises(RuntimeError, match="without the layout pre-hook"):
        proc(fresh.blocks[0].attn1, torch.randn(1, 64, 64))


@pytest.mark.parametrize("routing", ["static", "learned"])
def test_calibration_keeps_sparse_mode(dit, routing):
    from hf_ext import apply_echo_attention, calibrate_echo

    calls = [
        {
            "hidden_states": _inputs(seed=1)[0],
            "timestep": torch.tensor([500]),
            "encoder_hidden_states": _inputs()[2],
        }
    ]
    handle = apply_echo_attention(dit, _cfg(mode="sparse", routing=routing))
    report = calibrate_echo(handle, calls, stage3_steps=1)
    assert report["routes"] and {r["operator"] for r in report["routes"]} <= {"dense", "sparse"}
    assert "stage3_loss" not in report
    if routing == "static":
        assert all(op != 2 for op, _ in report["options"])  # echo is never offered
    x, t, txt = _inputs()
    _run(dit, x, t, txt)
    assert {r["operator"] for r in handle.stats()} <= {"dense", "sparse"}
    assert all(r.get("echoed", 0) == 0 for r in handle.stats())


def test_bad_latents_and_empty_calibration(dit):
    from hf_ext import apply_echo_attention, calibrate_echo

    handle = apply_echo_attention(dit, _cfg())
    x, t, txt = _inputs()
    x[0, 0, 0, 0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"`hidden_states` must be finite, got 1 NaN/inf value\(s\)"):
        _run(dit, x, t, txt)
    odd = _inputs(side=15)[0]
    with pytest.raises(
        ValueError, match=r"`hidden_states` dim 3 must be a multiple of the patch size 2, got 15"
    ):
        _run(dit, odd, t, txt)
    with pytest.raises(ValueError, match=r"`source` must be a pipeline or a non-empty sequence .* got \[\]"):
        calibrate_echo(handle, [])
