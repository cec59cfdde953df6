"""`KeystoneSet`: a serialisable, checkpoint-bound set of neurons (output channels of linear projections)."""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from torch import nn

from hf_ext._registry import paper

logger = logging.getLogger(__name__)

FINGERPRINT_FIELDS = ("model_type", "hidden_size", "num_hidden_layers", "intermediate_size", "vocab_size")
# Input embeddings and the LM head are never neurons: Gemma ties them, so a "row" there is a token embedding.
FORBIDDEN_MODULES = ("lm_head", "embed_tokens", "wte", "embed_out")


def model_fingerprint(model: nn.Module) -> dict[str, Any]:
    """The config fields a keystone set is bound to (``model_type``, sizes, vocabulary)."""
    config = getattr(model, "config", None)
    if config is None:
        return {}
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    return {name: getattr(text, name, None) for name in FINGERPRINT_FIELDS}


def check_fingerprint(expected: dict[str, Any], model: nn.Module, what: str = "keystone set") -> None:
    """Raise ``ValueError`` listing the fields where ``model`` differs from ``expected``."""
    actual = model_fingerprint(model)
    bad = {k: (v, actual.get(k)) for k, v in expected.items() if actual.get(k) != v}
    if bad:
        listing = ", ".join(f"{k}: set {v!r} vs model {m!r}" for k, (v, m) in bad.items())
        raise ValueError(
            f"The {what} was found on a different checkpoint; mismatching fingerprint fields: {listing}. "
            "Keystone sets are checkpoint-specific: run `find_keystone_neurons` on this model."
        )


def linear_module(model: nn.Module, name: str, *, argument: str = "target_modules") -> nn.Module:
    """Return the module at ``name``, checking it exists, is not an embedding/LM head, and is ``nn.Linear``.

    A PEFT tuner layer wrapping an ``nn.Linear`` (e.g. SHiRA's) is accepted and returned as is, because hooks
    must sit on the module currently at the path.
    """
    if any(part in FORBIDDEN_MODULES for part in name.split(".")):
        raise ValueError(
            f"`{argument}` contains {name!r}: embeddings and the LM head (tied in Gemma) cannot hold "
            f"keystone "
            "neurons. Target the linear projections inside the decoder layers instead."
        )
    try:
        module = model.get_submodule(name)
    except AttributeError:
        raise ValueError(f"`{argument}` names module {name!r}, which is absent from the model.") from None
    base_linear(module, name)
    return module


def base_linear(module: nn.Module, name: str = "") -> nn.Linear:
    """The ``nn.Linear`` that is ``module`` or that a PEFT tuner layer ``module`` wraps.

    Raises:
        TypeError: it is not an ``nn.Linear`` (``name`` is the module's path, for the message).
    """
    get_base_layer = getattr(module, "get_base_layer", None)
    base = get_base_layer() if callable(get_base_layer) else module
    if not isinstance(base, nn.Linear):
        raise TypeError(
            f"Module {name or type(module).__name__!r} is a {type(base).__name__}, not torch.nn.Linear; "
            "keystone neurons are output channels of nn.Linear projections (GPT-2 Conv1D and quantized "
            "layers are not supported)."
        )
    return base


def out_features(module: nn.Module) -> int:
    """Output channels of an ``nn.Linear`` or of a PEFT wrapper around one."""
    return base_linear(module).out_features


