"""KeystoneConfig (SHiRA route): mask counts, pads frozen, save/load, merge, disable, grads vs dense,
callback."""

from __future__ import annotations

import warnings

import pytest
import torch

from hf_ext.testing import requires, tiny_causal_lm, word_tokenizer

pytestmark = requires("peft", "transformers")

SET = {
    "model.layers.0.self_attn.o_proj": [2, 9],
    "model.layers.0.self_attn.q_proj": [5],
    "model.layers.1.mlp.up_proj": [0, 7, 31],
}
IDS = torch.tensor([[1, 5, 9, 12, 30, 7], [3, 8, 2, 44, 6, 1]])


def _lm(arch="llama", seed=0):
    return tiny_causal_lm(arch, seed)


def _set(**kw):
    from hf_ext.peft.keystone import KeystoneSet
    from hf_ext.peft.keystone.sets import model_fingerprint

    return KeystoneSet(dict(SET), fingerprint=model_fingerprint(_lm()), **kw)


def _peft(lm, ks):
    from peft import get_peft_model

    from hf_ext import KeystoneConfig

    return get_peft_model(lm, KeystoneConfig(model=lm, keystone_set=ks))


def _train(pm, steps=3, wd=0.1, dtype=None):
    opt = torch.optim.AdamW([p for p in pm.parameters() if p.requires_grad], lr=1e-2, weight_decay=wd)
    pm.train()
    for _ in range(steps):
        pm(input_ids=IDS, labels=IDS).loss.backward()
        opt.step()
        opt.zero_grad()
    pm.eval()


def test_mask_counts_and_complete_rows():
    from peft.tuners.shira import ShiraLayer

    from hf_ext.peft.keystone.adapter import complete_rows

    lm = _lm()
    pm = _peft(lm, _set())
    r = pm.peft_config["default"].r
    layers = {
        n.removeprefix("base_model.model."): m for n, m in pm.named_modules() if isinstance(m, ShiraLayer)
    }
    assert set(layers) == set(SET)
    for name, layer in layers.items():
        idx = layer.shira_indices["default"]
        assert idx.shape[1] == r * (layer.in_features + layer.out_features)
        assert complete_rows(idx, layer.in_features) == SET[name]


def test_plain_get_peft_model_trains_only_keystone_rows_adamw_decay():
    lm = _lm()
    base = {n: p.detach().clone() for n, p in lm.named_parameters()}
    pm = _peft(lm, _set())
    _train(pm, wd=0.1)
    for layer_name, rows in SET.items():
        layer = pm.get_base_model().get_submodule(layer_name)
        keep = torch.isin(layer.shira_indices["default"][0].long(), torch.tensor(rows))
        w = layer.shira_weight["default"]
        assert torch.all(w[~keep] == 0)  # pads exactly 0
        assert torch.all(w[keep] != 0)
    merged = pm.merge_and_unload()
    for name, p in merged.named_parameters():
        module = name.rsplit(".", 1)[0]
        if module in SET:
            others = [i for i in range(p.shape[0]) if i not in SET[module]]
            assert torch.equal(p[others], base[name][others])
            assert not torch.equal(p[SET[module]], base[name][SET[module]])
        else:
            assert torch.equal(p, base[name]), name


