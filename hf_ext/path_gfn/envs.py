"""Discrete environments with a state-graph API and exact targets by enumeration.

A state is a row of a ``LongTensor [B, state_dim]``. Forward action ``a`` from state ``s`` leads to
``env.step(s, a)``; the backward action that undoes it has the same index (the parent is determined by
the child and the action), so one mask layout serves both directions. Features ``psi(s)`` are what a
policy sees; the aliased variants map distinct states to identical features [paper: state aliasing;
the feature maps themselves are reconstructed].
"""

from __future__ import annotations

import math
from itertools import product

import torch
from torch import Tensor

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float, check_int, check_sequence

__all__ = [
    "DiscreteEnv",
    "BitSequence",
    "AliasedBitSequence",
    "HyperGrid",
    "AliasedHyperGrid",
]

BIT_MODES = ("10110010", "01001101", "11000011", "00111100")


class DiscreteEnv:
    """A finite acyclic state graph with a reward on its terminal states.

    Attributes:
        n_actions: Forward actions per state (and backward actions, same indices).
        feature_dim: Width of ``features(states)``.
        state_dim: Width of a state row.
        max_length: Longest trajectory, in transitions.
        is_tree: Whether every state has exactly one parent (then ``log p_B = 0``).
    """

    _paper = paper("path_gfn")

    n_actions: int
    feature_dim: int
    state_dim: int
    max_length: int
    is_tree: bool

    def initial_states(self, n: int) -> Tensor:
        """``s_0`` repeated: ``LongTensor [n, state_dim]``."""
        raise NotImplementedError

    def step(self, states: Tensor, actions: Tensor) -> Tensor:
        """Children of ``states [B, state_dim]`` under ``actions [B]`` (valid actions only)."""
        raise NotImplementedError

    def forward_mask(self, states: Tensor) -> Tensor:
        """``BoolTensor [B, n_actions]``: valid forward actions (all ``False`` at terminal states)."""
        raise NotImplementedError

    def backward_mask(self, states: Tensor) -> Tensor:
        """``BoolTensor [B, n_actions]``: actions that could have produced each state (none at ``s_0``)."""
        raise NotImplementedError

    def is_terminal(self, states: Tensor) -> Tensor:
        """``BoolTensor [B]``."""
        raise NotImplementedError

    def features(self, states: Tensor) -> Tensor:
        """``psi(s)``: ``FloatTensor [B, feature_dim]``."""
        raise NotImplementedError

    def log_reward(self, states: Tensor) -> Tensor:
        """``log R(x)`` of terminal states: ``FloatTensor [B]`` (natural log)."""
        raise NotImplementedError

    def terminal_states(self) -> Tensor:
        """Every terminal state, in ``terminal_index`` order: ``LongTensor [N, state_dim]``."""
        raise NotImplementedError

    def terminal_index(self, states: Tensor) -> Tensor:
        """Position of each terminal state in :meth:`terminal_states`: ``LongTensor [B]``."""
        raise NotImplementedError

    def n_trajectories(self) -> int:
        """Number of complete trajectories ``s_0 -> x`` over all terminals."""
        raise NotImplementedError

    def n_parents(self, states: Tensor) -> Tensor:
        """``|Par(s)|``: ``LongTensor [B]``."""
        return self.backward_mask(states).sum(-1)

    def target(self) -> Tensor:
        """The exact target ``pi(x) = R(x) / Z`` over :meth:`terminal_states`: ``[N]``, sums to 1."""
        return torch.softmax(self.log_reward(self.terminal_states()).double(), 0)

    def true_log_Z(self) -> float:
        """``log Z = log sum_x R(x)`` by enumeration."""
        return float(torch.logsumexp(self.log_reward(self.terminal_states()).double(), 0))

    def mode_mask(self) -> Tensor:
        """``BoolTensor [N]``: the terminals of maximal reward (the modes)."""
        log_r = self.log_reward(self.terminal_states())
        return log_r >= log_r.max() - 1e-6


