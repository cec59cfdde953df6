"""``EchoAttentionConfig``: the settings of EchoAttention (reconstructed; not verified against the paper).

Every default is [reconstructed]: the paper's tile size, budgets, schedule and router form are unknown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hf_ext._registry import paper
from hf_ext._validation import (
    check_choice,
    check_float,
    check_int,
    check_power_of_two,
    check_sequence,
)
from hf_ext.kernels._dispatch import BACKENDS

MODES = ("echo", "sparse", "dense")
ROUTINGS = ("static", "learned")
ECHO_MODELS = ("pooled", "band")


@dataclass
class EchoAttentionConfig:
    """Settings of the EchoAttention processors.

    EchoAttention (reconstructed; not verified against the paper): video self-attention is served by a
    Sparse operator (exact attention tiles chosen from a pooled estimate), an Echo operator (skipped tiles
    synthesised cheaply from computed quantities) and a per-head router. Two echo models are implemented:
    ``"pooled"`` synthesises the next-ranked skipped tiles of each query tile from their own pooled keys and
    values inside the same softmax, with a fitted log-mass correction per (layer, head, frame offset);
    ``"band"`` copies a representative's per-tile partial at another frame of the same band through a linear
    map fitted per (layer, head, frame offset). All defaults below are [reconstructed].

    Args:
        mode (`str`, *optional*, defaults to `"echo"`): ``"echo"``, ``"sparse"`` (the sparse-only baseline) or
            ``"dense"`` (exact pass-through to the stock processor).
        budget (`float`, *optional*, defaults to 0.25): attention FLOPs as a fraction of dense (``4*S^2*D``
            per head), in ``(0, 1]``; includes the estimate and echo costs. ``1`` keeps every tile.
        block_size (`int`, *optional*, defaults to 64): tile size ``b`` in tokens (power of two >= 16); tiles
            never straddle frames (the last tile of a frame is padded).
        echo_share (`float`, *optional*, defaults to 0.1): share ``eta`` of the budget spent on the Echo
            operator in ``mode="echo"``, in ``[0, 1)`` (the pooled echo's pooled keys and synthesised tiles;
            the band echo's representatives and echoed tiles, which need a larger share such as 0.25).
        echo_model (`str`, *optional*, defaults to `"pooled"`): ``"pooled"`` or ``"band"`` (see above).
        echo_pool (`int`, *optional*, defaults to 8): pooled keys per synthesised tile (pooled echo), a power
            of two <= ``block_size``.
        max_echo_distance (`int`, *optional*, defaults to 4): largest frame distance between an echoed tile
            and its representative.
        dense_first_steps (`int`, *optional*, defaults to 5): denoising steps run densely at the start of each
            run.
        dense_layers (`tuple[int, ...]`, *optional*, defaults to `(0,)`): transformer blocks kept dense.
        routing (`str`, *optional*, defaults to `"static"`): ``"static"`` (Lagrangian knapsack over measured
            errors) or ``"learned"`` (Gumbel-softmax logits), used by stage 2 of :func:`calibrate_echo`.
        backend (`str`, *optional*, defaults to `"auto"`): kernel backend for the sparse/echo heads
            (``"auto"``, ``"torch"``, ``"triton"``).

    Example:
        >>> EchoAttentionConfig(budget=0.125, dense_layers=()).budget
        0.125
    """

    _paper = paper("echo_attention")

    mode: str = field(default="echo", metadata={"help": "echo | sparse | dense"})
    budget: float = field(default=0.25, metadata={"help": "attention FLOP fraction of dense, in (0, 1]"})
    block_size: int = field(default=64, metadata={"help": "tile size in tokens (power of two >= 16)"})
    echo_share: float = field(default=0.1, metadata={"help": "budget share of the Echo operator, in [0, 1)"})
    echo_model: str = field(default="pooled", metadata={"help": "pooled | band"})
    echo_pool: int = field(default=8, metadata={"help": "pooled keys per synthesised tile (pooled echo)"})
    max_echo_distance: int = field(default=4, metadata={"help": "max frame distance to a representative"})
    dense_first_steps: int = field(default=5, metadata={"help": "dense denoising steps at the start"})
    dense_layers: tuple[int, ...] = field(default=(0,), metadata={"help": "transformer blocks kept dense"})
    routing: str = field(default="static", metadata={"help": "static | learned"})
    backend: str = field(default="auto", metadata={"help": "kernel backend: auto | torch | triton"})

    def __post_init__(self) -> None:
        self.mode = check_choice("mode", self.mode, MODES)
        self.routing = check_choice("routing", self.routing, ROUTINGS)
        self.budget = check_float(
            "budget", self.budget, low=0, high=1, low_open=True, hint="E.g. budget=0.25."
        )
        self.echo_share = check_float("echo_share", self.echo_share, low=0, high=1, high_open=True)
        self.block_size = check_power_of_two(
            "block_size", self.block_size, low=16, hint="E.g. block_size=64."
        )
        self.echo_model = check_choice("echo_model", self.echo_model, ECHO_MODELS)
        self.echo_pool = check_power_of_two("echo_pool", self.echo_pool, hint="E.g. echo_pool=8.")
        if self.echo_pool > self.block_size:
            raise ValueError(
                f"`echo_pool` must be <= block_size={self.block_size}, got {self.echo_pool}. "
                "E.g. echo_pool=8."
            )
        self.max_echo_distance = check_int("max_echo_distance", self.max_echo_distance, low=1)
        self.dense_first_steps = check_int("dense_first_steps", self.dense_first_steps, low=0)
        self.dense_layers = tuple(
            check_sequence("dense_layers", self.dense_layers, lambda n, v: check_int(n, v, low=0))
        )
        self.backend = check_choice("backend", self.backend, BACKENDS)

    def operator_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :func:`~hf_ext.echo_attention.core.sparse_echo_attention` that
        these settings fix (``model``, ``pool``, ``max_distance``)."""
        return {"model": self.echo_model, "pool": self.echo_pool, "max_distance": self.max_echo_distance}

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable fields."""
        out = asdict(self)
        out["dense_layers"] = list(self.dense_layers)
        return out
