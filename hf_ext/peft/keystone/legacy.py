"""Deprecated helpers of the earlier SHiRA-based keystone adapter, kept working until hf-ext 0.3.

:class:`~hf_ext.peft.keystone.config.KeystoneConfig` is now a PEFT tuner of its own: the set is stored in
``adapter_config.json``, PEFT's trainable-parameter count is exact and there are no pad entries to freeze. Use
``peft_model.save_pretrained`` / ``PeftModel.from_pretrained`` and ``get_nb_trainable_parameters`` instead.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from torch import nn

from hf_ext._lazy import REMOVED_IN
from hf_ext.peft.keystone.ablate import base_causal_lm
from hf_ext.peft.keystone.sets import KeystoneSet, base_linear, check_fingerprint, linear_module

SIDECAR = "keystone.json"


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(
        f"`{name}` is deprecated and will be removed in hf-ext {REMOVED_IN}; {instead}",
        DeprecationWarning,
        stacklevel=3,
    )


def attach_keystone_grad_mask(model: nn.Module, keystone_set: KeystoneSet) -> int:
    """Deprecated no-op: keystone layers train exactly their rows, with no pad entries to freeze.

    Returns:
        The number of keystone layers (modules of the set wrapped by ``KeystoneConfig``).

    Raises:
        ValueError: a module of the set is not wrapped by a keystone layer.
    """
    from hf_ext.peft.keystone.layer import KeystoneLayer

    _deprecated("attach_keystone_grad_mask", "keystone layers need no gradient mask.")
    lm = base_causal_lm(model)
    for name in keystone_set.indices:
        if not isinstance(linear_module(lm, name, argument="keystone_set"), KeystoneLayer):
            raise ValueError(
                f"`keystone_set` module {name!r} is not a keystone layer: wrap the model with "
                "`peft.get_peft_model(model, KeystoneConfig(keystone_set=ks))` first."
            )
    return len(keystone_set.indices)


def keystone_trainable_parameters(model: nn.Module, keystone_set: KeystoneSet) -> int:
    """Deprecated: the trainable values of keystone-only fine-tuning, ``sum_m k_m * in_features_m``.

    PEFT's ``get_nb_trainable_parameters()[0]`` gives the same number for a ``KeystoneConfig`` adapter.
    """
    _deprecated("keystone_trainable_parameters", "use `peft_model.get_nb_trainable_parameters()[0]`.")
    lm = base_causal_lm(model)
    return sum(
        len(rows) * base_linear(linear_module(lm, name, argument="keystone_set")).in_features
        for name, rows in keystone_set.indices.items()
    )


def save_keystone_adapter(model: Any, keystone_set: KeystoneSet, save_directory: str | Path) -> Path:
    """Deprecated: ``model.save_pretrained(save_directory)`` plus the set as ``keystone.json``."""
    _deprecated("save_keystone_adapter", "use `peft_model.save_pretrained(directory)`.")
    out = Path(save_directory)
    model.save_pretrained(str(out))
    keystone_set.save(out / SIDECAR)
    return out


def load_keystone_adapter(
    model: nn.Module, save_directory: str | Path, *, is_trainable: bool = False
) -> tuple[Any, KeystoneSet]:
    """Deprecated: check ``keystone.json``'s fingerprint, then ``PeftModel.from_pretrained``.

    Returns:
        ``(peft_model, keystone_set)``.

    Raises:
        ValueError: ``save_directory`` has no ``keystone.json``, or the model's fingerprint differs.
    """
    from peft import PeftModel

    _deprecated("load_keystone_adapter", "use `PeftModel.from_pretrained(model, directory)`.")
    sidecar = Path(save_directory) / SIDECAR
    if not sidecar.is_file():
        raise ValueError(
            f"`save_directory` {str(save_directory)!r} has no {SIDECAR}; save with `save_keystone_adapter`."
        )
    keystone_set = KeystoneSet.load(sidecar)
    check_fingerprint(keystone_set.fingerprint, base_causal_lm(model), what="keystone adapter")
    return PeftModel.from_pretrained(model, str(save_directory), is_trainable=is_trainable), keystone_set