class BitSequence(DiscreteEnv):
    """Append-only binary strings of length ``length``: a tree DAG with ``2**length`` terminals.

    A state holds the bits written so far and ``-1`` in the unwritten positions. The reward is
    ``R(x) = exp(-beta * min_m Hamming(x, m))`` over the modes ``m`` [reconstructed task].

    Args:
        length: ``L``, the number of bits (and of transitions).
        modes: Mode strings of ``L`` characters ``0``/``1``; default the four 8-bit modes
            ``10110010, 01001101, 11000011, 00111100`` (all with four ones).
        beta: Reward temperature per Hamming unit.
        features: ``"full"``: prefix one-hot plus mask (``2L`` dims, no aliasing); ``"aliased"``:
            ``(t/L, #ones/L, last bit, parity of #ones)``, which cannot tell the modes apart.

    Example:
        >>> env = BitSequence(length=8, features="aliased")
        >>> round(env.true_log_Z(), 3)
        2.814
    """

    is_tree = True
    n_actions = 2

    def __init__(
        self,
        length: int = 8,
        modes: tuple[str, ...] | None = None,
        beta: float = 1.5,
        features: str = "full",
    ) -> None:
        self.length = check_int("length", length, low=1, high=20)
        self.beta = check_float("beta", beta, low=0)
        self.feature_mode = check_choice("features", features, ("full", "aliased"))
        if modes is None:
            modes = BIT_MODES if self.length == 8 else ("0" * self.length, "1" * self.length)
        modes = tuple(check_sequence("modes", modes, min_length=1))
        for i, m in enumerate(modes):
            if not isinstance(m, str) or len(m) != self.length or set(m) - {"0", "1"}:
                raise ValueError(f"`modes[{i}]` must be a string of {self.length} '0'/'1', got {m!r}.")
        self.modes = modes
        self._modes = torch.tensor([[int(c) for c in m] for m in modes])
        self.state_dim = self.length
        self.max_length = self.length
        self.feature_dim = 2 * self.length if self.feature_mode == "full" else 4

    def initial_states(self, n: int) -> Tensor:
        return torch.full((n, self.length), -1, dtype=torch.long)

    def _t(self, states: Tensor) -> Tensor:
        return (states >= 0).sum(-1)

    def step(self, states: Tensor, actions: Tensor) -> Tensor:
        out = states.clone()
        t = self._t(states).clamp(max=self.length - 1)
        out.scatter_(1, t[:, None], actions[:, None].to(out.dtype))
        return out

    def is_terminal(self, states: Tensor) -> Tensor:
        return self._t(states) == self.length

    def forward_mask(self, states: Tensor) -> Tensor:
        return (~self.is_terminal(states))[:, None].expand(-1, 2).clone()

    def backward_mask(self, states: Tensor) -> Tensor:
        t = self._t(states)
        last = states.gather(1, (t - 1).clamp(min=0)[:, None])[:, 0]
        mask = torch.nn.functional.one_hot(last.clamp(min=0), 2).bool()
        return mask & (t > 0)[:, None]

    def features(self, states: Tensor) -> Tensor:
        written = (states >= 0).float()
        ones = (states == 1).float()
        if self.feature_mode == "full":
            return torch.cat([ones, written], -1)
        t = written.sum(-1)
        n1 = ones.sum(-1)
        last = states.gather(1, (t.long() - 1).clamp(min=0)[:, None])[:, 0].clamp(min=0).float()
        return torch.stack([t / self.length, n1 / self.length, last, n1.remainder(2)], -1)

    def log_reward(self, states: Tensor) -> Tensor:
        dist = (states[:, None, :] != self._modes[None]).sum(-1).min(-1).values
        return -self.beta * dist.float()

    def terminal_states(self) -> Tensor:
        idx = torch.arange(2**self.length)
        shifts = torch.arange(self.length - 1, -1, -1)
        return (idx[:, None] >> shifts) & 1

    def terminal_index(self, states: Tensor) -> Tensor:
        weights = 2 ** torch.arange(self.length - 1, -1, -1)
        return (states.clamp(min=0) * weights).sum(-1)

    def n_trajectories(self) -> int:
        return 2**self.length


def AliasedBitSequence(
    length: int = 8, modes: tuple[str, ...] | None = None, beta: float = 1.5
) -> BitSequence:
    """:class:`BitSequence` with the aliased features ``(t/L, #ones/L, last bit, parity)``."""
    return BitSequence(length=length, modes=modes, beta=beta, features="aliased")


