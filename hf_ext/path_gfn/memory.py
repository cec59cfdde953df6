"""Latent memories that lift a policy: ``W_t = W_{t-1} + phi(s_t, W_{t-1})``, deterministic and learned.

Every memory maps an input ``x_t [B, in_dim]`` (the state features, and by default an embedding of the
action that produced ``s_t``) and a carry ``[B, carry_dim]`` to a readout ``[B, readout_dim]`` and the
next carry. The carry is one flat tensor, so a padded step freezes it with a single ``torch.where``.
:class:`~hf_ext.path_gfn.policy.LiftedPolicy` calls :meth:`Memory.bind` with the input width.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_int

__all__ = ["Memory", "MarkovMemory", "GRUMemory", "LSTMMemory", "RSRWM", "LinesMemory", "build_memory"]


class Memory(nn.Module):
    """Base class: ``forward(x [B, in_dim], carry [B, carry_dim]) -> (readout, carry)``."""

    _paper = paper("path_gfn")

    readout_dim: int = 0
    carry_dim: int = 0

    def bind(self, in_dim: int) -> None:
        """Create the parameters for inputs of width ``in_dim``."""

    def init_carry(self, batch_size: int, device: torch.device | None = None) -> Tensor:
        """``W_0 = 0``: ``[batch_size, carry_dim]``."""
        return torch.zeros(batch_size, self.carry_dim, device=device)

    def forward(self, x: Tensor, carry: Tensor) -> tuple[Tensor, Tensor]:
        raise NotImplementedError


class MarkovMemory(Memory):
    """No carry: the policy sees ``psi(s_t)`` only (the Markov baseline, same head as the memories)."""

    def forward(self, x: Tensor, carry: Tensor) -> tuple[Tensor, Tensor]:
        return x.new_zeros(x.shape[0], 0), carry


class GRUMemory(Memory):
    """``h_t = GRUCell(x_t, h_{t-1})``; readout ``h_t`` [reconstructed]."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.hidden = check_int("hidden", hidden, low=1)
        self.readout_dim = self.carry_dim = self.hidden

    def bind(self, in_dim: int) -> None:
        self.cell = nn.GRUCell(in_dim, self.hidden)

    def forward(self, x: Tensor, carry: Tensor) -> tuple[Tensor, Tensor]:
        h = self.cell(x, carry)
        return h, h


class LSTMMemory(Memory):
    """``(h_t, c_t) = LSTMCell(x_t, (h_{t-1}, c_{t-1}))``; readout ``h_t``; carry ``[h; c]``."""

    def __init__(self, hidden: int = 64) -> None:
        super().__init__()
        self.hidden = check_int("hidden", hidden, low=1)
        self.readout_dim = self.hidden
        self.carry_dim = 2 * self.hidden

    def bind(self, in_dim: int) -> None:
        self.cell = nn.LSTMCell(in_dim, self.hidden)

    def forward(self, x: Tensor, carry: Tensor) -> tuple[Tensor, Tensor]:
        h, c = self.cell(x, carry.split(self.hidden, -1))
        return h, torch.cat([h, c], -1)


