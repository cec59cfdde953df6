"""Sampling with the memory carried step by step, and re-threading it to recompute log-probs.

Losses never reuse carries stored while sampling (they came from older parameters under replay or
off-policy training): :func:`relogprob` always unrolls the memory from ``s_0`` over the stored
trajectory under the current parameters [reconstructed]. Padded steps freeze the carry and contribute 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from hf_ext._registry import paper
from hf_ext._validation import check_int, check_probability
from hf_ext.path_gfn.core import exploration_probs, masked_log_softmax, step_mask
from hf_ext.path_gfn.envs import DiscreteEnv
from hf_ext.path_gfn.policy import LiftedPolicy

__all__ = ["Trajectories", "sample_trajectories", "relogprob"]


@dataclass
class Trajectories:
    """A padded batch of complete trajectories.

    Attributes:
        states: ``LongTensor [B, T+1, state_dim]``; after its end a row repeats its terminal state.
        actions: ``LongTensor [B, T]``; ``-1`` after the end.
        lengths: ``LongTensor [B]``, transitions per trajectory (``T = lengths.max()``).
        log_pf: ``[B, T]`` log p_F of the taken actions recorded while sampling (0 when padded), or
            ``None``. For checks only: losses recompute it with :func:`relogprob`.
    """

    _paper = paper("path_gfn")

    states: Tensor
    actions: Tensor
    lengths: Tensor
    log_pf: Tensor | None = None

    def __len__(self) -> int:
        return int(self.states.shape[0])

    @property
    def terminals(self) -> Tensor:
        """``[B, state_dim]``: the last state of each trajectory."""
        return self.states[torch.arange(len(self)), self.lengths]

    def __getitem__(self, index: Tensor | slice) -> Trajectories:
        lp = None if self.log_pf is None else self.log_pf[index]
        return Trajectories(self.states[index], self.actions[index], self.lengths[index], lp)


def _checked_mask(mask: Tensor, active: Tensor) -> Tensor:
    """Raise if an active state has no valid action; give inactive rows an all-valid mask (no NaN)."""
    dead = active & ~mask.any(-1)
    if dead.any():
        idx = int(dead.nonzero()[0, 0])
        raise ValueError(f"all actions are masked in non-terminal state index {idx} of the batch.")
    return mask | ~active[:, None]


@torch.no_grad()
def sample_trajectories(
    env: DiscreteEnv,
    policy: LiftedPolicy,
    batch_size: int,
    *,
    epsilon: float = 0.0,
    generator: torch.Generator | None = None,
) -> Trajectories:
    """Sample ``batch_size`` complete trajectories from ``p_E = (1 - epsilon) p_F + epsilon Uniform(valid)``.

    Records ``log p_F`` (not ``log p_E``) of each action taken, under the sampling parameters.
    """
    n = check_int("batch_size", batch_size, low=1)
    epsilon = check_probability("epsilon", epsilon)
    s = env.initial_states(n)
    carry = policy.init_carry(n)
    prev = torch.full((n,), policy.start_action, dtype=torch.long)
    states, actions, log_pfs = [s], [], []
    lengths = torch.zeros(n, dtype=torch.long)
    for _ in range(env.max_length):
        active = ~env.is_terminal(s)
        if not active.any():
            break
        logits, _, new_carry = policy.step(env.features(s), prev, carry)
        mask = _checked_mask(env.forward_mask(s), active)
        probs = exploration_probs(logits, mask, epsilon)
        a = torch.multinomial(probs, 1, generator=generator)[:, 0]
        lp = masked_log_softmax(logits, mask).gather(1, a[:, None])[:, 0]
        a = torch.where(active, a, -1)
        s = torch.where(active[:, None], env.step(s, a.clamp(min=0)), s)
        carry = torch.where(active[:, None], new_carry, carry)
        prev = torch.where(active, a, prev)
        lengths += active.long()
        states.append(s)
        actions.append(a)
        log_pfs.append(torch.where(active, lp, 0.0))
    if not env.is_terminal(s).all():
        raise ValueError(f"trajectories did not terminate within env.max_length={env.max_length} steps.")
    return Trajectories(torch.stack(states, 1), torch.stack(actions, 1), lengths, torch.stack(log_pfs, 1))


def relogprob(env: DiscreteEnv, policy: LiftedPolicy, traj: Trajectories) -> tuple[Tensor, Tensor]:
    """Recompute ``log p_F`` and the lifted flows by unrolling the memory from ``s_0``.

    Returns:
        ``(log_pf [B, T], log_flow [B, T])``: ``log p_F(a_t | s_t, W_t)`` and ``log F(s_t, W_t)`` at the
        real steps ``t < lengths``, 0 at padded ones.
    """
    batch, max_len = traj.actions.shape
    valid = step_mask(traj.lengths, max_len)
    states = traj.states[:, :max_len]
    feats = env.features(states.flatten(0, 1)).view(batch, max_len, -1)
    masks = env.forward_mask(states.flatten(0, 1)).view(batch, max_len, -1)
    prev = torch.cat([torch.full_like(traj.actions[:, :1], policy.start_action), traj.actions[:, :-1]], 1)
    prev = torch.where(prev < 0, policy.start_action, prev)
    if policy.is_markov:  # no carry: every step in one call
        logits, log_flow, _ = policy.step(feats.flatten(0, 1), prev.flatten(), policy.init_carry(0))
        logits, log_flow = logits.view(batch, max_len, -1), log_flow.view(batch, max_len)
    else:
        carry = policy.init_carry(batch)
        steps = []
        for t in range(max_len):
            lg, fl, new_carry = policy.step(feats[:, t], prev[:, t], carry)
            carry = torch.where(valid[:, t, None], new_carry, carry)
            steps.append((lg, fl))
        logits = torch.stack([lg for lg, _ in steps], 1)
        log_flow = torch.stack([fl for _, fl in steps], 1)
    mask = _checked_mask(masks.flatten(0, 1), valid.flatten()).view_as(masks)
    logp = masked_log_softmax(logits, mask).gather(2, traj.actions.clamp(min=0)[..., None])[..., 0]
    return torch.where(valid, logp, 0.0), torch.where(valid, log_flow, 0.0)