class HyperGrid(DiscreteEnv):
    """The HyperGrid of Bengio et al. (2021): walk from the origin of ``{0..H-1}^D``, then stop.

    Actions ``0..D-1`` increment one coordinate, action ``D`` stops. A state is ``(x_1..x_D, done)``.
    Reward ``R0 + R1 * prod_d 1[0.25 < |x_d/(H-1) - 0.5| <= 0.5] + R2 * prod_d 1[0.3 < |.| < 0.4]``.
    A non-tree DAG for ``D >= 2``.

    Args:
        height: ``H``, points per axis.
        ndim: ``D``, number of axes.
        R0: Base reward everywhere.
        R1: Added where every coordinate is in the outer band.
        R2: Added where every coordinate is in the inner ring (the modes).
        features: ``"full"``: one-hot of each coordinate (``D*H`` dims); ``"coarse"``: one-hot of
            ``x_d // coarsen`` (aliased, ``D*ceil(H/coarsen)`` dims).
        coarsen: Bucket width of the coarse features.

    Example:
        >>> HyperGrid(height=8, ndim=2).n_trajectories()
        12869
    """

    def __init__(
        self,
        height: int = 8,
        ndim: int = 2,
        R0: float = 0.1,
        R1: float = 0.5,
        R2: float = 2.0,
        features: str = "full",
        coarsen: int = 2,
    ) -> None:
        self.height = check_int("height", height, low=2)
        self.ndim = check_int("ndim", ndim, low=1)
        self.R0 = check_float("R0", R0, low=0)
        self.R1 = check_float("R1", R1, low=0)
        self.R2 = check_float("R2", R2, low=0)
        self.feature_mode = check_choice("features", features, ("full", "coarse"))
        self.coarsen = check_int("coarsen", coarsen, low=1, high=self.height)
        self.n_actions = self.ndim + 1
        self.state_dim = self.ndim + 1
        self.max_length = self.ndim * (self.height - 1) + 1
        self.is_tree = self.ndim == 1
        self.n_buckets = math.ceil(self.height / self.coarsen) if features == "coarse" else self.height
        self.feature_dim = self.ndim * self.n_buckets

    def initial_states(self, n: int) -> Tensor:
        return torch.zeros(n, self.state_dim, dtype=torch.long)

    def step(self, states: Tensor, actions: Tensor) -> Tensor:
        return states + torch.nn.functional.one_hot(actions.long(), self.n_actions)

    def is_terminal(self, states: Tensor) -> Tensor:
        return states[:, -1] == 1

    def forward_mask(self, states: Tensor) -> Tensor:
        live = ~self.is_terminal(states)[:, None]
        grow = states[:, :-1] < self.height - 1
        return torch.cat([grow, torch.ones_like(grow[:, :1])], -1) & live

    def backward_mask(self, states: Tensor) -> Tensor:
        done = self.is_terminal(states)[:, None]
        shrink = (states[:, :-1] > 0) & ~done
        return torch.cat([shrink, done], -1)

    def features(self, states: Tensor) -> Tensor:
        x = states[:, :-1]
        if self.feature_mode == "coarse":
            x = x // self.coarsen
        return torch.nn.functional.one_hot(x, self.n_buckets).flatten(1).float()

    def log_reward(self, states: Tensor) -> Tensor:
        ax = ((states[:, :-1].double() / (self.height - 1)) - 0.5).abs()
        band1 = ((ax > 0.25) & (ax <= 0.5)).all(-1).double()
        band2 = ((ax > 0.3) & (ax < 0.4)).all(-1).double()
        return torch.log(self.R0 + self.R1 * band1 + self.R2 * band2).float()

    def terminal_states(self) -> Tensor:
        grid = torch.tensor(list(product(range(self.height), repeat=self.ndim)), dtype=torch.long)
        return torch.cat([grid, torch.ones_like(grid[:, :1])], -1)

    def terminal_index(self, states: Tensor) -> Tensor:
        weights = self.height ** torch.arange(self.ndim - 1, -1, -1)
        return (states[:, :-1] * weights).sum(-1)

    def n_trajectories(self) -> int:
        return sum(
            math.factorial(sum(x)) // math.prod(math.factorial(v) for v in x)
            for x in product(range(self.height), repeat=self.ndim)
        )


def AliasedHyperGrid(
    height: int = 8, ndim: int = 2, coarsen: int = 2, R0: float = 0.1, R1: float = 0.5, R2: float = 2.0
) -> HyperGrid:
    """:class:`HyperGrid` whose policy sees only the one-hot of ``x_d // coarsen`` per axis."""
    return HyperGrid(height=height, ndim=ndim, R0=R0, R1=R1, R2=R2, features="coarse", coarsen=coarsen)
