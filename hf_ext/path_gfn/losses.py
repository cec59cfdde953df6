"""TB, DB and SubTB objectives on lifted states, as ``nn.Module`` s holding ``log Z`` and ``p_B``.

Each loss is called as ``loss(env, traj) -> (loss, aux)``: it re-threads the forward memory over the
stored trajectories (:func:`~hf_ext.path_gfn.sampling.relogprob`), evaluates ``p_B`` and reduces the
per-trajectory objective of :mod:`hf_ext.path_gfn.core` by a batch mean.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float
from hf_ext.path_gfn import core
from hf_ext.path_gfn.backward import check_backward
from hf_ext.path_gfn.envs import DiscreteEnv
from hf_ext.path_gfn.policy import LiftedPolicy
from hf_ext.path_gfn.sampling import Trajectories, relogprob

__all__ = ["TrajectoryBalance", "DetailedBalance", "SubTrajectoryBalance"]


class _BalanceLoss(nn.Module):
    """Shared parts: the forward policy, ``p_B``, the learned ``log Z`` and the reward checks."""

    _paper = paper("path_gfn")
    allow_suffix = False

    def __init__(
        self,
        pf: LiftedPolicy,
        pb: nn.Module | None = None,
        init_logZ: float = 0.0,
        log_reward_clip_min: float | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(pf, LiftedPolicy):
            raise TypeError(f"`pf` must be a LiftedPolicy, got {type(pf).__name__}.")
        check_backward(pb, allow_suffix=self.allow_suffix)
        self.pf = pf
        self.pb = pb
        self.logZ = nn.Parameter(torch.tensor(check_float("init_logZ", init_logZ)))
        self.log_reward_clip_min = (
            None if log_reward_clip_min is None else check_float("log_reward_clip_min", log_reward_clip_min)
        )

    def check_env(self, env: DiscreteEnv) -> None:
        """Raise when ``pb=None`` on a non-tree DAG or the policy's widths do not match ``env``."""
        if self.pb is None and not env.is_tree:
            raise ValueError("env is not a tree DAG; pass UniformBackward or a learned Markov p_B")
        if env.feature_dim != self.pf.feature_dim:
            raise ValueError(
                f"feature-dim mismatch between env and pf.feature_dim: expected {self.pf.feature_dim}, "
                f"got {env.feature_dim}."
            )
        if env.n_actions != self.pf.n_actions:
            raise ValueError(f"`pf.n_actions` must be {env.n_actions} for this env, got {self.pf.n_actions}.")

    def terms(self, env: DiscreteEnv, traj: Trajectories) -> dict[str, Tensor]:
        """``log_pf``, ``log_flow``, ``log_pb`` (``[B, T]``) and the checked ``log_reward`` (``[B]``)."""
        self.check_env(env)
        log_reward = core.check_log_reward(env.log_reward(traj.terminals), self.log_reward_clip_min)
        log_pf, log_flow = relogprob(env, self.pf, traj)
        if self.pb is None:
            log_pb = torch.zeros_like(log_pf)
        else:
            log_pb = self.pb.log_prob(env, traj)  # type: ignore[operator]
        return {"log_pf": log_pf, "log_flow": log_flow, "log_pb": log_pb, "log_reward": log_reward}

    def per_trajectory(self, env: DiscreteEnv, traj: Trajectories) -> Tensor:
        """The objective of each trajectory: ``[B]``."""
        raise NotImplementedError

    def forward(self, env: DiscreteEnv, traj: Trajectories) -> tuple[Tensor, dict[str, Any]]:
        """``(batch-mean loss, {"per_trajectory": [B], "logZ": float})``."""
        per = self.per_trajectory(env, traj)
        return per.mean(), {"per_trajectory": per.detach(), "logZ": float(self.logZ.detach())}


class TrajectoryBalance(_BalanceLoss):
    """Trajectory balance on lifted states [paper]: the memory adds no probability term.

    ``(log Z + sum_t log p_F(s_{t+1} | s_t, W_t) - log R(x) - sum_t log p_B(s_t | s_{t+1}))^2``.

    Args:
        pf: The forward :class:`~hf_ext.path_gfn.policy.LiftedPolicy`.
        pb: ``None`` (tree DAGs only: ``log p_B = 0``), ``UniformBackward``, ``MarkovBackward`` or
            ``SuffixMemoryBackward``. A module conditioned on the forward memory raises ``ValueError``.
        init_logZ: Initial ``log Z``.
        log_reward_clip_min: Clamp ``log R`` from below (needed when some ``R(x) = 0``).
    """

    allow_suffix = True

    def per_trajectory(self, env: DiscreteEnv, traj: Trajectories) -> Tensor:
        t = self.terms(env, traj)
        return core.trajectory_balance(self.logZ, t["log_pf"], t["log_pb"], t["log_reward"])


class DetailedBalance(_BalanceLoss):
    """Detailed balance on lifted states with a flow head ``log F(s, W)`` [reconstructed].

    ``delta_t = log F(s_t, W_t) + log p_F - log F(s_{t+1}, W_{t+1}) - log p_B``, ``log F_0 = log Z``,
    ``log F_T = log R(x)``; the loss is the mean ``delta_t^2`` per trajectory, then over the batch.
    ``pb`` must be ``None`` (trees), ``UniformBackward`` or ``MarkovBackward``.
    """

    def per_trajectory(self, env: DiscreteEnv, traj: Trajectories) -> Tensor:
        t = self.terms(env, traj)
        return core.detailed_balance(
            self.logZ, t["log_flow"], t["log_pf"], t["log_pb"], t["log_reward"], traj.lengths
        )


class SubTrajectoryBalance(_BalanceLoss):
    """Subtrajectory balance on lifted states [reconstructed]: every ``(i, j)`` pair of a trajectory,
    weighted ``lam^(j - i)``. ``weighting="TB"`` equals :class:`TrajectoryBalance` and ``"DB"`` equals
    :class:`DetailedBalance`. ``pb`` as for :class:`DetailedBalance`.

    Args:
        pf: The forward :class:`~hf_ext.path_gfn.policy.LiftedPolicy`.
        pb: ``None`` (trees), ``UniformBackward`` or ``MarkovBackward``.
        init_logZ: Initial ``log Z``.
        log_reward_clip_min: Clamp ``log R`` from below (needed when some ``R(x) = 0``).
        weighting: ``"geometric"`` (default), ``"TB"`` or ``"DB"``.
        lam: ``lambda`` of the geometric weights.
    """

    def __init__(
        self,
        pf: LiftedPolicy,
        pb: nn.Module | None = None,
        init_logZ: float = 0.0,
        log_reward_clip_min: float | None = None,
        weighting: str = "geometric",
        lam: float = 0.9,
    ) -> None:
        super().__init__(pf, pb, init_logZ, log_reward_clip_min)
        self.weighting = check_choice("weighting", weighting, core.SUBTB_WEIGHTINGS)
        self.lam = check_float("lam", lam, low=0, low_open=True)

    def per_trajectory(self, env: DiscreteEnv, traj: Trajectories) -> Tensor:
        t = self.terms(env, traj)
        return core.subtrajectory_balance(
            self.logZ,
            t["log_flow"],
            t["log_pf"],
            t["log_pb"],
            t["log_reward"],
            traj.lengths,
            weighting=self.weighting,
            lam=self.lam,
        )
