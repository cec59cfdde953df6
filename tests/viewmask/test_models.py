"""``LFQAutoencoder`` and ``ViewMaskTransformer``: shapes, the shared token space, save/load, bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

from .conftest import tiny_transformer, tiny_vq

pytestmark = requires("diffusers")


def test_autoencoder_shapes_and_straight_through_reconstruction():
    vq = tiny_vq()
    x = torch.rand(2, 3, 8, 8) * 2 - 1
    out = vq(x)
    assert out.sample.shape == x.shape and out.indices.shape == (2, 2, 2)
    assert out.indices.min() >= 0 and out.indices.max() < 16
    assert torch.equal(out.indices, vq.tokenize(x))
    # the straight-through forward decodes exactly the quantised codes
    assert torch.allclose(out.sample, vq.decode_indices(out.indices), atol=1e-6)
    out.sample.sum().backward()
    assert vq.encoder[0].weight.grad is not None and vq.encoder[0].weight.grad.abs().sum() > 0


def test_autoencoder_save_load_round_trip(tmp_path):
    from hf_ext.viewmask import LFQAutoencoder

    vq = tiny_vq()
    vq.save_pretrained(tmp_path / "vq")
    back = LFQAutoencoder.from_pretrained(tmp_path / "vq")
    x = torch.rand(1, 3, 8, 8) * 2 - 1
    assert back.config.codebook_bits == 4 and back.codebook_size == 16
    assert torch.equal(back.tokenize(x), vq.tokenize(x))
    with torch.no_grad():
        assert torch.equal(back(x).sample, vq(x).sample)


def test_transformer_head_emits_exactly_k_logits_and_shared_table():
    model = tiny_transformer(text_vocab_size=5, max_text_length=3)
    assert model.token_embed.num_embeddings == 5 + 16 + 1  # words, codes, [MASK]
    assert model.head.out_features == 16 and model.mask_token_id == 16
    ids = torch.full((2, 16), 16)
    logits = model(
        ids,
        text_ids=torch.tensor([[1, 2, 0], [3, 0, 0]]),
        text_attention_mask=torch.tensor([[1, 1, 0], [1, 0, 0]]),
    ).logits
    assert logits.shape == (2, 16, 16) and torch.isfinite(logits).all()
    two = model(torch.full((2, 8), 16), view_ids=torch.tensor([0, 3])).logits
    assert two.shape == (2, 8, 16)


def test_view_ids_change_the_output():
    model = tiny_transformer()
    ids = torch.randint(0, 17, (1, 8), generator=torch.Generator().manual_seed(0))
    a = model(ids, view_ids=torch.tensor([0, 1])).logits
    b = model(ids, view_ids=torch.tensor([0, 2])).logits
    assert not torch.allclose(a, b)


def test_transformer_save_load_round_trip(tmp_path):
    from hf_ext.viewmask import ViewMaskTransformer

    model = tiny_transformer(text_vocab_size=4)
    model.eval()  # from_pretrained returns eval mode (the encoder fast path)
    model.save_pretrained(tmp_path / "t")
    back = ViewMaskTransformer.from_pretrained(tmp_path / "t")
    ids = torch.randint(0, 17, (2, 16), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(back(ids).logits, model(ids).logits)
    assert back.config.text_vocab_size == 4


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"num_views": 1}, r"`num_views`.*1"),
        ({"codebook_size": 12}, r"`codebook_size`.*12"),
        ({"tokens_per_view": 5}, r"`tokens_per_view`.*5"),
        ({"num_heads": 3}, r"`num_heads`.*3"),
        ({"dropout": 1.0}, r"`dropout`.*1"),
    ],
)
def test_transformer_bad_config(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        tiny_transformer(**kwargs)


def test_transformer_bad_inputs():
    model = tiny_transformer()
    with pytest.raises(ValueError, match=r"`image_tokens`.*\[0, 16\).*17"):
        model(torch.full((1, 16), 17))
    with pytest.raises(ValueError, match=r"`image_tokens` length.*tokens_per_view=4.*6"):
        model(torch.zeros(1, 6, dtype=torch.long))
    with pytest.raises(ValueError, match=r"`view_ids`.*\[4, 1\]"):
        model(torch.zeros(1, 8, dtype=torch.long), view_ids=torch.tensor([4, 1]))
    with pytest.raises(ValueError, match="`text_ids`.*text_vocab_size=0"):
        model(torch.zeros(1, 8, dtype=torch.long), text_ids=torch.zeros(1, 2, dtype=torch.long))
    texted = tiny_transformer(text_vocab_size=4, max_text_length=2)
    with pytest.raises(ValueError, match=r"`text_ids` must lie in \[0, 4\).*9"):
        texted(torch.zeros(1, 8, dtype=torch.long), text_ids=torch.tensor([[9, 0]]))
    with pytest.raises(ValueError, match="max_text_length=2.*3"):
        texted(torch.zeros(1, 8, dtype=torch.long), text_ids=torch.zeros(1, 3, dtype=torch.long))


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [
        ({"downsample": 3}, r"`downsample`.*3"),
        ({"codebook_bits": 0}, r"`codebook_bits`.*0"),
        ({"hidden_channels": 12}, r"`hidden_channels`.*12"),
        ({"inv_temperature": 0.0}, r"`inv_temperature`.*0"),
    ],
)
def test_autoencoder_bad_config(kwargs, pattern):
    from hf_ext.viewmask import LFQAutoencoder

    with pytest.raises(ValueError, match=pattern):
        LFQAutoencoder(**kwargs)


def test_autoencoder_bad_inputs():
    vq = tiny_vq()
    with pytest.raises(ValueError, match=r"`image`.*downsample=4.*\(10, 10\)"):
        vq.tokenize(torch.zeros(1, 3, 10, 10))
    with pytest.raises(ValueError, match=r"`image`.*3-channel.*\(1, 1, 8, 8\)"):
        vq.tokenize(torch.zeros(1, 1, 8, 8))
    with pytest.raises(ValueError, match=r"`indices`.*\[0, 16\).*16"):
        vq.decode_indices(torch.full((1, 2, 2), 16))
