"""Error-preserving latent interventions on the tiny SegFormer and the TinyUNet."""

from __future__ import annotations

import pytest
import torch

from hf_ext.seglens.activations import capture_site, to_rows
from hf_ext.seglens.intervene import LatentIntervention

from .conftest import fitted_sae

SITE = "decode_head.linear_fuse"


def _hook_counts(model):
    return {name: len(m._forward_hooks) for name, m in model.named_modules()}


def _logits(model, x):
    with torch.no_grad():
        return model(pixel_values=x).logits


def _site(model, x, site=SITE):
    with capture_site(model, site) as seen, torch.no_grad():
        model(pixel_values=x) if hasattr(model, "config") else model(x)
    return seen[0]


def test_no_edit_and_unit_scale_leave_the_output_identical(segformer, images):
    sae = fitted_sae(segformer, SITE, images)
    clean = _logits(segformer, images)
    with LatentIntervention(segformer, SITE, sae, edits={}):
        assert torch.equal(_logits(segformer, images), clean)
    every = {j: ("scale", 1.0) for j in range(sae.n_latents)}
    with LatentIntervention(segformer, SITE, sae, edits=every):
        assert torch.allclose(_logits(segformer, images), clean, atol=1e-6, rtol=0)
    assert torch.equal(_logits(segformer, images), clean)
    assert not segformer.decode_head.linear_fuse._forward_hooks


def test_edited_output_is_reconstruction_plus_error(segformer, images):
    sae = fitted_sae(segformer, SITE, images)
    a = to_rows(_site(segformer, images))
    z = sae.encode(a)
    j = int((z != 0).sum(0).argmax())
    with LatentIntervention(segformer, SITE, sae, edits={j: ("scale", 3.0)}):
        edited = to_rows(_site(segformer, images))
    z2 = z.clone()
    z2[:, j] *= 3.0
    expected = sae.decode(z2) + (a - sae.decode(z))
    assert torch.allclose(edited, expected, atol=1e-5)


def test_add_shifts_by_alpha_times_the_decoder_column_where_masked(unet, images):
    sae = fitted_sae(unet, "mid", images)
    a = _site(unet, images, "mid")
    where = torch.zeros(8, 8, 8, dtype=torch.bool)
    where[:, 2:5, 1:3] = True
    with LatentIntervention(unet, "mid", sae, edits={5: ("add", 1.5)}, where=where):
        edited = _site(unet, images, "mid")
    step = 1.5 * sae.W_dec[:, 5] * sae.scale
    delta = to_rows(edited - a)
    rows = where.reshape(-1)
    assert torch.allclose(delta[rows], step.expand(int(rows.sum()), -1), atol=1e-5)
    assert delta[~rows].eq(0).all()


def test_ablating_a_latent_that_never_fires_changes_nothing(segformer, images):
    sae = fitted_sae(segformer, SITE, images)
    with torch.no_grad():
        sae.b_enc[0] = -1e4
    clean = _logits(segformer, images)
    with LatentIntervention(segformer, SITE, sae, edits={0: "ablate"}):
        assert torch.equal(_logits(segformer, images), clean)


def test_ablate_and_clamp_change_only_the_chosen_directions(unet, images):
    sae = fitted_sae(unet, "mid", images)
    a = to_rows(_site(unet, images, "mid"))
    z = sae.encode(a)
    for edits in ({3: "ablate"}, {3: ("clamp", 2.0), 7: ("scale", 0.5)}):
        with LatentIntervention(unet, "mid", sae, edits=edits):
            delta = to_rows(_site(unet, images, "mid")) - a
        chosen = sorted(edits)
        # the change lies in the span of the chosen decoder columns, with the edited code differences
        dz = torch.zeros_like(z)
        for j in chosen:
            kind = edits[j] if isinstance(edits[j], str) else edits[j][0]
            value = 0.0 if kind == "ablate" else edits[j][1]
            new = z[:, j] * value if kind in ("ablate", "scale") else torch.full_like(z[:, j], value)
            dz[:, j] = new - z[:, j]
        assert torch.allclose(delta, (dz @ sae.W_dec.T) * sae.scale, atol=1e-5)


def test_hooks_removed_on_exception_and_save_pretrained_unaffected(segformer, images, tmp_path):
    sae = fitted_sae(segformer, SITE, images)
    before = _hook_counts(segformer)
    with pytest.raises(RuntimeError, match="boom"), LatentIntervention(segformer, SITE, sae, {0: "ablate"}):
        raise RuntimeError("boom")
    assert _hook_counts(segformer) == before and not segformer.decode_head.linear_fuse._forward_hooks
    with LatentIntervention(segformer, SITE, sae, {0: "ablate"}):
        segformer.save_pretrained(tmp_path / "model")
    names = {p.name for p in (tmp_path / "model").iterdir()}
    assert "config.json" in names and not any("sae" in n for n in names)


def test_bad_interventions_raise(segformer, unet, images):
    sae = fitted_sae(segformer, SITE, images)
    before = _hook_counts(segformer)
    with pytest.raises(ValueError, match="`edits`"):
        LatentIntervention(segformer, SITE, sae, {sae.n_latents: "ablate"})
    with pytest.raises(ValueError, match="kind"):
        LatentIntervention(segformer, SITE, sae, {0: ("boost", 1.0)})
    with pytest.raises(KeyError, match="site"):
        LatentIntervention(segformer, "decode_head.fuse", sae, {})
    with (
        pytest.raises(ValueError, match=r"d_in = 32.*48 channels"),
        LatentIntervention(segformer, "segformer.stages.2", sae, {}),
    ):
        _logits(segformer, images)
    with (
        pytest.raises(ValueError, match="`where`"),
        LatentIntervention(segformer, SITE, sae, {0: ("add", 1.0)}, where=torch.ones(3, dtype=torch.bool)),
    ):
        _logits(segformer, images)
    assert _hook_counts(segformer) == before


def test_gate_edits_only_where_a_gate_latent_fires(unet, images):
    sae = fitted_sae(unet, "mid", images)
    a = to_rows(_site(unet, images, "mid"))
    z = sae.encode(a)
    assert torch.allclose(sae.encode_latents(a, [3, 7]), z[:, [3, 7]], atol=1e-6)
    g = int((z > 0).float().mean(0).sub(0.5).abs().argmin())  # a latent firing at some positions only
    fires = z[:, g] > 0
    assert fires.any() and not fires.all()
    with LatentIntervention(unet, "mid", sae, edits={5: ("add", 1.5)}, gate=[g]):
        delta = to_rows(_site(unet, images, "mid")) - a
    step = 1.5 * sae.W_dec[:, 5] * sae.scale
    assert torch.allclose(delta[fires], step.expand(int(fires.sum()), -1), atol=1e-5)
    assert delta[~fires].eq(0).all()
    with pytest.raises(ValueError, match="`gate`"):
        LatentIntervention(unet, "mid", sae, {5: "ablate"}, gate=[sae.n_latents])


def test_topk_sae_cannot_encode_single_latents(unet, images):
    sae = fitted_sae(unet, "mid", images, variant="topk")
    a = to_rows(_site(unet, images, "mid"))
    with pytest.raises(ValueError, match="encode_latents"):
        sae.encode_latents(a, [0])
    with LatentIntervention(unet, "mid", sae, edits={2: ("scale", 2.0)}):
        delta = to_rows(_site(unet, images, "mid")) - a
    z = sae.encode(a)
    assert torch.allclose(delta, torch.outer(z[:, 2], sae.W_dec[:, 2]) * sae.scale, atol=1e-5)
