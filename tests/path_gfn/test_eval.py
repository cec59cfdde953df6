"""Exact evaluation: enumeration sums to 1, equals state-level DP for Markov policies, and equals the
per-trajectory re-threaded log-probs for lifted ones; the exact targets of the benchmark tasks."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.path_gfn.envs import AliasedBitSequence, AliasedHyperGrid, BitSequence, HyperGrid
from hf_ext.path_gfn.eval import (
    enumerate_trajectories,
    exact_terminal_distribution,
    l1_to_target,
    modes_found,
    sampled_terminal_distribution,
    state_dp_terminal_distribution,
)
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.sampling import relogprob


def test_true_log_z_of_the_aliased_bit_task():
    env = AliasedBitSequence()
    assert env.true_log_Z() == pytest.approx(2.814, abs=5e-4)
    # by hand: each x has min-Hamming distance d to the 4 modes; count strings per d
    dist = (env.terminal_states()[:, None] != env._modes[None]).sum(-1).min(-1).values
    counts = torch.bincount(dist).tolist()
    assert sum(counts) == 256
    assert env.true_log_Z() == pytest.approx(
        math.log(sum(c * math.exp(-1.5 * d) for d, c in enumerate(counts)))
    )
    assert int(env.mode_mask().sum()) == 4


def test_hypergrid_target_and_modes():
    env = HyperGrid(height=8, ndim=2)
    assert env.n_trajectories() == math.comb(16, 8) - 1
    modes = env.terminal_states()[env.mode_mask()][:, :2].tolist()
    assert sorted(modes) == [[1, 1], [1, 6], [6, 1], [6, 6]]
    r = env.log_reward(env.terminal_states()).exp()
    assert r.max().item() == pytest.approx(2.6) and r.min().item() == pytest.approx(0.1)
    assert env.target().sum().item() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "env", [HyperGrid(height=4, ndim=2), BitSequence(length=4), AliasedHyperGrid(height=5)]
)
def test_markov_enumeration_equals_state_dp(env):
    pf = LiftedPolicy(env.feature_dim, env.n_actions, "markov")
    p = exact_terminal_distribution(env, pf)
    assert p.sum().item() == pytest.approx(1.0, abs=1e-6)
    torch.testing.assert_close(p, state_dp_terminal_distribution(env, pf), atol=1e-6, rtol=0)


@pytest.mark.parametrize("memory", ["gru", "rsrwm"])
def test_prefix_tree_walk_equals_per_trajectory_sum(memory):
    env = AliasedHyperGrid(height=4, ndim=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions, memory)
    p = exact_terminal_distribution(env, pf)
    traj = enumerate_trajectories(env)
    with torch.no_grad():
        log_pf, _ = relogprob(env, pf, traj)
    want = torch.zeros_like(p).index_add_(
        0, env.terminal_index(traj.terminals), log_pf.sum(-1).double().exp()
    )
    torch.testing.assert_close(p, want, atol=1e-6, rtol=0)
    assert p.sum().item() == pytest.approx(1.0, abs=1e-6)


def test_sampled_distribution_and_figures():
    env = BitSequence(length=3)
    pf = LiftedPolicy(env.feature_dim, env.n_actions)
    exact = exact_terminal_distribution(env, pf)
    emp = sampled_terminal_distribution(env, pf, 20_000, seed=0)
    assert l1_to_target(emp, exact) < 0.05
    assert l1_to_target(env.target(), env.target()) == 0.0
    assert modes_found(env.target(), env) == (2, 2)
    assert modes_found(torch.zeros(8), env) == (0, 2)
    with pytest.raises(ValueError, match="`p` must have the target's shape"):
        l1_to_target(torch.zeros(3), env.target())
