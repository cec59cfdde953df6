"""Loan MAFE-style environment (``loan_mafe_v0``): banks, a regulator and a two-or-more-group applicant pool.

**[reconstructed]** MAFE-style dynamics after the delayed-impact lending model of Liu et al. (2018) and
D'Amour et al. (2020), not the paper's appendix equations; no numerical parity with MAFE is claimed.

Per step, ``n_per_step`` individuals are sampled without replacement; each applies to a uniformly random bank.
Credit levels are ``K`` bins with repayment probability ``rho_k`` linear from ``repay_low`` to ``repay_high``.
A bank action ``tau in {0..K}`` approves applicants whose observed bin is ``>= tau`` (``tau = K``: nobody);
``group_thresholds=True`` makes it one threshold per group. Approved and repaid: level +1; approved and
defaulted: level -1 (clipped); not approved: unchanged.

Agents and reward components (per step, divided by ``n_per_step``):

- ``bank_<i>``: ``profit`` = ``u+ * repaid - u- * defaulted + subsidy received``, ``loan_volume`` = approvals,
  ``default_loss`` = ``-u- * defaulted``;
- ``regulator_0``: ``subsidy_cost`` = ``-subsidy paid``, ``welfare`` = mean level change of the sampled.

The regulator's action (``Discrete(5)``) is the intensity ``l in {0, .25, .5, .75, 1}`` of the configured
``intervention``: ``"subsidy"`` reimburses ``l * subsidy_max * u-`` per default in the disadvantaged group,
``"quota"`` enforces a minimum approval rate ``l * quota_max`` per group (top-bin rejected members of a short
group are approved), ``"score_boost"`` adds ``score_boost_bins`` to the *observed* bin of the disadvantaged
group when ``l > 0`` (repayment still follows the true bin). With ``intervention=None`` it has no effect.
Fairness: positive = approval, qualified = would repay (drawn for every applicant).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils import parallel_to_aec

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.marl.mafe.config import LoanConfig
from hf_ext.marl.mafe.core import REGULATOR, StepOutcome, apply_quota
from hf_ext.marl.mafe.env_base import MAFEParallelEnv

__all__ = ["LoanMAFE", "env", "parallel_env", "raw_env"]


class LoanMAFE(MAFEParallelEnv):
    """Loan MAFE-style ``ParallelEnv`` (see the module docstring for the dynamics).

    Args:
        n_banks: Number of bank agents ``bank_0..bank_{n_banks-1}`` (>= 1).
        config: :class:`~hf_ext.marl.mafe.config.LoanConfig` constants.
        **kwargs: The options of :class:`~hf_ext.marl.mafe.env_base.MAFEParallelEnv`: ``groups``,
            ``group_shares``,
            ``population_size``, ``n_per_step``, ``max_cycles``, ``intervention`` (``None``, ``"subsidy"``,
            ``"quota"``, ``"score_boost"``), ``group_thresholds``, ``render_mode``.

    Examples:
        >>> from hf_ext.marl import loan_mafe_v0
        >>> env = loan_mafe_v0.parallel_env(intervention="subsidy", max_cycles=5)
        >>> obs, infos = env.reset(seed=0)
        >>> env.agents
        ['bank_0', 'bank_1', 'regulator_0']
        >>> obs, rew, term, trunc, infos = env.step({"bank_0": 3, "bank_1": 3, "regulator_0": 2})
        >>> sorted(infos["bank_0"]["reward_components"])
        ['default_loss', 'loan_volume', 'profit']
        >>> 0.0 <= infos["bank_0"]["fairness_components"]["dp_gap"] <= 1.0
        True
    """

    metadata = {"name": "loan_mafe_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}
    interventions = (None, "subsidy", "quota", "score_boost")
    config_cls = LoanConfig
    decision_name = "approval"
    _paper = paper("mafe")

    def __init__(self, n_banks: int = 2, *, config: LoanConfig | None = None, **kwargs: Any) -> None:
        n_banks = check_int("n_banks", n_banks, low=1)
        self.n_banks = int(n_banks)
        self.banks = [f"bank_{i}" for i in range(self.n_banks)]
        super().__init__(config=config, **kwargs)
        c = self.config
        self._rho = np.linspace(c.repay_low, c.repay_high, self.num_levels)

    def _agent_table(self) -> dict[str, tuple[spaces.Space, int]]:
        table = {b: (self.threshold_space(self.num_levels + 1), 1) for b in self.banks}
        table[REGULATOR] = (spaces.Discrete(5), 1)
        return table

    def _reset_dynamics(self) -> None:
        self._profit = np.zeros(self.n_banks)
        self._paid = 0.0

    def _observed(self, level: np.ndarray, grp: np.ndarray) -> np.ndarray:
        if self.intervention == "score_boost" and self._intensity > 0:
            boosted = np.minimum(level + self.config.score_boost_bins, self.num_levels - 1)
            return np.where(grp == self.disadvantaged, boosted, level)
        return level

    def _simulate(self, idx: np.ndarray, actions: dict[str, Any]) -> StepOutcome:
        c, rng, n, nb = self.config, self._np_random, len(idx), self.n_banks
        grp, lvl = self._group[idx], self._level[idx]
        u = rng.random(2 * n)
        bank = (u[:n] * nb).astype(np.int64)
        score = self._observed(lvl, grp)
        taus = np.array([actions[b] for b in self.banks])  # (B,) or (B, G)
        tau = taus[bank, grp] if taus.ndim == 2 else taus[bank]
        approve = score >= tau
        if self.intervention == "quota":
            approve = apply_quota(approve, grp, score, self._intensity * c.quota_max, self.num_groups)
        repay = u[n:] < self._rho[lvl]
        good, bad = approve & repay, approve & ~repay
        s = self._intensity * c.subsidy_max if self.intervention == "subsidy" else 0.0
        paid = (s * c.loss) * (bad & (grp == self.disadvantaged))
        good_b = np.bincount(bank, weights=good, minlength=nb)
        bad_b = np.bincount(bank, weights=bad, minlength=nb)
        paid_b = np.bincount(bank, weights=paid, minlength=nb)
        vol_b = np.bincount(bank, weights=approve, minlength=nb)
        self._profit = (c.gain * good_b - c.loss * bad_b + paid_b) / n
        self._paid = float(paid_b.sum()) / n
        comps = {
            b: {"profit": p, "loan_volume": v, "default_loss": d}
            for b, p, v, d in zip(
                self.banks, self._profit.tolist(), (vol_b / n).tolist(), (-c.loss * bad_b / n).tolist()
            )
        }
        comps[REGULATOR] = {"subsidy_cost": -self._paid}
        self._level[idx] = np.minimum(np.maximum(lvl + good.astype(np.int64) - bad, 0), self.num_levels - 1)
        return StepOutcome(comps, grp, approve, repay, [(self.banks, bank, approve, repay)])

    def _features(self, agent: str) -> list[float]:
        if agent == REGULATOR:
            return [self._paid / max(self.config.loss, 1e-12)]
        return [(self._profit[int(agent.rsplit("_", 1)[1])] * self.n_banks + 1.0) / 2.0]

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected profit share of each threshold from the observed histograms and intensity."""
        c, k = self.config, self.num_levels
        d = self.decode_obs(obs)
        hist = d["hist"] * self.group_shares[:, None]
        sub = np.zeros(self.num_groups)
        if self.intervention == "subsidy":
            sub[self.disadvantaged] = d["intensity"] * c.subsidy_max
        value = hist * (self._rho * c.gain - (1 - self._rho)[None, :] * c.loss * (1 - sub[:, None]))
        if self.intervention == "score_boost" and d["intensity"] > 0:
            g = self.disadvantaged
            shifted = np.minimum(np.arange(k) + c.score_boost_bins, k - 1)
            value[g] = np.bincount(shifted, weights=value[g], minlength=k)
        tail = np.concatenate(
            [np.cumsum(value[:, ::-1], axis=1)[:, ::-1], np.zeros((self.num_groups, 1))], axis=1
        )
        return tail if self.group_thresholds else tail.sum(0)


raw_env = LoanMAFE


def parallel_env(**kwargs: Any) -> LoanMAFE:
    """The Loan MAFE-style ``ParallelEnv`` (keyword arguments of :class:`LoanMAFE`)."""
    return LoanMAFE(**kwargs)


def env(**kwargs: Any) -> Any:
    """The AEC form, through ``pettingzoo.utils.parallel_to_aec``."""
    return parallel_to_aec(parallel_env(**kwargs))
