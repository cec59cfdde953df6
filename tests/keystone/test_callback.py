"""KeystoneGradMaskCallback: a full-model Trainer run changes only keystone rows; weight decay warns."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("peft", "transformers")


def test_callback_keeps_other_rows_and_warns_on_decay(tmp_path, make_lm, rows, ids):
    from datasets import Dataset
    from transformers import Trainer, TrainingArguments

    from hf_ext.keystone import KeystoneGradMaskCallback, KeystoneSet

    lm = make_lm()
    base = {n: p.detach().clone() for n, p in lm.named_parameters()}
    data = [{"input_ids": ids[i % 2].tolist(), "labels": ids[i % 2].tolist()} for i in range(8)]
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
    callback = KeystoneGradMaskCallback(KeystoneSet(rows))
    Trainer(model=lm, args=args, train_dataset=Dataset.from_list(data), callbacks=[callback]).train()
    for name, p in lm.named_parameters():
        module = name.rsplit(".", 1)[0]
        if module in rows and name.endswith("weight"):
            assert (p != base[name]).any(1).nonzero().flatten().tolist() == rows[module], name
        else:
            assert torch.equal(p, base[name]), name
    args.weight_decay = 0.1
    with pytest.warns(UserWarning, match="weight_decay=0.1"):
        KeystoneGradMaskCallback(KeystoneSet(rows)).on_train_begin(args, None, None, model=make_lm())
    with pytest.raises(TypeError, match="must be a KeystoneSet"):
        KeystoneGradMaskCallback({"a": [1]})
