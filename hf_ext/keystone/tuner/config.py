"""`KeystoneConfig`: the PEFT config of keystone-only fine-tuning, holding the neuron set as data."""

from __future__ import annotations

import enum
from dataclasses import InitVar, dataclass, field
from typing import Any

from peft import PeftConfig
from peft.utils import PeftType

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_int, check_sequence
from hf_ext.keystone.sets import FORBIDDEN_MODULES, KeystoneSet


class KeystonePeftType(str, enum.Enum):  # noqa: UP042 -- the same kind as PeftType (str() shows the name)
    """The ``peft_type`` of keystone adapters (``"KEYSTONE"`` in ``adapter_config.json``).

    peft 0.21's ``PeftType`` enum is closed, so the value is a one-member enum of the same kind (a ``str``
    enum whose name equals its value): it hashes and compares like the string, as ``PeftType`` members do.
    """

    KEYSTONE = "KEYSTONE"


PEFT_TYPE: str = getattr(PeftType, "KEYSTONE", KeystonePeftType.KEYSTONE)

PARAMETERISATIONS = ("rows", "columns", "rows+columns")
DELTA_SCALES = ("none", "weight_norm")
# Llama-family projection names (Llama, Qwen2, Gemma3): the modules whose rows write the residual stream and
# those whose columns read it (after a norm). `frozen_channels` uses them.
RESIDUAL_WRITERS = ("o_proj", "down_proj")
RESIDUAL_READERS = ("q_proj", "k_proj", "v_proj", "gate_proj", "up_proj")


