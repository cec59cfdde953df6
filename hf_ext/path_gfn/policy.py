"""``LiftedPolicy``: a forward policy ``p_F(. | s_t, W_t)`` on the state lifted by a latent memory."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_int
from hf_ext.path_gfn.memory import MEMORIES, MarkovMemory, Memory, build_memory

__all__ = ["LiftedPolicy"]

MEMORY_INPUTS = ("state_action", "state")


class LiftedPolicy(nn.Module):
    """A path-dependent forward policy (Markov when ``memory`` is :class:`MarkovMemory`).

    Per step ``t``: the memory reads ``x_t = psi(s_t) (+) emb(a_{t-1})`` (``a_{-1}`` is a start token),
    ``(y_t, W_t) = memory(x_t, W_{t-1})``, then a head on ``[y_t; psi(s_t)]`` gives the action logits and
    ``log F(s_t, W_t)`` (used by DB/SubTB). The head is a 2-hidden-layer ReLU MLP of width ``hidden``
    shared by every memory, so Markov and lifted policies differ only in ``y_t`` [reconstructed].

    Args:
        feature_dim: Width of the environment's features ``psi(s)``.
        n_actions: Number of forward actions.
        memory: A :class:`~hf_ext.path_gfn.memory.Memory` or its name (``markov``, ``gru``, ``lstm``,
            ``rsrwm``, ``lines``).
        hidden: Width of the head.
        action_emb_dim: Width of the action embedding fed to the memory.
        memory_input: ``"state_action"`` (default: the action disambiguates aliased features) or
            ``"state"`` (the paper's ``phi(s_t, W)`` literally).

    Example:
        >>> pf = LiftedPolicy(feature_dim=4, n_actions=2, memory="gru")
        >>> logits, log_flow, carry = pf.step(torch.zeros(3, 4), torch.full((3,), 2), pf.init_carry(3))
        >>> tuple(logits.shape), tuple(log_flow.shape), tuple(carry.shape)
        ((3, 2), (3,), (3, 64))
    """

    _paper = paper("path_gfn")

    def __init__(
        self,
        feature_dim: int,
        n_actions: int,
        memory: Memory | str = "markov",
        hidden: int = 64,
        action_emb_dim: int = 16,
        memory_input: str = "state_action",
    ) -> None:
        super().__init__()
        self.feature_dim = check_int("feature_dim", feature_dim, low=1)
        self.n_actions = check_int("n_actions", n_actions, low=1)
        self.hidden = check_int("hidden", hidden, low=1)
        self.memory_input = check_choice("memory_input", memory_input, MEMORY_INPUTS)
        if isinstance(memory, str):
            memory = build_memory(memory)
        elif not isinstance(memory, Memory):
            raise TypeError(
                f"`memory` must be a Memory or one of {', '.join(repr(m) for m in MEMORIES)}, got {memory!r}."
            )
        self.memory = memory
        emb = check_int("action_emb_dim", action_emb_dim, low=1) if memory_input == "state_action" else 0
        self.action_emb = nn.Embedding(self.n_actions + 1, emb) if emb else None
        self.memory.bind(self.feature_dim + emb)
        self.trunk = nn.Sequential(
            nn.Linear(self.memory.readout_dim + self.feature_dim, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.logits_out = nn.Linear(hidden, self.n_actions)
        self.flow_out = nn.Linear(hidden, 1)

    @property
    def is_markov(self) -> bool:
        """Whether the policy ignores the past (no carry)."""
        return isinstance(self.memory, MarkovMemory)

    @property
    def start_action(self) -> int:
        """The index standing for "no previous action" at ``s_0``."""
        return self.n_actions

    def init_carry(self, batch_size: int, device: torch.device | None = None) -> Tensor:
        """``W_{-1} = 0``: ``[batch_size, memory.carry_dim]``."""
        return self.memory.init_carry(batch_size, device)

    def step(self, features: Tensor, prev_actions: Tensor, carry: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """One lifted step.

        Args:
            features: ``psi(s_t)``, ``[B, feature_dim]``.
            prev_actions: ``a_{t-1}``, ``LongTensor [B]`` (:attr:`start_action` at ``s_0``).
            carry: ``W_{t-1}``, ``[B, carry_dim]``.

        Returns:
            ``(logits [B, n_actions], log_flow [B], W_t [B, carry_dim])``; logits are unmasked.
        """
        if features.shape[-1] != self.feature_dim:
            raise ValueError(
                f"features have dimension {features.shape[-1]}, but the policy expects feature_dim="
                f"{self.feature_dim} (expected {self.feature_dim}, got {features.shape[-1]})."
            )
        x = features
        if self.action_emb is not None:
            x = torch.cat([features, self.action_emb(prev_actions)], -1)
        y, carry = self.memory(x, carry)
        h = self.trunk(torch.cat([y, features], -1))
        return self.logits_out(h), self.flow_out(h)[:, 0], carry
