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
    """Keystone-only fine-tuning state: per adapter, row and input-column indices and deltas of exactly those.

    ``keystone_delta[adapter]`` has shape ``(len(rows), in_features)`` and ``keystone_col_delta[adapter]``
    ``(out_features, len(columns))``; an adapter holds either or both. The adapted weight is ``W`` with
    ``W[rows] + s_r * delta`` and ``W[:, columns] + s_c * col_delta``, where the scales ``s`` are 1, or with
    ``delta_scale="weight_norm"`` each row's (column's) L2 norm over the mean norm of the module's rows
    (columns), computed from the base weight when the adapter is added. The indices live in the config, so
    the saved adapter holds only the deltas.
    """

    _paper = paper("keystone")
    adapter_layer_names: tuple[str, ...] = ("keystone_delta", "keystone_col_delta")
    other_param_names: tuple[str, ...] = (
        "keystone_rows",
        "keystone_cols",
        "keystone_row_scale",
        "keystone_col_scale",
    )

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
        self.keystone_col_delta = nn.ParameterDict({})
        self.keystone_rows: dict[str, torch.Tensor] = {}
        self.keystone_cols: dict[str, torch.Tensor] = {}
        self.keystone_row_scale: dict[str, torch.Tensor] = {}
        self.keystone_col_scale: dict[str, torch.Tensor] = {}
        self.merged_adapters: list[str] = []  # per layer: BaseTunerLayer's class-level default is shared
        self.kwargs = kwargs

    def update_layer(
        self,
        adapter_name: str,
        rows: Sequence[int],
        *,
        columns: Sequence[int] = (),
        init_weights: bool = True,
        delta_scale: str = "none",
        inference_mode: bool = False,
    ) -> None:
        """Add adapter ``adapter_name`` training ``rows`` (output channels) and ``columns`` (input channels).

        Args:
            adapter_name: The adapter's name.
            rows: Distinct output-channel indices whose weight rows train (empty if ``columns`` is not).
            columns: Distinct input-channel indices whose weight columns train.
            init_weights: Start the deltas at 0; ``False`` draws ``N(0, 0.02^2)``, for tests.
            delta_scale: ``"none"`` or ``"weight_norm"`` (see the class docstring).
            inference_mode: Leave the new deltas frozen.

        Raises:
            ValueError: ``rows`` and ``columns`` both empty, duplicates, an index outside
                ``[0, out_features)`` (rows) or ``[0, in_features)`` (columns), or an unknown ``delta_scale``.
        """
        for arg, idx, size in (("rows", rows, self.out_features), ("columns", columns, self.in_features)):
            if len(set(idx)) != len(idx) or not all(0 <= i < size for i in idx):
                raise ValueError(
                    f"`{arg}` must be distinct indices in [0, {size}) (the layer's "
                    f"{'output' if arg == 'rows' else 'input'} channels), got {list(idx)!r}."
                )
        if not rows and not columns:
            raise ValueError(f"Adapter {adapter_name!r} needs `rows` or `columns`, got neither.")
        if delta_scale not in ("none", "weight_norm"):
            raise ValueError(f"`delta_scale` must be 'none' or 'weight_norm', got {delta_scale!r}.")
        weight = self._weight().float()
        for idx, kind in ((rows, "row"), (columns, "col")):
            if not idx:
                continue
            index = torch.tensor(sorted(idx), dtype=torch.long)
            norms = weight.norm(dim=1 if kind == "row" else 0)
            scale = norms[index] / norms.mean() if delta_scale == "weight_norm" else torch.ones(len(idx))
            shape = (len(idx), self.in_features) if kind == "row" else (self.out_features, len(idx))
            delta = torch.zeros(shape)
            if not init_weights:
                nn.init.normal_(delta, std=0.02)
            if kind == "row":
                self.keystone_rows[adapter_name], self.keystone_row_scale[adapter_name] = index, scale
                self.keystone_delta[adapter_name] = nn.Parameter(delta)
            else:
                self.keystone_cols[adapter_name], self.keystone_col_scale[adapter_name] = index, scale
                self.keystone_col_delta[adapter_name] = nn.Parameter(delta)
        self._move_adapter_to_device_of_base_layer(adapter_name)
        self.set_adapter(self.active_adapters, inference_mode=inference_mode)

    def _weight(self) -> torch.Tensor:
        """The wrapped ``nn.Linear``'s weight tensor, ``(out_features, in_features)`` (never quantized)."""
        return cast(torch.Tensor, self.get_base_layer().weight).data

    def _index(self, table: dict[str, torch.Tensor], adapter: str, device: torch.device) -> torch.Tensor:
        """``table[adapter]`` (indices or scales) on ``device``, moved there once."""
        value = table[adapter]
        if value.device != device:
            value = table[adapter] = value.to(device)
        return value

    def _rows(self, adapter: str, device: torch.device) -> torch.Tensor:
        return self._index(self.keystone_rows, adapter, device)

    def _row_delta(self, adapter: str) -> torch.Tensor:
        """The effective row delta ``s_r * delta``, ``(len(rows), in_features)``."""
        delta = self.keystone_delta[adapter]
        return delta * self._index(self.keystone_row_scale, adapter, delta.device).to(delta.dtype)[:, None]

    def _col_delta(self, adapter: str) -> torch.Tensor:
        """The effective column delta ``s_c * col_delta``, ``(out_features, len(columns))``."""
        delta = self.keystone_col_delta[adapter]
        return delta * self._index(self.keystone_col_scale, adapter, delta.device).to(delta.dtype)


