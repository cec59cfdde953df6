"""Discovery math (hand-computed), planted keystone, ablation exactness, sets, IoU, bad inputs."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hf_ext.testing import requires, tiny_causal_lm, word_tokenizer

pytestmark = requires("peft", "transformers")

O_PROJ = "model.layers.0.self_attn.o_proj"
PROMPTS = {"knowledge": "the capital city of paris", "math": "one and two", "code": "if it is true then"}


@pytest.fixture(scope="module")
def tok():
    return word_tokenizer()


def _lm(tok, arch="llama", **kw):
    return tiny_causal_lm(arch, vocab_size=len(tok), hidden_size=32, intermediate_size=64, **kw)


def test_planted_keystone_is_top1(tok):
    from hf_ext.keystone import find_keystone_neurons

    lm = _lm(tok)
    with torch.no_grad():
        lm.get_submodule(O_PROJ).weight[7] *= 50
    ks = find_keystone_neurons(lm, tok, PROMPTS, k=1, normalize="mean", aggregate="min")
    assert ks.indices == {O_PROJ: [7]}


class _TwoLinear(nn.Module):
    """Two fixed ``nn.Linear`` fed the token's one-hot input; ``config`` gives it a fingerprint."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(2, 2, bias=False)
        self.b = nn.Linear(2, 3, bias=False)
        with torch.no_grad():
            self.a.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, 3.0]]))
            self.b.weight.copy_(torch.tensor([[1.0, 1.0], [2.0, 0.0], [0.0, -6.0]]))
        self.config = type("C", (), {"_name_or_path": "two-linear"})()

    def forward(self, input_ids):
        x = torch.nn.functional.one_hot(input_ids, 2).float()
        return self.b(self.a(x))


class _IdTok:
    def __call__(self, text, return_tensors=None):
        return {"input_ids": torch.tensor([[int(c) for c in text]])}


