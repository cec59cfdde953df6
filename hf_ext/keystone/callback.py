"""`KeystoneGradMaskCallback`: keystone-only fine-tuning of a full model in ``Trainer``, without PEFT."""

from __future__ import annotations

import logging
import warnings
from typing import Any

import torch
from transformers import TrainerCallback

from hf_ext._registry import paper
from hf_ext.keystone.sets import KeystoneSet, base_linear, linear_module

logger = logging.getLogger(__name__)


class KeystoneGradMaskCallback(TrainerCallback):
    """Freeze everything but the keystone rows: ``Trainer(..., callbacks=[KeystoneGradMaskCallback(ks)])``.

    On ``on_train_begin`` every parameter is frozen except the ``weight`` of each module in the set, whose
    gradient is multiplied by a row mask (``Tensor.register_hook``). Frozen parameters get no gradient, so the
    optimizer skips them. AdamW with ``weight_decay > 0`` still decays the non-selected rows of the unfrozen
    weights (they have a zero gradient, not none): use ``weight_decay=0`` (a warning is issued otherwise) or
    the SHiRA route (:class:`~hf_ext.keystone.tuner.config.KeystoneConfig`), whose pads are exactly 0. Biases
    are not trained.

    Args:
        keystone_set: The neurons to train (module names relative to the model given to the ``Trainer``).

    Example:
        >>> cb = KeystoneGradMaskCallback(KeystoneSet({"model.layers.0.mlp.up_proj": [1]}))
        >>> len(cb.keystone_set)
        1
    """

    _paper = paper("keystone")

    def __init__(self, keystone_set: KeystoneSet) -> None:
        if not isinstance(keystone_set, KeystoneSet):
            raise TypeError(f"`keystone_set` must be a KeystoneSet, got {type(keystone_set).__name__}.")
        self.keystone_set = keystone_set
        self._handles: list[Any] = []

    def on_train_begin(self, args: Any, state: Any, control: Any, model: Any = None, **kwargs: Any) -> None:
        if model is None:
            raise ValueError("`model` was not passed to the callback; use it through a transformers Trainer.")
        if getattr(args, "weight_decay", 0.0) > 0:
            warnings.warn(
                f"weight_decay={args.weight_decay} decays the frozen rows of keystone modules too; set "
                f"weight_decay=0 "
                "or use KeystoneConfig (SHiRA route) for exact keystone-only updates.",
                UserWarning,
                stacklevel=2,
            )
        self.keystone_set.validate(model)
        model.requires_grad_(False)
        for name, rows in self.keystone_set.indices.items():
            weight = base_linear(linear_module(model, name, argument="keystone_set")).weight
            keep = torch.zeros(weight.shape[0], 1, dtype=weight.dtype, device=weight.device)
            keep[rows] = 1.0
            weight.requires_grad_(True)
            self._handles.append(weight.register_hook(lambda g, keep=keep: g * keep))

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()
