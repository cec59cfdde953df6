"""Keystone-only fine-tuning through PEFT's SHiRA tuner: pad freezing, parameter counts, save/load with a
sidecar.

SHiRA allocates ``r * (in + out)`` trainable values per targeted module (one global ``r``). A keystone mask
fills the selected rows completely (``k_m * in`` values) and puts the remaining "pads" in other rows, at most
``in - 1`` per row. Pads start at 0 and a gradient hook (public ``Tensor.register_hook``) multiplies their
gradient by 0, so they stay exactly 0 under SGD, Adam and AdamW with weight decay (zero moments, zero update,
decay of 0 is 0).
"""

from __future__ import annotations

import logging
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hf_ext.peft.keystone.ablate import base_causal_lm
from hf_ext.peft.keystone.sets import KeystoneSet, base_linear, check_fingerprint, linear_module

logger = logging.getLogger(__name__)

SIDECAR = "keystone.json"
_MASKED: weakref.WeakKeyDictionary[torch.Tensor, Any] = weakref.WeakKeyDictionary()


def complete_rows(indices: torch.Tensor, in_features: int) -> list[int]:
    """Rows fully covered by SHiRA ``indices`` (shape ``(2, N)``: row, column): the keystone rows of a
    keystone mask."""
    rows, counts = indices[0].long().unique(return_counts=True)
    return rows[counts == in_features].tolist()


def attach_keystone_grad_mask(model: nn.Module, keystone_set: KeystoneSet) -> int:
    """Freeze the SHiRA pad entries of every keystone-masked adapter by a gradient hook; idempotent.

    ``get_peft_model(model, KeystoneConfig(...))`` calls this lazily on the first forward, and
    :func:`load_keystone_adapter` after a trainable load; call it yourself after a plain
    ``PeftModel.from_pretrained(..., is_trainable=True)``. Adapters whose complete rows are not the set's rows
    (other SHiRA adapters on the same modules) are left alone.

    Returns:
        The number of ``shira_weight`` tensors that carry the mask (including ones masked before).

    Raises:
        ValueError: a module of the set is not wrapped by SHiRA.
    """
    from peft.tuners.shira import ShiraLayer

    lm = base_causal_lm(model)
    masked = 0
    for name, rows in keystone_set.indices.items():
        layer = linear_module(lm, name, argument="keystone_set")
        if not isinstance(layer, ShiraLayer):
            raise ValueError(
                f"`keystone_set` module {name!r} is a {type(layer).__name__}, not a SHiRA layer: wrap "
                f"the model with "
                "`peft.get_peft_model(model, KeystoneConfig(model=model, keystone_set=ks))` first."
            )
        for adapter, weight in layer.shira_weight.items():
            indices = layer.shira_indices[adapter]
            if sorted(complete_rows(indices, layer.in_features)) != sorted(rows):
                continue
            if weight not in _MASKED:
                keep = torch.isin(indices[0].long(), torch.tensor(rows, device=indices.device)).to(
                    weight.dtype
                )
                _MASKED[weight] = weight.register_hook(lambda g, keep=keep: g * keep.to(g.device))
            masked += 1
    return masked


def keystone_trainable_parameters(model: nn.Module, keystone_set: KeystoneSet) -> int:
    """Effective trainable parameters of keystone-only fine-tuning: ``sum_m k_m * in_features_m``.

    SHiRA's ``print_trainable_parameters`` reports ``r * sum_m (in_m + out_m)`` instead, which includes the
    frozen pads; the two agree only when ``k_m * in_m == r * (in_m + out_m)`` in every targeted module.
    """
    lm = base_causal_lm(model)
    total = 0
    for name, rows in keystone_set.indices.items():
        layer = linear_module(lm, name, argument="keystone_set")
        total += len(rows) * base_linear(layer).in_features
    return total


def save_keystone_adapter(model: Any, keystone_set: KeystoneSet, save_directory: str | Path) -> Path:
    """``model.save_pretrained(save_directory)`` plus the set as ``keystone.json`` (fingerprint included)."""
    out = Path(save_directory)
    model.save_pretrained(str(out))
    keystone_set.save(out / SIDECAR)
    return out


def load_keystone_adapter(
    model: nn.Module, save_directory: str | Path, *, is_trainable: bool = False
) -> tuple[Any, KeystoneSet]:
    """Load an adapter written by :func:`save_keystone_adapter` onto ``model``; returns ``(peft_model,
    keystone_set)``.

    The sidecar's fingerprint is checked against ``model`` first; with ``is_trainable=True`` the pad mask is
    re-attached. No ``mask_fn`` is needed: SHiRA reloads its saved ``shira_indices``.

    Raises:
        ValueError: ``save_directory`` has no ``keystone.json``, or the model's fingerprint differs (fields
            listed).
    """
    from peft import PeftModel

    sidecar = Path(save_directory) / SIDECAR
    if not sidecar.is_file():
        raise ValueError(
            f"`save_directory` {str(save_directory)!r} has no {SIDECAR}; save with `save_keystone_adapter`."
        )
    keystone_set = KeystoneSet.load(sidecar)
    check_fingerprint(keystone_set.fingerprint, base_causal_lm(model), what="keystone adapter")
    peft_model = PeftModel.from_pretrained(model, str(save_directory), is_trainable=is_trainable)
    if is_trainable:
        attach_keystone_grad_mask(peft_model, keystone_set)
    return peft_model, keystone_set
