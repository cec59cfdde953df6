"""Tiny seeded fixtures build quickly, deterministically and run a forward pass."""

from __future__ import annotations

import pytest
import torch

from hf_ext import testing
from hf_ext.testing import requires


@requires("transformers")
@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "gemma3"])
def test_causal_lms_are_seeded_and_generate(arch):
    a, b = testing.tiny_causal_lm(arch, seed=1), testing.tiny_causal_lm(arch, seed=1)
    assert not a.training
    ids = torch.tensor([[1, 5, 9, 3]])
    torch.testing.assert_close(a(ids).logits, b(ids).logits)
    out = a.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)
    assert out.shape == (1, 7)


@requires("transformers")
def test_bad_arch_is_named():
    with pytest.raises(ValueError, match="`arch` must be one of .* got 'gpt9'"):
        testing.tiny_causal_lm("gpt9")


@requires("transformers")
def test_word_tokenizer_round_trips(tmp_path):
    from transformers import AutoTokenizer

    tok = testing.word_tokenizer(["hello", "world"])
    assert tok("hello world zebra")["input_ids"] == [4, 5, 3]
    tok.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)("world")["input_ids"] == [5]


@requires("transformers")
def test_llava_and_segformer_forward():
    llava = testing.tiny_llava()
    ids = torch.tensor([[1] + [63] * 16 + [5, 6]])
    out = llava(input_ids=ids, pixel_values=torch.randn(1, 3, 32, 32))
    assert out.logits.shape == (1, 19, 64)
    seg = testing.tiny_segformer(num_labels=3)
    assert seg(pixel_values=torch.randn(1, 3, 32, 32)).logits.shape == (1, 3, 8, 8)


@requires("diffusers")
def test_wan_transformer_and_unet_forward():
    dit = testing.tiny_wan_transformer()
    assert len(dit.attn_processors) == 4
    out = dit(torch.randn(1, 4, 5, 16, 16), torch.tensor([500]), torch.randn(1, 8, 32)).sample
    assert out.shape == (1, 4, 5, 16, 16)
    unet = testing.tiny_unet()
    assert len(unet.attn_processors) == 8
    assert unet(torch.randn(1, 4, 8, 8), 10, torch.randn(1, 3, 16)).sample.shape == (1, 4, 8, 8)


@pytest.mark.slow
@requires("diffusers")
def test_wan_pipeline_runs():
    pipe = testing.tiny_wan_pipeline()
    pipe.set_progress_bar_config(disable=True)
    video = pipe(
        "a cat runs",
        height=16,
        width=16,
        num_frames=9,
        num_inference_steps=2,
        guidance_scale=1.0,
        max_sequence_length=16,
        output_type="pt",
        generator=torch.Generator().manual_seed(0),
    ).frames
    assert video.shape[1] == 9 and torch.isfinite(video).all()


@requires("timm")
@pytest.mark.parametrize("name", ["test_vit", "test_resnet"])
def test_timm_models(name):
    net = testing.tiny_timm_model(name, num_classes=3)
    assert net(torch.randn(2, 3, 64, 64)).shape == (2, 3)
