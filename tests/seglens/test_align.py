"""Latent alignment: permutation recovery, identical models, errors."""

from __future__ import annotations

import copy

import pytest
import torch

from hf_ext.seglens.align import align_saes, backbone, latent_maps

from .conftest import fitted_sae

pytest.importorskip("scipy")


def _permuted(sae, perm):
    twin = copy.deepcopy(sae)
    with torch.no_grad():
        twin.W_dec.copy_(sae.W_dec[:, perm])
        twin.W_enc.copy_(sae.W_enc[perm])
        twin.b_enc.copy_(sae.b_enc[perm])
    return twin


def test_decoder_cosine_recovers_a_permutation(unet, images):
    sae = fitted_sae(unet, "mid", images)
    perm = torch.randperm(sae.n_latents, generator=torch.Generator().manual_seed(3))
    al = align_saes(sae, _permuted(sae, perm), "decoder_cosine")
    # latent i of the twin is latent perm[i] of the original
    assert torch.equal(perm[al.pairs[:, 1]], al.pairs[:, 0])
    assert torch.allclose(al.pair_scores, torch.ones(sae.n_latents), atol=1e-5)
    assert al.shared_fraction == 1.0 and al.specific_a == [] and backbone([al, al]) == list(range(128))


def test_activation_correlation_on_identical_models_is_the_identity(unet, images):
    sae = fitted_sae(unet, "mid", images)
    perm = torch.randperm(sae.n_latents, generator=torch.Generator().manual_seed(4))
    al = align_saes(sae, _permuted(sae, perm), models=(unet, unet), images=images)
    maps = latent_maps(unet, sae, images)
    varying = set(torch.nonzero(maps.flatten(2).transpose(0, 1).flatten(1).std(1) > 0).flatten().tolist())
    matched = {int(a): int(b) for a, b in al.pairs}
    assert all(perm[matched[j]] == j for j in varying)
    assert al.shared_a == sorted(varying) or set(varying) <= set(al.shared_a)


def test_activation_correlation_across_architectures_resizes(segformer, unet, images):
    sae_s = fitted_sae(segformer, "decode_head.linear_fuse", images)
    sae_u = fitted_sae(unet, "dec2", images)
    al = align_saes(sae_u, sae_s, models=(unet, segformer), images=images, threshold=0.3)
    assert al.score.shape == (sae_u.n_latents, sae_s.n_latents)
    assert al.score.abs().max() <= 1 + 1e-5 and 0 <= al.shared_fraction <= 1


def test_alignment_errors_name_the_argument(segformer, unet, images):
    sae_s = fitted_sae(segformer, "decode_head.linear_fuse", images)
    sae_u = fitted_sae(unet, "mid", images)
    with pytest.raises(ValueError, match="activation_correlation"):
        align_saes(sae_s, sae_u, "decoder_cosine")
    other = copy.deepcopy(sae_u)
    other.model_id = "another run"
    with pytest.raises(ValueError, match="model_id"):
        align_saes(sae_u, other, "decoder_cosine")
    with pytest.raises(ValueError, match="`images`"):
        align_saes(sae_u, sae_s, models=(unet, segformer))
    with pytest.raises(ValueError, match="`models`"):
        align_saes(sae_u, sae_s, images=images)
    with pytest.raises(ValueError, match="`method`"):
        align_saes(sae_u, sae_s, "cosine")
    with pytest.raises(ValueError, match="`threshold`"):
        align_saes(sae_u, sae_u, "decoder_cosine", threshold=2.0)
