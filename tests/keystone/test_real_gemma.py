"""Real Gemma-3-270M: keystone-30 ablation collapses held-out text, random-30 does not; IoU across groups."""

from __future__ import annotations

import pytest

from hf_ext.testing import requires

pytestmark = [requires("peft", "transformers", "gemma"), pytest.mark.slow, pytest.mark.real]


@pytest.fixture(scope="module")
def gemma():
    from hf_ext.assets import gemma3_270m

    return gemma3_270m()


def test_keystone30_collapses_and_random_does_not(gemma):
    from hf_ext.peft.keystone import ablate_neurons, find_keystone_neurons, random_neuron_set, text_nll
    from hf_ext.peft.keystone._bench_data import PROBE_GROUPS
    from hf_ext.peft.keystone.bench import TEXTS

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
    from hf_ext.peft.keystone import find_keystone_neurons, keystone_iou
    from hf_ext.peft.keystone._bench_data import PROBE_GROUPS

    model, tok = gemma
    a, b = (find_keystone_neurons(model, tok, g, k=30) for g in PROBE_GROUPS[:2])
    assert keystone_iou(a, b) >= 0.6