def test_save_load_merge_disable_parity(tmp_path):
    from safetensors.torch import load_file

    from hf_ext.peft.keystone import load_keystone_adapter, save_keystone_adapter

    ks = _set()
    plain = _lm()(IDS).logits
    pm = _peft(_lm(), ks)
    _train(pm)
    out = pm(input_ids=IDS).logits
    with pm.disable_adapter():
        torch.testing.assert_close(pm(input_ids=IDS).logits, plain, atol=1e-6, rtol=0)
    save_keystone_adapter(pm, ks, tmp_path)
    keys = load_file(tmp_path / "adapter_model.safetensors")
    assert keys and all(("shira_weight" in k) or ("shira_indices" in k) for k in keys)
    assert any("shira_indices" in k for k in keys)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # e.g. "mask_type not recognized"
        from peft import PeftModel

        plain_load = PeftModel.from_pretrained(_lm(), tmp_path)
    assert torch.equal(plain_load(input_ids=IDS).logits, out)
    pm2, ks2 = load_keystone_adapter(_lm(), tmp_path, is_trainable=True)
    assert ks2 == ks and torch.equal(pm2(input_ids=IDS).logits, out)
    _train(pm2)  # the pad mask was re-attached on load
    for name, rows in SET.items():
        layer = pm2.get_base_model().get_submodule(name)
        keep = torch.isin(layer.shira_indices["default"][0].long(), torch.tensor(rows))
        assert torch.all(layer.shira_weight["default"][~keep] == 0)
    merged = PeftModel.from_pretrained(_lm(), tmp_path).merge_and_unload()
    torch.testing.assert_close(merged(IDS).logits, out, atol=1e-5, rtol=1e-5)


def test_trainable_count_matches_set_when_no_pads_needed():
    """``print_trainable_parameters`` equals sum k_m*in_m exactly when k_m*in = r*(in+out); hidden 16: k_m =
    2r."""
    from hf_ext.peft.keystone import KeystoneSet, keystone_trainable_parameters
    from hf_ext.peft.keystone.sets import model_fingerprint

    lm = _lm()
    ks = KeystoneSet(
        {"model.layers.0.self_attn.o_proj": [1, 4], "model.layers.1.self_attn.o_proj": [0, 15]},
        fingerprint=model_fingerprint(lm),
    )
    pm = _peft(lm, ks)
    reported, _ = pm.get_nb_trainable_parameters()
    assert reported == keystone_trainable_parameters(pm, ks) == 64
    # With pads (the general case) SHiRA reports r*(in+out) per module, more than the effective count.
    pm2 = _peft(_lm(), _set())
    assert (
        pm2.get_nb_trainable_parameters()[0]
        > keystone_trainable_parameters(pm2, _set())
        == 2 * 16 + 16 + 3 * 16
    )


def test_shira_gradients_equal_dense_row_gradients():
    lm64 = _lm().double()
    dense = _lm().double()
    pm = _peft(lm64, _set())
    pm(input_ids=IDS, labels=IDS).loss.backward()
    dense(input_ids=IDS, labels=IDS).loss.backward()
    for name, rows in SET.items():
        layer = pm.get_base_model().get_submodule(name)
        idx = layer.shira_indices["default"].long()
        g = layer.shira_weight["default"].grad
        keep = torch.isin(idx[0], torch.tensor(rows))
        ref = dense.get_submodule(name).weight.grad[idx[0][keep], idx[1][keep]]
        torch.testing.assert_close(g[keep], ref, atol=1e-6, rtol=0)
        assert torch.all(g[~keep] == 0)


def test_ablation_through_shira_wrappers():
    from hf_ext.peft.keystone import ablate_neurons

    lm = _lm()
    ks = _set()
    with ablate_neurons(lm, ks):
        ref = lm(IDS).logits
    pm = _peft(_lm(), ks)
    with ablate_neurons(pm, ks):
        got = pm(input_ids=IDS).logits
    torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("arch", ["qwen2", "gemma3"])
def test_other_architectures_roundtrip(arch, tmp_path):
    from hf_ext.peft.keystone import find_keystone_neurons, load_keystone_adapter, save_keystone_adapter

    tok = word_tokenizer()
    make = lambda: tiny_causal_lm(arch, vocab_size=len(tok))  # noqa: E731
    ks = find_keystone_neurons(make(), tok, {"a": "the city of paris", "b": "what is true or false"}, k=5)
    pm = _peft(make(), ks)
    _train(pm, steps=2)
    out = pm(input_ids=IDS).logits
    save_keystone_adapter(pm, ks, tmp_path)
    pm2, _ = load_keystone_adapter(make(), tmp_path)
    assert torch.equal(pm2(input_ids=IDS).logits, out)


