"""``ViewMaskPipeline`` on tiny untrained components: the scheduler wiring, outputs, seeding, save/load, bad
inputs, and an overfit sanity run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from benchmarks.harness import pinned_threads
from hf_ext.testing import requires

from .conftest import tiny_transformer, tiny_vq

pytestmark = requires("diffusers", "transformers")

K, P, V = 16, 4, 4  # codes, tokens per view (8x8 image, 4x downsampling), views


def _pipe(*, text=True, schedule="cosine"):
    from diffusers import AmusedScheduler

    from hf_ext.viewmask import (
        ViewMaskPipeline,
        viewmask_prompt_tokenizer,
    )

    tok = viewmask_prompt_tokenizer(6) if text else None
    vq = tiny_vq()
    transformer = tiny_transformer(
        num_views=V,
        tokens_per_view=P,
        codebook_size=K,
        text_vocab_size=len(tok) if text else 0,
        max_text_length=6,
    )
    pipe = ViewMaskPipeline(
        vqvae=vq,
        transformer=transformer,
        scheduler=AmusedScheduler(mask_token_id=K, masking_schedule=schedule),
        tokenizer=tok,
    )
    pipe.set_progress_bar_config(disable=True)
    vq.eval(), transformer.eval()  # as from_pretrained returns them
    return pipe


def _images(batch=2):
    return torch.rand(batch, 3, 8, 8, generator=torch.Generator().manual_seed(3))


def _record(pipe):
    """Wrap the transformer's forward to record the image tokens it sees at every step."""
    seen = []
    forward = pipe.transformer.forward

    def spy(image_tokens, *args, **kwargs):
        seen.append(image_tokens.clone())
        return forward(image_tokens, *args, **kwargs)

    pipe.transformer.forward = spy
    return seen


def _expected_masked_counts(steps, n, schedule):
    """Masked target tokens entering each step: all of them, then ``floor(nP (n-1)/n ratio(i))`` clipped to
    ``[1, #masked - 1]`` (in float32, in the scheduler's order of operations)."""
    masked, counts = (n - 1) * P, []
    for i in range(steps):
        counts.append(masked)
        if i == steps - 1:
            break
        x = torch.tensor(i + 1) / steps
        ratio = torch.cos(x * math.pi / 2) if schedule == "cosine" else 1 - x
        length = int((n * P * ((n - 1) / n * ratio)).floor())
        masked = max(1, min(masked - 1, length))
    return counts


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_masked_counts_follow_the_scheduler_formula_and_conditioning_is_kept(schedule):
    pipe = _pipe(schedule=schedule)
    seen = _record(pipe)
    images = _images()
    steps = 6
    out = pipe(
        image=images,
        prompt="one box red",
        num_inference_steps=steps,
        generator=torch.Generator().manual_seed(0),
        output_type="pt",
    )
    cond = pipe.vqvae.tokenize(pipe.image_processor.preprocess(images)).flatten(1)
    expected = _expected_masked_counts(steps, V, schedule)
    assert [int((s == K).sum(-1)[0]) for s in seen] == expected
    assert all(int((s == K).sum(-1)[1]) == expected[i] for i, s in enumerate(seen))
    assert all(torch.equal(s[:, :P], cond) for s in seen)  # conditioning identical at every step
    assert not (out.tokens == K).any() and torch.equal(out.tokens[:, 0], cond)


def test_linear_schedule_gives_a_different_count_sequence():
    assert _expected_masked_counts(8, V, "cosine") != _expected_masked_counts(8, V, "linear")
    # the lower clip (#masked - 1) binds on this short sequence
    assert _expected_masked_counts(4, 2, "cosine") == [4, 3, 2, 1]


@pytest.mark.parametrize("output_type", ["pil", "np", "pt"])
def test_end_to_end_output_types(output_type):
    pipe = _pipe()
    out = pipe(
        image=_images(),
        prompt=["two boxes red and blue", "one box green"],
        num_inference_steps=4,
        generator=torch.Generator().manual_seed(0),
        output_type=output_type,
    )
    assert out.tokens.shape == (2, V, P) and out.tokens.max() < K
    if output_type == "pil":
        assert len(out.images) == 2 and all(len(views) == V for views in out.images)
        assert out.images[0][0].size == (8, 8)
    elif output_type == "np":
        assert out.images.shape == (2, V, 8, 8, 3) and np.isfinite(out.images).all()
    else:
        assert out.images.shape == (2, V, 3, 8, 8) and torch.isfinite(out.images).all()
        assert out.images.min() >= 0 and out.images.max() <= 1
        # view 0 is the re-decoded input
        redecoded = pipe.vqvae.decode_indices(out.tokens[:, 0].view(2, 2, 2)).clamp(-1, 1)
        assert torch.allclose(out.images[:, 0], (redecoded + 1) / 2, atol=1e-5)


def test_return_dict_false_pil_input_and_single_target_view():
    pipe = _pipe(text=False)
    images, tokens = pipe(
        image=pipe.image_processor.pt_to_numpy(_images(1)),
        num_inference_steps=3,
        output_type="np",
        return_dict=False,
    )
    assert images.shape == (1, V, 8, 8, 3) and tokens.shape == (1, V, P)
    from PIL import Image

    pil = Image.fromarray((images[0, 0] * 255).astype(np.uint8))
    out = pipe(image=pil, target_views=[2], num_inference_steps=3, output_type="pt")
    assert out.images.shape == (1, 2, 3, 8, 8)


