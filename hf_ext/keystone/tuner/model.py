"""`KeystoneModel`: the PEFT tuner that wraps each module of a keystone set in a keystone ``Linear``.

Importing this module registers the tuner with PEFT, so ``get_peft_model`` and ``PeftModel.from_pretrained``
know the ``"KEYSTONE"`` adapter type. PEFT's documented extension path, ``register_peft_method``, is
always tried first. PEFT refuses it: in peft 0.21 that function accepts only members of the closed
``PeftType`` enum (``ValueError: Unknown PEFT type KEYSTONE``), and PEFT offers no other route for a new
adapter type. Only on that refusal does :func:`register_keystone_tuner` fill the three tables
``register_peft_method`` fills (``PEFT_TYPE_TO_CONFIG_MAPPING``, ``PEFT_TYPE_TO_TUNER_MAPPING``,
``PEFT_TYPE_TO_PREFIX_MAPPING``, public module attributes of ``peft.mapping``) under a ``str`` enum value
that compares like the name; nothing else of peft is written.
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
        # A second adapter that wraps a module for the first time trains only once it is made active.
        new_module.set_requires_grad(adapter_name, requires_grad=adapter_name in self.active_adapters)
        self._replace_module(parent, target_name, new_module, target)


def register_keystone_tuner() -> None:
    """Make ``"KEYSTONE"`` a PEFT adapter type (idempotent); runs when this module is imported.

    PEFT's own ``register_peft_method`` is called first. Only when it refuses the name with ``ValueError:
    Unknown PEFT type KEYSTONE`` (peft 0.21: ``PeftType`` is a closed enum without that member) are the three
    tables that function fills written here, with the same values: config class, tuner class and the
    ``"keystone_"`` prefix. Any other error from PEFT propagates.
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
        except ValueError as err:
            if not str(err).startswith("Unknown PEFT type KEYSTONE"):
                raise
    # PEFT refused the name (closed enum), or this module was reloaded: the entries are ours to (re)write.
    PEFT_TYPE_TO_CONFIG_MAPPING[PEFT_TYPE] = KeystoneConfig  # type: ignore[index]
    PEFT_TYPE_TO_TUNER_MAPPING[PEFT_TYPE] = KeystoneModel  # type: ignore[index]
    PEFT_TYPE_TO_PREFIX_MAPPING[PEFT_TYPE] = KeystoneModel.prefix  # type: ignore[index]


register_keystone_tuner()
