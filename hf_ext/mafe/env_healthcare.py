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

Reward components (per step, each divided by ``n_per_step``; an agent's reward is their sum):

- ``insurer_0``: ``premiums`` = premiums collected from the enrolled, ``claims`` = ``-`` the bills of its
  treated members;
- ``hospital_<i>``: ``revenue`` = the bills it is paid (by the insurer, or the ``self_pay`` share by an
  uninsured patient), ``treatment_cost`` = ``-`` the cost of the treatments it gives;
- ``regulator_0``: ``subsidy_cost`` = ``-`` premium subsidies and outreach paid, ``welfare`` = mean severity
  decrease of the sampled individuals (the health outcome; on money alone a cooperative insurer and
  hospital team would deny all care).

Interventions at the regulator's intensity ``l``: ``"premium_subsidy"`` (the disadvantaged group pays
``(1 - l * premium_subsidy_max)`` of the premium, the regulator the rest), ``"capacity_reservation"``
(``floor(l * reserve_max * capacity)`` places of each hospital go first to the disadvantaged group's care
seekers, most severe first, whatever the hospital's threshold), ``"outreach"`` (uninsured disadvantaged
care-seeking ``+ l * outreach_boost`` at ``outreach_cost`` per member sampled).
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
from hf_ext.mafe.config import HealthcareConfig
from hf_ext.mafe.core import REGULATOR, Batch, Sample, StepOutcome, pick, select_by_capacity
from hf_ext.mafe.env_base import MAFEParallelEnv
from hf_ext.mafe.vector import MAFEVectorEnv

__all__ = ["HealthcareMAFE", "env", "parallel_env", "raw_env", "vector_env"]

INSURER = "insurer_0"


