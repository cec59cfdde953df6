"""`KeystoneLayer`: a PEFT tuner layer adding a trainable delta to selected rows of an ``nn.Linear``."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, cast

import torch
import torch.nn.functional as F
from peft.tuners.tuners_utils import BaseTunerLayer, check_adapters_to_merge
from torch import nn

from hf_ext._registry import paper


class KeystoneLayer(BaseTunerLayer):
    """Keystone-only fine-tuning state: per adapter, row indices and a delta of exactly those rows.

    ``keystone_delta[adapter]`` has shape ``(len(rows), in_features)``; the adapted weight is ``W`` with
    ``W[rows] + delta``. The rows live in the config (``KeystoneConfig.keystone_rows``), so the saved adapter
    holds only the deltas.
    """

    _paper = paper("keystone")
    adapter_layer_names: tuple[str, ...] = ("keystone_delta",)
    other_param_names: tuple[str, ...] = ("keystone_rows",)

    def __init__(self, base_layer: nn.Module, **kwargs: Any) -> None:
        base = base_layer.get_base_layer() if isinstance(base_layer, BaseTunerLayer) else base_layer
        if not isinstance(base, nn.Linear):
            raise TypeError(
                f"Keystone layers wrap torch.nn.Linear only, got {type(base).__name__} (GPT-2 Conv1D and "
                "quantized layers are not supported)."
            )
        self.base_layer = base_layer
        self.in_features, self.out_features = base.in_features, base.out_features
        self.keystone_delta = nn.ParameterDict({})
        self.keystone_rows: dict[str, torch.Tensor] = {}
        self.merged_adapters: list[str] = []  # per layer: BaseTunerLayer's class-level default is shared
        self.kwargs = kwargs

    def update_layer(
        self,
        adapter_name: str,
        rows: Sequence[int],
        *,
        init_weights: bool = True,
        inference_mode: bool = False,
    ) -> None:
        """Add adapter ``adapter_name`` training ``rows`` (distinct output-channel indices of this layer).

        Raises:
            ValueError: ``rows`` is empty, has duplicates, or holds an index outside ``[0, out_features)``.
        """
        if not rows or len(set(rows)) != len(rows) or not all(0 <= r < self.out_features for r in rows):
            raise ValueError(
                f"`rows` must be distinct indices in [0, {self.out_features}) (the layer's output channels), "
                f"got {list(rows)!r}."
            )
        self.keystone_rows[adapter_name] = torch.tensor(sorted(rows), dtype=torch.long)
        delta = torch.zeros(len(rows), self.in_features)
        if not init_weights:
            nn.init.normal_(delta, std=0.02)
        self.keystone_delta[adapter_name] = nn.Parameter(delta)
        self._move_adapter_to_device_of_base_layer(adapter_name)
        self.set_adapter(self.active_adapters, inference_mode=inference_mode)

    def _weight(self) -> torch.Tensor:
        """The wrapped ``nn.Linear``'s weight tensor, ``(out_features, in_features)`` (never quantized)."""
        return cast(torch.Tensor, self.get_base_layer().weight).data

    def _rows(self, adapter: str, device: torch.device) -> torch.Tensor:
        rows = self.keystone_rows[adapter]
        if rows.device != device:
            rows = self.keystone_rows[adapter] = rows.to(device)
        return rows


class Linear(nn.Module, KeystoneLayer):
    """An ``nn.Linear`` whose selected weight rows carry a trainable delta: ``y[..., rows] += x @ delta.T``.

    Only ``len(rows)`` extra output channels are computed per adapter; hooks on the base layer still run.

    Args:
        base_layer: The ``nn.Linear`` to adapt.
        adapter_name: Name of the first adapter.
        rows: Its output-channel indices.
        init_weights: Start the delta at 0, defaults to ``True``.
    """

    def __init__(
        self,
        base_layer: nn.Module,
        adapter_name: str,
        rows: Sequence[int],
        init_weights: bool = True,
        **kwargs: Any,
    ) -> None:
        nn.Module.__init__(self)
        KeystoneLayer.__init__(self, base_layer, **kwargs)
        self._active_adapter = adapter_name
        self.update_layer(adapter_name, rows, init_weights=init_weights)

    def get_delta_weight(self, adapter: str) -> torch.Tensor:
        """The dense ``(out_features, in_features)`` weight change of ``adapter`` (zero off its rows)."""
        delta = self.keystone_delta[adapter]
        dense = torch.zeros(self.out_features, self.in_features, device=delta.device, dtype=delta.dtype)
        return dense.index_add(0, self._rows(adapter, delta.device), delta)

    def _shift_rows(self, weight: torch.Tensor, adapter: str, sign: int, *, inplace: bool) -> torch.Tensor:
        """``weight`` with ``sign * delta`` added to ``adapter``'s rows (in place, or on a new tensor)."""
        delta = self.keystone_delta[adapter].detach().to(weight.dtype)
        rows = self._rows(adapter, weight.device)
        if inplace:
            return weight.index_add_(0, rows, delta, alpha=sign)
        return weight.index_add(0, rows, delta, alpha=sign)

    def merge(self, safe_merge: bool = False, adapter_names: list[str] | None = None) -> None:
        """Add the active (or the named) adapters' deltas into the base weight rows.

        Args:
            safe_merge: Build the merged weight on a copy and raise ``ValueError``, leaving the base weight
                unchanged, if a merged row holds NaN or inf.
            adapter_names: The adapters to merge, defaults to the active ones.
        """
        mine = [a for a in check_adapters_to_merge(self, adapter_names) if a in self.keystone_delta]
        for adapter in mine:
            weight = self._weight()
            if not safe_merge:
                self._shift_rows(weight, adapter, +1, inplace=True)
            else:
                candidate = self._shift_rows(weight, adapter, +1, inplace=False)
                bad = (~torch.isfinite(candidate[self._rows(adapter, weight.device)])).any(dim=1)
                if bad.any():
                    rows = self._rows(adapter, weight.device)[bad].tolist()
                    raise ValueError(
                        f"safe_merge: adapter {adapter!r} would write NaN/inf into weight rows {rows}; the "
                        "base weight is left unchanged."
                    )
                self.get_base_layer().weight.data = candidate
            self.merged_adapters.append(adapter)

    def unmerge(self) -> None:
        """Take every merged adapter's delta out of the base weight rows again, last merged first."""
        if not self.merged_adapters:
            warnings.warn(
                "unmerge: no keystone adapter is merged into this layer, the weight is left as it is.",
                stacklevel=2,
            )
            return
        for adapter in reversed(self.merged_adapters):
            if adapter in self.keystone_delta:
                self._shift_rows(self._weight(), adapter, -1, inplace=True)
        self.merged_adapters.clear()

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        # A disabled layer must compute with the plain base weight, so merged deltas come out first.
        if self.disable_adapters and self.merged:
            self.unmerge()
        result = self.base_layer(x, *args, **kwargs)
        if self.disable_adapters or self.merged:
            return result
        for adapter in (a for a in self.active_adapters if a in self.keystone_delta):
            delta = self.keystone_delta[adapter]
            update = F.linear(self._cast_input_dtype(x, delta.dtype), delta)
            result = result.index_add(-1, self._rows(adapter, result.device), update.to(result.dtype))
        return result

    def __repr__(self) -> str:
        return "keystone." + super().__repr__()
