"""Activation capture on the tiny SegFormer (built from a config) and the TinyUNet; bad sites."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hf_ext.seglens.activations import ActivationStore, capture_site, from_rows, resolve_site, to_rows


def test_segformer_default_sites_give_rows_of_the_right_width(segformer, images):
    stage = ActivationStore(segformer, "segformer.stages[2]").collect([images[:4], images[4:]])
    fuse = ActivationStore(segformer, "decode_head.linear_fuse").collect([images])
    assert stage.x.shape == (8 * 2 * 2, 48) and stage.grid == (2, 2)
    assert fuse.x.shape == (8 * 8 * 8, 32) and fuse.grid == (8, 8)
    assert stage.index[:, 0].max() == 7 and stage.index[4].tolist() == [1, 0, 0]
    # rows follow (image, y, x): row of image 3, y 5, x 2 is the channel vector of that pixel
    with capture_site(segformer, "decode_head.linear_fuse") as seen, torch.no_grad():
        segformer(pixel_values=images)
    assert torch.equal(fuse.x[3 * 64 + 5 * 8 + 2], seen[0][3, :, 5, 2])


def test_unet_bottleneck_and_subsampling(unet, images):
    acts = ActivationStore(unet, "mid", max_samples=100, seed=1).collect([images])
    assert acts.x.shape == (100, 32) and acts.grid == (8, 8)
    assert (acts.index[1:, 0] * 64 + acts.index[1:, 1] * 8 + acts.index[1:, 2]).diff().ge(0).all()
    assert unet.training is False and not unet.mid._forward_hooks


def test_rows_round_trip():
    t = torch.randn(2, 5, 3, 4)
    assert torch.equal(from_rows(to_rows(t), t), t)
    s = torch.randn(2, 7, 5)
    assert torch.equal(from_rows(to_rows(s), s), s)


def test_unknown_site_lists_close_matches(segformer):
    with pytest.raises(KeyError, match=r"decode_head.linear_fuse"):
        resolve_site(segformer, "decode_head.linear_fus")
    with pytest.raises(KeyError, match="site"):
        ActivationStore(segformer, "")


def test_site_output_must_be_a_rank_2_to_4_tensor(images):
    class Odd(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = nn.Identity()

        def forward(self, x):
            return self.inner(x.flatten())

    with pytest.raises(TypeError, match=r"rank 2-4.*\(2048,\)"):
        ActivationStore(Odd(), "inner").collect([images[:2]])


def test_hook_removed_when_the_block_raises(unet, images):
    with pytest.raises(RuntimeError, match="boom"), capture_site(unet, "mid"):
        raise RuntimeError("boom")
    assert not unet.mid._forward_hooks


def test_max_samples_is_validated(unet):
    with pytest.raises(ValueError, match="`max_samples`"):
        ActivationStore(unet, "mid", max_samples=0)