@dataclass
class KeystoneSet:
    """A set of neurons of one checkpoint: ``indices[module_name]`` are output-channel (weight-row) indices.

    Module names are relative to the causal LM (``model.named_modules()``), e.g.
    ``"model.layers.0.self_attn.o_proj"``. ``scores[module_name][i]`` is the cross-task score of
    ``indices[module_name][i]``. The definition of a neuron as one output channel is **[reconstructed]**.

    Attributes:
        indices: Module name -> sorted row indices.
        scores: Module name -> score per index (same order), or empty for sets not found by scoring.
        base_model_name_or_path: ``config._name_or_path`` of the probed model.
        fingerprint: ``model_type``, ``hidden_size``, ``num_hidden_layers``, ``intermediate_size``,
            ``vocab_size``.
        settings: The discovery settings (target modules, normalisation, aggregation, ...).
        prompts_sha256: Hash of the probe prompts.

    Example:
        >>> o_proj = "model.layers.0.self_attn.o_proj"
        >>> ks = KeystoneSet({o_proj: [3, 1]}, {o_proj: [2.0, 5.0]})
        >>> ks.indices, len(ks), ks.top(1).indices
        ({'model.layers.0.self_attn.o_proj': [1, 3]}, 2, {'model.layers.0.self_attn.o_proj': [1]})
    """

    _paper = paper("keystone")

    indices: dict[str, list[int]]
    scores: dict[str, list[float]] = field(default_factory=dict)
    base_model_name_or_path: str = ""
    fingerprint: dict[str, Any] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    prompts_sha256: str = ""

    def __post_init__(self) -> None:
        if not self.indices or not any(self.indices.values()):
            raise ValueError("`indices` is empty: a keystone set needs at least one (module, row) neuron.")
        pairs: dict[str, list[tuple[int, float]]] = {}
        for name, rows in self.indices.items():
            rows = [int(r) for r in rows]
            if len(set(rows)) != len(rows):
                dup = sorted({r for r in rows if rows.count(r) > 1})
                raise ValueError(f"`indices` for module {name!r} has duplicate rows {dup}.")
            if any(r < 0 for r in rows):
                raise ValueError(
                    f"`indices` for module {name!r} has negative rows {[r for r in rows if r < 0]}."
                )
            sc = [float(s) for s in self.scores.get(name, [])]
            if self.scores and len(sc) != len(rows):
                raise ValueError(
                    f"`scores` for module {name!r} has {len(sc)} entries for {len(rows)} indices."
                )
            if rows:
                pairs[name] = sorted(zip(rows, sc or [float("nan")] * len(rows)))
        self.indices = {n: [r for r, _ in p] for n, p in pairs.items()}
        if self.scores:
            self.scores = {n: [s for _, s in p] for n, p in pairs.items()}

    def __len__(self) -> int:
        return sum(len(v) for v in self.indices.values())

    def neurons(self) -> set[tuple[str, int]]:
        """The set as ``{(module_name, row)}``."""
        return {(n, r) for n, rows in self.indices.items() for r in rows}

    def top(self, k: int) -> KeystoneSet:
        """The ``k`` highest-scoring neurons (ties broken by module name, then row) as a new set."""
        if not self.scores:
            raise ValueError("`top` needs a scored set (one returned by `find_keystone_neurons`).")
        if not isinstance(k, int) or not 1 <= k <= len(self):
            raise ValueError(f"`k` must be an int in [1, {len(self)}], got {k!r}.")
        ranked = sorted(
            ((s, n, r) for n in self.indices for r, s in zip(self.indices[n], self.scores[n])),
            key=lambda t: (-t[0], t[1], t[2]),
        )[:k]
        idx: dict[str, list[int]] = {}
        sc: dict[str, list[float]] = {}
        for s, n, r in ranked:
            idx.setdefault(n, []).append(r)
            sc.setdefault(n, []).append(s)
        meta = {**self.settings, "k": k}
        return KeystoneSet(
            idx, sc, self.base_model_name_or_path, dict(self.fingerprint), meta, self.prompts_sha256
        )

    def validate(self, model: nn.Module) -> None:
        """Check the set against ``model``: fingerprint, modules present and ``nn.Linear``, rows in range."""
        if self.fingerprint:
            check_fingerprint(self.fingerprint, model)
        for name, rows in self.indices.items():
            n_out = out_features(linear_module(model, name, argument="keystone_set"))
            bad = [r for r in rows if r >= n_out]
            if bad:
                raise ValueError(
                    f"`keystone_set` rows {bad} of module {name!r} are out of range [0, {n_out})."
                )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KeystoneSet:
        return cls(**data)

    def save(self, path: str | Path) -> None:
        """Write the set as JSON."""
        Path(path).write_text(json.dumps(self.to_dict(), indent=1))

    @classmethod
    def load(cls, path: str | Path) -> KeystoneSet:
        """Read a set written by :meth:`save`."""
        return cls.from_dict(json.loads(Path(path).read_text()))
