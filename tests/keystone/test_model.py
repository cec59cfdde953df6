"""KeystoneModel through PEFT: exact trainable count, only keystone rows change, save -> load on a fresh
instance, merge/unmerge, disable_adapter, several adapters, other architectures, the registration route."""

from __future__ import annotations

import warnings

import pytest
import torch

from hf_ext.testing import requires, word_tokenizer

pytestmark = requires("peft", "transformers")


def _config(rows, **kw):
    from hf_ext import KeystoneConfig

    return KeystoneConfig(keystone_rows=rows, **kw)


def test_registered_with_peft_under_its_own_type(rows):
    from peft import PEFT_TYPE_TO_CONFIG_MAPPING, PEFT_TYPE_TO_TUNER_MAPPING
    from peft.mapping import PEFT_TYPE_TO_PREFIX_MAPPING
    from peft.utils import PeftType, register_peft_method

    from hf_ext.keystone import KeystoneConfig, KeystoneModel

    assert PEFT_TYPE_TO_CONFIG_MAPPING["KEYSTONE"] is KeystoneConfig
    assert PEFT_TYPE_TO_TUNER_MAPPING["KEYSTONE"] is KeystoneModel
    assert PEFT_TYPE_TO_PREFIX_MAPPING["KEYSTONE"] == "keystone_"
    if not hasattr(PeftType, "KEYSTONE"):  # why the tables are filled directly (peft 0.21: closed enum)
        with pytest.raises(ValueError, match="Unknown PEFT type KEYSTONE"):
            register_peft_method(name="keystone", config_cls=KeystoneConfig, model_cls=KeystoneModel)
    assert _config(rows).peft_type == "KEYSTONE" and str(_config(rows).peft_type).endswith("KEYSTONE")


def test_trainable_count_is_rows_times_in_features(make_lm, rows):
    from peft import get_peft_model

    pm = get_peft_model(make_lm(), _config(rows))
    in_features = {"o_proj": 16, "q_proj": 16, "up_proj": 16}  # hidden 16 in, for all three
    expected = sum(len(r) * in_features[n.rsplit(".", 1)[-1]] for n, r in rows.items())
    assert pm.get_nb_trainable_parameters()[0] == expected == 6 * 16
    wide = get_peft_model(make_lm(), _config({"model.layers.0.mlp.down_proj": [1, 2]}))
    assert wide.get_nb_trainable_parameters()[0] == 2 * 32  # down_proj: in_features = intermediate 32


def test_only_keystone_rows_change_under_adamw_decay(make_lm, rows, train):
    from peft import get_peft_model

    lm = make_lm()
    base = {n: p.detach().clone() for n, p in lm.named_parameters()}
    pm = get_peft_model(lm, _config(rows))
    train(pm, weight_decay=0.1)
    merged = pm.merge_and_unload()
    for name, p in merged.named_parameters():
        module = name.rsplit(".", 1)[0]
        if module in rows and name.endswith("weight"):
            changed = (p != base[name]).any(1).nonzero().flatten().tolist()
            assert changed == rows[module], name
        else:
            assert torch.equal(p, base[name]), name


def test_saved_config_applies_to_a_fresh_instance(tmp_path, make_lm, rows, ids, train):
    from peft import PeftConfig, PeftModel, get_peft_model

    from hf_ext import KeystoneConfig

    plain = make_lm()(ids).logits
    pm = get_peft_model(make_lm(), _config(rows))
    train(pm)
    out = pm(input_ids=ids).logits
    pm.save_pretrained(tmp_path)
    loaded = PeftConfig.from_pretrained(tmp_path)
    assert isinstance(loaded, KeystoneConfig) and loaded.keystone_rows == rows
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        again = PeftModel.from_pretrained(make_lm(), tmp_path)  # a fresh, identical instance
    assert torch.equal(again(input_ids=ids).logits, out)
    fresh = get_peft_model(make_lm(), loaded)  # the loaded config alone, untrained
    torch.testing.assert_close(fresh(input_ids=ids).logits, plain)
    trainable = PeftModel.from_pretrained(make_lm(), tmp_path, is_trainable=True)
    assert trainable.get_nb_trainable_parameters()[0] == 6 * 16
    merged = PeftModel.from_pretrained(make_lm(), tmp_path).merge_and_unload()
    torch.testing.assert_close(merged(ids).logits, out, atol=1e-5, rtol=1e-5)


