"""The open parameterisations of keystone-only fine-tuning as `KeystoneConfig` options: input columns of the
reading weights, per-row rate scaled by the row norm, frozen residual channels. Each trains exactly its
entries, reloads and merges exactly."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("peft", "transformers")

_MORE = {"model.layers.1.self_attn.v_proj": [3], "model.layers.0.mlp.down_proj": [4]}


def _config(rows, **kw):
    from hf_ext import KeystoneConfig

    return KeystoneConfig(keystone_rows=rows, **kw)


def test_reader_columns_by_hand(make_lm, rows):
    from hf_ext.keystone.tuner.model import reader_columns

    lm = make_lm()  # hidden 16, 2 query heads sharing 1 key-value head of width 8
    assert lm.config.num_key_value_heads == 1 and lm.config.num_attention_heads == 2
    got = reader_columns(lm, {**rows, **_MORE})
    assert got == {
        "model.layers.0.mlp.gate_proj": [2, 9],  # o_proj rows write residual channels 2, 9
        "model.layers.0.mlp.up_proj": [2, 9],
        "model.layers.1.mlp.down_proj": [0, 7, 31],  # up_proj neurons 0, 7, 31
        "model.layers.1.self_attn.o_proj": [3, 11],  # value channel 3 of the shared head, both query heads
        "model.layers.1.self_attn.q_proj": [4],  # layer-0 down_proj writes channel 4 for layer 1
        "model.layers.1.self_attn.k_proj": [4],
        "model.layers.1.self_attn.v_proj": [4],
    }  # q_proj rows: no weight reads them
    with pytest.raises(ValueError, match="cannot tell which weights read 'model.norm'"):
        reader_columns(lm, {"model.norm": [0]})


@pytest.mark.parametrize(
    "options",
    [
        {"parameterisation": "columns"},
        {"parameterisation": "rows+columns", "delta_scale": "weight_norm"},
        {"delta_scale": "weight_norm", "frozen_channels": [9]},
    ],
    ids=["columns", "rows+columns-scaled", "rows-scaled-frozen"],
)
def test_variant_trains_its_entries_and_reloads_and_merges_exactly(
    options, tmp_path, make_lm, rows, ids, train
):
    from peft import PeftConfig, PeftModel, get_peft_model

    rows = {**rows, **_MORE}
    base = {n: p.detach().clone() for n, p in make_lm().named_parameters()}
    plain = make_lm()(ids).logits
    pm = get_peft_model(make_lm(), _config(rows, **options))
    targets = pm.peft_config["default"].module_targets()
    assert pm.get_nb_trainable_parameters()[0] == sum(
        len(r) * pm.get_base_model().get_submodule(n).in_features
        + len(c) * pm.get_base_model().get_submodule(n).out_features
        for n, (r, c) in targets.items()
    )
    train(pm, weight_decay=0.1)
    out = pm(input_ids=ids).logits
    assert not torch.allclose(out, plain)
    pm.save_pretrained(tmp_path)
    assert PeftConfig.from_pretrained(tmp_path).keystone_columns == pm.peft_config["default"].keystone_columns
    again = PeftModel.from_pretrained(make_lm(), tmp_path)
    assert torch.equal(again(input_ids=ids).logits, out)
    again.merge_adapter()
    torch.testing.assert_close(again(input_ids=ids).logits, out, atol=1e-5, rtol=1e-5)
    again.unmerge_adapter()  # W + d - d: equal up to float rounding, as for the rows-only adapter
    torch.testing.assert_close(again(input_ids=ids).logits, out)
    with again.disable_adapter():
        torch.testing.assert_close(again(input_ids=ids).logits, plain)
    merged = pm.merge_and_unload()
    for name, p in merged.named_parameters():
        module = name.rsplit(".", 1)[0]
        if module in targets and name.endswith("weight"):
            r, c = targets[module]
            expect = torch.zeros_like(p, dtype=torch.bool)
            expect[r] = True
            expect[:, c] = True
            assert torch.equal(p != base[name], expect), name
        else:
            assert torch.equal(p, base[name]), name


def test_frozen_channels_drop_writing_rows_and_reading_columns(make_lm, rows):
    config = _config({**rows, **_MORE}, parameterisation="rows+columns", frozen_channels=[2, 4])
    from peft import get_peft_model

    targets = get_peft_model(make_lm(), config).peft_config["default"].module_targets()
    assert targets["model.layers.0.self_attn.o_proj"] == ([9], [])  # row 2 writes channel 2
    assert targets["model.layers.0.mlp.gate_proj"] == ([], [9])  # column 2 reads it
    assert targets["model.layers.0.self_attn.q_proj"] == ([5], [])  # q_proj rows do not write the stream
    assert "model.layers.0.mlp.down_proj" not in targets  # its only row writes channel 4
    assert "model.layers.1.self_attn.q_proj" not in targets  # its only column reads channel 4
    assert targets["model.layers.1.self_attn.o_proj"] == ([], [3, 11])  # o_proj columns read heads, kept


def test_weight_norm_scale_is_the_row_norm_over_the_mean(make_lm, rows):
    from peft import get_peft_model

    weight = make_lm().model.layers[0].self_attn.o_proj.weight.detach()
    pm = get_peft_model(make_lm(), _config(rows, delta_scale="weight_norm", init_weights=False))
    layer = pm.get_base_model().model.layers[0].self_attn.o_proj
    norms = weight.norm(dim=1)
    scale = norms[[2, 9]] / norms.mean()
    delta = layer.keystone_delta["default"].detach()
    torch.testing.assert_close(layer.get_delta_weight("default")[[2, 9]], scale[:, None] * delta)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"parameterisation": "cols"}, "`parameterisation` must be one of 'rows', 'columns', 'rows.columns'"),
        ({"delta_scale": "norm"}, "`delta_scale` must be one of 'none', 'weight_norm'"),
        ({"frozen_channels": [-1]}, r"`frozen_channels\[0\]` must be an int >= 0, got -1"),
        (
            {"keystone_columns": {"m.up_proj": [0]}},
            "`keystone_columns` is given but `parameterisation` is 'rows'",
        ),
        (
            {"parameterisation": "columns", "keystone_columns": {"m.up_proj": [1, 1]}},
            r"`keystone_columns\['m.up_proj'\]` must hold distinct columns",
        ),
    ],
)
def test_bad_options_name_the_argument(options, message, rows):
    with pytest.raises(ValueError, match=message):
        _config(rows, **options)


def test_nothing_left_to_train_is_an_error(make_lm):
    from peft import get_peft_model

    only_q = {"model.layers.0.self_attn.q_proj": [1]}
    with pytest.raises(ValueError, match="parameterisation='columns'.* leaves nothing to train"):
        get_peft_model(make_lm(), _config(only_q, parameterisation="columns"))
    with pytest.raises(ValueError, match=r"columns \[16\] of module 'model.layers.0.mlp.up_proj' are out of"):
        get_peft_model(
            make_lm(),
            _config(
                only_q, parameterisation="columns", keystone_columns={"model.layers.0.mlp.up_proj": [16]}
            ),
        )
