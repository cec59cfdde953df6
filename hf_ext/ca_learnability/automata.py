"""Binary 2-D cellular automata on a 3x3 (Moore) neighbourhood: rules, rule families, evolution, k-step maps.

Conventions [reconstructed]: a rule is a 512-entry truth table. Pattern index ``sum_k x_k << k`` with
bit ``k = 3 * dy + dx`` for window row ``dy`` and column ``dx`` (0..2, top-left = bit 0, centre = bit 4).
The k-step map ``F^k`` is a Boolean function of the ``(2k+1)``-square window, with bit
``(2k+1) * dy + dx``. Life-like (outer-totalistic) rules ``B/S``: with ``cnt`` live cells among the 8
neighbours, the next state is ``cnt in S`` for a live centre and ``cnt in B`` for a dead one; Conway's Life
is ``B3/S23``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import numpy as np

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_int, check_probability
from hf_ext.ca_learnability.core import MAX_EXACT_INPUTS

KINDS = ("outer_totalistic", "d4", "local")
BOUNDARIES = ("wrap", "zero")
_CHUNK = 1 << 20


@cache
def d4_transforms() -> np.ndarray:
    """Pattern index under each of the 8 symmetries of the square, shape ``[8, 512]`` (row 0 = identity)."""
    cells = np.arange(9).reshape(3, 3)
    perms = []
    for flip in (False, True):
        grid = cells.T if flip else cells
        for turns in range(4):
            perms.append(np.rot90(grid, turns).reshape(-1))
    patterns = np.arange(512)
    bits = (patterns[:, None] >> np.arange(9)) & 1  # [512, 9]
    maps = np.stack([(bits[:, p] << np.arange(9)).sum(1) for p in perms])
    maps.setflags(write=False)
    return maps


@cache
def d4_orbits() -> np.ndarray:
    """Orbit label (0..101) of each of the 512 patterns under the symmetries of the square, shape ``[512]``.

    Burnside: ``(512 + 2 * 8 + 32 + 4 * 64) / 8 = 102`` orbits.
    """
    labels = np.unique(d4_transforms().min(axis=0), return_inverse=True)[1]
    labels.setflags(write=False)
    return labels


def _check_table(table: Any, name: str = "table") -> np.ndarray:
    t = np.asarray(table)
    if t.shape != (512,):
        raise ValueError(
            f"`{name}` must be a 512-entry truth table (3x3 neighbourhood), got shape {t.shape}."
        )
    bad = ~np.isin(t, (0, 1))
    if bad.any():
        raise ValueError(
            f"`{name}` entries must be 0 or 1, got {t[bad][0].item()!r} "
            f"at index {int(np.flatnonzero(bad)[0])}."
        )
    out = t.astype(np.uint8)
    out.setflags(write=False)
    return out


@dataclass(frozen=True, eq=False)
class CARule:
    """A cellular-automaton rule: the next state of a cell as a 512-entry table of its 3x3 window.

    Args:
        table: ``[512]`` array of 0/1, indexed by the window pattern (module docstring for the bit order).
        name: Display name, e.g. ``"B3/S23"``.
        symmetric: Demand invariance under the 8 symmetries of the square (rotations and reflections);
            raises ``ValueError`` when the table is not.

    Example:
        >>> rule = life_like_rule(B=[3], S=[2, 3])
        >>> rule.name, rule.is_d4_invariant, rule.is_constant
        ('B3/S23', True, False)
    """

    _paper = paper("ca_learnability")

    table: np.ndarray
    name: str = ""
    symmetric: bool = field(default=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "table", _check_table(self.table))
        check_bool("symmetric", self.symmetric)
        if self.symmetric and not self.is_d4_invariant:
            raise ValueError(
                f"`symmetric=True` but rule {self.name or '<unnamed>'!r} is not invariant under rotations "
                "and reflections of the window. Pass symmetric=False, or build it with random_rule('d4')."
            )

    @property
    def is_constant(self) -> bool:
        """Whether every window gives the same next state (no learnable signal)."""
        return bool(self.table.min() == self.table.max())

    @property
    def is_d4_invariant(self) -> bool:
        """Whether the rule commutes with the 8 symmetries of the square."""
        return bool((self.table[d4_transforms()] == self.table).all())

    def __repr__(self) -> str:
        return f"CARule({self.name or '<unnamed>'!r}, ones={int(self.table.sum())}/512)"


def as_rule(rule: CARule | Any) -> CARule:
    """``rule`` itself, or a :class:`CARule` built from a 512-entry table."""
    return rule if isinstance(rule, CARule) else CARule(rule)


def _counts(name: str, values: Iterable[Any]) -> list[int]:
    try:
        items = list(values)
    except TypeError:
        raise TypeError(f"`{name}` must be a list of neighbour counts in 0..8, got {values!r}.") from None
    return sorted({check_int(f"{name}[{i}]", c, low=0, high=8) for i, c in enumerate(items)})


def life_like_rule(B: Iterable[int], S: Iterable[int], *, name: str | None = None) -> CARule:
    """The outer-totalistic rule ``B/S`` (birth counts, survival counts, each in 0..8) [paper: Life-like].

    Example:
        >>> life_like_rule(B=[3, 6], S=[2, 3]).name
        'B36/S23'
    """
    births, survivals = _counts("B", B), _counts("S", S)
    patterns = np.arange(512)
    centre = (patterns >> 4) & 1
    count = np.bitwise_count(patterns.astype(np.uint16)) - centre
    table = np.where(centre == 1, np.isin(count, survivals), np.isin(count, births))
    label = name or f"B{''.join(map(str, births))}/S{''.join(map(str, survivals))}"
    return CARule(table.astype(np.uint8), label)


def random_rule(kind: str = "outer_totalistic", *, p: float | None = None, seed: int = 0) -> CARule:
    """One random rule of a family (it may be constant; see :attr:`CARule.is_constant`).

    Args:
        kind: ``"outer_totalistic"`` (each count 0..8 in B, and in S, independently with probability ``p``),
            ``"d4"`` (one Bernoulli(``p``) bit per symmetry orbit of the 512 windows: 102 free bits) or
            ``"local"`` (512 independent Bernoulli(``p``) bits).
        p: Probability of each bit, *optional*, defaults to 0.3 for ``"outer_totalistic"`` and 0.5 otherwise.
        seed: Seed of a numpy ``default_rng``.
    """
    kind = check_choice("kind", kind, KINDS)
    p = check_probability("p", 0.3 if p is None and kind == KINDS[0] else 0.5 if p is None else p)
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    if kind == "outer_totalistic":
        b, s = rng.random(9) < p, rng.random(9) < p
        return life_like_rule(np.flatnonzero(b), np.flatnonzero(s))
    if kind == "d4":
        bits = (rng.random(102) < p).astype(np.uint8)
        return CARule(bits[d4_orbits()], f"d4-{seed}", symmetric=True)
    return CARule((rng.random(512) < p).astype(np.uint8), f"local-{seed}")


def sample_rules(
    n_rules: int,
    kind: str = "outer_totalistic",
    *,
    p: float | None = None,
    seed: int = 0,
    life_first: bool = True,
) -> list[CARule]:
    """``n_rules`` distinct non-constant rules of one family (constant rules are dropped), seeded.

    ``life_first`` puts Conway's Life (``B3/S23``) first, then random rules drawn with seeds ``seed, seed + 1,
    ...`` until enough distinct ones are found.
    """
    n_rules = check_int("n_rules", n_rules, low=1)
    rules = [life_like_rule([3], [2, 3])] if life_first else []
    seen = {rules[0].table.tobytes()} if rules else set()
    draw = check_int("seed", seed, low=0)
    while len(rules) < n_rules:
        rule = random_rule(kind, p=p, seed=draw)
        draw += 1
        if not rule.is_constant and rule.table.tobytes() not in seen:
            seen.add(rule.table.tobytes())
            rules.append(rule)
        if draw - seed > 1000 * n_rules:
            raise RuntimeError(f"found only {len(rules)} distinct non-constant {kind} rules with p={p}.")
    return rules


def _pad(x: Any, boundary: str) -> Any:
    """Pad the last two axes by one cell: periodic copies (torus) or zeros."""
    if boundary == "wrap":
        x = _cat([x[..., -1:, :], x, x[..., :1, :]], -2)
        return _cat([x[..., :, -1:], x, x[..., :, :1]], -1)
    pad = [(0, 0)] * (x.ndim - 2) + [(1, 1), (1, 1)]
    if isinstance(x, np.ndarray):
        return np.pad(x, pad)
    import torch.nn.functional as F

    return F.pad(x, (1, 1, 1, 1))


def _cat(parts: list[Any], axis: int) -> Any:
    if isinstance(parts[0], np.ndarray):
        return np.concatenate(parts, axis=axis)
    import torch

    return torch.cat(parts, dim=axis)


def _lookup(windows: Any, table: np.ndarray, valid: bool, boundary: str) -> Any:
    """One step: pattern index of every 3x3 window, then the table (``valid`` shrinks the grid by 2)."""
    x = windows if valid else _pad(windows, boundary)
    h, w = x.shape[-2] - 2, x.shape[-1] - 2
    index: Any = 0
    for dy in range(3):
        for dx in range(3):
            index = index + (x[..., dy : dy + h, dx : dx + w] << (3 * dy + dx))
    if isinstance(index, np.ndarray):
        return table.astype(x.dtype)[index]  # keep the wide dtype: the next step shifts by up to 8 bits
    import torch

    return torch.tensor(table, device=index.device).to(x.dtype)[index.long()]


def ca_step(grid: Any, rule: CARule | Any, *, steps: int = 1, boundary: str = "wrap") -> Any:
    """Evolve binary grids ``steps`` times, all cells at once.

    Args:
        grid: ``[..., H, W]`` numpy array or torch tensor of 0/1 (any integer, bool or float dtype).
        rule: A :class:`CARule` or a 512-entry table.
        steps: Number of updates ``k >= 1``.
        boundary: ``"wrap"`` (torus) or ``"zero"`` (dead cells outside the grid).

    Returns:
        ``[..., H, W]`` uint8 array or tensor (same kind and device as ``grid``).

    Example:
        >>> blinker = np.zeros((5, 5), np.uint8); blinker[2, 1:4] = 1
        >>> ca_step(blinker, life_like_rule([3], [2, 3]))[1:4, 2]
        array([1, 1, 1], dtype=uint8)
    """
    table = as_rule(rule).table
    steps = check_int("steps", steps, low=1)
    boundary = check_choice("boundary", boundary, BOUNDARIES)
    if np.ndim(grid) < 2:
        raise ValueError(f"`grid` must have shape [..., H, W], got {tuple(np.shape(grid))}.")
    if boundary == "wrap":
        warn_small_torus(tuple(np.shape(grid)[-2:]), steps)
    if isinstance(grid, np.ndarray):
        x: Any = grid.astype(np.int64)
    else:
        import torch

        x = torch.as_tensor(grid).to(torch.int64)
    for _ in range(steps):
        x = _lookup(x, table, False, boundary)
    return x.astype(np.uint8) if isinstance(x, np.ndarray) else x.byte()


def warn_small_torus(shape: tuple[int, ...], steps: int) -> None:
    """Warn when a torus is smaller than the ``(2k+1)``-window: the window then wraps onto itself."""
    if min(shape) < 2 * steps + 1:
        warnings.warn(
            f"a {shape[0]}x{shape[1]} torus is smaller than the {2 * steps + 1}x{2 * steps + 1} window of "
            f"{steps} step(s): windows overlap themselves (periodic extension). Use a grid of at least "
            f"{2 * steps + 1} cells per side for a k-step map of distinct cells.",
            UserWarning,
            stacklevel=3,
        )


def window_function(rule: CARule | Any, steps: int = 1) -> Callable[[np.ndarray], np.ndarray]:
    """``F^k`` as a function of bit rows: ``[m, (2k+1)**2]`` 0/1 -> ``[m]`` uint8 (any ``k``, no wrap).

    The window is evolved ``k`` times without padding (each step shrinks it by 2), leaving its centre cell.
    """
    table = as_rule(rule).table
    steps = check_int("steps", steps, low=1)
    side = 2 * steps + 1

    def f(bits: np.ndarray) -> np.ndarray:
        x = np.asarray(bits, dtype=np.int16).reshape(-1, side, side)  # 9-bit pattern indices fit
        for _ in range(steps):
            x = _lookup(x, table, True, "wrap")
        return x.reshape(-1).astype(np.uint8)

    return f


def ca_truth_table(rule: CARule | Any, steps: int = 1) -> np.ndarray:
    """Exact truth table of the k-step map ``F^k`` over its ``n = (2k+1)**2`` window bits.

    ``k = 1``: the rule itself (512 entries); ``k = 2``: ``2**25`` entries (32 MB), built in chunks of
    ``2**20`` inputs by composing lookups: the nine cells around the centre after ``k - 1`` steps are looked
    up from their ``(2k-1)``-square sub-windows, then the rule is applied to them. Larger ``k`` exceeds the
    exact path (``n > 26``); estimate its spectrum with :func:`mc_spectrum`.

    Returns:
        ``[2**n]`` uint8 array.
    """
    rule = as_rule(rule)
    steps = check_int("steps", steps, low=1)
    n = (2 * steps + 1) ** 2
    if n > MAX_EXACT_INPUTS:
        raise ValueError(
            f"`steps`={steps} gives n={n} window bits; the exact truth table handles n <= "
            f'{MAX_EXACT_INPUTS}. Use method="monte_carlo" '
            f"(mc_spectrum(window_function(rule, {steps}), {n}))."
        )
    if steps == 1:
        return rule.table.copy()
    inner = ca_truth_table(rule, steps - 1)  # F^(k-1) over (2k-1)-squares
    side, sub = 2 * steps + 1, 2 * steps - 1
    out = np.empty(1 << n, dtype=np.uint8)
    for start in range(0, 1 << n, _CHUNK):
        index = np.arange(start, start + _CHUNK, dtype=np.int32)
        # rows[r][j]: the sub-window-wide run of bits starting at column j of window row r
        rows = [[(index >> (side * r + j)) & ((1 << sub) - 1) for j in range(3)] for r in range(side)]
        middle = np.zeros(_CHUNK, dtype=np.int32)
        for i in range(3):
            for j in range(3):
                pattern = sum((rows[i + dy][j] << (sub * dy) for dy in range(sub)), np.zeros_like(index))
                middle |= inner[pattern].astype(np.int32) << (3 * i + j)
        out[start : start + _CHUNK] = rule.table[middle]
    return out
