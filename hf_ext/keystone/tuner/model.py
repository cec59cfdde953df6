"""`KeystoneModel`: the PEFT tuner that wraps each module of a keystone set in a keystone ``Linear``.

Importing this module registers the tuner with PEFT, so ``get_peft_model`` and ``PeftModel.from_pretrained``
know the ``"KEYSTONE"`` adapter type. peft 0.21's ``register_peft_method`` refuses names that are not members
of its closed ``PeftType`` enum; :func:`register_keystone_tuner` then fills the three tables that
``register_peft_method`` itself fills (``PEFT_TYPE_TO_CONFIG_MAPPING``, ``PEFT_TYPE_TO_TUNER_MAPPING``,
``PEFT_TYPE_TO_PREFIX_MAPPING``), keyed by a ``str`` enum value that compares like the name. No private
attribute of peft is touched.
"""

from __future__ import annotations

from typing import Any

from peft.tuners.tuners_utils import BaseTuner
from torch import nn

from hf_ext._registry import paper
from hf_ext.keystone.sets import KeystoneSet
from hf_ext.keystone.tuner.config import PEFT_TYPE, KeystoneConfig
from hf_ext.keystone.tuner.layer import KeystoneLayer, Linear


class KeystoneModel(BaseTuner):
    """Keystone-only fine-tuning as a PEFT tuner; built by ``get_peft_model(model, KeystoneConfig(...))``.

    Only the modules named in ``KeystoneConfig.keystone_rows`` are wrapped (exact names, relative to the model
    given to PEFT). Before injection the set is checked against the model: the fingerprint, every module
    present and an ``nn.Linear``, every row in range. Merge, unmerge, ``disable_adapter``, several adapters
    and ``PeftModel.from_pretrained`` work as for LoRA.

    Example:
        >>> from peft import get_peft_model
        >>> from hf_ext.testing import tiny_llama
        >>> config = KeystoneConfig(keystone_rows={"model.layers.1.mlp.up_proj": [0, 5]})
        >>> pm = get_peft_model(tiny_llama(), config)
        >>> up_proj = pm.get_base_model().model.layers[1].mlp.up_proj
        >>> type(pm.base_model).__name__, up_proj.keystone_delta["default"].shape
        ('KeystoneModel', torch.Size([2, 16]))
    """

    _paper = paper("keystone")

    prefix: str = "keystone_"
    tuner_layer_cls = KeystoneLayer
    target_module_mapping: dict[str, list[str]] = {}

    def _pre_injection_hook(self, model: nn.Module, config: Any, adapter_name: str) -> None:
        KeystoneSet(config.keystone_rows, fingerprint=config.fingerprint).validate(model)

    @staticmethod
    def _check_target_module_exists(peft_config: Any, key: str) -> bool:
        return key in peft_config.keystone_rows

    def _create_and_replace(
        self,
        peft_config: Any,
        adapter_name: str,
        target: nn.Module,
        target_name: str,
        parent: nn.Module,
        current_key: str,
        parameter_name: str | None = None,
    ) -> None:
        rows = peft_config.keystone_rows[current_key]
        if isinstance(target, KeystoneLayer):
            target.update_layer(
                adapter_name,
                rows,
                init_weights=peft_config.init_weights,
                inference_mode=peft_config.inference_mode,
            )
            return
        new_module = Linear(target, adapter_name, rows, init_weights=peft_config.init_weights)
        if adapter_name not in self.active_adapters:
            new_module.requires_grad_(False)  # an added adapter is not trainable until it is activated
        self._replace_module(parent, target_name, new_module, target)


def register_keystone_tuner() -> None:
    """Make ``"KEYSTONE"`` a PEFT adapter type (idempotent); runs when this module is imported.

    PEFT's public ``register_peft_method`` is tried first; on peft versions whose closed ``PeftType`` enum
    refuses the name, the config, tuner and prefix tables are filled directly, exactly as that function
    would fill them.
    """
    from peft.mapping import (
        PEFT_TYPE_TO_CONFIG_MAPPING,
        PEFT_TYPE_TO_PREFIX_MAPPING,
        PEFT_TYPE_TO_TUNER_MAPPING,
    )
    from peft.utils import register_peft_method

    if PEFT_TYPE not in PEFT_TYPE_TO_TUNER_MAPPING:
        try:
            register_peft_method(
                name="keystone",
                config_cls=KeystoneConfig,
                model_cls=KeystoneModel,
                prefix=KeystoneModel.prefix,
            )
            return
        except ValueError:  # "Unknown PEFT type KEYSTONE, please add an entry to ... PeftType."
            pass
    # Also replaces a stale registration (a reloaded module's classes).
    PEFT_TYPE_TO_PREFIX_MAPPING[PEFT_TYPE] = KeystoneModel.prefix  # type: ignore[index]
    PEFT_TYPE_TO_CONFIG_MAPPING[PEFT_TYPE] = KeystoneConfig  # type: ignore[index]
    PEFT_TYPE_TO_TUNER_MAPPING[PEFT_TYPE] = KeystoneModel  # type: ignore[index]


register_keystone_tuner()
