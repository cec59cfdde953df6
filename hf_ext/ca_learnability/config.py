"""``LearnabilityConfig``: the fixed training budget of the learnability harness [reconstructed defaults]."""

from __future__ import annotations

from dataclasses import dataclass, field

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float, check_int, check_probability, check_sequence
from hf_ext.ca_learnability.automata import BOUNDARIES

ARCHITECTURES = ("cnn", "mlp_patch", "mlp_global", "vit", "vit_window")
LEARNING_RATES = {"cnn": 1e-2, "mlp_patch": 3e-3, "mlp_global": 1e-3, "vit": 3e-3, "vit_window": 3e-3}


@dataclass
class LearnabilityConfig:
    """One training budget, kept fixed across rules so that their errors are comparable.

    Every rule is trained on the same ``n_train`` random grids and tested on the same ``n_test`` fresh grids
    (seeded), full batch, with Adam and binary cross-entropy on the next-state logits. The defaults are the
    settings hf-ext chose; the paper's are not known.

    Args:
        steps (`int`, *optional*, defaults to `1`):
            ``k``: the task maps a grid to the grid ``k`` updates later.
        grid (`tuple[int, int]`, *optional*, defaults to `(16, 16)`):
            Grid height and width in cells.
        n_train (`int`, *optional*, defaults to `24`):
            Training grids.
        n_test (`int`, *optional*, defaults to `64`):
            Test grids.
        train_steps (`int`, *optional*, defaults to `200`):
            Full-batch optimiser steps.
        density (`float`, *optional*, defaults to `0.5`):
            Probability that a cell of a random grid is alive.
        boundary (`str`, *optional*, defaults to `"wrap"`):
            ``"wrap"`` (torus, circular padding in the networks) or ``"zero"``.
        learning_rates (`dict[str, float]`, *optional*):
            Adam learning rate per architecture; missing ones default to ``cnn`` 1e-2, ``mlp_patch`` 3e-3,
            ``mlp_global`` 1e-3, ``vit`` and ``vit_window`` 3e-3.
        max_normalized_error (`float`, *optional*, defaults to `0.8`):
            Learning gate: an architecture whose mean normalised error (error over the majority-class error)
            is not below this did not learn, and its correlations are not reported as learnability.
        seed (`int`, *optional*, defaults to `0`):
            Seed of the grids (train ``2 * seed``, test ``2 * seed + 1``) and of the initial weights.

    Example:
        >>> LearnabilityConfig(n_train=8).lr("cnn")
        0.01
    """

    _paper = paper("ca_learnability")

    steps: int = field(default=1, metadata={"help": "k: predict the grid k updates later."})
    grid: tuple[int, int] = field(default=(16, 16), metadata={"help": "Grid height and width in cells."})
    n_train: int = field(default=24, metadata={"help": "Training grids (full batch)."})
    n_test: int = field(default=64, metadata={"help": "Fresh test grids."})
    train_steps: int = field(default=200, metadata={"help": "Full-batch Adam steps."})
    density: float = field(default=0.5, metadata={"help": "Probability that a random cell is alive."})
    boundary: str = field(default="wrap", metadata={"help": "'wrap' (torus) or 'zero' boundary."})
    learning_rates: dict[str, float] = field(
        default_factory=dict, metadata={"help": "Adam learning rate per architecture (defaults per arch)."}
    )
    max_normalized_error: float = field(
        default=0.8,
        metadata={"help": "An architecture learned when its mean normalised error is below this."},
    )
    seed: int = field(default=0, metadata={"help": "Seed of the grids and of the initial weights."})

    def __post_init__(self) -> None:
        self.steps = check_int("steps", self.steps, low=1)
        self.grid = tuple(  # type: ignore[assignment]
            check_sequence("grid", self.grid, lambda n, v: check_int(n, v, low=1), length=2)
        )
        self.n_train = check_int("n_train", self.n_train, low=1, hint="Train on at least one grid.")
        self.n_test = check_int("n_test", self.n_test, low=1)
        self.train_steps = check_int("train_steps", self.train_steps, low=1)
        self.density = check_probability("density", self.density)
        self.boundary = check_choice("boundary", self.boundary, BOUNDARIES)
        if not isinstance(self.learning_rates, dict):
            raise TypeError(f"`learning_rates` must be a dict {{arch: lr}}, got {self.learning_rates!r}.")
        for arch, lr in self.learning_rates.items():
            check_choice("learning_rates key", arch, ARCHITECTURES)
            check_float(f"learning_rates[{arch!r}]", lr, low=0, low_open=True)
        self.max_normalized_error = check_float(
            "max_normalized_error", self.max_normalized_error, low=0, low_open=True
        )
        self.seed = check_int("seed", self.seed, low=0)

    def lr(self, arch: str) -> float:
        """Adam learning rate of ``arch``."""
        return float(self.learning_rates.get(check_choice("arch", arch, ARCHITECTURES), LEARNING_RATES[arch]))
