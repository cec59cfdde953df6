"""`KeystoneConfig`: the PEFT config of keystone-only fine-tuning, holding the neuron set as data."""

from __future__ import annotations

import enum
from dataclasses import InitVar, dataclass, field
from typing import Any

from peft import PeftConfig
from peft.utils import PeftType

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_int, check_sequence
from hf_ext.keystone.sets import FORBIDDEN_MODULES, KeystoneSet


class KeystonePeftType(str, enum.Enum):  # noqa: UP042 -- the same kind as PeftType (str() shows the name)
    """The ``peft_type`` of keystone adapters (``"KEYSTONE"`` in ``adapter_config.json``).

    peft 0.21's ``PeftType`` enum is closed, so the value is a one-member enum of the same kind (a ``str``
    enum whose name equals its value): it hashes and compares like the string, as ``PeftType`` members do.
    """

    KEYSTONE = "KEYSTONE"


PEFT_TYPE: str = getattr(PeftType, "KEYSTONE", KeystonePeftType.KEYSTONE)


@dataclass
class KeystoneConfig(PeftConfig):
    """PEFT config that trains only the weight rows of a keystone set: ``get_peft_model(model, config)``.

    The set is data, ``keystone_rows = {module name: [row indices]}`` (names relative to the causal LM), so
    the config is written to ``adapter_config.json`` and applies to any instance of the checkpoint it was
    found on. Each targeted ``nn.Linear`` gets a :class:`~hf_ext.keystone.tuner.layer.Linear` with one delta
    of shape ``(len(rows), in_features)``; PEFT's trainable-parameter count is therefore
    ``sum_m len(rows_m) * in_m``.

    [paper] Supervised fine-tuning of the keystone neurons only. [reconstructed] The parameterisation: the
    weight rows of the selected output channels (no bias entry, no consuming column).

    Args:
        keystone_rows: Module name -> weight-row (output-channel) indices to train.
        fingerprint: Config fields of the checkpoint the set was found on (``model_type``, sizes,
            ``vocab_size``); checked when the adapter is applied. Empty skips the check.
        discovery: The settings that produced the set (pool, normalisation, aggregation, ``k``, tasks, prompt
            hash); kept for provenance, not used to apply the adapter.
        init_weights: Start the deltas at 0 (the adapted model equals the base), defaults to ``True``;
            ``False`` draws them from ``N(0, 0.02^2)``, for tests.
        keystone_set: *Init only.* A :class:`~hf_ext.keystone.sets.KeystoneSet` that fills
            ``keystone_rows``, ``fingerprint`` and ``discovery``.

    Raises:
        ValueError: an empty set, duplicate or negative rows, embeddings or the LM head targeted, both
            ``keystone_rows`` and ``keystone_set`` given, or ``target_modules`` that differ from the set.

    Example:
        >>> from peft import get_peft_model
        >>> from hf_ext.testing import tiny_llama
        >>> config = KeystoneConfig(keystone_rows={"model.layers.0.self_attn.o_proj": [2, 9]})
        >>> get_peft_model(tiny_llama(), config).get_nb_trainable_parameters()[0]  # 2 rows x in_features 16
        32
    """

    _paper = paper("keystone")

    keystone_rows: dict[str, list[int]] = field(
        default_factory=dict,
        metadata={"help": "Module name (relative to the causal LM) -> weight-row indices to train."},
    )
    fingerprint: dict[str, Any] = field(
        default_factory=dict,
        metadata={"help": "Config fields of the checkpoint the set was found on; checked on application."},
    )
    discovery: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "Settings that produced the set (pool, normalize, aggregate, k, tasks, prompt hash)."
        },
    )
    target_modules: list[str] | None = field(
        default=None, metadata={"help": "Derived from `keystone_rows` (its module names); leave unset."}
    )
    init_weights: bool = field(
        default=True, metadata={"help": "Start the row deltas at 0; False draws N(0, 0.02^2), for tests."}
    )
    modules_to_save: list[str] | None = field(
        default=None, metadata={"help": "Other modules to train and save in full, as in every PEFT config."}
    )
    keystone_set: InitVar[KeystoneSet | None] = None

    def __post_init__(self, keystone_set: KeystoneSet | None) -> None:  # type: ignore[override]
        super().__post_init__()
        self.peft_type = PEFT_TYPE
        if keystone_set is not None:
            if self.keystone_rows:
                raise ValueError("Pass either `keystone_rows` or `keystone_set` to KeystoneConfig, not both.")
            self.keystone_rows = keystone_set.indices
            self.fingerprint = self.fingerprint or dict(keystone_set.fingerprint)
            self.discovery = self.discovery or {
                **keystone_set.settings,
                "prompts_sha256": keystone_set.prompts_sha256,
                "base_model_name_or_path": keystone_set.base_model_name_or_path,
            }
        self.init_weights = check_bool("init_weights", self.init_weights)
        self.keystone_rows = _checked_rows(self.keystone_rows)
        names = sorted(self.keystone_rows)
        if self.target_modules is not None and sorted(self.target_modules) != names:
            raise ValueError(
                f"`target_modules` must be the module names of `keystone_rows` ({names[:3]}...), got "
                f"{self.target_modules!r}; leave it unset."
            )
        self.target_modules = names


def _checked_rows(rows: Any) -> dict[str, list[int]]:
    """``rows`` as ``{name: sorted distinct non-negative ints}``, raising on an empty set or a bad entry."""
    if not isinstance(rows, dict) or not rows:
        raise ValueError(
            f"`keystone_rows` must be a non-empty dict {{module name: [row indices]}}, got {rows!r}. Build "
            "the config from a set: KeystoneConfig(keystone_set=find_keystone_neurons(...))."
        )
    out: dict[str, list[int]] = {}
    for name, idx in rows.items():
        if any(part in FORBIDDEN_MODULES for part in str(name).split(".")):
            raise ValueError(
                f"`keystone_rows` contains {name!r}: embeddings and the LM head (tied in Gemma) cannot hold "
                "keystone neurons."
            )
        checked = check_sequence(
            f"keystone_rows[{name!r}]", idx, lambda n, v: check_int(n, v, low=0), min_length=1
        )
        if len(set(checked)) != len(checked):
            dup = sorted({r for r in checked if checked.count(r) > 1})
            raise ValueError(f"`keystone_rows[{name!r}]` must hold distinct rows, got duplicates {dup}.")
        out[str(name)] = sorted(checked)
    return out


# Importing the tuner registers it with PEFT; it imports this module, so the import comes last.
import hf_ext.keystone.tuner.model  # noqa: E402, F401
