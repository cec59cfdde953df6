"""``EchoAttentionConfig``: the settings of EchoAttention (reconstructed; not verified against the paper).

Every default is [reconstructed]: the paper's tile size, budgets, schedule and router form are unknown.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from hf_ext._registry import paper

MODES = ("echo", "sparse", "dense")
ROUTINGS = ("static", "learned")


@dataclass
class EchoAttentionConfig:
    """Settings of the EchoAttention processors.

    EchoAttention (reconstructed; not verified against the paper): video self-attention is served by a
    Sparse operator (exact attention tiles chosen from a pooled estimate), an Echo operator (skipped tiles
    synthesised from a computed representative at another frame by a per-(layer, head, frame offset) linear
    calibration) and a per-head router. All defaults below are [reconstructed].

    Args:
        mode (`str`, *optional*, defaults to `"echo"`): ``"echo"``, ``"sparse"`` (the sparse-only baseline) or
            ``"dense"`` (exact pass-through to the stock processor).
        budget (`float`, *optional*, defaults to 0.25): attention FLOPs as a fraction of dense (``4*S^2*D`` per
            head), in ``(0, 1]``; includes the estimate and echo costs. ``1`` keeps every tile.
        block_size (`int`, *optional*, defaults to 64): tile size ``b`` in tokens (power of two >= 16); tiles never
            straddle frames (the last tile of a frame is padded).
        echo_share (`float`, *optional*, defaults to 0.25): share ``eta`` of the budget spent on representatives and
            echoed tiles in ``mode="echo"``, in ``[0, 1)``.
        max_echo_distance (`int`, *optional*, defaults to 4): largest frame distance between an echoed tile and its
            representative.
        dense_first_steps (`int`, *optional*, defaults to 5): denoising steps run densely at the start of each run.
        dense_layers (`tuple[int, ...]`, *optional*, defaults to `(0,)`): transformer blocks kept dense.
        routing (`str`, *optional*, defaults to `"static"`): ``"static"`` (Lagrangian knapsack over measured errors)
            or ``"learned"`` (Gumbel-softmax logits), used by stage 2 of :func:`calibrate_echo`.
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
    echo_share: float = field(
        default=0.25, metadata={"help": "budget share for echo representatives, in [0, 1)"}
    )
    max_echo_distance: int = field(default=4, metadata={"help": "max frame distance to a representative"})
    dense_first_steps: int = field(default=5, metadata={"help": "dense denoising steps at the start"})
    dense_layers: tuple[int, ...] = field(default=(0,), metadata={"help": "transformer blocks kept dense"})
    routing: str = field(default="static", metadata={"help": "static | learned"})
    backend: str = field(default="auto", metadata={"help": "kernel backend: auto | torch | triton"})

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"`mode` must be one of {MODES}, got {self.mode!r}.")
        if self.routing not in ROUTINGS:
            raise ValueError(f"`routing` must be one of {ROUTINGS}, got {self.routing!r}.")
        if not isinstance(self.budget, int | float) or not 0 < self.budget <= 1:
            raise ValueError(f"`budget` must be a float in (0, 1], got {self.budget!r}. E.g. budget=0.25.")
        if not isinstance(self.echo_share, int | float) or not 0 <= self.echo_share < 1:
            raise ValueError(f"`echo_share` must be a float in [0, 1), got {self.echo_share!r}.")
        b = self.block_size
        if not isinstance(b, int) or b < 16 or b & (b - 1):
            raise ValueError(f"`block_size` must be a power of two >= 16, got {b!r}. E.g. block_size=64.")
        if not isinstance(self.max_echo_distance, int) or self.max_echo_distance < 1:
            raise ValueError(f"`max_echo_distance` must be an int >= 1, got {self.max_echo_distance!r}.")
        if not isinstance(self.dense_first_steps, int) or self.dense_first_steps < 0:
            raise ValueError(f"`dense_first_steps` must be an int >= 0, got {self.dense_first_steps!r}.")
        self.dense_layers = tuple(self.dense_layers)
        if any(not isinstance(i, int) or i < 0 for i in self.dense_layers):
            raise ValueError(f"`dense_layers` must hold block indices >= 0, got {self.dense_layers!r}.")
        if self.backend not in ("auto", "torch", "triton"):
            raise ValueError(f"`backend` must be one of ('auto', 'torch', 'triton'), got {self.backend!r}.")

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable fields."""
        out = asdict(self)
        out["dense_layers"] = list(self.dense_layers)
        return out
