"""`KeystoneConfig`: a PEFT ``ShiraConfig`` whose mask trains only the weight rows of keystone neurons."""

from __future__ import annotations

import logging
import math
from dataclasses import InitVar, dataclass, field
from typing import Any

import torch
from peft import ShiraConfig
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.peft.keystone.adapter import attach_keystone_grad_mask
from hf_ext.peft.keystone.sets import KeystoneSet, base_linear

logger = logging.getLogger(__name__)


def _module_sizes(model: nn.Module, keystone_set: KeystoneSet) -> dict[str, tuple[int, int, int]]:
    """``name -> (k_m, in_features, out_features)`` for every module of the set."""
    sizes = {}
    for name, rows in keystone_set.indices.items():
        lin = base_linear(model.get_submodule(name))
        sizes[name] = (len(rows), lin.in_features, lin.out_features)
    return sizes


def minimal_rank(sizes: dict[str, tuple[int, int, int]]) -> int:
    """Smallest global SHiRA ``r`` with ``r * (in + out) >= k_m * in`` in every module."""
    return max(1, *(math.ceil(k * i / (i + o)) for k, i, o in sizes.values()))


def keystone_mask(rows: list[int], r: int, out_features: int, in_features: int) -> torch.Tensor:
    """0/1 mask ``(out_features, in_features)`` with exactly ``r * (in + out)`` ones: ``rows`` complete, pads
    elsewhere.

    Pads fill the other rows in order, ``in_features - 1`` per row (never a complete row), so the complete
    rows of the mask are exactly ``rows``.

    Example:
        >>> m = keystone_mask([1], r=1, out_features=3, in_features=4)
        >>> m.sum().item(), m[1].tolist(), m[0].tolist()
        (7.0, [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0, 0.0])
    """
    mask = torch.zeros(out_features, in_features)
    mask[rows] = 1.0
    pads = r * (in_features + out_features) - len(rows) * in_features
    taken = set(rows)
    others = torch.tensor([j for j in range(out_features) if j not in taken], dtype=torch.long)
    capacity = len(others) * (in_features - 1)
    if pads < 0 or pads > capacity:
        raise ValueError(
            f"SHiRA pad capacity overflow: r={r} needs {r * (in_features + out_features)} values, "
            f"{len(rows)} keystone rows take {len(rows) * in_features}, leaving {pads} pads for a "
            f"capacity of "
            f"{capacity} ((out - k_m) * (in - 1)). Use fewer modules (a smaller or more concentrated "
            f"set) or a smaller r."
        )
    if pads:
        grid = torch.zeros(len(others), in_features)
        grid[:, :-1] = 1.0
        pos = grid.flatten().nonzero().squeeze(1)[:pads]
        flat = torch.zeros(len(others) * in_features)
        flat[pos] = 1.0
        mask[others] = flat.view(len(others), in_features)
    return mask


