"""``CellularAutomatonDataset``: pairs (random grid, the grid k updates later) as a torch ``Dataset``."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import Dataset

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_int, check_probability, check_sequence
from hf_ext.ca_learnability.automata import BOUNDARIES, CARule, as_rule, ca_step, warn_small_torus


class CellularAutomatonDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """``n_samples`` i.i.d. Bernoulli(``density``) grids and their ``steps``-step successors, built at once.

    Args:
        rule: A :class:`~hf_ext.ca_learnability.automata.CARule` or a 512-entry table.
        steps: ``k >= 1`` updates between input and target.
        grid: ``(H, W)`` in cells. A torus smaller than ``2k + 1`` is valid (periodic extension) but warns.
        n_samples: Number of pairs.
        density: Probability that a cell of an input grid is alive.
        boundary: ``"wrap"`` (torus) or ``"zero"`` (dead cells outside).
        seed: Seed of a ``torch.Generator``; the same seed gives the same grids for every rule.

    Items are ``(x, y)``, two float32 tensors of shape ``(1, H, W)`` with values 0/1; :attr:`inputs` and
    :attr:`targets` hold the whole set as ``(n_samples, 1, H, W)`` for full-batch training.

    Example:
        >>> from hf_ext.ca_learnability import life_like_rule
        >>> ds = CellularAutomatonDataset(life_like_rule([3], [2, 3]), grid=(8, 8), n_samples=4)
        >>> x, y = ds[0]
        >>> len(ds), tuple(x.shape), y.dtype
        (4, (1, 8, 8), torch.float32)
    """

    _paper = paper("ca_learnability")

    def __init__(
        self,
        rule: CARule | Any,
        steps: int = 1,
        grid: tuple[int, int] = (16, 16),
        n_samples: int = 64,
        density: float = 0.5,
        boundary: str = "wrap",
        seed: int = 0,
    ) -> None:
        self.rule = as_rule(rule)
        self.steps = check_int("steps", steps, low=1)
        self.grid = tuple(check_sequence("grid", grid, lambda n, v: check_int(n, v, low=1), length=2))
        self.n_samples = check_int("n_samples", n_samples, low=1)
        self.density = check_probability("density", density)
        self.boundary = check_choice("boundary", boundary, BOUNDARIES)
        self.seed = check_int("seed", seed, low=0)
        if self.boundary == "wrap":
            warn_small_torus(self.grid, self.steps)
        generator = torch.Generator().manual_seed(self.seed)
        cells = torch.rand((self.n_samples, 1, *self.grid), generator=generator) < self.density
        self.inputs = cells.float()
        import warnings

        with warnings.catch_warnings():  # already warned above, once
            warnings.simplefilter("ignore", UserWarning)
            self.targets = ca_step(cells, self.rule, steps=self.steps, boundary=self.boundary).float()

    def __len__(self) -> int:
        return self.n_samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.inputs[index], self.targets[index]
