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

import torch
from peft.tuners.tuners_utils import BaseTuner
from torch import nn

from hf_ext._registry import paper
from hf_ext.keystone.sets import KeystoneSet, base_linear, linear_module
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

    def inject_adapter(
        self,
        model: nn.Module,
        adapter_name: str,
        autocast_adapter_dtype: bool = True,
        low_cpu_mem_usage: bool = False,
        state_dict: dict[str, torch.Tensor] | None = None,
    ) -> None:
        """Check the set against ``model``, fill ``keystone_columns`` when the config trains columns and has
        none, then inject as every PEFT tuner does (this runs for the first adapter, ``add_adapter`` and
        ``PeftModel.from_pretrained`` alike)."""
        config = self.peft_config[adapter_name]
        assert isinstance(config, KeystoneConfig)
        KeystoneSet(config.keystone_rows, fingerprint=config.fingerprint).validate(model)
        if config.parameterisation != "rows":
            if not config.keystone_columns:
                config.keystone_columns = reader_columns(model, config.keystone_rows)
            _check_columns(model, config.keystone_columns)
        if not config.module_targets():
            raise ValueError(
                f"KeystoneConfig(parameterisation={config.parameterisation!r}, frozen_channels="
                f"{config.frozen_channels!r}) leaves nothing to train in this set: no row or column survives."
            )
        super().inject_adapter(
            model,
            adapter_name,
            autocast_adapter_dtype=autocast_adapter_dtype,
            low_cpu_mem_usage=low_cpu_mem_usage,
            state_dict=state_dict,
        )

    @staticmethod
    def _check_target_module_exists(peft_config: Any, key: str) -> bool:
        return key in peft_config.module_targets()

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
        rows, columns = peft_config.module_targets()[current_key]
        options = {
            "columns": columns,
            "init_weights": peft_config.init_weights,
            "delta_scale": peft_config.delta_scale,
        }
        if isinstance(target, KeystoneLayer):
            target.update_layer(adapter_name, rows, inference_mode=peft_config.inference_mode, **options)
            return
        new_module = Linear(target, adapter_name, rows, **options)
        # A second adapter that wraps a module for the first time trains only once it is made active.
        new_module.set_requires_grad(adapter_name, requires_grad=adapter_name in self.active_adapters)
        self._replace_module(parent, target_name, new_module, target)


def reader_columns(model: nn.Module, keystone_rows: dict[str, list[int]]) -> dict[str, list[int]]:
    """[reconstructed] The input columns of the weights that next read each keystone neuron's output.

    For Llama-family blocks (Llama, Qwen2, Gemma3 module names), neuron ``n`` of

    * ``mlp.gate_proj`` / ``mlp.up_proj`` is read by column ``n`` of ``mlp.down_proj``;
    * ``self_attn.v_proj`` is read by ``self_attn.o_proj`` at the same position of every query head that
      shares its key-value head (grouped-query attention);
    * ``self_attn.o_proj`` writes residual channel ``n``, read (after the norm) by column ``n`` of the same
      layer's ``mlp.gate_proj`` and ``mlp.up_proj``;
    * ``mlp.down_proj`` writes residual channel ``n``, read by column ``n`` of the next layer's ``q_proj``,
      ``k_proj`` and ``v_proj`` (none after the last layer);
    * ``self_attn.q_proj`` / ``k_proj`` is read by no weight (it meets the other in the attention scores).

    Args:
        model: The model the rows index (names relative to it).
        keystone_rows: Module name -> row indices, as in ``KeystoneConfig.keystone_rows``.

    Returns:
        Reader module name -> sorted input-column indices.

    Raises:
        ValueError: a module name outside this layout (the error names it), or ``v_proj`` without the
            model config's ``num_attention_heads`` / ``num_key_value_heads``.
    """
    cols: dict[str, set[int]] = {}
    modules = dict(model.named_modules())
    for name, rows in keystone_rows.items():
        stem, _, leaf = name.rpartition(".")
        block, _, part = stem.rpartition(".")
        if leaf in ("q_proj", "k_proj"):
            continue
        if leaf in ("gate_proj", "up_proj"):
            targets = {f"{stem}.down_proj": set(rows)}
        elif leaf == "o_proj":
            targets = {f"{block}.mlp.{m}": set(rows) for m in ("gate_proj", "up_proj")}
        elif leaf == "down_proj":
            head, _, layer = block.rpartition(".")
            nxt = f"{head}.{int(layer) + 1}.self_attn" if layer.isdigit() else ""
            targets = {f"{nxt}.{m}": set(rows) for m in ("q_proj", "k_proj", "v_proj")}
            targets = {t: r for t, r in targets.items() if t in modules}
        elif leaf == "v_proj":
            config: Any = getattr(model, "config", None)
            if hasattr(config, "get_text_config"):
                config = config.get_text_config()
            heads = getattr(config, "num_attention_heads", None)
            kv_heads = getattr(config, "num_key_value_heads", None) or heads
            if not heads or not kv_heads:
                raise ValueError(
                    f"reader_columns: {name!r} needs the model config's `num_attention_heads` to map value "
                    "channels to o_proj columns."
                )
            head_dim = base_linear(modules[name], name).out_features // kv_heads
            group = heads // kv_heads
            targets = {
                f"{stem}.o_proj": {
                    ((r // head_dim) * group + g) * head_dim + r % head_dim
                    for r in rows
                    for g in range(group)
                }
            }
        else:
            raise ValueError(
                f"reader_columns: cannot tell which weights read {name!r} (Llama-family projections only: "
                "q/k/v/o_proj, gate/up/down_proj); pass `keystone_columns` explicitly."
            )
        for target, idx in targets.items():
            if target not in modules:
                raise ValueError(f"reader_columns: {name!r} is read by {target!r}, which the model lacks.")
            cols.setdefault(target, set()).update(idx)
    return {name: sorted(idx) for name, idx in sorted(cols.items())}


def _check_columns(model: nn.Module, columns: dict[str, list[int]]) -> None:
    for name, idx in columns.items():
        n_in = base_linear(linear_module(model, name, argument="keystone_columns"), name).in_features
        bad = [c for c in idx if c >= n_in]
        if bad:
            raise ValueError(
                f"`keystone_columns` columns {bad} of module {name!r} are out of range [0, {n_in})."
            )


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
