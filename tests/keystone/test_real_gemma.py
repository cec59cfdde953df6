"""Real Gemma-3-270M: keystone-30 ablation collapses held-out text, random-30 does not; IoU across groups;
the keystone adapter saved from one instance loads onto a fresh one."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = [requires("peft", "transformers", "gemma"), pytest.mark.slow, pytest.mark.real]


@pytest.fixture(scope="module")
def gemma():
    from hf_ext.assets import gemma3_270m

    return gemma3_270m()


def test_keystone30_collapses_and_random_does_not(gemma):
    from benchmarks.keystone.ablation import TEXTS
    from benchmarks.keystone.data import PROBE_GROUPS
    from hf_ext.keystone import ablate_neurons, find_keystone_neurons, random_neuron_set, text_nll

    model, tok = gemma
    ks = find_keystone_neurons(model, tok, PROBE_GROUPS[0], k=30)
    base = sum(text_nll(model, tok, TEXTS)) / len(TEXTS)
    with ablate_neurons(model, ks):
        ablated = sum(text_nll(model, tok, TEXTS)) / len(TEXTS)
    assert ablated >= 3 * base
    for seed in range(5):
        with ablate_neurons(model, random_neuron_set(model, 30, seed=seed)):
            assert sum(text_nll(model, tok, TEXTS)) / len(TEXTS) <= base + 0.1


def test_top30_iou_between_disjoint_groups(gemma):
    from benchmarks.keystone.data import PROBE_GROUPS
    from hf_ext.keystone import find_keystone_neurons, keystone_iou

    model, tok = gemma
    a, b = (find_keystone_neurons(model, tok, g, k=30) for g in PROBE_GROUPS[:2])
    assert keystone_iou(a, b) >= 0.6


def test_adapter_from_one_instance_applies_to_a_fresh_one(gemma, tmp_path):
    from peft import PeftModel, get_peft_model

    from benchmarks.keystone.data import PROBE_GROUPS
    from hf_ext import KeystoneConfig
    from hf_ext.assets import gemma3_270m
    from hf_ext.keystone import find_keystone_neurons

    model, tok = gemma
    ks = find_keystone_neurons(model, tok, PROBE_GROUPS[0], k=30)
    pm = get_peft_model(model, KeystoneConfig(keystone_set=ks))
    try:
        assert pm.get_nb_trainable_parameters()[0] == sum(
            len(r) * pm.get_base_model().get_submodule(n).in_features for n, r in ks.indices.items()
        )
        with torch.no_grad():
            for name, p in pm.named_parameters():
                if "keystone_delta" in name:
                    p.normal_(std=1e-3)
        ids = tok("The capital of France is", return_tensors="pt")["input_ids"]
        out = pm(input_ids=ids).logits
        pm.save_pretrained(tmp_path)
    finally:
        pm.unload()
        vars(model).pop("peft_config", None)
    fresh = PeftModel.from_pretrained(gemma3_270m()[0], tmp_path)
    torch.testing.assert_close(fresh(input_ids=ids).logits, out)
