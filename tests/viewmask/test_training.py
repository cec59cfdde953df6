"""The tokenizer and transformer training loops, the batch layouts of both arms, and config validation."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.testing import requires

from .conftest import tiny_transformer

pytestmark = requires("diffusers")


def test_lfq_training_lowers_the_reconstruction_loss():
    from hf_ext.viewmask import LFQAutoencoder, LFQTrainingConfig, train_lfq_autoencoder
    from hf_ext.viewmask.data import procedural_dataset

    images = torch.from_numpy(procedural_dataset(range(16))["images"]).flatten(0, 1)
    torch.manual_seed(0)
    vq = LFQAutoencoder(codebook_bits=6, downsample=4, hidden_channels=16)
    losses = train_lfq_autoencoder(vq, images, LFQTrainingConfig(steps=40, batch_size=16, seed=0))
    assert len(losses) == 40 and sum(losses[-5:]) < sum(losses[:5])
    assert not vq.training
    with pytest.raises(ValueError, match=r"`images` height and width.*downsample=4.*\(6, 6\)"):
        train_lfq_autoencoder(vq, torch.zeros(2, 3, 6, 6), LFQTrainingConfig(steps=1))


def test_tokenize_views_shape():
    from hf_ext.viewmask import LFQAutoencoder
    from hf_ext.viewmask.training import tokenize_views

    vq = LFQAutoencoder(codebook_bits=4, downsample=4, hidden_channels=8)
    assert tokenize_views(vq, torch.zeros(3, 4, 3, 8, 8), batch_size=5).shape == (3, 4, 4)
    with pytest.raises(ValueError, match="`images` must be"):
        tokenize_views(vq, torch.zeros(4, 3, 8, 8))


def test_independent_batches_pair_view_zero_with_one_target():
    from hf_ext.viewmask.training import _batch

    tokens = torch.arange(5 * 4 * 2).view(5, 4, 2)
    pair, view_ids = _batch(tokens, torch.tensor([0, 3, 4]), "independent", torch.Generator().manual_seed(0))
    assert pair.shape == (3, 2, 2) and view_ids.shape == (3, 2)
    assert (view_ids[:, 0] == 0).all() and ((view_ids[:, 1] >= 1) & (view_ids[:, 1] <= 3)).all()
    for row, obj, ids in zip(pair, (0, 3, 4), view_ids):
        assert torch.equal(row[0], tokens[obj, 0]) and torch.equal(row[1], tokens[obj, ids[1]])
    joint, none = _batch(tokens, torch.tensor([1]), "joint", torch.Generator())
    assert none is None and torch.equal(joint[0], tokens[1])


@pytest.mark.parametrize("sampling", ["joint", "independent"])
def test_viewmask_training_runs_with_text_and_is_seeded(sampling):
    from hf_ext.viewmask import ViewMaskTrainingConfig, train_viewmask

    def train():
        model = tiny_transformer(codebook_size=8, text_vocab_size=5, max_text_length=3)
        tokens = torch.randint(0, 8, (6, 4, 4), generator=torch.Generator().manual_seed(1))
        text = torch.randint(0, 5, (6, 3), generator=torch.Generator().manual_seed(2))
        cfg = ViewMaskTrainingConfig(steps=30, batch_size=4, view_sampling=sampling, seed=3)
        return train_viewmask(model, tokens, cfg, text_ids=text, text_attention_mask=torch.ones(6, 3))

    a, b = train(), train()
    assert a == b and sum(a[-5:]) < sum(a[:5])


def test_learning_rate_schedule_warms_up_then_decays_to_its_floor():
    from hf_ext.viewmask.training import _lr_lambda

    for floor in (0.0, 0.1):
        factor = _lr_lambda(105, floor)  # 5 warm-up steps, then 100 steps of cosine decay
        assert factor(0) == pytest.approx(0.2) and factor(4) == factor(5) == pytest.approx(1.0)
        assert factor(55) == pytest.approx(floor + (1 - floor) / 2)  # half-way: cos(pi / 2) = 0
        assert factor(80) == pytest.approx(floor + (1 - floor) / 2 * (1 + math.cos(0.75 * math.pi)))
        assert factor(105) == pytest.approx(floor)


def test_training_bad_inputs_and_configs():
    from hf_ext.viewmask import (
        LFQTrainingConfig,
        ViewMaskTrainingConfig,
        train_viewmask,
    )

    model = tiny_transformer(codebook_size=8)
    with pytest.raises(ValueError, match=r"`view_tokens` must be \[N, 4, 4\].*\(2, 3, 4\)"):
        train_viewmask(model, torch.zeros(2, 3, 4, dtype=torch.long), ViewMaskTrainingConfig(steps=1))
    with pytest.raises(ValueError, match="`view_sampling`.*'pairs'"):
        ViewMaskTrainingConfig(view_sampling="pairs")
    with pytest.raises(ValueError, match="`masking_schedule`.*'square'"):
        ViewMaskTrainingConfig(masking_schedule="square")
    with pytest.raises(ValueError, match="`cond_drop_prob`.*1.0"):
        ViewMaskTrainingConfig(cond_drop_prob=1.0)
    with pytest.raises(ValueError, match="`steps`.*0"):
        LFQTrainingConfig(steps=0)
    with pytest.raises(ValueError, match="`learning_rate`.*0"):
        ViewMaskTrainingConfig(learning_rate=0.0)
    with pytest.raises(ValueError, match="`min_lr_ratio`.*1.5"):
        ViewMaskTrainingConfig(min_lr_ratio=1.5)
