"""``GFNTrainer``: on-policy training with exploration; the memory is re-threaded at every loss."""

from __future__ import annotations

import math
import sys
from typing import Any

import torch

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.path_gfn.config import GFNConfig
from hf_ext.path_gfn.envs import DiscreteEnv
from hf_ext.path_gfn.losses import _BalanceLoss
from hf_ext.path_gfn.sampling import sample_trajectories

__all__ = ["GFNTrainer"]


class GFNTrainer:
    """Train a balance loss (and the policies it holds) on an environment.

    Each step samples ``batch_size`` trajectories from ``(1 - epsilon) p_F + epsilon Uniform``, recomputes
    their log-probs under the current parameters and takes one Adam step (``log Z`` on its own rate).

    Args:
        env: The environment.
        loss: A :class:`~hf_ext.path_gfn.losses.TrajectoryBalance`, ``DetailedBalance`` or
            ``SubTrajectoryBalance`` holding ``pf`` (and a learned ``pb``, if any).
        config: A :class:`~hf_ext.path_gfn.config.GFNConfig`; keyword arguments build one instead
            (``lr``, ``logZ_lr``, ``epsilon``, ``batch_size``, ``seed``).

    Example:
        >>> from hf_ext.path_gfn import AliasedBitSequence, LiftedPolicy, TrajectoryBalance
        >>> env = AliasedBitSequence(length=3)
        >>> pf = LiftedPolicy(env.feature_dim, env.n_actions, memory="gru", hidden=8)
        >>> trainer = GFNTrainer(env, TrajectoryBalance(pf), batch_size=4, seed=0)
        >>> len(trainer.train(steps=2, progress_bar=False))
        2
    """

    _paper = paper("path_gfn")

    def __init__(
        self, env: DiscreteEnv, loss: _BalanceLoss, config: GFNConfig | None = None, **kwargs: Any
    ) -> None:
        if not isinstance(loss, _BalanceLoss):
            raise TypeError(
                f"`loss` must be a TrajectoryBalance, DetailedBalance or SubTrajectoryBalance, got {loss!r}."
            )
        if config is not None and kwargs:
            raise ValueError(f"pass either `config` or keyword settings, not both (got {sorted(kwargs)}).")
        self.config = config or GFNConfig(**kwargs)
        loss.check_env(env)
        self.env, self.loss = env, loss
        others = [p for name, p in loss.named_parameters() if name != "logZ"]
        self.optimizer = torch.optim.Adam(
            [{"params": others, "lr": self.config.lr}, {"params": [loss.logZ], "lr": self.config.logZ_lr}]
        )
        self.generator = torch.Generator().manual_seed(self.config.seed)
        self.history: list[dict[str, float]] = []

    def train_step(self) -> dict[str, float]:
        """One sampled batch and one optimiser step; returns ``{"loss", "logZ"}``."""
        traj = sample_trajectories(
            self.env,
            self.loss.pf,
            self.config.batch_size,
            epsilon=self.config.epsilon,
            generator=self.generator,
        )
        loss, aux = self.loss(self.env, traj)
        value = float(loss.detach())
        if not math.isfinite(value):
            raise FloatingPointError(f"the loss became {value} at step {len(self.history)}.")
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        record = {"loss": value, "logZ": float(self.loss.logZ.detach())}
        self.history.append(record)
        return record

    def train(self, steps: int, *, progress_bar: bool | None = None) -> list[dict[str, float]]:
        """Run ``steps`` training steps (a tqdm bar when ``progress_bar``, default: on a terminal).

        Returns the records of these steps (also appended to :attr:`history`).
        """
        steps = check_int("steps", steps, low=0)
        show = sys.stderr.isatty() if progress_bar is None else progress_bar
        bar = None
        if show:
            try:
                from tqdm.auto import tqdm

                bar = tqdm(total=steps, desc="GFN training", unit="step", file=sys.stderr)
            except ImportError:
                bar = None
        records = []
        for _ in range(steps):
            records.append(self.train_step())
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{records[-1]['loss']:.3g}", logZ=f"{records[-1]['logZ']:.3f}")
        if bar is not None:
            bar.close()
        return records
