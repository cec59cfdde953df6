"""Backward validity on a non-tree DAG: sum over trajectories into x of prod p_B is 1 for every x."""

from __future__ import annotations

import pytest
import torch

from hf_ext.path_gfn.backward import MarkovBackward, SuffixMemoryBackward, UniformBackward
from hf_ext.path_gfn.envs import AliasedHyperGrid, HyperGrid
from hf_ext.path_gfn.eval import enumerate_trajectories
from hf_ext.path_gfn.losses import DetailedBalance, SubTrajectoryBalance, TrajectoryBalance
from hf_ext.path_gfn.policy import LiftedPolicy


def _backward_mass(env, pb) -> torch.Tensor:
    traj = enumerate_trajectories(env)
    with torch.no_grad():
        prob = pb.log_prob(env, traj).sum(-1).double().exp()
    out = torch.zeros(len(env.terminal_states()), dtype=torch.float64)
    return out.index_add_(0, env.terminal_index(traj.terminals), prob)


@pytest.mark.parametrize("features", ["full", "coarse"])
def test_backward_policies_are_normalised(features):
    env = HyperGrid(height=3, ndim=2, features=features)
    assert env.n_trajectories() == 19 and not env.is_tree
    for pb in (
        UniformBackward(env),
        MarkovBackward(env.feature_dim, env.n_actions),
        SuffixMemoryBackward(env.feature_dim, env.n_actions, hidden=8),
    ):
        torch.testing.assert_close(_backward_mass(env, pb), torch.ones(9, dtype=torch.float64))


def test_uniform_backward_by_hand():
    env = HyperGrid(height=3, ndim=2)
    traj = enumerate_trajectories(env)
    i = next(
        b for b in range(len(traj)) if traj.actions[b, :3].tolist() == [0, 1, 2]
    )  # (0,0)->(1,0)->(1,1)->stop
    lp = UniformBackward(env).log_prob(env, traj)[i]
    torch.testing.assert_close(lp[:3], torch.tensor([0.0, -torch.log(torch.tensor(2.0)).item(), 0.0]))


def test_forward_memory_backward_is_rejected():
    env = AliasedHyperGrid(height=3, ndim=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions, "gru")
    lifted_pb = LiftedPolicy(env.feature_dim, env.n_actions, "gru")
    for cls in (TrajectoryBalance, DetailedBalance, SubTrajectoryBalance):
        with pytest.raises(ValueError, match="forward memory"):
            cls(pf, pb=lifted_pb)


def test_suffix_memory_is_tb_only():
    env = AliasedHyperGrid(height=3, ndim=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions, "gru")
    suffix = SuffixMemoryBackward(env.feature_dim, env.n_actions)
    TrajectoryBalance(pf, pb=suffix)
    for cls in (DetailedBalance, SubTrajectoryBalance):
        with pytest.raises(ValueError, match="`pb` must be one of None, UniformBackward, MarkovBackward"):
            cls(pf, pb=suffix)
    with pytest.raises(ValueError, match="`pb` must be one of"):
        TrajectoryBalance(pf, pb=torch.nn.Linear(2, 2))


def test_pb_none_on_a_non_tree_env_raises():
    env = HyperGrid(height=3, ndim=2)
    loss = TrajectoryBalance(LiftedPolicy(env.feature_dim, env.n_actions))
    with pytest.raises(
        ValueError, match="env is not a tree DAG; pass UniformBackward or a learned Markov p_B"
    ):
        loss.check_env(env)
