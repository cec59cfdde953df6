"""Exact evaluation by enumerating trajectories, and the figures a sampler is judged by.

A path-dependent policy has no state-level dynamic programme for its terminal marginal, so the exact
marginal sums ``prod_t p_F`` over every complete trajectory (capped by ``max_paths``).
:func:`sampled_terminal_distribution` is the fallback beyond the cap; its L1 is biased upwards.
"""

from __future__ import annotations

import torch
from torch import Tensor

from hf_ext._validation import check_int
from hf_ext.path_gfn.core import masked_log_softmax
from hf_ext.path_gfn.envs import DiscreteEnv
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.sampling import Trajectories, sample_trajectories

__all__ = [
    "enumerate_trajectories",
    "exact_terminal_distribution",
    "state_dp_terminal_distribution",
    "sampled_terminal_distribution",
    "l1_to_target",
    "modes_found",
]


def _check_count(env: DiscreteEnv, max_paths: int) -> None:
    max_paths = check_int("max_paths", max_paths, low=1)
    count = env.n_trajectories()
    if count > max_paths:
        raise ValueError(
            f"enumeration needs {count} trajectories, above max_paths={max_paths}; raise max_paths or use "
            "sampled_terminal_distribution (a biased, sample-based estimate)."
        )


def enumerate_trajectories(env: DiscreteEnv, max_paths: int = 200_000) -> Trajectories:
    """Every complete trajectory ``s_0 -> x`` of ``env`` as one padded batch.

    Raises:
        ValueError: ``env`` has more than ``max_paths`` trajectories (the count is in the message).
    """
    _check_count(env, max_paths)
    states = env.initial_states(1)[:, None]  # [P, t+1, state_dim]: the live prefixes of length t
    actions = torch.zeros(1, 0, dtype=torch.long)
    done: list[tuple[Tensor, Tensor]] = []
    while len(states):
        last = states[:, -1]
        term = env.is_terminal(last)
        done += [(s, a) for s, a in zip(states[term], actions[term])]
        states, actions, last = states[~term], actions[~term], last[~term]
        rows, acts = env.forward_mask(last).nonzero(as_tuple=True)
        states = torch.cat([states[rows], env.step(last[rows], acts)[:, None]], 1)
        actions = torch.cat([actions[rows], acts[:, None]], 1)
    max_len = max(len(a) for _, a in done)
    states = torch.stack([torch.cat([s, s[-1:].expand(max_len + 1 - len(s), -1)]) for s, _ in done])
    pad = torch.full((max_len,), -1, dtype=torch.long)
    actions = torch.stack([torch.cat([a, pad[len(a) :]]) for _, a in done])
    lengths = torch.tensor([len(a) for _, a in done])
    return Trajectories(states, actions, lengths)


@torch.no_grad()
def exact_terminal_distribution(
    env: DiscreteEnv, policy: LiftedPolicy, *, max_paths: int = 200_000
) -> Tensor:
    """The exact terminal marginal of ``p_F``: ``[N]`` over :meth:`env.terminal_states`, float64.

    Walks the prefix tree breadth first, carrying the memory and the log-mass of every prefix, so each
    prefix is evaluated once; every complete trajectory's ``prod_t p_F`` lands on its terminal.

    Raises:
        ValueError: ``env`` has more than ``max_paths`` trajectories (the count is in the message).
    """
    _check_count(env, max_paths)
    out = torch.zeros(len(env.terminal_states()), dtype=torch.float64)
    states = env.initial_states(1)
    prev = torch.full((1,), policy.start_action)
    carry = policy.init_carry(1)
    log_mass = torch.zeros(1, dtype=torch.float64)
    while len(states):
        term = env.is_terminal(states)
        out.index_add_(0, env.terminal_index(states[term]), log_mass[term].exp())
        states, prev, carry, log_mass = states[~term], prev[~term], carry[~term], log_mass[~term]
        if not len(states):
            break
        logits, _, carry = policy.step(env.features(states), prev, carry)
        mask = env.forward_mask(states)
        if not mask.any(-1).all():
            idx = int((~mask.any(-1)).nonzero()[0, 0])
            raise ValueError(f"all actions are masked in non-terminal state index {idx} of the enumeration.")
        log_p = masked_log_softmax(logits, mask).double()
        rows, acts = mask.nonzero(as_tuple=True)
        states, prev, carry = env.step(states[rows], acts), acts, carry[rows]
        log_mass = log_mass[rows] + log_p[rows, acts]
    return out


@torch.no_grad()
def state_dp_terminal_distribution(env: DiscreteEnv, policy: LiftedPolicy) -> Tensor:
    """The terminal marginal of a *Markov* policy by forward dynamic programming over states.

    Only defined for Markov policies (``policy.is_markov``); used to cross-check the enumeration.
    """
    if not policy.is_markov:
        raise ValueError("state_dp_terminal_distribution needs a Markov policy (memory=MarkovMemory()).")
    layer = {tuple(env.initial_states(1)[0].tolist()): 1.0}
    out = torch.zeros(len(env.terminal_states()), dtype=torch.float64)
    while layer:
        states = torch.tensor(list(layer))
        mass = torch.tensor(list(layer.values()), dtype=torch.float64)
        term = env.is_terminal(states)
        if term.any():
            out.index_add_(0, env.terminal_index(states[term]), mass[term])
        states, mass = states[~term], mass[~term]
        nxt: dict[tuple[int, ...], float] = {}
        if len(states):
            start = torch.full((len(states),), policy.start_action)
            logits, _, _ = policy.step(env.features(states), start, policy.init_carry(len(states)))
            mask = env.forward_mask(states)
            probs = masked_log_softmax(logits, mask).exp().double()
            for a in range(env.n_actions):
                for i in mask[:, a].nonzero()[:, 0].tolist():
                    key = tuple(env.step(states[i : i + 1], torch.tensor([a]))[0].tolist())
                    nxt[key] = nxt.get(key, 0.0) + float(mass[i] * probs[i, a])
        layer = nxt
    return out


@torch.no_grad()
def sampled_terminal_distribution(
    env: DiscreteEnv, policy: LiftedPolicy, n_samples: int = 100_000, *, seed: int = 0
) -> Tensor:
    """Empirical terminal frequencies of ``n_samples`` trajectories (biased L1; for large envs)."""
    n_samples = check_int("n_samples", n_samples, low=1)
    gen = torch.Generator().manual_seed(seed)
    traj = sample_trajectories(env, policy, n_samples, generator=gen)
    counts = torch.bincount(env.terminal_index(traj.terminals), minlength=len(env.terminal_states()))
    return counts.double() / n_samples


def l1_to_target(p: Tensor, target: Tensor) -> float:
    """``sum_x |p(x) - pi(x)|`` (between 0 and 2)."""
    if p.shape != target.shape:
        raise ValueError(f"`p` must have the target's shape {tuple(target.shape)}, got {tuple(p.shape)}.")
    return float((p.double() - target.double()).abs().sum())


def modes_found(p: Tensor, env: DiscreteEnv) -> tuple[int, int]:
    """``(found, total)``: modes ``x`` (maximal reward) with ``p(x) >= pi(x) / 2``."""
    target = env.target()
    modes = env.mode_mask()
    found = modes & (p.double() >= 0.5 * target)
    return int(found.sum()), int(modes.sum())