def test_callback_keeps_other_rows_and_warns_on_decay(tmp_path):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    from hf_ext.peft.keystone import KeystoneGradMaskCallback

    lm = _lm()
    base = {n: p.detach().clone() for n, p in lm.named_parameters()}
    rows = [{"input_ids": IDS[i % 2].tolist(), "labels": IDS[i % 2].tolist()} for i in range(8)]
    args = TrainingArguments(
        str(tmp_path),
        max_steps=3,
        per_device_train_batch_size=2,
        learning_rate=1e-2,
        weight_decay=0.0,
        report_to=[],
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
    )
    Trainer(
        model=lm,
        args=args,
        train_dataset=Dataset.from_list(rows),
        callbacks=[KeystoneGradMaskCallback(_set())],
    ).train()
    for name, p in lm.named_parameters():
        module = name.rsplit(".", 1)[0]
        if module in SET and name.endswith("weight"):
            others = [i for i in range(p.shape[0]) if i not in SET[module]]
            assert torch.equal(p[others], base[name][others])
            assert not torch.equal(p[SET[module]], base[name][SET[module]])
        else:
            assert torch.equal(p, base[name]), name
    args.weight_decay = 0.1
    with pytest.warns(UserWarning, match="weight_decay=0.1"):
        KeystoneGradMaskCallback(_set()).on_train_begin(args, None, None, model=_lm())


# ----------------------------------------------------------------------------------------------- bad inputs


def test_config_bad_inputs():
    from hf_ext import KeystoneConfig
    from hf_ext.peft.keystone import KeystoneSet, attach_keystone_grad_mask, load_keystone_adapter
    from hf_ext.peft.keystone.config import keystone_mask

    lm = _lm()
    with pytest.raises(ValueError, match="needs `model=` and `keystone_set=`"):
        KeystoneConfig()
    with pytest.raises(ValueError, match="`init_weights` must be True"):
        KeystoneConfig(model=lm, keystone_set=_set(), init_weights=False)
    with pytest.raises(ValueError, match="`r` must be an int >= 2"):
        KeystoneConfig(
            model=lm, keystone_set=KeystoneSet({"model.layers.0.self_attn.o_proj": [0, 1, 2]}), r=1
        )
    with pytest.raises(ValueError, match="SHiRA pad capacity overflow"):
        keystone_mask(
            [0], r=2, out_features=2, in_features=4
        )  # 12 values: 4 in the row, 8 pads > (2-1)*(4-1)
    with pytest.raises(ValueError, match="SHiRA pad capacity overflow"):
        KeystoneConfig(model=lm, keystone_set=KeystoneSet({"model.layers.0.self_attn.o_proj": [0]}), r=15)
    with pytest.raises(ValueError, match="not a SHiRA layer"):
        attach_keystone_grad_mask(lm, _set())
    with pytest.raises(ValueError, match="has no keystone.json"):
        load_keystone_adapter(lm, "/nonexistent-dir")
    with pytest.raises(TypeError, match="must be a KeystoneSet"):
        from hf_ext.peft.keystone import KeystoneGradMaskCallback

        KeystoneGradMaskCallback({"a": [1]})


def test_adapter_fingerprint_mismatch(tmp_path):
    from hf_ext.peft.keystone import load_keystone_adapter, save_keystone_adapter

    ks = _set()
    save_keystone_adapter(_peft(_lm(), ks), ks, tmp_path)
    other = tiny_causal_lm("llama", hidden_size=32, intermediate_size=64)
    with pytest.raises(
        ValueError, match="keystone adapter .* hidden_size: set 16 vs model 32, intermediate_size"
    ):
        load_keystone_adapter(other, tmp_path)
