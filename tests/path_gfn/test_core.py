"""TB, DB and SubTB by hand on L = 2 bit strings, their equalities, and zero loss at the optimum."""

from __future__ import annotations

import math

import pytest
import torch

from hf_ext.path_gfn.core import exploration_probs, masked_log_softmax, subtrajectory_balance
from hf_ext.path_gfn.envs import BitSequence
from hf_ext.path_gfn.eval import enumerate_trajectories
from hf_ext.path_gfn.losses import DetailedBalance, SubTrajectoryBalance, TrajectoryBalance
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.sampling import Trajectories


def constant_policy(env: BitSequence, logits: list[float], log_flow: float) -> LiftedPolicy:
    """A Markov policy whose head ignores its input: fixed ``logits`` and ``log F``."""
    pf = LiftedPolicy(env.feature_dim, env.n_actions, "markov", hidden=4)
    with torch.no_grad():
        for p in pf.parameters():
            p.zero_()
        pf.logits_out.bias.copy_(torch.tensor(logits))
        pf.flow_out.bias.fill_(log_flow)
    return pf


def one_trajectory(env: BitSequence, bits: list[int]) -> Trajectories:
    s = env.initial_states(1)
    states = [s]
    for b in bits:
        s = env.step(s, torch.tensor([b]))
        states.append(s)
    return Trajectories(torch.stack(states, 1), torch.tensor([bits]), torch.tensor([len(bits)]))


def test_losses_by_hand(bits2):
    pf = constant_policy(bits2, [0.0, math.log(3.0)], log_flow=0.2)  # p(0) = 1/4, p(1) = 3/4
    traj = one_trajectory(bits2, [0, 1])  # x = 01: Hamming 1 from both modes, log R = -1.5
    lp0, lp1, log_r, log_z = math.log(0.25), math.log(0.75), -1.5, 0.5
    tb = (log_z + lp0 + lp1 - log_r) ** 2
    d0, d1 = log_z + lp0 - 0.2, 0.2 + lp1 - log_r
    db = (d0**2 + d1**2) / 2
    subtb = (0.9 * d0**2 + 0.9 * d1**2 + 0.81 * (d0 + d1) ** 2) / (0.9 + 0.9 + 0.81)
    for cls, want in ((TrajectoryBalance, tb), (DetailedBalance, db), (SubTrajectoryBalance, subtb)):
        loss, aux = cls(pf, init_logZ=log_z)(bits2, traj)
        assert loss.item() == pytest.approx(want, abs=1e-6), cls.__name__
        assert aux["logZ"] == pytest.approx(log_z)
    assert tb == pytest.approx((2 + math.log(3 / 16)) ** 2)


@pytest.mark.parametrize("memory", ["markov", "gru"])
def test_subtb_weightings_equal_tb_and_db(memory):
    env = BitSequence(length=3, features="full")
    pf = LiftedPolicy(env.feature_dim, env.n_actions, memory, hidden=8)
    traj = enumerate_trajectories(env)
    tb = TrajectoryBalance(pf, init_logZ=0.3).per_trajectory(env, traj)
    db = DetailedBalance(pf, init_logZ=0.3).per_trajectory(env, traj)
    as_tb = SubTrajectoryBalance(pf, init_logZ=0.3, weighting="TB").per_trajectory(env, traj)
    as_db = SubTrajectoryBalance(pf, init_logZ=0.3, weighting="DB").per_trajectory(env, traj)
    torch.testing.assert_close(as_tb, tb, atol=1e-6, rtol=0)
    torch.testing.assert_close(as_db, db, atol=1e-6, rtol=0)


def test_subtb_on_variable_lengths_matches_a_loop():
    log_flow = torch.randn(2, 3)
    log_pf, log_pb = -torch.rand(2, 3), -torch.rand(2, 3)
    log_r, lengths, log_z = torch.tensor([0.3, -1.0]), torch.tensor([3, 2]), torch.tensor(0.7)
    log_pf[1, 2] = log_pb[1, 2] = log_flow[1, 2] = 0.0
    got = subtrajectory_balance(log_z, log_flow, log_pf, log_pb, log_r, lengths, lam=0.5)
    for b in range(2):
        n = int(lengths[b])
        flows = [log_z.item(), *log_flow[b, 1:n].tolist(), log_r[b].item()]
        num = den = 0.0
        for i in range(n):
            for j in range(i + 1, n + 1):
                d = flows[i] + (log_pf[b, i:j] - log_pb[b, i:j]).sum().item() - flows[j]
                num, den = num + 0.5 ** (j - i) * d**2, den + 0.5 ** (j - i)
        assert got[b].item() == pytest.approx(num / den, abs=1e-6)


class TablePolicy(LiftedPolicy):
    """The analytic optimal Markov policy of a tree: ``p_F(s'|s) = F(s') / F(s)``, ``log F(s)`` head."""

    def __init__(self, env: BitSequence) -> None:
        super().__init__(env.feature_dim, env.n_actions, "markov", hidden=1)
        self.env = env
        self.log_r = env.log_reward(env.terminal_states())

    def log_flow_of(self, states: torch.Tensor) -> torch.Tensor:
        """``log F(s) = log sum_{x extends s} R(x)``."""
        terms = self.env.terminal_states()
        written = states >= 0
        match = ((terms[None] == states[:, None]) | ~written[:, None]).all(-1)
        return torch.logsumexp(self.log_r[None].expand(len(states), -1).masked_fill(~match, -math.inf), -1)

    def step(self, features, prev_actions, carry):
        n = self.env.length
        ones, written = features[:, :n], features[:, n:]
        states = torch.where(written.bool(), ones.long(), -1)
        live = ~self.env.is_terminal(states)
        logits = torch.zeros(len(states), 2)
        if live.any():
            kids = [self.env.step(states[live], torch.full((int(live.sum()),), a)) for a in (0, 1)]
            logits[live] = torch.stack([self.log_flow_of(k) for k in kids], -1)
        return logits, self.log_flow_of(states), carry


def test_analytic_optimal_policy_has_zero_loss():
    env = BitSequence(length=3, modes=("101",), features="full")
    pf = TablePolicy(env)
    traj = enumerate_trajectories(env)
    for cls in (TrajectoryBalance, DetailedBalance, SubTrajectoryBalance):
        per = cls(pf, init_logZ=env.true_log_Z()).per_trajectory(env, traj)
        assert per.abs().max().item() < 1e-6, cls.__name__


def test_masking_and_exploration_mix_probabilities():
    logits = torch.tensor([[1.0, 2.0, 50.0]])
    mask = torch.tensor([[True, True, False]])
    lp = masked_log_softmax(logits, mask)
    assert lp[0, 2] == -math.inf and lp[0, :2].exp().sum().item() == pytest.approx(1.0)
    p = exploration_probs(logits, mask, 0.2)
    soft = torch.softmax(torch.tensor([1.0, 2.0]), 0)
    torch.testing.assert_close(p[0, :2], 0.8 * soft + 0.1)
    assert p[0, 2] == 0 and p.sum().item() == pytest.approx(1.0)


def test_gradient_flows_to_log_z_and_policy(bits2):
    pf = LiftedPolicy(bits2.feature_dim, bits2.n_actions, "gru", hidden=8)
    loss, _ = TrajectoryBalance(pf, init_logZ=1.0)(bits2, one_trajectory(bits2, [1, 1]))
    loss.backward()
    assert all(isinstance(p.grad, torch.Tensor) for p in pf.memory.parameters())
