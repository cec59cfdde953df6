"""The deprecated helpers of the SHiRA-based route still work on keystone adapters, with a warning."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = [requires("peft", "transformers"), pytest.mark.filterwarnings("default::DeprecationWarning")]


def test_old_helpers_warn_and_work(tmp_path, make_lm, rows, ids, train):
    from peft import get_peft_model

    from hf_ext import KeystoneConfig
    from hf_ext.peft.keystone import (
        KeystoneSet,
        attach_keystone_grad_mask,
        keystone_trainable_parameters,
        load_keystone_adapter,
        save_keystone_adapter,
    )
    from hf_ext.peft.keystone.sets import model_fingerprint

    ks = KeystoneSet(rows, fingerprint=model_fingerprint(make_lm()))
    pm = get_peft_model(make_lm(), KeystoneConfig(keystone_set=ks))
    with pytest.warns(DeprecationWarning, match="attach_keystone_grad_mask"):
        assert attach_keystone_grad_mask(pm, ks) == 3
    with pytest.warns(DeprecationWarning, match="get_nb_trainable_parameters"):
        assert keystone_trainable_parameters(pm, ks) == pm.get_nb_trainable_parameters()[0] == 6 * 16
    train(pm)
    out = pm(input_ids=ids).logits
    with pytest.warns(DeprecationWarning, match="save_pretrained"):
        save_keystone_adapter(pm, ks, tmp_path)
    with pytest.warns(DeprecationWarning, match="PeftModel.from_pretrained"):
        pm2, ks2 = load_keystone_adapter(make_lm(), tmp_path, is_trainable=True)
    assert ks2 == ks and torch.equal(pm2(input_ids=ids).logits, out)
    other = make_lm(hidden_size=32, intermediate_size=64)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="hidden_size: set 16 vs model 32"):
        load_keystone_adapter(other, tmp_path)
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="has no keystone.json"):
        load_keystone_adapter(make_lm(), tmp_path / "missing")
    with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="not a keystone layer"):
        attach_keystone_grad_mask(make_lm(), ks)


def test_old_module_path_is_an_alias():
    import importlib
    import sys

    sys.modules.pop("hf_ext.peft.keystone.adapter", None)
    with pytest.warns(DeprecationWarning, match="moved to `hf_ext.peft.keystone.legacy`"):
        old = importlib.import_module("hf_ext.peft.keystone.adapter")
    assert (
        old.save_keystone_adapter
        is importlib.import_module("hf_ext.peft.keystone.legacy").save_keystone_adapter
    )