class HealthcareMAFE(MAFEParallelEnv):
    """Healthcare MAFE-style ``ParallelEnv`` (see the module docstring for the dynamics).

    Args:
        n_hospitals: Number of hospital agents ``hospital_0..`` (>= 1).
        config: :class:`~hf_ext.mafe.config.HealthcareConfig` constants.
        **kwargs: ``groups``, ``group_shares``, ``population_size``, ``n_per_step``, ``max_cycles``,
            ``intervention`` (``None``, ``"premium_subsidy"``, ``"capacity_reservation"``, ``"outreach"``),
            ``group_thresholds``, ``render_mode``, as in :class:`~hf_ext.mafe.env_base.MAFEParallelEnv`.

    Examples:
        >>> from hf_ext.mafe import healthcare_mafe_v0
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
    n_uniform = 5  # enrolment, care seeking, which hospital, triage tie-break, health change
    _paper = paper("mafe")

    def __init__(
        self, n_hospitals: int = 1, *, config: HealthcareConfig | None = None, **kwargs: Any
    ) -> None:
        self.n_hospitals = check_int("n_hospitals", n_hospitals, low=1)
        self.hospitals = [f"hospital_{i}" for i in range(self.n_hospitals)]
        self.deciders = self.hospitals
        super().__init__(config=config, **kwargs)
        c, g, k = self.config, self.num_groups, self.num_levels
        self._premiums = np.linspace(0.0, c.premium_max, c.premium_levels)
        self._sens = c.sensitivity(g)
        self._seek_un = c.seek_uninsured_rates(g)
        self._bill = c.bill_base + c.bill_per_level * np.arange(k)
        self._cost = c.cost_base + c.cost_per_level * np.arange(k)

    def _agent_table(self) -> dict[str, tuple[spaces.Space, int]]:
        g = self.num_groups
        table: dict[str, tuple[spaces.Space, int]] = {
            INSURER: (spaces.Discrete(self.config.premium_levels), g + 1)
        }
        table.update({h: (self.threshold_space(self.num_levels + 1), g + 1) for h in self.hospitals})
        table[REGULATOR] = (spaces.Discrete(5), 1)
        return table

    def _reset_batch(self, batch: Batch) -> None:
        g, nh = self.num_groups, self.n_hospitals
        batch.feats[:] = 0.0  # no coverage seen yet, nothing spent
        batch.feats[:, g] = 0.5  # the insurer's zero profit
        batch.feats[:, 2 * g + 1 : (g + 1) * (nh + 1) : g + 1] = 0.5  # each hospital's zero margin

    def _simulate(
        self, batch: Batch, s: Sample, acts: dict[str, np.ndarray], u: np.ndarray, z: np.ndarray
    ) -> StepOutcome:
        c, nh, g, k = self.config, self.n_hospitals, self.num_groups, self.num_levels
        b, n = s.idx.shape
        rows, grp, lvl, dis = s.rows, s.groups, s.levels, s.disadvantaged
        li = batch.intensity[:, None]
        premium = self._premiums[acts[INSURER]][:, None]
        paid_share = np.ones((b, n))
        if self.intervention == "premium_subsidy":
            paid_share = np.where(dis, 1.0 - li * c.premium_subsidy_max, 1.0)
        insured = u[0] < np.clip(c.enrol_base - self._sens[grp] * premium * paid_share, 0.0, 1.0)
        seek_p = np.where(insured, c.seek_insured, self._seek_un[grp])
        if self.intervention == "outreach":
            seek_p = seek_p + (li * c.outreach_boost) * (dis & ~insured)
        sick = lvl >= 1
        seek = sick & (u[1] < seek_p)
        hosp = (u[2] * nh).astype(np.int64)
        taus = np.stack([acts[h] for h in self.hospitals], 1)
        eligible = seek & (lvl >= (pick(taus, hosp, grp) if taus.ndim == 3 else pick(taus, hosp)))
        priority = lvl + 0.5 * u[3]
        cap = np.full((b, nh), c.capacity)
        treated = np.zeros((b, n), dtype=bool)
        if self.intervention == "capacity_reservation":
            reserved = np.floor(li * c.reserve_max * c.capacity).astype(np.int64) + np.zeros_like(cap)
            treated = select_by_capacity(seek & dis, hosp, priority, reserved)
            cap = cap - self._per_hospital(hosp, treated, b).astype(np.int64)
        treated |= select_by_capacity(eligible & ~treated, hosp, priority, cap)
        bill = self._bill[lvl]
        revenue = self._per_hospital(hosp, np.where(insured, bill, c.self_pay * bill) * treated, b) / n
        cost = self._per_hospital(hosp, self._cost[lvl] * treated, b) / n
        premiums = premium[:, 0] * insured.sum(1) / n
        claims = -(bill * (treated & insured)).sum(1) / n
        spent = (premium * (1.0 - paid_share) * insured).sum(1)
        if self.intervention == "outreach":
            spent = spent + batch.intensity * c.outreach_cost * dis.sum(1)
        spent = spent / n
        delta = np.where(
            treated,
            -(u[4] < c.p_cure).astype(np.int64),
            np.where(sick, (u[4] < c.p_worsen).astype(np.int64) - (u[4] >= 1 - c.p_recover), u[4] < c.p_sick),
        )
        new = np.minimum(np.maximum(lvl + delta, 0), k - 1)
        batch.level[rows, s.idx] = new
        comps = {
            INSURER: {"premiums": premiums, "claims": claims},
            REGULATOR: {"subsidy_cost": -spent, "welfare": self.level_change(lvl, new)},
        }
        for i, h in enumerate(self.hospitals):
            comps[h] = {"revenue": revenue[:, i], "treatment_cost": -cost[:, i]}
        key = (rows * g + grp).ravel()
        members = np.bincount(key, minlength=b * g).reshape(b, g)
        coverage = np.bincount(key, insured.ravel(), minlength=b * g).reshape(b, g) / np.maximum(members, 1)
        margin = (revenue - cost) * nh
        hospital_feats = np.concatenate(
            [np.repeat(coverage[:, None], nh, 1), (margin[:, :, None] + 1.0) / 2.0], 2
        ).reshape(b, -1)
        insurer_feats = np.concatenate([coverage, (premiums + claims + 1.0)[:, None] / 2.0], 1)
        batch.feats[:] = np.concatenate([insurer_feats, hospital_feats, spent[:, None]], 1)
        need = lvl >= c.need_level
        own = [([INSURER], None, insured, need), (self.hospitals, np.where(seek, hosp, -1), treated, need)]
        return StepOutcome(comps, grp, treated, need, own)

    def _per_hospital(self, hosp: np.ndarray, weights: np.ndarray, b: int) -> np.ndarray:
        """``(B, n_hospitals)`` sums of ``weights`` ``(B, n)`` per copy and hospital."""
        nh = self.n_hospitals
        key = (np.arange(b)[:, None] * nh + hosp).ravel()
        return np.bincount(key, weights.ravel(), minlength=b * nh).reshape(b, nh)

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected one-step value per action from the observed histograms and coverage (capacity ignored)."""
        c, g, k = self.config, self.num_groups, self.num_levels
        d = self.decode_obs(obs)
        hist = d["hist"] * self.group_shares[:, None]  # (..., G, K)
        sick = (np.arange(k) >= 1).astype(float)
        if agent == INSURER:
            share = np.ones(hist.shape[:-1])
            if self.intervention == "premium_subsidy":
                share[..., self.disadvantaged] = 1.0 - d["intensity"] * c.premium_subsidy_max
            claim = (hist * sick * c.seek_insured * self._bill).sum(-1)  # (..., G)
            price = self._premiums[:, None] * share[..., None, :]  # (..., P, G)
            enrol = np.clip(c.enrol_base - self._sens * price, 0, 1)
            return (enrol * (self._premiums[:, None] * self.group_shares - claim[..., None, :])).sum(-1)
        cov = d["own"][..., :g, None]
        value = (
            hist
            * sick
            * (
                cov * c.seek_insured * (self._bill - self._cost)
                + (1 - cov) * self._seek_un[:, None] * (c.self_pay * self._bill - self._cost)
            )
        )
        return self.tail_values(value)


raw_env = HealthcareMAFE


def parallel_env(**kwargs: Any) -> HealthcareMAFE:
    """The Healthcare MAFE-style ``ParallelEnv`` (keyword arguments of :class:`HealthcareMAFE`)."""
    return HealthcareMAFE(**kwargs)


def env(**kwargs: Any) -> Any:
    """The AEC form, through ``pettingzoo.utils.parallel_to_aec``."""
    return parallel_to_aec(parallel_env(**kwargs))


def vector_env(num_envs: int = 16, **kwargs: Any) -> MAFEVectorEnv:
    """``num_envs`` lock-step copies of :class:`HealthcareMAFE` (keyword arguments of ``parallel_env``)."""
    return MAFEVectorEnv(HealthcareMAFE(**kwargs), num_envs)
