"""Every bad input raises a clear error naming the argument (or the state) and the value."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.path_gfn.backward import UniformBackward
from hf_ext.path_gfn.config import GFNConfig
from hf_ext.path_gfn.envs import AliasedHyperGrid, BitSequence, HyperGrid
from hf_ext.path_gfn.eval import enumerate_trajectories, exact_terminal_distribution
from hf_ext.path_gfn.losses import DetailedBalance, SubTrajectoryBalance, TrajectoryBalance
from hf_ext.path_gfn.memory import RSRWM, build_memory
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.sampling import sample_trajectories
from hf_ext.path_gfn.trainer import GFNTrainer


class NaNReward(BitSequence):
    def log_reward(self, states):
        out = super().log_reward(states)
        out[0] = math.nan
        return out


class ZeroReward(BitSequence):
    def log_reward(self, states):
        return torch.where(states[:, 0] == 1, -math.inf, 0.0)


class Stuck(BitSequence):
    def forward_mask(self, states):
        mask = super().forward_mask(states)
        return mask & ~((states >= 0).sum(-1, keepdim=True) == 1)  # dead end after one step


def _traj(env, n=4):
    pf = LiftedPolicy(env.feature_dim, env.n_actions)
    return pf, sample_trajectories(env, pf, n, epsilon=1.0, generator=torch.Generator().manual_seed(0))


def test_nan_log_reward():
    env = NaNReward(length=2)
    pf, traj = _traj(env)
    with pytest.raises(ValueError, match="log_reward contains NaN"):
        TrajectoryBalance(pf)(env, traj)


def test_zero_reward_needs_the_clip():
    env = ZeroReward(length=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions)
    traj = enumerate_trajectories(env)
    with pytest.raises(ValueError, match="log_reward_clip_min"):
        TrajectoryBalance(pf)(env, traj)
    loss, _ = TrajectoryBalance(pf, log_reward_clip_min=-20.0)(env, traj)
    assert math.isfinite(loss.item())


def test_all_actions_masked_names_the_state():
    env = Stuck(length=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions)
    with pytest.raises(ValueError, match="all actions are masked in non-terminal state index 0 of the batch"):
        sample_trajectories(env, pf, 3)
    with pytest.raises(ValueError, match="all actions are masked in non-terminal state index"):
        exact_terminal_distribution(Stuck(length=2), pf)


def test_feature_dim_mismatch():
    env = HyperGrid(height=4, ndim=2)
    pf = LiftedPolicy(env.feature_dim + 1, env.n_actions, "gru")
    with pytest.raises(ValueError, match=f"expected {env.feature_dim + 1}, got {env.feature_dim}"):
        pf.step(torch.zeros(2, env.feature_dim), torch.zeros(2, dtype=torch.long), pf.init_carry(2))
    with pytest.raises(ValueError, match="feature-dim mismatch"):
        GFNTrainer(env, TrajectoryBalance(pf, pb=UniformBackward(env)))


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": 1.5}, "epsilon"),
        ({"epsilon": -0.1}, "epsilon"),
        ({"batch_size": 0}, "batch_size"),
        ({"lr": 0.0}, "lr"),
        ({"logZ_lr": -1.0}, "logZ_lr"),
    ],
)
def test_bad_trainer_settings(kwargs, name):
    with pytest.raises(ValueError, match=f"`{name}` must be"):
        GFNConfig(**kwargs)
    env = BitSequence(length=2)
    with pytest.raises(ValueError, match=f"`{name}` must be"):
        GFNTrainer(env, TrajectoryBalance(LiftedPolicy(env.feature_dim, env.n_actions)), **kwargs)


def test_bad_sampling_arguments():
    env = BitSequence(length=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions)
    with pytest.raises(ValueError, match="`epsilon` must be a finite float in \\[0, 1\\], got 2"):
        sample_trajectories(env, pf, 2, epsilon=2)
    with pytest.raises(ValueError, match="`batch_size` must be an int >= 1, got 0"):
        sample_trajectories(env, pf, 0)


def test_enumeration_cap_gives_the_count():
    env = AliasedHyperGrid(height=8, ndim=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions)
    with pytest.raises(ValueError, match="needs 12869 trajectories, above max_paths=1000"):
        exact_terminal_distribution(env, pf, max_paths=1000)
    with pytest.raises(ValueError, match="max_paths=10"):
        enumerate_trajectories(env, max_paths=10)


def test_unknown_memory_lists_the_valid_names():
    with pytest.raises(ValueError, match="`memory` must be one of 'markov', 'gru', 'lstm', 'rsrwm', 'lines'"):
        build_memory("transformer")
    with pytest.raises(ValueError, match="`memory` must be one of"):
        LiftedPolicy(4, 2, memory="lstn")
    with pytest.raises(TypeError, match="`memory` must be a Memory"):
        LiftedPolicy(4, 2, memory=3)  # type: ignore[arg-type]


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="`dim` must be even"):
        RSRWM(dim=5)
    with pytest.raises(ValueError, match="`write_key` must be one of"):
        RSRWM(write_key="v")
    with pytest.raises(ValueError, match="`weighting` must be one of"):
        SubTrajectoryBalance(LiftedPolicy(4, 2), weighting="tb")
    with pytest.raises(ValueError, match="`features` must be one of"):
        BitSequence(features="coarse")
    with pytest.raises(ValueError, match="`modes\\[0\\]` must be a string of 3"):
        BitSequence(length=3, modes=("01",))
    with pytest.raises(ValueError, match="`coarsen` must be an int in \\[1, 4\\]"):
        HyperGrid(height=4, coarsen=5)
    with pytest.raises(TypeError, match="`pf` must be a LiftedPolicy"):
        DetailedBalance(torch.nn.Linear(2, 2))  # type: ignore[arg-type]