def test_merge_unmerge_disable_and_unload(make_lm, rows, ids):
    from peft import get_peft_model

    plain = make_lm()(ids).logits
    pm = get_peft_model(make_lm(), _config(rows, init_weights=False))
    out = pm(input_ids=ids).logits
    assert not torch.allclose(out, plain)
    with pm.disable_adapter():
        torch.testing.assert_close(pm(input_ids=ids).logits, plain)
    pm.merge_adapter()
    torch.testing.assert_close(pm(input_ids=ids).logits, out, atol=1e-5, rtol=1e-5)
    pm.unmerge_adapter()
    torch.testing.assert_close(pm(input_ids=ids).logits, out)
    torch.testing.assert_close(pm.unload()(ids).logits, plain)


def test_several_adapters(make_lm, rows, ids):
    from peft import get_peft_model

    pm = get_peft_model(make_lm(), _config(rows, init_weights=False))
    other = {"model.layers.0.self_attn.o_proj": [0], "model.layers.1.self_attn.v_proj": [3]}
    pm.add_adapter("other", _config(other, init_weights=False))
    first = pm(input_ids=ids).logits
    pm.set_adapter("other")
    second = pm(input_ids=ids).logits
    assert not torch.allclose(first, second)
    o_proj = pm.get_base_model().get_submodule("model.layers.0.self_attn.o_proj")
    assert set(o_proj.keystone_delta) == {"default", "other"}
    trainable = {n for n, p in pm.named_parameters() if p.requires_grad}
    assert trainable and all(n.endswith(".other") for n in trainable)
    pm.base_model.set_adapter(["default", "other"])
    both = pm(input_ids=ids).logits
    pm.merge_adapter(["default", "other"])
    torch.testing.assert_close(pm(input_ids=ids).logits, both, atol=1e-5, rtol=1e-5)
    pm.unmerge_adapter()
    pm.delete_adapter("other")
    assert set(o_proj.keystone_delta) == {"default"} and set(o_proj.keystone_rows) == {"default"}


def test_ablation_hooks_the_keystone_wrapper(make_lm, rows, ids):
    from peft import get_peft_model

    from hf_ext.keystone import KeystoneSet, ablate_neurons

    ks = KeystoneSet(rows)
    with ablate_neurons(make_lm(), ks) as lm:
        ref = lm(ids).logits
    pm = get_peft_model(make_lm(), _config({}, keystone_set=ks, init_weights=False))
    with ablate_neurons(pm, ks):
        got = pm(input_ids=ids).logits  # trained rows are zeroed too: the hook sits after the delta
    torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("arch", ["qwen2", "gemma3"])
def test_other_architectures_roundtrip(arch, tmp_path, make_lm, ids, train):
    from peft import PeftModel, get_peft_model

    from hf_ext import KeystoneConfig
    from hf_ext.keystone import find_keystone_neurons

    tok = word_tokenizer()
    ks = find_keystone_neurons(
        make_lm(arch, vocab_size=len(tok)), tok, {"a": "the city of paris", "b": "what is true"}, k=5
    )
    pm = get_peft_model(make_lm(arch, vocab_size=len(tok)), KeystoneConfig(keystone_set=ks))
    assert pm.get_nb_trainable_parameters()[0] == sum(
        len(r) * pm.get_base_model().get_submodule(n).in_features for n, r in ks.indices.items()
    )
    train(pm, steps=2)
    out = pm(input_ids=ids).logits
    pm.save_pretrained(tmp_path)
    again = PeftModel.from_pretrained(make_lm(arch, vocab_size=len(tok)), tmp_path)
    assert torch.equal(again(input_ids=ids).logits, out)


def test_applying_to_a_mismatching_model_names_the_problem(make_lm, rows):
    from peft import get_peft_model

    from hf_ext.keystone.sets import model_fingerprint

    with pytest.raises(ValueError, match="'model.layers.9.self_attn.o_proj', which is absent"):
        get_peft_model(make_lm(), _config({"model.layers.9.self_attn.o_proj": [0]}))
    with pytest.raises(ValueError, match=r"rows \[16\] of module .* out of range \[0, 16\)"):
        get_peft_model(make_lm(), _config({"model.layers.0.self_attn.o_proj": [1, 16]}))
    with pytest.raises(TypeError, match="'model.layers.0.mlp' is a LlamaMLP, not torch.nn.Linear"):
        get_peft_model(make_lm(), _config({"model.layers.0.mlp": [0]}))
    fp = model_fingerprint(make_lm())
    with pytest.raises(ValueError, match="hidden_size: set 16 vs model 32"):
        get_peft_model(
            make_lm(hidden_size=32, intermediate_size=64),
            _config({"model.layers.0.self_attn.o_proj": [1]}, fingerprint=fp),
        )
