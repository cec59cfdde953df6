"""KeystoneConfig: the set as data (JSON round trip, from a KeystoneSet), the old constructor, bad input."""

from __future__ import annotations

import json

import pytest

from hf_ext.testing import requires, word_tokenizer

pytestmark = requires("peft", "transformers")


def test_config_round_trips_the_set_and_its_provenance(tmp_path, make_lm):
    from peft import PeftConfig

    from hf_ext import KeystoneConfig
    from hf_ext.keystone import find_keystone_neurons

    tok = word_tokenizer()
    ks = find_keystone_neurons(
        make_lm(vocab_size=len(tok)), tok, {"a": "the city of paris", "b": "what is"}, k=4
    )
    config = KeystoneConfig(keystone_set=ks)
    assert config.keystone_rows == ks.indices and config.target_modules == sorted(ks.indices)
    assert config.fingerprint["model_type"] == "llama" and config.discovery["aggregate"] == "min"
    assert config.discovery["prompts_sha256"] == ks.prompts_sha256
    config.save_pretrained(tmp_path)
    on_disk = json.loads((tmp_path / "adapter_config.json").read_text())
    assert on_disk["peft_type"] == "KEYSTONE" and on_disk["keystone_rows"] == ks.indices
    back = PeftConfig.from_pretrained(tmp_path)
    assert type(back) is KeystoneConfig
    assert (back.keystone_rows, back.fingerprint, back.discovery) == (
        ks.indices,
        ks.fingerprint,
        config.discovery,
    )


def test_rows_are_sorted_and_checked():
    from hf_ext import KeystoneConfig

    assert KeystoneConfig(keystone_rows={"m.o_proj": [5, 1]}).keystone_rows == {"m.o_proj": [1, 5]}
    bad = [
        ({}, ValueError, "`keystone_rows` must be a non-empty dict"),
        ({"m.o_proj": []}, ValueError, r"`keystone_rows\['m.o_proj'\]` must be a list of at least 1"),
        ({"m.o_proj": [1, 1]}, ValueError, r"must hold distinct rows, got duplicates \[1\]"),
        ({"m.o_proj": [-1]}, ValueError, r"`keystone_rows\['m.o_proj'\]\[0\]` must be an int >= 0, got -1"),
        ({"m.o_proj": [1.5]}, TypeError, r"`keystone_rows\['m.o_proj'\]\[0\]` must be an int >= 0, got 1.5"),
        ({"lm_head": [0]}, ValueError, "embeddings and the LM head"),
        ({"model.embed_tokens": [0]}, ValueError, "embeddings and the LM head"),
    ]
    for rows, error, message in bad:
        with pytest.raises(error, match=message):
            KeystoneConfig(keystone_rows=rows)
    with pytest.raises(TypeError, match="`init_weights` must be a bool, got 'yes'"):
        KeystoneConfig(keystone_rows={"m.o_proj": [0]}, init_weights="yes")
    with pytest.raises(ValueError, match="`target_modules` must be the module names of `keystone_rows`"):
        KeystoneConfig(keystone_rows={"m.o_proj": [0]}, target_modules=["q_proj"])


def test_set_and_rows_together_are_refused():
    from hf_ext import KeystoneConfig
    from hf_ext.keystone import KeystoneSet

    with pytest.raises(ValueError, match="either `keystone_rows` or `keystone_set`"):
        KeystoneConfig(keystone_rows={"m.o_proj": [0]}, keystone_set=KeystoneSet({"m.o_proj": [1]}))