class Linear(nn.Module, KeystoneLayer):
    """An ``nn.Linear`` whose selected weight rows and input columns carry trainable deltas.

    Forward: ``y = base(x)``, then ``y[..., rows] += x @ (s_r * delta).T`` and
    ``y += x[..., columns] @ (s_c * col_delta).T``. Only ``len(rows)`` extra output channels and a
    ``len(columns)``-wide product are computed per adapter; hooks on the base layer still run.

    Args:
        base_layer: The ``nn.Linear`` to adapt.
        adapter_name: Name of the first adapter.
        rows: Its output-channel indices.
        columns: Its input-channel indices, defaults to none.
        init_weights: Start the deltas at 0, defaults to ``True``.
        delta_scale: ``"none"`` (default) or ``"weight_norm"``.
    """

    def __init__(
        self,
        base_layer: nn.Module,
        adapter_name: str,
        rows: Sequence[int],
        columns: Sequence[int] = (),
        init_weights: bool = True,
        delta_scale: str = "none",
        **kwargs: Any,
    ) -> None:
        nn.Module.__init__(self)
        KeystoneLayer.__init__(self, base_layer, **kwargs)
        self._active_adapter = adapter_name
        self.update_layer(
            adapter_name, rows, columns=columns, init_weights=init_weights, delta_scale=delta_scale
        )

    def _adapters(self) -> list[str]:
        return list(dict.fromkeys([*self.keystone_delta, *self.keystone_col_delta]))

    def get_delta_weight(self, adapter: str) -> torch.Tensor:
        """The dense ``(out_features, in_features)`` weight change of ``adapter`` (0 off its rows/columns)."""
        weight = self._weight()
        dense = torch.zeros(self.out_features, self.in_features, device=weight.device, dtype=weight.dtype)
        return self._shift(dense, adapter, +1, inplace=True)

    def _shift(self, weight: torch.Tensor, adapter: str, sign: int, *, inplace: bool) -> torch.Tensor:
        """``weight`` plus ``sign`` times ``adapter``'s row and column deltas (in place or on a copy)."""
        if not inplace:
            weight = weight.clone()
        if adapter in self.keystone_delta:
            delta = self._row_delta(adapter).detach().to(weight.dtype)
            weight.index_add_(0, self._rows(adapter, weight.device), delta, alpha=sign)
        if adapter in self.keystone_col_delta:
            delta = self._col_delta(adapter).detach().to(weight.dtype)
            weight.index_add_(1, self._index(self.keystone_cols, adapter, weight.device), delta, alpha=sign)
        return weight

    def merge(self, safe_merge: bool = False, adapter_names: list[str] | None = None) -> None:
        """Add the active (or the named) adapters' deltas into the base weight.

        Args:
            safe_merge: Build the merged weight on a copy and raise ``ValueError``, leaving the base weight
                unchanged, if it holds NaN or inf.
            adapter_names: The adapters to merge, defaults to the active ones.
        """
        mine = [a for a in check_adapters_to_merge(self, adapter_names) if a in self._adapters()]
        for adapter in mine:
            weight = self._weight()
            if not safe_merge:
                self._shift(weight, adapter, +1, inplace=True)
            else:
                candidate = self._shift(weight, adapter, +1, inplace=False)
                finite = torch.isfinite(candidate)
                where = []
                if adapter in self.keystone_delta:
                    rows = self._rows(adapter, weight.device)
                    where += [f"rows {rows[~finite[rows].all(1)].tolist()}"]
                if adapter in self.keystone_col_delta:
                    cols = self._index(self.keystone_cols, adapter, weight.device)
                    where += [f"columns {cols[~finite[:, cols].all(0)].tolist()}"]
                if not finite.all():
                    raise ValueError(
                        f"safe_merge: adapter {adapter!r} would write NaN/inf into weight "
                        f"{' and '.join(where)}; the base weight is left unchanged."
                    )
                self.get_base_layer().weight.data = candidate
            self.merged_adapters.append(adapter)

    def unmerge(self) -> None:
        """Take every merged adapter's deltas out of the base weight again, last merged first."""
        if not self.merged_adapters:
            warnings.warn(
                "unmerge: no keystone adapter is merged into this layer, the weight is left as it is.",
                stacklevel=2,
            )
            return
        for adapter in reversed(self.merged_adapters):
            if adapter in self._adapters():
                self._shift(self._weight(), adapter, -1, inplace=True)
        self.merged_adapters.clear()

    def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        # A disabled layer must compute with the plain base weight, so merged deltas come out first.
        if self.disable_adapters and self.merged:
            self.unmerge()
        result = self.base_layer(x, *args, **kwargs)
        if self.disable_adapters or self.merged:
            return result
        for adapter in (a for a in self.active_adapters if a in self._adapters()):
            if adapter in self.keystone_delta:
                delta = self._row_delta(adapter)
                update = F.linear(self._cast_input_dtype(x, delta.dtype), delta)
                result = result.index_add(-1, self._rows(adapter, result.device), update.to(result.dtype))
            if adapter in self.keystone_col_delta:
                delta = self._col_delta(adapter)
                cols = self._index(self.keystone_cols, adapter, x.device)
                update = F.linear(self._cast_input_dtype(x, delta.dtype).index_select(-1, cols), delta)
                result = result + update.to(result.dtype)
        return result

    def __repr__(self) -> str:
        return "keystone." + super().__repr__()