@dataclass
class KeystoneConfig(PeftConfig):
    """PEFT config that trains only the weight rows of a keystone set: ``get_peft_model(model, config)``.

    The set is data, ``keystone_rows = {module name: [row indices]}`` (names relative to the causal LM), so
    the config is written to ``adapter_config.json`` and applies to any instance of the checkpoint it was
    found on. Each targeted ``nn.Linear`` gets a :class:`~hf_ext.keystone.tuner.layer.Linear` with one delta
    of shape ``(len(rows), in_features)``; PEFT's trainable-parameter count is therefore
    ``sum_m len(rows_m) * in_m``.

    [paper] Supervised fine-tuning of the keystone neurons only. [reconstructed] The parameterisation: by
    default the weight rows of the selected output channels (no bias entry). The paper does not say which
    weights belong to a neuron; ``parameterisation``, ``delta_scale`` and ``frozen_channels`` are the open
    choices, as options.

    Args:
        keystone_rows: Module name -> weight-row (output-channel) indices to train.
        fingerprint: Config fields of the checkpoint the set was found on (``model_type``, sizes,
            ``vocab_size``); checked when the adapter is applied. Empty skips the check.
        discovery: The settings that produced the set (pool, normalisation, aggregation, ``k``, tasks, prompt
            hash); kept for provenance, not used to apply the adapter.
        init_weights: Start the deltas at 0 (the adapted model equals the base), defaults to ``True``;
            ``False`` draws them from ``N(0, 0.02^2)``, for tests.
        parameterisation: [reconstructed] Which weights of each keystone neuron train: ``"rows"`` (its weight
            row, the default), ``"columns"`` (the input columns of the weights that read it, see
            ``keystone_columns``) or ``"rows+columns"``.
        keystone_columns: [reconstructed] Reader module name -> input-column indices to train. Left empty, it
            is filled from the model when the adapter is applied and ``parameterisation`` uses columns (see
            :func:`~hf_ext.keystone.tuner.model.reader_columns`: the next weights that read each neuron's
            output channel), and then saved with the config.
        delta_scale: [hf-ext design] ``"none"`` (default) or ``"weight_norm"``: each trained row (column) is
            ``s * delta`` with ``s`` = the row's (column's) L2 norm in the base weight over the mean norm of
            the module's rows (columns). Under Adam(W) that scales the row's learning rate by ``s``; ``s`` is
            recomputed from the base weight on load, so reload onto the unmerged checkpoint is exact.
        frozen_channels: [hf-ext design] Residual-stream channels to leave frozen (e.g. the massive-activation
            channels): rows with these indices of the modules that write the residual stream
            (``o_proj``, ``down_proj``) and columns with these indices of the modules that read it
            (``q_proj``, ``k_proj``, ``v_proj``, ``gate_proj``, ``up_proj``) are dropped from the trainable
            set. Llama-family module names (Llama, Qwen2, Gemma3).
        keystone_set: *Init only.* A :class:`~hf_ext.keystone.sets.KeystoneSet` that fills
            ``keystone_rows``, ``fingerprint`` and ``discovery``.

    Raises:
        ValueError: an empty set, duplicate or negative rows or columns, embeddings or the LM head targeted,
            both ``keystone_rows`` and ``keystone_set`` given, ``target_modules`` that differ from the set, a
            ``parameterisation`` or ``delta_scale`` outside its choices, negative ``frozen_channels``, or
            ``keystone_columns`` given with ``parameterisation="rows"``.

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
    parameterisation: str = field(
        default="rows",
        metadata={
            "help": "[reconstructed] 'rows', 'columns' (input columns of the reading weights) or both."
        },
    )
    keystone_columns: dict[str, list[int]] = field(
        default_factory=dict,
        metadata={"help": "Reader module name -> input columns; filled from the model on application."},
    )
    delta_scale: str = field(
        default="none",
        metadata={"help": "[hf-ext design] 'none' or 'weight_norm' (per-row rate scaled by the row norm)."},
    )
    frozen_channels: list[int] = field(
        default_factory=list,
        metadata={
            "help": "[hf-ext design] Residual channels whose writing rows / reading columns stay frozen."
        },
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
        self.parameterisation = check_choice("parameterisation", self.parameterisation, PARAMETERISATIONS)
        self.delta_scale = check_choice("delta_scale", self.delta_scale, DELTA_SCALES)
        self.frozen_channels = sorted(
            set(
                check_sequence(
                    "frozen_channels", self.frozen_channels, lambda n, v: check_int(n, v, low=0), min_length=0
                )
            )
        )
        if self.keystone_columns:
            if self.parameterisation == "rows":
                raise ValueError(
                    "`keystone_columns` is given but `parameterisation` is 'rows', so no column would train; "
                    "pass parameterisation='columns' or 'rows+columns'."
                )
            self.keystone_columns = _checked_rows(self.keystone_columns, "keystone_columns")
        names = sorted(self.keystone_rows)
        if self.target_modules is not None and sorted(self.target_modules) != names:
            raise ValueError(
                f"`target_modules` must be the module names of `keystone_rows` ({names[:3]}...), got "
                f"{self.target_modules!r}; leave it unset."
            )
        self.target_modules = names

    def module_targets(self) -> dict[str, tuple[list[int], list[int]]]:
        """Module name -> (rows, input columns) that train under ``parameterisation``, ``frozen_channels``.

        Modules left with neither are absent. Columns come from ``keystone_columns``, so with a column
        parameterisation this is complete only once the adapter was applied (or the columns were given).
        """
        frozen = set(self.frozen_channels)
        rows = self.keystone_rows if self.parameterisation != "columns" else {}
        cols = self.keystone_columns if self.parameterisation != "rows" else {}
        out: dict[str, tuple[list[int], list[int]]] = {}
        for name in sorted(set(rows) | set(cols)):
            leaf = name.rsplit(".", 1)[-1]
            r = [i for i in rows.get(name, []) if not (leaf in RESIDUAL_WRITERS and i in frozen)]
            c = [i for i in cols.get(name, []) if not (leaf in RESIDUAL_READERS and i in frozen)]
            if r or c:
                out[name] = (r, c)
        return out


def _checked_rows(rows: Any, arg: str = "keystone_rows") -> dict[str, list[int]]:
    """``rows`` as ``{name: sorted distinct non-negative ints}``, raising on an empty set or a bad entry."""
    if not isinstance(rows, dict) or not rows:
        raise ValueError(
            f"`{arg}` must be a non-empty dict {{module name: [indices]}}, got {rows!r}. Build "
            "the config from a set: KeystoneConfig(keystone_set=find_keystone_neurons(...))."
        )
    out: dict[str, list[int]] = {}
    for name, idx in rows.items():
        if any(part in FORBIDDEN_MODULES for part in str(name).split(".")):
            raise ValueError(
                f"`{arg}` contains {name!r}: embeddings and the LM head (tied in Gemma) cannot hold "
                "keystone neurons."
            )
        checked = check_sequence(f"{arg}[{name!r}]", idx, lambda n, v: check_int(n, v, low=0), min_length=1)
        if len(set(checked)) != len(checked):
            dup = sorted({r for r in checked if checked.count(r) > 1})
            what = "rows" if arg == "keystone_rows" else "columns"
            raise ValueError(f"`{arg}[{name!r}]` must hold distinct {what}, got duplicates {dup}.")
        out[str(name)] = sorted(checked)
    return out


# Importing the tuner registers it with PEFT; it imports this module, so the import comes last.
import hf_ext.keystone.tuner.model  # noqa: E402, F401