@dataclass
class KeystoneConfig(ShiraConfig):
    """PEFT config for keystone-only fine-tuning: ``get_peft_model(model, KeystoneConfig(model=m,
    keystone_set=ks))``.

    A ``ShiraConfig`` (peft's public custom-mask extension point) whose ``mask_fn`` marks every row of the
    keystone neurons of each module in the set, plus frozen zero pads to reach SHiRA's ``r * (in + out)``
    count. ``target_modules`` becomes the list of full module names of the set. The mask function knows the
    model through a closure keyed on ``id(model.get_submodule(name))``, and on its first call registers a
    one-shot forward pre-hook on the model that attaches the pad gradient mask
    (:func:`attach_keystone_grad_mask`) before any backward, so a plain ``get_peft_model`` trains only
    keystone rows.

    [paper] SFT of keystone neurons only. [reconstructed] the parameterisation: rows only (no bias entry, no
    consuming column), trained as SHiRA entries; biases stay frozen (matters for Qwen2's biased q/k/v).

    ``save_pretrained`` writes ``peft_type: SHIRA`` with ``mask_type: "keystone"``;
    ``PeftModel.from_pretrained`` needs no mask function (the indices are saved).
    ``print_trainable_parameters`` counts the pads too (``r * sum(in + out)``);
    :func:`keystone_trainable_parameters` gives the effective ``sum k_m * in_m``.

    Args:
        model: The causal LM the set was found on (``InitVar``: not stored, not serialised).
        keystone_set: The neurons to train (``InitVar``).
        r: Global SHiRA rank, *optional*, defaults to the smallest one that fits every module's keystone rows.
        mask_type: Stored in ``adapter_config.json``, defaults to ``"keystone"``.

    Raises:
        ValueError: missing ``model``/``keystone_set``, a set that does not fit the model,
            ``init_weights=False``, an ``r`` too small for the rows, or a pad capacity overflow.

    Example:
        >>> from peft import get_peft_model
        >>> from hf_ext.testing import tiny_llama
        >>> lm = tiny_llama()
        >>> ks = KeystoneSet({"model.layers.0.self_attn.o_proj": [2, 9], "model.layers.1.mlp.up_proj": [0]})
        >>> pm = get_peft_model(lm, KeystoneConfig(model=lm, keystone_set=ks))
        >>> pm.peft_config["default"].r, sorted(pm.peft_config["default"].target_modules)[0]
        (1, 'model.layers.0.self_attn.o_proj')
    """

    _paper = paper("keystone")

    model: InitVar[Any] = None
    keystone_set: InitVar[KeystoneSet | None] = None
    r: int | None = field(  # type: ignore[assignment]
        default=None,
        metadata={
            "help": (
                "Global SHiRA rank; defaults to the smallest r whose r*(in+out) holds every module's rows."
            )
        },
    )
    mask_type: str = field(  # type: ignore[assignment]
        default="keystone", metadata={"help": "Mask name stored in adapter_config.json."}
    )

    def __post_init__(self, model: Any, keystone_set: KeystoneSet | None) -> None:  # type: ignore[override]
        if model is None or keystone_set is None:
            raise ValueError(
                "`KeystoneConfig` needs `model=` and `keystone_set=` (the causal LM and the set from "
                f"`find_keystone_neurons`), got model={type(model).__name__}, keystone_set={keystone_set!r}."
            )
        if not self.init_weights:
            raise ValueError("`init_weights` must be True: the frozen SHiRA pads must start (and stay) at 0.")
        keystone_set.validate(model)
        sizes = _module_sizes(model, keystone_set)
        needed = minimal_rank(sizes)
        if self.r is None:
            self.r = needed
        else:
            self.r = check_int("r", self.r, low=needed, hint="Smaller values cannot hold the keystone rows.")
        masks = {
            id(model.get_submodule(n)): keystone_mask(keystone_set.indices[n], self.r, o, i)
            for n, (_, i, o) in sizes.items()
        }  # built now, so a capacity overflow raises here rather than inside get_peft_model
        self.target_modules = list(sizes)
        mask_type, self.mask_type = (
            self.mask_type,
            "random",
        )  # ShiraConfig warns on unknown names; we set our own
        super().__post_init__()
        self.mask_type = mask_type
        self.mask_fn = _make_mask_fn(model, keystone_set, masks)


def _make_mask_fn(model: nn.Module, keystone_set: KeystoneSet, masks: dict[int, torch.Tensor]) -> Any:
    state: dict[str, Any] = {}

    def attach_once(module: nn.Module, args: Any, kwargs: Any) -> None:
        attach_keystone_grad_mask(model, keystone_set)
        state.pop("handle").remove()

    def mask_fn(base_layer: nn.Linear, r: int, **kwargs: Any) -> torch.Tensor:
        if id(base_layer) not in masks:
            raise ValueError(
                f"SHiRA asked for a mask of a module outside the keystone set ({base_layer!r}); keep the "
                "`target_modules` that KeystoneConfig sets."
            )
        if "handle" not in state:
            state["handle"] = model.register_forward_pre_hook(attach_once, with_kwargs=True)
        w = base_layer.weight
        return masks[id(base_layer)].to(device=w.device, dtype=w.dtype)

    return mask_fn
