"""What :func:`~hf_ext.echo_attention.api.apply_echo_attention` returns: handles with undo, stats
and save/load.

EchoAttention (reconstructed; not verified against the paper).
"""

from __future__ import annotations

import json
import os
from typing import Any

import torch

from hf_ext._registry import paper
from hf_ext.echo_attention.config import EchoAttentionConfig
from hf_ext.echo_attention.layout import Layout
from hf_ext.echo_attention.params import EchoParams, layout_key
from hf_ext.echo_attention.routed import OPERATORS, EchoContext

CONFIG_NAME = "echo_attention_config.json"
TENSORS_NAME = "echo_attention.safetensors"
FIT_KEYS = ("theta_a", "theta_c", "theta_u", "theta_w", "route_op", "route_budget")


class EchoAttentionHandle:
    """The EchoAttention processors installed on one transformer, their shared state, and undo.

    EchoAttention (reconstructed; not verified against the paper).

    Attributes:
        transformer: The patched transformer.
        config: The settings.
        context: Layout and step state filled by the pre-hook.
        params: Theta and routes per calibrated layout
            (:class:`~hf_ext.echo_attention.params.EchoParams`).
        removed: Whether :meth:`remove` ran.
    """

    _paper = paper("echo_attention")

    def __init__(
        self,
        transformer: Any,
        config: EchoAttentionConfig,
        context: EchoContext,
        params: EchoParams,
        original: dict[str, Any],
        hook: Any,
    ) -> None:
        self.transformer, self.config, self.context, self.params = transformer, config, context, params
        self._original, self._hook = original, hook
        self.removed = False

    @property
    def handles(self) -> dict[str, EchoAttentionHandle]:
        """``{"transformer": self}`` (the shape of :attr:`EchoPipelineHandle.handles`)."""
        return {"transformer": self}

    def remove(self) -> None:
        """Restore the original processor objects (all keys) and remove the pre-hook."""
        if self.removed:
            return
        self.transformer.set_attn_processor(dict(self._original))
        self._hook.remove()
        self.removed = True

    def stats(self) -> list[dict[str, Any]]:
        """Per (layer, head) of the last call: operator, FLOP fraction, exact/echoed/dropped tiles, echo
        coverage.

        Counts are for batch element 0; layers whose last call was all dense report ``"dense"``. FLOP
        fractions count the video-video part (joint models keep the text rows and columns dense on top).
        """
        rows = []
        for layer in range(self.params.num_layers):
            heads, ops, alloc = self.params.last_alloc.get(layer, ([], [], None))
            for h in range(self.params.heads):
                row: dict[str, Any] = {"layer": layer, "head": h, "operator": "dense", "flops": 1.0}
                if alloc is not None and h in heads:
                    i = heads.index(h)
                    n_t = alloc.exact.shape[-1]
                    n_ex, n_ec = int(alloc.exact[i].sum()), int(alloc.echoed[i].sum())
                    row.update(
                        operator=OPERATORS[ops[i]],
                        flops=float(alloc.flops[i].detach()),
                        exact=n_ex,
                        echoed=n_ec,
                        dropped=n_t * n_t - n_ex - n_ec,
                        coverage=float(alloc.coverage[i].detach()),
                    )
                rows.append(row)
        return rows

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> None:
        """Write the config JSON and a safetensors file (theta and routes of every calibrated layout)."""
        from safetensors.torch import save_file

        os.makedirs(save_directory, exist_ok=True)
        p = self.params
        meta = {
            "config": self.config.to_dict(),
            "layouts": [[fit.layout.frames, fit.layout.tokens_per_frame] for _, fit in p.layout_fits()],
            "shape": [p.num_layers, p.heads, p.head_dim],
        }
        with open(os.path.join(save_directory, CONFIG_NAME), "w") as fh:
            json.dump(meta, fh, indent=2)
        tensors = {}
        for key, fit in p.layout_fits():
            for name, value in zip(FIT_KEYS, (fit.a, fit.c, fit.u, fit.w, fit.route_op, fit.route_budget)):
                tensors[f"{key}.{name}"] = value.detach().cpu().contiguous()
        save_file(tensors, os.path.join(save_directory, TENSORS_NAME))

    def load(self, directory: str | os.PathLike[str], meta: dict[str, Any]) -> None:
        """Read the fits written by :meth:`save_pretrained` (``meta``: its config JSON)."""
        from safetensors.torch import load_file

        path = os.path.join(directory, TENSORS_NAME)
        if not os.path.isfile(path):
            raise ValueError(f"`calibration` folder {str(directory)!r} has no {TENSORS_NAME}.")
        tensors = load_file(path)
        p = self.params
        if meta["shape"] != [p.num_layers, p.heads, p.head_dim]:
            raise ValueError(
                f"`calibration` was saved for (layers, heads, head_dim) = {tuple(meta['shape'])}, this "
                f"transformer has {(p.num_layers, p.heads, p.head_dim)}."
            )
        need = [f"{layout_key(tuple(lay))}.{name}" for lay in meta["layouts"] for name in FIT_KEYS]
        missing = [k for k in need if k not in tensors]
        if missing:
            raise ValueError(f"`calibration` folder {str(directory)!r} is missing tensors {missing}.")
        dev = next(self.transformer.parameters()).device
        for frames, tokens in meta["layouts"]:
            fit = p.bind(Layout(frames, tokens, self.config.block_size), dev)
            key = layout_key((frames, tokens))
            with torch.no_grad():
                for name, dst in zip(FIT_KEYS, (fit.a, fit.c, fit.u, fit.w, fit.route_op, fit.route_budget)):
                    dst.copy_(tensors[f"{key}.{name}"])
            fit.refresh_routes()


class EchoPipelineHandle:
    """EchoAttention on every transformer of a pipeline (Wan2.2: ``transformer`` and ``transformer_2``).

    EchoAttention (reconstructed; not verified against the paper). The transformers share one step/layout
    context, so ``dense_first_steps`` counts the steps of the whole run; theta and routes stay per
    transformer.

    Attributes:
        handles: Component name -> :class:`EchoAttentionHandle`.
    """

    _paper = paper("echo_attention")

    def __init__(self, handles: dict[str, EchoAttentionHandle]) -> None:
        self.handles = handles

    @property
    def config(self) -> EchoAttentionConfig:
        """The settings (shared by every transformer)."""
        return next(iter(self.handles.values())).config

    @property
    def removed(self) -> bool:
        """Whether :meth:`remove` ran."""
        return all(h.removed for h in self.handles.values())

    def remove(self) -> None:
        """Restore every transformer's processors and hooks."""
        for handle in self.handles.values():
            handle.remove()

    def stats(self) -> list[dict[str, Any]]:
        """:meth:`EchoAttentionHandle.stats` of every transformer, each row with its ``transformer`` name."""
        return [{"transformer": name, **row} for name, h in self.handles.items() for row in h.stats()]

    def save_pretrained(self, save_directory: str | os.PathLike[str]) -> None:
        """One :meth:`EchoAttentionHandle.save_pretrained` folder per transformer, one per component."""
        for name, handle in self.handles.items():
            handle.save_pretrained(os.path.join(save_directory, name))
