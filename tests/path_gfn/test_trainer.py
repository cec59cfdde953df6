"""End to end in seconds: a lifted GRU policy learns an aliased target; RSRWM trains with DB/SubTB."""

from __future__ import annotations

import math

import torch

from hf_ext.path_gfn.backward import MarkovBackward, UniformBackward
from hf_ext.path_gfn.envs import AliasedBitSequence, HyperGrid
from hf_ext.path_gfn.eval import exact_terminal_distribution, l1_to_target
from hf_ext.path_gfn.losses import DetailedBalance, SubTrajectoryBalance, TrajectoryBalance
from hf_ext.path_gfn.memory import RSRWM
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.trainer import GFNTrainer


def test_gru_learns_an_aliased_target():
    env = AliasedBitSequence(length=4, modes=("1100", "0011"))
    pf = LiftedPolicy(env.feature_dim, env.n_actions, "gru")
    trainer = GFNTrainer(env, TrajectoryBalance(pf), seed=0)
    records = trainer.train(steps=300, progress_bar=False)
    assert all(math.isfinite(r["loss"]) for r in records)
    assert l1_to_target(exact_terminal_distribution(env, pf), env.target()) < 0.15


def test_rsrwm_steps_with_db_and_subtb():
    env = HyperGrid(height=4, ndim=2, features="coarse")
    for cls in (DetailedBalance, SubTrajectoryBalance):
        pf = LiftedPolicy(env.feature_dim, env.n_actions, RSRWM(dim=16))
        trainer = GFNTrainer(env, cls(pf, pb=UniformBackward(env)), batch_size=8, seed=0)
        before = [p.detach().clone() for p in pf.parameters()]
        (record,) = trainer.train(steps=1, progress_bar=False)
        assert math.isfinite(record["loss"])
        assert any(not torch.equal(a, b) for a, b in zip(before, pf.parameters()))


def test_learned_backward_and_seeding():
    env = HyperGrid(height=4, ndim=2)

    def run() -> list[dict[str, float]]:
        torch.manual_seed(0)
        pf = LiftedPolicy(env.feature_dim, env.n_actions, "gru", hidden=16)
        pb = MarkovBackward(env.feature_dim, env.n_actions, hidden=16)
        trainer = GFNTrainer(env, TrajectoryBalance(pf, pb=pb), batch_size=8, seed=3)
        return trainer.train(steps=5, progress_bar=False)

    assert run() == run()