def test_same_generator_seed_same_output_and_generator_lists():
    pipe = _pipe()

    def run(g):
        return pipe(
            image=_images(), prompt="one box red", num_inference_steps=4, generator=g, output_type="pt"
        ).tokens

    a, b = run(torch.Generator().manual_seed(7)), run(torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    c = run([torch.Generator().manual_seed(7), torch.Generator().manual_seed(8)])
    d = run([torch.Generator().manual_seed(7), torch.Generator().manual_seed(8)])
    assert torch.equal(c, d)


def test_save_load_round_trip_with_the_text_tokenizer(tmp_path):
    from hf_ext.viewmask import ViewMaskPipeline

    pipe = _pipe()
    pipe.save_pretrained(tmp_path / "pipe")
    back = ViewMaskPipeline.from_pretrained(tmp_path / "pipe")
    back.set_progress_bar_config(disable=True)
    assert back.tokenizer("two boxes red").input_ids == pipe.tokenizer("two boxes red").input_ids
    kw = dict(image=_images(), prompt="two boxes red and blue", num_inference_steps=4, output_type="pt")
    a = pipe(generator=torch.Generator().manual_seed(1), **kw)
    b = back(generator=torch.Generator().manual_seed(1), **kw)
    assert torch.equal(a.tokens, b.tokens) and torch.allclose(a.images, b.images)


def test_to_and_progress_bar_config(capsys):
    pipe = _pipe(text=False)
    pipe.to("cpu")
    assert pipe.device.type == "cpu"
    pipe(image=_images(1), num_inference_steps=3)
    assert "it/s" not in capsys.readouterr().err
    pipe.set_progress_bar_config(disable=False)
    pipe(image=_images(1), num_inference_steps=3)
    assert "3/3" in capsys.readouterr().err


def test_bad_inputs_name_the_argument_and_value():
    from diffusers import AmusedScheduler

    from hf_ext.viewmask import ViewMaskPipeline

    pipe = _pipe()
    img = _images(2)
    with pytest.raises(ValueError, match=r"`image` height and width.*downsample=4.*\(10, 10\)"):
        pipe(image=torch.rand(1, 3, 10, 10))
    with pytest.raises(ValueError, match=r"`image` must be \[B, 3, H, W\].*\(1, 1, 8, 8\)"):
        pipe(image=torch.rand(1, 1, 8, 8))
    with pytest.raises(ValueError, match="`image` must be square.*tokens_per_view=4.*16"):
        pipe(image=torch.rand(1, 3, 16, 16))
    with pytest.raises(ValueError, match=r"`num_views`.*1"):
        pipe(image=img, num_views=1)
    with pytest.raises(ValueError, match=r"`num_views` must equal.*num_views=4.*3"):
        pipe(image=img, num_views=3)
    with pytest.raises(ValueError, match=r"`num_inference_steps`.*0"):
        pipe(image=img, num_inference_steps=0)
    with pytest.raises(ValueError, match=r"`generator` must be one generator or 2.*3"):
        pipe(image=img, generator=[torch.Generator() for _ in range(3)])
    with pytest.raises(ValueError, match=r"`target_views`.*\[0, 2\]"):
        pipe(image=img, target_views=[0, 2])
    with pytest.raises(ValueError, match=r"`output_type`.*'latent'"):
        pipe(image=img, output_type="latent")
    with pytest.raises(ValueError, match=r"`temperature`.*5"):
        pipe(image=img, temperature=5.0)
    with pytest.raises(ValueError, match=r"`prompt` must be one string or 2 strings.*3"):
        pipe(image=img, prompt=["a", "b", "c"])
    plain = _pipe(text=False)
    with pytest.raises(ValueError, match=r"`prompt` must be None.*'red'"):
        plain(image=img, prompt="red")
    with pytest.raises(ValueError, match=r"`scheduler.config.mask_token_id`.*codebook_size=16.*15"):
        ViewMaskPipeline(
            vqvae=pipe.vqvae, transformer=pipe.transformer, scheduler=AmusedScheduler(mask_token_id=15)
        )


def test_overfit_one_object_reproduces_its_target_tokens():
    from hf_ext.viewmask import (
        ViewMaskTrainingConfig,
        random_voxel_object,
        render_views,
        train_viewmask,
    )

    pipe = _pipe(text=False)
    views = torch.from_numpy(render_views(random_voxel_object(5), pixels_per_voxel=1)).permute(0, 3, 1, 2)
    tokens = pipe.vqvae.tokenize(views * 2 - 1).flatten(1)[None]  # [1, V, P]
    with pinned_threads(1):  # a tiny model: one thread is fastest and unaffected by other processes
        losses = train_viewmask(
            pipe.transformer,
            tokens,
            ViewMaskTrainingConfig(steps=200, batch_size=8, learning_rate=3e-3, seed=0),
        )
    assert losses[-1] < losses[0]
    out = pipe(
        image=views[:1], num_inference_steps=4, generator=torch.Generator().manual_seed(0), output_type="pt"
    )
    accuracy = (out.tokens[0, 1:] == tokens[0, 1:]).float().mean().item()
    assert accuracy > 0.9, accuracy
