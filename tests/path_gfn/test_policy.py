"""Lifting invariants: the Markov memory is a plain MLP, a memory cut off from the head is Markov,
and re-threaded log-probs equal the ones recorded while sampling."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from hf_ext.path_gfn.core import masked_log_softmax
from hf_ext.path_gfn.envs import AliasedBitSequence, AliasedHyperGrid, HyperGrid
from hf_ext.path_gfn.memory import RSRWM, GRUMemory, LinesMemory, LSTMMemory, MarkovMemory, build_memory
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.sampling import relogprob, sample_trajectories


def test_markov_memory_is_a_plain_mlp():
    env = HyperGrid(height=4, ndim=2)
    pf = LiftedPolicy(env.feature_dim, env.n_actions, MarkovMemory())
    mlp = nn.Sequential(*pf.trunk, pf.logits_out)
    traj = sample_trajectories(env, pf, 16, epsilon=0.3, generator=torch.Generator().manual_seed(1))
    log_pf, _ = relogprob(env, pf, traj)
    for b in range(len(traj)):
        for t in range(int(traj.lengths[b])):
            s = traj.states[b, t : t + 1]
            want = masked_log_softmax(mlp(env.features(s)), env.forward_mask(s))[0, traj.actions[b, t]]
            assert log_pf[b, t].item() == pytest.approx(want.item(), abs=1e-6)
        assert (log_pf[b, int(traj.lengths[b]) :] == 0).all()


@pytest.mark.parametrize("memory", [GRUMemory(16), RSRWM(8), LSTMMemory(8), LinesMemory(2)])
def test_memory_cut_from_the_head_equals_markov(memory):
    env = AliasedHyperGrid(height=4, ndim=2)
    lifted = LiftedPolicy(env.feature_dim, env.n_actions, memory, hidden=16)
    markov = LiftedPolicy(env.feature_dim, env.n_actions, "markov", hidden=16)
    r = memory.readout_dim
    with torch.no_grad():
        lifted.trunk[0].weight[:, :r] = 0
        markov.trunk[0].weight.copy_(lifted.trunk[0].weight[:, r:])
        markov.trunk[0].bias.copy_(lifted.trunk[0].bias)
        for name in ("trunk.2.weight", "trunk.2.bias", "logits_out.weight", "logits_out.bias"):
            markov.get_parameter(name).copy_(lifted.get_parameter(name))
    traj = sample_trajectories(env, lifted, 32, epsilon=0.5, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(relogprob(env, lifted, traj)[0], relogprob(env, markov, traj)[0])


@pytest.mark.parametrize("memory", ["gru", "rsrwm", "lstm"])
@pytest.mark.parametrize("env", [AliasedHyperGrid(height=5, ndim=2), AliasedBitSequence(length=5)])
def test_relogprob_equals_sampled_log_probs(memory, env):
    pf = LiftedPolicy(
        env.feature_dim, env.n_actions, build_memory(memory) if memory != "rsrwm" else RSRWM(16)
    )
    traj = sample_trajectories(env, pf, 24, epsilon=0.0, generator=torch.Generator().manual_seed(3))
    if not env.is_tree:
        assert len(set(traj.lengths.tolist())) > 1  # padded, variable-length batch
    log_pf, _ = relogprob(env, pf, traj)
    torch.testing.assert_close(log_pf, traj.log_pf, atol=1e-6, rtol=0)


def test_givens_rotation_is_orthogonal_and_matches_the_matrix():
    mem = RSRWM(dim=6)
    mem.bind(3)
    rot = mem.rotation_matrix()
    torch.testing.assert_close(rot @ rot.T, torch.eye(6), atol=1e-6, rtol=0)
    m = torch.randn(2, 6, 6)
    torch.testing.assert_close(mem._rotate(m), m @ rot)


def test_rsrwm_update_by_hand():
    mem = RSRWM(dim=2, write_key="k")
    mem.bind(2)
    with torch.no_grad():
        mem.p_in.weight.copy_(torch.eye(2))
        mem.p_in.bias.zero_()
        mem.proj.weight.zero_()
        mem.proj.bias.copy_(torch.tensor([0.0, 0.0, 0.0, math.log(3.0), 1.0, 2.0, 0.0]))
        mem.angles.fill_(math.pi / 2)  # R = [[0, -1], [1, 0]]
    m0 = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    y, carry = mem(torch.zeros(1, 2), m0.flatten()[None])
    zk = torch.tensor([0.25, 0.75])
    vbar = m0 @ zk
    want = m0 @ torch.tensor([[0.0, -1.0], [1.0, 0.0]]) + 0.5 * torch.outer(
        torch.tensor([1.0, 2.0]) - vbar, zk
    )
    torch.testing.assert_close(carry.view(2, 2), want)
    torch.testing.assert_close(y[0], want @ torch.tensor([0.5, 0.5]))


def test_lines_memory_accumulates():
    mem = LinesMemory(n_out=2)
    mem.bind(3)
    x1, x2 = torch.randn(1, 3), torch.randn(1, 3)
    _, a1 = mem(x1, mem.init_carry(1))
    y2, a2 = mem(x2, a1)
    want_a = (x1 @ mem.w_a + x2 @ mem.w_a)[:, None] * mem.v_a
    torch.testing.assert_close(a2, want_a)
    torch.testing.assert_close(y2, torch.outer((want_a * x2).sum(-1), mem.b))


def test_full_rotation_runs():
    env = AliasedBitSequence(length=3)
    pf = LiftedPolicy(env.feature_dim, env.n_actions, RSRWM(8, rotation="full"))
    traj = sample_trajectories(env, pf, 4)
    torch.testing.assert_close(relogprob(env, pf, traj)[0], traj.log_pf, atol=1e-6, rtol=0)
