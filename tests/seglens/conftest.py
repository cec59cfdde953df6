"""Shared fixtures for the Med-SegLens tests: a 4-stage tiny SegFormer, a TinyUNet and fitted SAEs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from benchmarks.harness import pinned_threads


@pytest.fixture(autouse=True)
def _seed_and_one_thread() -> Iterator[None]:
    torch.manual_seed(0)
    with pinned_threads(1):
        yield


@pytest.fixture
def segformer():
    """The benchmark's 4-stage tiny SegFormer: ``segformer.stages.2`` gives ``(B, 48, H/16, W/16)`` and
    ``decode_head.linear_fuse`` ``(B, 32, H/4, W/4)``."""
    pytest.importorskip("transformers")
    from benchmarks.seglens.models import segformer as build

    return build(seed=0).eval()


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
