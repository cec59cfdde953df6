"""Model diffing: statistics, the report, and the calibration-split choice of edits."""

from __future__ import annotations

import pytest
import torch

from hf_ext.seglens.activations import ActivationStore
from hf_ext.seglens.config import InterventionConfig
from hf_ext.seglens.core import lesion_dice
from hf_ext.seglens.diff import diff_report, edited_dice, latent_stats, predict_labels, select_intervention
from hf_ext.seglens.synthetic import make_cohorts

from .conftest import fitted_sae


@pytest.fixture
def setup(unet):
    c = make_cohorts(8, 32, cohorts=("adult", "ssa"))
    sae = fitted_sae(unet, "enc1", torch.cat([c["adult"].images, c["ssa"].images]), expansion=2, k=2)
    cohorts = {k: (v.images, v.masks) for k, v in c.items()}
    return unet, sae, cohorts


def test_latent_stats_match_the_codes(setup):
    model, sae, cohorts = setup
    x = cohorts["adult"][0]
    z = sae.encode(ActivationStore(model, "enc1").collect([x]).x)
    st = latent_stats(model, sae, x, batch_size=3)
    assert torch.allclose(st.freq, (z > 0).float().mean(0))
    assert torch.allclose(st.mean, z.mean(0), atol=1e-6)
    assert torch.allclose(st.std, z.std(0, unbiased=False), atol=1e-4)


def test_diff_report_ranks_and_ablates(setup):
    model, sae, cohorts = setup
    rep = diff_report(model, sae, cohorts, ablate_top=2)
    assert rep.reference == "adult" and set(rep.log_ratio) == {"ssa"}
    ranked = rep.ranking("ssa")
    assert sorted(ranked) == list(range(sae.n_latents))
    assert rep.log_ratio["ssa"][ranked[0]].abs() == rep.log_ratio["ssa"].abs().max()
    assert (
        rep.mean_log_ratio["ssa"][rep.ranking("ssa", by="mean")[0]].abs()
        == rep.mean_log_ratio["ssa"].abs().max()
    )
    assert len(rep.ablation["adult"]) >= 2
    j = next(iter(rep.ablation["ssa"]))
    manual = edited_dice(model, sae, {j: "ablate"}, *cohorts["ssa"]).mean() - rep.dice["ssa"].mean()
    assert rep.ablation["ssa"][j] == pytest.approx(float(manual))
    assert "| latent |" in rep.to_markdown(top=3)
    with pytest.raises(KeyError, match="`cohort`"):
        rep.ranking("adult")
    with pytest.raises(KeyError, match="`reference`"):
        diff_report(model, sae, cohorts, reference="child")
    with pytest.raises(ValueError, match="`cohorts`"):
        diff_report(model, sae, {})


@pytest.mark.parametrize("strategy", ["joint", "greedy"])
def test_select_intervention_never_lowers_the_calibration_dice(setup, strategy):
    model, sae, cohorts = setup
    rep = diff_report(model, sae, cohorts, ablate_top=0)
    cfg = InterventionConfig(
        strategy=strategy, m_grid=[2, 4], strengths=[0.5, 1.0], top_m=2, scales=[0.0, 2.0]
    )
    edits, trace = select_intervention(model, sae, rep, "ssa", cohorts["ssa"], cfg)
    assert trace
    clean = lesion_dice(predict_labels(model, cohorts["ssa"][0]), cohorts["ssa"][1])
    after = edited_dice(model, sae, edits, *cohorts["ssa"])
    assert after.mean() >= clean.mean() - 1e-6
    if not edits:
        assert all(t["gain"] < cfg.min_gain or not t.get("kept", True) for t in trace)
    with pytest.raises(KeyError, match="`target`"):
        select_intervention(model, sae, rep, "adult", cohorts["ssa"], cfg)
    with pytest.raises(ValueError, match="`max_reference_drop`"):
        select_intervention(model, sae, rep, "ssa", cohorts["ssa"], cfg, max_reference_drop=-1.0)


def test_gate_latents_fire_more_on_the_target(setup):
    model, sae, cohorts = setup
    rep = diff_report(model, sae, cohorts, ablate_top=0)
    gate = rep.gate_latents("ssa", 3)
    assert len(gate) <= 3 and all(float(rep.log_ratio["ssa"][j]) > 0 for j in gate)
    assert gate == sorted(gate, key=lambda j: -float(rep.log_ratio["ssa"][j]))
    with pytest.raises(KeyError, match="cohort"):
        rep.gate_latents("nope", 1)
    cfg = InterventionConfig(gate=2, m_grid=[2], strengths=[1.0])
    edits, _ = select_intervention(model, sae, rep, "ssa", cohorts["ssa"], cfg)
    base = edited_dice(model, sae, {}, *cohorts["ssa"]).mean()
    assert edited_dice(model, sae, edits, *cohorts["ssa"], rep.gate_latents("ssa", 2)).mean() >= base
    with pytest.raises(ValueError, match="`gate`"):
        InterventionConfig(gate=-1)
