"""Loan MAFE-style environment (``loan_mafe_v0``): banks, a regulator and a two-or-more-group applicant pool.

**[reconstructed]** MAFE-style dynamics after the delayed-impact lending model of Liu et al. (2018) and
D'Amour et al. (2020), not the paper's appendix equations; no numerical parity with MAFE is claimed.

Per step, ``n_per_step`` individuals are sampled without replacement; each applies to a uniformly random bank.
Credit levels are ``K`` bins with repayment probability ``rho_k`` linear from ``repay_low`` to ``repay_high``.
A bank action ``tau in {0..K}`` approves applicants whose observed bin is ``>= tau`` (``tau = K``: nobody);
``group_thresholds=True`` makes it one threshold per group. Approved and repaid: level +1; approved and
defaulted: level -1 (clipped); not approved: unchanged.

Agents and reward components (per step, each divided by ``n_per_step``; an agent's reward is their sum):

- ``bank_<i>``: ``interest`` = ``u+`` per repaid loan (what a good loan earns), ``default_loss`` = ``-u-``
  per defaulted loan (the principal lost), ``subsidy`` = what the regulator reimburses on its defaults. The
  sum is the bank's profit; each loan outcome is counted once.
- ``regulator_0``: ``subsidy_cost`` = ``-`` the reimbursements paid, ``welfare`` = mean credit-bin change of
  the sampled applicants (the delayed impact of lending: +1 per repaid loan, -1 per default).

With the default ``u- = 2 u+`` a loan pays off only when ``rho_k >= 2/3``: approving everyone loses money
(and lowers the credit of those who default), approving no one earns nothing.

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
from hf_ext.mafe.config import LoanConfig
from hf_ext.mafe.core import REGULATOR, Batch, Sample, StepOutcome, apply_quota, pick
from hf_ext.mafe.env_base import MAFEParallelEnv
from hf_ext.mafe.vector import MAFEVectorEnv

__all__ = ["LoanMAFE", "env", "parallel_env", "raw_env", "vector_env"]


class LoanMAFE(MAFEParallelEnv):
    """Loan MAFE-style ``ParallelEnv`` (see the module docstring for the dynamics and reward terms).

    Args:
        n_banks: Number of bank agents ``bank_0..bank_{n_banks-1}`` (>= 1).
        config: :class:`~hf_ext.mafe.config.LoanConfig` constants.
        **kwargs: The options of :class:`~hf_ext.mafe.env_base.MAFEParallelEnv`: ``groups``,
            ``group_shares``, ``population_size``, ``n_per_step``, ``max_cycles``, ``intervention``
            (``None``, ``"subsidy"``, ``"quota"``, ``"score_boost"``), ``group_thresholds``, ``render_mode``.

    Examples:
        >>> from hf_ext.mafe import loan_mafe_v0
        >>> env = loan_mafe_v0.parallel_env(intervention="subsidy", max_cycles=5)
        >>> obs, infos = env.reset(seed=0)
        >>> env.agents
        ['bank_0', 'bank_1', 'regulator_0']
        >>> obs, rew, term, trunc, infos = env.step({"bank_0": 3, "bank_1": 3, "regulator_0": 2})
        >>> sorted(infos["bank_0"]["reward_components"])
        ['default_loss', 'interest', 'subsidy']
        >>> rew["bank_0"] == sum(infos["bank_0"]["reward_components"].values())
        True
        >>> 0.0 <= infos["bank_0"]["fairness_components"]["dp_gap"] <= 1.0
        True
    """

    metadata = {"name": "loan_mafe_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}
    interventions = (None, "subsidy", "quota", "score_boost")
    config_cls = LoanConfig
    decision_name = "approval"
    n_uniform = 2  # which bank, repayment
    _paper = paper("mafe")

    def __init__(self, n_banks: int = 2, *, config: LoanConfig | None = None, **kwargs: Any) -> None:
        self.n_banks = check_int("n_banks", n_banks, low=1)
        self.banks = [f"bank_{i}" for i in range(self.n_banks)]
        self.deciders = self.banks
        super().__init__(config=config, **kwargs)
        c, k = self.config, self.num_levels
        self._rho = np.linspace(c.repay_low, c.repay_high, k)
        # observed-bin shift of "score_boost" as a (K, K) matrix acting on per-bin values
        self._boost = np.eye(k)[np.minimum(np.arange(k) + c.score_boost_bins, k - 1)]

    def _agent_table(self) -> dict[str, tuple[spaces.Space, int]]:
        table: dict[str, tuple[spaces.Space, int]] = {
            b: (self.threshold_space(self.num_levels + 1), 1) for b in self.banks
        }
        table[REGULATOR] = (spaces.Discrete(5), 1)
        return table

    def _reset_batch(self, batch: Batch) -> None:
        batch.feats[:, : self.n_banks] = 0.5  # zero profit
        batch.feats[:, self.n_banks] = 0.0  # nothing paid

    def _simulate(
        self, batch: Batch, s: Sample, acts: dict[str, np.ndarray], u: np.ndarray, z: np.ndarray
    ) -> StepOutcome:
        c, nb, k = self.config, self.n_banks, self.num_levels
        b, n = s.idx.shape
        rows, grp, lvl, dis = s.rows, s.groups, s.levels, s.disadvantaged
        li = batch.intensity[:, None]
        bank = (u[0] * nb).astype(np.int64)
        score = lvl
        if self.intervention == "score_boost":
            score = np.where(dis & (li > 0), np.minimum(lvl + c.score_boost_bins, k - 1), lvl)
        taus = np.stack([acts[a] for a in self.banks], 1)  # (B, nb) or (B, nb, G)
        approve = score >= (pick(taus, bank, grp) if taus.ndim == 3 else pick(taus, bank))
        if self.intervention == "quota":
            approve = apply_quota(approve, grp, score, batch.intensity * c.quota_max, self.num_groups)
        repay = u[1] < self._rho[lvl]
        good = approve & repay
        bad = approve ^ good
        # per bank: counts of repaid loans, defaults outside and inside the disadvantaged group
        outcome = good + 2 * bad + (bad & dis)  # 0 rejected, 1 repaid, 2 default, 3 default in dis
        key = ((rows * nb + bank) * 4 + outcome).ravel()
        counts = np.bincount(key, minlength=b * nb * 4).reshape(b, nb, 4) / n
        share = batch.intensity * c.subsidy_max if self.intervention == "subsidy" else np.zeros(b)
        interest = c.gain * counts[..., 1]
        default_loss = -c.loss * (counts[..., 2] + counts[..., 3])
        subsidy = (share * c.loss)[:, None] * counts[..., 3]
        new = np.minimum(np.maximum(lvl + good.astype(np.int64) - bad, 0), k - 1)
        batch.level[rows, s.idx] = new
        paid = subsidy.sum(1)
        comps = {
            a: {"interest": interest[:, i], "default_loss": default_loss[:, i], "subsidy": subsidy[:, i]}
            for i, a in enumerate(self.banks)
        }
        comps[REGULATOR] = {"subsidy_cost": -paid, "welfare": self.level_change(lvl, new)}
        profit = interest + default_loss + subsidy
        batch.feats[:, :nb] = (profit * nb + 1.0) / 2.0
        batch.feats[:, nb] = paid / max(c.loss, 1e-12)
        return StepOutcome(comps, grp, approve, repay, [(self.banks, bank, approve, repay)])

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected profit share of each threshold from the observed histograms and intensity."""
        c = self.config
        d = self.decode_obs(obs)
        hist = d["hist"] * self.group_shares[:, None]  # (..., G, K) population shares
        sub = np.zeros(hist.shape[:-1])
        if self.intervention == "subsidy":
            sub[..., self.disadvantaged] = d["intensity"] * c.subsidy_max
        value = hist * (self._rho * c.gain - (1 - self._rho) * c.loss * (1 - sub[..., None]))
        if self.intervention == "score_boost":
            g = self.disadvantaged
            boosted = value[..., g, :] @ self._boost
            value[..., g, :] = np.where(d["intensity"][..., None] > 0, boosted, value[..., g, :])
        return self.tail_values(value)


raw_env = LoanMAFE


def parallel_env(**kwargs: Any) -> LoanMAFE:
    """The Loan MAFE-style ``ParallelEnv`` (keyword arguments of :class:`LoanMAFE`)."""
    return LoanMAFE(**kwargs)


def env(**kwargs: Any) -> Any:
    """The AEC form, through ``pettingzoo.utils.parallel_to_aec``."""
    return parallel_to_aec(parallel_env(**kwargs))


def vector_env(num_envs: int = 16, **kwargs: Any) -> MAFEVectorEnv:
    """``num_envs`` lock-step copies of :class:`LoanMAFE` (keyword arguments as for ``parallel_env``)."""
    return MAFEVectorEnv(LoanMAFE(**kwargs), num_envs)
