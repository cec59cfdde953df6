"""Healthcare MAFE-style environment (``healthcare_mafe_v0``): an insurer, hospitals and a regulator.

**[reconstructed]** MAFE-style dynamics designed for hf-ext, not the paper's appendix; no numerical parity
with MAFE is claimed. Levels are severities ``0..K-1`` (0 = healthy; a *lower* level is better).

Per step, ``n_per_step`` individuals are sampled without replacement:

1. the insurer's premium level ``p`` (``Discrete(premium_levels)``) sets each individual's enrolment
   probability ``clip(enrol_base - sensitivity_g * p, 0, 1)`` (price sensitivity differs by group);
2. a sick individual seeks care with probability ``seek_insured`` (insured) or ``seek_uninsured[g]``, at a
   uniformly random hospital;
3. a hospital's action ``tau in {0..K}`` treats care-seekers with severity ``>= tau`` (per group with
   ``group_thresholds=True``), most severe first, up to ``capacity``;
4. treated: -1 level w.p. ``p_cure``; untreated sick: +1 w.p. ``p_worsen``, -1 w.p. ``p_recover``; healthy: +1
   w.p. ``p_sick``.

Reward components (per step, divided by ``n_per_step``): ``insurer_0``: ``premiums``, ``claims`` (-bills of
treated insured); ``hospital_<i>``: ``revenue`` (bill if insured, ``self_pay`` share if not),
``treatment_cost``; ``regulator_0``: ``subsidy_cost``, ``welfare`` (mean severity decrease).
Interventions at the regulator's intensity ``l``: ``"premium_subsidy"`` (the disadvantaged group pays
``(1 - l * premium_subsidy_max)`` of the premium, the regulator the rest), ``"capacity_reservation"``
(``l * reserve_max`` of each hospital's capacity is kept for the disadvantaged group), ``"outreach"``
(uninsured disadvantaged care-seeking ``+ l * outreach_boost`` at ``outreach_cost`` per member sampled).
Fairness: positive = treated (care access), qualified = severity ``>= need_level``; the insurer's own
decision is coverage, a hospital's own decisions are its own patients' treatment.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils import parallel_to_aec

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.marl.mafe.config import HealthcareConfig
from hf_ext.marl.mafe.core import REGULATOR, StepOutcome, select_by_capacity
from hf_ext.marl.mafe.env_base import MAFEParallelEnv

__all__ = ["HealthcareMAFE", "env", "parallel_env", "raw_env"]

INSURER = "insurer_0"


class HealthcareMAFE(MAFEParallelEnv):
    """Healthcare MAFE-style ``ParallelEnv`` (see the module docstring for the dynamics).

    Args:
        n_hospitals: Number of hospital agents ``hospital_0..`` (>= 1).
        config: :class:`~hf_ext.marl.mafe.config.HealthcareConfig` constants.
        **kwargs: ``groups``, ``group_shares``, ``population_size``, ``n_per_step``, ``max_cycles``,
            ``intervention`` (``None``, ``"premium_subsidy"``, ``"capacity_reservation"``, ``"outreach"``),
            ``group_thresholds``, ``render_mode``, as in :class:`~hf_ext.marl.mafe.core.MAFEParallelEnv`.

    Examples:
        >>> from hf_ext.marl import healthcare_mafe_v0
        >>> env = healthcare_mafe_v0.parallel_env(intervention="outreach", max_cycles=3)
        >>> obs, infos = env.reset(seed=0)
        >>> env.agents
        ['insurer_0', 'hospital_0', 'regulator_0']
        >>> obs, rew, term, trunc, infos = env.step({"insurer_0": 2, "hospital_0": 1, "regulator_0": 4})
        >>> sorted(infos["insurer_0"]["reward_components"])
        ['claims', 'premiums']
    """

    metadata = {"name": "healthcare_mafe_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}
    interventions = (None, "premium_subsidy", "capacity_reservation", "outreach")
    config_cls = HealthcareConfig
    decision_name = "care access"
    _paper = paper("mafe")

    def __init__(
        self, n_hospitals: int = 1, *, config: HealthcareConfig | None = None, **kwargs: Any
    ) -> None:
        n_hospitals = check_int("n_hospitals", n_hospitals, low=1)
        self.n_hospitals = int(n_hospitals)
        self.hospitals = [f"hospital_{i}" for i in range(self.n_hospitals)]
        super().__init__(config=config, **kwargs)
        c, g, k = self.config, self.num_groups, self.num_levels
        self._premiums = np.linspace(0.0, c.premium_max, c.premium_levels)
        self._sens = c.sensitivity(g)
        self._seek_un = c.seek_uninsured_rates(g)
        self._bill = c.bill_base + c.bill_per_level * np.arange(k)
        self._cost = c.cost_base + c.cost_per_level * np.arange(k)

    def _agent_table(self) -> dict[str, tuple[spaces.Space, int]]:
        g = self.num_groups
        table = {INSURER: (spaces.Discrete(self.config.premium_levels), g + 1)}
        table.update({h: (self.threshold_space(self.num_levels + 1), g + 1) for h in self.hospitals})
        table[REGULATOR] = (spaces.Discrete(5), 1)
        return table

    def _reset_dynamics(self) -> None:
        self._coverage = np.zeros(self.num_groups)
        self._insurer_profit = 0.0
        self._margin = np.zeros(self.n_hospitals)
        self._spent = 0.0

    def _simulate(self, idx: np.ndarray, actions: dict[str, Any]) -> StepOutcome:
        c, rng, n, nh, g = self.config, self._np_random, len(idx), self.n_hospitals, self.num_groups
        grp, lvl = self._group[idx], self._level[idx]
        u = rng.random((5, n))
        dis = grp == self.disadvantaged
        lvl_i = self._intensity
        premium = self._premiums[actions[INSURER]]
        paid_share = np.ones(n)
        if self.intervention == "premium_subsidy":
            paid_share[dis] = 1.0 - lvl_i * c.premium_subsidy_max
        insured = u[0] < np.clip(c.enrol_base - self._sens[grp] * premium * paid_share, 0.0, 1.0)
        seek_p = np.where(insured, c.seek_insured, self._seek_un[grp])
        if self.intervention == "outreach":
            seek_p = seek_p + (lvl_i * c.outreach_boost) * (dis & ~insured)
        sick = lvl >= 1
        seek = sick & (u[1] < seek_p)
        hosp = (u[2] * nh).astype(np.int64)
        taus = np.array([actions[h] for h in self.hospitals])
        tau = taus[hosp, grp] if taus.ndim == 2 else taus[hosp]
        eligible = seek & (lvl >= tau)
        priority = lvl + 0.5 * u[3]
        cap = np.full(nh, c.capacity)
        treated = np.zeros(n, dtype=bool)
        if self.intervention == "capacity_reservation" and lvl_i > 0:
            reserved = np.full(nh, int(lvl_i * c.reserve_max * c.capacity))
            treated = select_by_capacity(eligible & dis, hosp, priority, reserved)
            cap = cap - np.bincount(hosp[treated], minlength=nh)
        treated |= select_by_capacity(eligible & ~treated, hosp, priority, cap)
        bill = self._bill[lvl]
        income = np.where(insured, bill, c.self_pay * bill) * treated
        cost = self._cost[lvl] * treated
        rev_h = np.bincount(hosp, weights=income, minlength=nh) / n
        cost_h = np.bincount(hosp, weights=cost, minlength=nh) / n
        premiums = float(premium * insured.sum()) / n
        claims = -float((bill * (treated & insured)).sum()) / n
        spent = float(premium * ((1.0 - paid_share) * insured).sum())
        if self.intervention == "outreach":
            spent += lvl_i * c.outreach_cost * float(dis.sum())
        self._spent = spent / n
        self._coverage = np.bincount(grp, weights=insured, minlength=g) / np.maximum(
            np.bincount(grp, minlength=g), 1
        )
        self._insurer_profit = premiums + claims
        self._margin = rev_h - cost_h
        comps = {INSURER: {"premiums": premiums, "claims": claims}, REGULATOR: {"subsidy_cost": -self._spent}}
        for h, r, k in zip(self.hospitals, rev_h.tolist(), (-cost_h).tolist()):
            comps[h] = {"revenue": r, "treatment_cost": k}
        delta = np.where(
            treated,
            -(u[4] < c.p_cure).astype(np.int64),
            np.where(sick, (u[4] < c.p_worsen).astype(np.int64) - (u[4] >= 1 - c.p_recover), u[4] < c.p_sick),
        )
        self._level[idx] = np.minimum(np.maximum(lvl + delta, 0), self.num_levels - 1)
        need = lvl >= c.need_level
        own = [([INSURER], None, insured, need), (self.hospitals, np.where(seek, hosp, -1), treated, need)]
        return StepOutcome(comps, grp, treated, need, own)

    def _features(self, agent: str) -> list[float]:
        if agent == REGULATOR:
            return [self._spent]
        cov = self._coverage.tolist()
        if agent == INSURER:
            return [*cov, (self._insurer_profit + 1.0) / 2.0]
        return [*cov, (self._margin[int(agent.rsplit("_", 1)[1])] * self.n_hospitals + 1.0) / 2.0]

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected one-step value per action from the observed histograms and coverage (capacity ignored)."""
        c, g, k = self.config, self.num_groups, self.num_levels
        d = self.decode_obs(obs)
        hist = d["hist"] * self.group_shares[:, None]
        sick = (np.arange(k) >= 1).astype(float)
        if agent == INSURER:
            share = np.ones(g)
            if self.intervention == "premium_subsidy":
                share[self.disadvantaged] = 1.0 - d["intensity"] * c.premium_subsidy_max
            claim = (hist * sick * c.seek_insured * self._bill).sum(1)  # per member of g, times share_g
            enrol = np.clip(
                c.enrol_base - self._sens[None, :] * self._premiums[:, None] * share[None, :], 0, 1
            )
            return (enrol * (self._premiums[:, None] * self.group_shares[None, :] - claim[None, :])).sum(1)
        cov = d["own"][:g][:, None]
        value = (
            hist
            * sick
            * (
                cov * c.seek_insured * (self._bill - self._cost)
                + (1 - cov) * self._seek_un[:, None] * (c.self_pay * self._bill - self._cost)
            )
        )
        tail = np.concatenate([np.cumsum(value[:, ::-1], axis=1)[:, ::-1], np.zeros((g, 1))], axis=1)
        return tail if self.group_thresholds else tail.sum(0)


raw_env = HealthcareMAFE


def parallel_env(**kwargs: Any) -> HealthcareMAFE:
    """The Healthcare MAFE-style ``ParallelEnv`` (keyword arguments of :class:`HealthcareMAFE`)."""
    return HealthcareMAFE(**kwargs)


def env(**kwargs: Any) -> Any:
    """The AEC form, through ``pettingzoo.utils.parallel_to_aec``."""
    return parallel_to_aec(parallel_env(**kwargs))
