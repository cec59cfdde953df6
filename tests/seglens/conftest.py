"""Shared fixtures for the Med-SegLens tests: a 4-stage tiny SegFormer, a TinyUNet and fitted SAEs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from hf_ext.benchmarking import pinned_threads


@pytest.fixture(autouse=True)
def _seed_and_one_thread() -> Iterator[None]:
    torch.manual_seed(0)
    with pinned_threads(1):
        yield


def tiny_segformer4(seed: int = 0, num_channels: int = 1):
    """The 4-stage tiny SegFormer (hidden sizes 16/32/48/64, decoder 32): ``segformer.stages.2`` gives
    ``(B, 48, H/16, W/16)`` and ``decode_head.linear_fuse`` ``(B, 32, H/4, W/4)``."""
    tf = pytest.importorskip("transformers")
    config = tf.SegformerConfig(
        num_channels=num_channels,
        hidden_sizes=[16, 32, 48, 64],
        depths=[1, 1, 1, 1],
        num_attention_heads=[1, 1, 2, 2],
        sr_ratios=[8, 4, 2, 1],
        decoder_hidden_size=32,
        num_labels=3,
    )
    torch.manual_seed(seed)
    return tf.SegformerForSemanticSegmentation(config).eval()


@pytest.fixture
def segformer():
    return tiny_segformer4()


@pytest.fixture
def unet():
    from hf_ext.seglens.models import TinyUNet

    torch.manual_seed(0)
    return TinyUNet().eval()


@pytest.fixture
def images() -> torch.Tensor:
    from hf_ext.seglens.synthetic import make_cohorts

    return make_cohorts(8, 32, cohorts=("adult",))["adult"].images


def fitted_sae(model, site: str, images: torch.Tensor, **kwargs):
    """An SAE fitted for a few steps on the site activations of ``images``."""
    from hf_ext.seglens.activations import ActivationStore
    from hf_ext.seglens.sae import SparseAutoencoder

    acts = ActivationStore(model, site).collect([images])
    options = {"expansion": 4, "k": 4, "steps": 30, "batch_size": 128, **kwargs}
    return SparseAutoencoder(d_in=acts.x.shape[1], site=site, model_id=type(model).__name__, **options).fit(
        acts.x
    )