class RSRWM(Memory):
    """Recurrent self-referential weight memory with a rotation [paper equations; shapes reconstructed].

    ``x'_t = P_in x_t`` (``d`` dims); ``(q, k, v, beta) = W_proj x'_t + b``; ``zeta`` = softmax over ``d``::

        vbar_t = M_{t-1} zeta(k_t)
        M_t    = M_{t-1} R + sigmoid(beta_t) (v_t - vbar_t) zeta(w_t)^T     (w = q, or k with write_key="k")
        y_t    = M_t zeta(q_t)

    ``M_0 = 0`` (``[d, d]``, carried flat). ``R`` is orthogonal: block-diagonal 2x2 Givens rotations with
    learned angles on column pairs ``(k, k + d/2)`` (``rotation="givens"``, ``d/2`` parameters, angles
    drawn from ``U(-pi, pi)``) or a full orthogonal matrix (``rotation="full"``,
    ``torch.nn.utils.parametrizations.orthogonal``).
    This is the fast-weight form: the projection ``W_proj`` is an ordinary learned matrix, not itself
    self-modified as in Irie et al.'s fully self-referential SRWM [reconstructed].

    Args:
        dim: ``d``, the memory width (even for Givens rotations).
        rotation: ``"givens"`` or ``"full"``.
        write_key: Key of the outer product, ``"q"`` (as on the ICML poster) or ``"k"`` (delta rule).
    """

    def __init__(self, dim: int = 64, rotation: str = "givens", write_key: str = "q") -> None:
        super().__init__()
        self.dim = check_int("dim", dim, low=2)
        self.rotation = check_choice("rotation", rotation, ("givens", "full"))
        self.write_key = check_choice("write_key", write_key, ("q", "k"))
        if self.rotation == "givens" and self.dim % 2:
            raise ValueError(f"`dim` must be even for Givens rotations, got {dim}.")
        self.readout_dim = self.dim
        self.carry_dim = self.dim * self.dim

    def bind(self, in_dim: int) -> None:
        d = self.dim
        self.p_in = nn.Linear(in_dim, d)
        self.proj = nn.Linear(d, 3 * d + 1)
        if self.rotation == "givens":
            self.angles = nn.Parameter(torch.empty(d // 2).uniform_(-math.pi, math.pi))
        else:
            self.rot = nn.utils.parametrizations.orthogonal(nn.Linear(d, d, bias=False))

    def rotation_matrix(self) -> Tensor:
        """``R [d, d]`` (orthogonal). Givens pairs are columns ``(k, k + d/2)``."""
        if self.rotation == "full":
            return self.rot.weight  # type: ignore[return-value]
        c, s = torch.diag(self.angles.cos()), torch.diag(self.angles.sin())
        return torch.cat([torch.cat([c, -s], 1), torch.cat([s, c], 1)], 0)

    def _rotate(self, m: Tensor) -> Tensor:
        """``M R`` for ``M [B, d, d]``, without forming ``R`` for Givens rotations."""
        if self.rotation == "full":
            return m @ self.rot.weight  # type: ignore[operator]
        c, s = self.angles.cos(), self.angles.sin()
        m0, m1 = m.chunk(2, -1)
        return torch.cat([m0 * c + m1 * s, m1 * c - m0 * s], -1)

    def forward(self, x: Tensor, carry: Tensor) -> tuple[Tensor, Tensor]:
        d = self.dim
        q, k, v, beta = self.proj(self.p_in(x)).split([d, d, d, 1], -1)
        zq, zk = q.softmax(-1), k.softmax(-1)
        m = carry.view(-1, d, d)
        vbar = (m * zk[:, None, :]).sum(-1)
        write = zq if self.write_key == "q" else zk
        m = self._rotate(m) + torch.sigmoid(beta)[..., None] * (v - vbar)[:, :, None] * write[:, None, :]
        y = (m * zq[:, None, :]).sum(-1)
        return y, m.flatten(1)


class LinesMemory(Memory):
    """The rank-one memory of the LINES construction [paper]: ``W_t = b a_t^T``,
    ``a_t = a_{t-1} + (w_a^T x_t) v_a``; readout ``W_t x_t = b (a_t^T x_t)`` [reconstructed readout].

    Args:
        n_out: Width of ``b`` (the readout).
    """

    def __init__(self, n_out: int = 2) -> None:
        super().__init__()
        self.readout_dim = check_int("n_out", n_out, low=1)

    def bind(self, in_dim: int) -> None:
        self.carry_dim = in_dim
        self.b = nn.Parameter(torch.randn(self.readout_dim) / math.sqrt(self.readout_dim))
        self.w_a = nn.Parameter(torch.randn(in_dim) / math.sqrt(in_dim))
        self.v_a = nn.Parameter(torch.randn(in_dim) / math.sqrt(in_dim))

    def forward(self, x: Tensor, carry: Tensor) -> tuple[Tensor, Tensor]:
        a = carry + (x @ self.w_a)[:, None] * self.v_a
        return (a * x).sum(-1, keepdim=True) * self.b, a


MEMORIES: dict[str, type[Memory]] = {
    "markov": MarkovMemory,
    "gru": GRUMemory,
    "lstm": LSTMMemory,
    "rsrwm": RSRWM,
    "lines": LinesMemory,
}


def build_memory(name: str, **kwargs: object) -> Memory:
    """A memory by name (``markov``, ``gru``, ``lstm``, ``rsrwm``, ``lines``); ``kwargs`` go to its class."""
    check_choice("memory", name, tuple(MEMORIES))
    return MEMORIES[name](**kwargs)  # type: ignore[arg-type]