def test_normalisation_and_aggregation_by_hand():
    from hf_ext.keystone.core import cross_task_scores, neuron_activations

    model = _TwoLinear()
    # task t1: tokens "10" -> BOS dropped -> only token 0 (x=[1,0]); task t2: "01" -> only token 1 (x=[0,1]).
    acts = neuron_activations(model, _IdTok(), {"t1": "10", "t2": "01"}, target_modules=("a", "b"))
    # a(x): t1 -> [1, 0]; t2 -> [0, 3].  b(a(x)): t1 -> [1, 2, 0]; t2 -> [3, 0, 18] (abs).
    torch.testing.assert_close(acts["t1"]["a"], torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(acts["t2"]["b"], torch.tensor([3.0, 0.0, 18.0]))
    s_min = cross_task_scores(acts, normalize="mean", aggregate="min")
    s_mean = cross_task_scores(acts, normalize="mean", aggregate="mean")
    # â: a/t1 = [2, 0], a/t2 = [0, 2]; b/t1 = [1,2,0]/1 = [1, 2, 0]; b/t2 = [3,0,18]/7.
    torch.testing.assert_close(s_min["a"], torch.tensor([0.0, 0.0]))
    torch.testing.assert_close(s_min["b"], torch.tensor([3 / 7, 0.0, 0.0]))
    torch.testing.assert_close(s_mean["a"], torch.tensor([1.0, 1.0]))
    torch.testing.assert_close(s_mean["b"], torch.tensor([(1 + 3 / 7) / 2, 1.0, 18 / 14]))
    s_med = cross_task_scores(acts, normalize="median", aggregate="min")
    torch.testing.assert_close(s_med["b"], torch.tensor([1.0, 0.0, 0.0]))  # medians 1 and 3
    raw = cross_task_scores(acts, normalize="none", aggregate="mean")
    torch.testing.assert_close(raw["b"], torch.tensor([2.0, 1.0, 9.0]))
    # Without the BOS skip both tokens count: t1 "10" -> mean of x=[0,1] and [1,0].
    both = neuron_activations(model, _IdTok(), {"t1": "10"}, target_modules=("a",), skip_first_token=False)
    torch.testing.assert_close(both["t1"]["a"], torch.tensor([0.5, 1.5]))


def test_top_k_global_ranking_and_fraction():
    from hf_ext.keystone.core import top_k_set

    model = _TwoLinear()
    scores = {"a": torch.tensor([0.1, 5.0]), "b": torch.tensor([3.0, 0.2, 4.0])}
    ks = top_k_set(model, scores, 3)
    assert ks.indices == {"a": [1], "b": [0, 2]}
    assert ks.top(1).indices == {"a": [1]}
    assert len(top_k_set(model, scores, 0.4)) == 2


def test_ablation_exact_and_restored(tok):
    from hf_ext.keystone import KeystoneSet, ablate_neurons

    lm = _lm(tok)
    ids = torch.tensor([[1, 5, 9, 12, 30]])
    before = lm(ids).logits
    seen = {}
    mod = lm.get_submodule(O_PROJ)
    h = mod.register_forward_hook(lambda m, a, o: seen.setdefault("plain", o.detach().clone()))
    lm(ids)
    h.remove()
    ks = KeystoneSet({O_PROJ: [3, 11]})
    with ablate_neurons(lm, ks):
        h = mod.register_forward_hook(lambda m, a, o: seen.setdefault("abl", o.detach().clone()))
        lm(ids)
        h.remove()
    assert torch.all(seen["abl"][..., [3, 11]] == 0)
    keep = [i for i in range(32) if i not in (3, 11)]
    assert torch.equal(seen["abl"][..., keep], seen["plain"][..., keep])
    assert torch.equal(lm(ids).logits, before)
    with pytest.raises(RuntimeError, match="boom"), ablate_neurons(lm, ks):
        raise RuntimeError("boom")
    assert not mod._forward_hooks
    other = KeystoneSet({"model.layers.1.mlp.up_proj": [0]})
    with ablate_neurons(lm, ks), ablate_neurons(lm, other):
        nested = lm(ids).logits
    with ablate_neurons(lm, KeystoneSet({O_PROJ: [3, 11], "model.layers.1.mlp.up_proj": [0]})):
        joint = lm(ids).logits
    assert torch.equal(nested, joint)
    assert torch.equal(lm(ids).logits, before)


def test_keystone_set_json_roundtrip_and_iou(tmp_path, tok):
    from hf_ext.keystone import KeystoneSet, find_keystone_neurons, keystone_iou, pairwise_iou

    ks = find_keystone_neurons(_lm(tok), tok, PROMPTS, k=5)
    ks.save(tmp_path / "ks.json")
    back = KeystoneSet.load(tmp_path / "ks.json")
    assert back == ks and back.fingerprint["model_type"] == "llama" and len(back.prompts_sha256) == 64
    a, b, c = KeystoneSet({"m": [0, 1]}), KeystoneSet({"m": [1], "n": [0]}), KeystoneSet({"n": [0]})
    assert keystone_iou(a, b) == pytest.approx(1 / 3)
    assert keystone_iou(a, c) == 0.0 and keystone_iou(a, a) == 1.0
    assert pairwise_iou([a, b, c]) == pytest.approx({"mean": (1 / 3 + 0 + 1 / 2) / 3, "min": 0.0, "max": 0.5})


def test_random_set_and_select_k(tok):
    from hf_ext.keystone import find_keystone_neurons, random_neuron_set, select_k_by_ablation

    lm = _lm(tok)
    r = random_neuron_set(lm, 7, seed=3)
    assert len(r) == 7 and r == random_neuron_set(lm, 7, seed=3)
    ks = find_keystone_neurons(lm, tok, PROMPTS, k=8)
    like = random_neuron_set(lm, like=ks, seed=0)
    suffix_counts = lambda s: sorted(n.rsplit(".", 1)[-1] for n, rows in s.indices.items() for _ in rows)  # noqa: E731
    assert suffix_counts(like) == suffix_counts(ks)
    k, table = select_k_by_ablation(
        lm, tok, ks, ["the city of rome", "what is the answer"], sweep=(1, 2, 8), collapse_ratio=1.0001
    )
    assert table[0]["k"] == 1 and all(math.isfinite(t["nll"]) for t in table)
    assert k is None or k in (1, 2, 8)


@pytest.mark.parametrize("arch", ["qwen2", "gemma3"])
def test_other_architectures_discovery_and_ablation(arch, tok):
    from hf_ext.keystone import ablate_neurons, find_keystone_neurons

    lm = _lm(tok, arch)
    ks = find_keystone_neurons(lm, tok, PROMPTS, k=4)
    assert len(ks) == 4 and ks.fingerprint["model_type"] in ("qwen2", "gemma3_text")
    ids = torch.tensor([[1, 5, 9]])
    before = lm(ids).logits
    with ablate_neurons(lm, ks):
        assert not torch.equal(lm(ids).logits, before)
    assert torch.equal(lm(ids).logits, before)


# ----------------------------------------------------------------------------------------------- bad inputs


def test_bad_discovery_inputs(tok):
    from hf_ext.keystone import find_keystone_neurons

    lm = _lm(tok)
    with pytest.raises(ValueError, match="`target_modules` entry 'x_proj' matches no module"):
        find_keystone_neurons(lm, tok, PROMPTS, target_modules=("x_proj",))
    with pytest.raises(ValueError, match="`prompts` has 1 task"):
        find_keystone_neurons(lm, tok, {"a": "the city"})
    with pytest.raises(ValueError, match=r"`prompts\['b'\]` has 1 token"):
        find_keystone_neurons(lm, tok, {"a": "the city", "b": "city"})
    with pytest.raises(ValueError, match="`normalize` must be one of"):
        find_keystone_neurons(lm, tok, PROMPTS, normalize="max")
    with pytest.raises(ValueError, match="`aggregate` must be one of"):
        find_keystone_neurons(lm, tok, PROMPTS, aggregate="max")
    with pytest.raises(ValueError, match=r"`k` must be an int in \[1, "):
        find_keystone_neurons(lm, tok, PROMPTS, k=0)
    with pytest.raises(ValueError, match=r"`k` must be an int in \[1, "):
        find_keystone_neurons(lm, tok, PROMPTS, k=10**6)
    with pytest.raises(ValueError, match=r"`k` must be a finite float in \(0, 1\), got 1.5"):
        find_keystone_neurons(lm, tok, PROMPTS, k=1.5)
    with pytest.raises(ValueError, match="embeddings and the LM head"):
        find_keystone_neurons(lm, tok, PROMPTS, target_modules=("lm_head",))
    with pytest.raises(ValueError, match="embeddings and the LM head"):
        find_keystone_neurons(lm, tok, PROMPTS, target_modules=("embed_tokens",))


def test_non_linear_target_is_type_error(tok):
    from hf_ext.keystone import find_keystone_neurons

    lm = _lm(tok)
    with pytest.raises(TypeError, match="'model.layers.0.mlp' is a LlamaMLP, not torch.nn.Linear"):
        find_keystone_neurons(lm, tok, PROMPTS, target_modules=("mlp",))


def test_bad_sets(tok):
    from hf_ext.keystone import KeystoneSet, ablate_neurons

    lm = _lm(tok)
    with pytest.raises(ValueError, match="`indices` is empty"):
        KeystoneSet({})
    with pytest.raises(ValueError, match=r"duplicate rows \[2\]"):
        KeystoneSet({O_PROJ: [2, 2]})
    with pytest.raises(ValueError, match="absent from the model"):
        with ablate_neurons(lm, KeystoneSet({"model.layers.9.self_attn.o_proj": [0]})):
            pass
    with pytest.raises(ValueError, match=r"rows \[32\] of module .* out of range \[0, 32\)"):
        with ablate_neurons(lm, KeystoneSet({O_PROJ: [1, 32]})):
            pass
    with pytest.raises(ValueError, match="embeddings and the LM head"):
        with ablate_neurons(lm, KeystoneSet({"lm_head": [0]})):
            pass
    wrong = KeystoneSet({O_PROJ: [1]}, fingerprint={"model_type": "llama", "hidden_size": 999})
    with pytest.raises(ValueError, match=r"mismatching fingerprint fields: hidden_size: set 999 vs model 32"):
        with ablate_neurons(lm, wrong):
            pass
