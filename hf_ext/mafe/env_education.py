"""Education MAFE-style environment (``education_mafe_v0``): school, university, employer and a regulator.

**[reconstructed]** MAFE-style education-to-employment dynamics designed for hf-ext, not the paper's
appendix; no numerical parity with MAFE is claimed. Levels are skills ``0..K-1``.

Per step, a cohort of ``n_per_step`` students is sampled without replacement and goes through the pipeline:

1. ``school_0`` (``Discrete(5)``) gives the share ``{0, .25, .5, .75, 1}`` of ``tutoring_slots * n`` tutoring
   places to the disadvantaged group (the rest to the others), lowest skill first; tutoring: +1 skill w.p.
   ``tutoring_gain``;
2. ``university_0`` admits students whose observed test score ``skill + test_bias[g] + N(0, test_noise)`` is
   ``>= tau`` (``tau in {0..K}``; per group with ``group_thresholds=True``), best scores first up to
   ``university_capacity * n``; admission: +1 skill w.p. ``admission_gain``;
3. ``employer_0`` hires graduates whose signal ``skill + hire_bias[g] + N(0, hire_noise)`` is ``>= tau``.

The cohort then leaves and is replaced by newcomers of the same group, with skill drawn around the group mean
``mu_g``, which feeds back on employment: ``mu_g <- mu_g + feedback * (emp_g - mean_g emp_g)``.

Reward components (per step, each divided by ``n_per_step``; skills in units of the skill range ``K - 1``;
an agent's reward is their sum, and each skill gain is counted once, by the agent that produced it):

- ``school_0``: ``skill_gain`` = skill its tutoring added, ``tutoring_cost`` = ``-tutoring_cost`` per place
  it pays for;
- ``university_0``: ``admit_quality`` = ``sum (skill - admit_reference)`` over admissions (the strength of its
  intake), ``skill_gain`` = skill its teaching added;
- ``employer_0``: ``productivity`` = ``sum skill`` over hires, ``wages`` = ``-wage`` per hire;
- ``regulator_0``: ``subsidy_cost`` = ``-subsidy_cost`` per subsidised tutoring place.

Interventions at intensity ``l``:
``"tutoring_subsidy"`` (``l * subsidy_slots_max * n`` extra places for the disadvantaged group, paid by the
regulator), ``"admission_quota"`` (minimum admission rate ``l * quota_max`` per group), ``"blind_hiring"``
(the hiring signal loses ``l`` of its group bias). Fairness: positive = hired, qualified = skill
``>= skill_bar`` at graduation; the school's own decision is tutoring, the university's admission.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces
from pettingzoo.utils import parallel_to_aec

from hf_ext._registry import paper
from hf_ext.mafe.config import EducationConfig
from hf_ext.mafe.core import (
    INTENSITIES,
    REGULATOR,
    Batch,
    Sample,
    StepOutcome,
    apply_quota,
    pick,
    select_by_capacity,
)
from hf_ext.mafe.env_base import MAFEParallelEnv
from hf_ext.mafe.vector import MAFEVectorEnv

__all__ = ["EducationMAFE", "env", "parallel_env", "raw_env", "vector_env"]

SCHOOL, UNIVERSITY, EMPLOYER = "school_0", "university_0", "employer_0"
_erf = np.vectorize(math.erf)


def _pass_prob(levels: np.ndarray, bias: np.ndarray, noise: float, num_thresholds: int) -> np.ndarray:
    """``P(level + bias_g + N(0, noise) >= tau)``, shape ``(G, K, num_thresholds)``."""
    z = (levels[None, :, None] + bias[:, None, None] - np.arange(num_thresholds)[None, None, :]) / noise
    return 0.5 * (1.0 + _erf(z / math.sqrt(2.0)))


class EducationMAFE(MAFEParallelEnv):
    """Education MAFE-style ``ParallelEnv`` (see the module docstring for the dynamics).

    Args:
        config: :class:`~hf_ext.mafe.config.EducationConfig` constants.
        **kwargs: ``groups``, ``group_shares``, ``population_size``, ``n_per_step``, ``max_cycles``,
            ``intervention`` (``None``, ``"tutoring_subsidy"``, ``"admission_quota"``, ``"blind_hiring"``),
            ``group_thresholds``, ``render_mode``, as in :class:`~hf_ext.mafe.env_base.MAFEParallelEnv`.

    Examples:
        >>> from hf_ext.mafe import education_mafe_v0
        >>> env = education_mafe_v0.parallel_env(intervention="blind_hiring", max_cycles=3)
        >>> obs, infos = env.reset(seed=0)
        >>> env.agents
        ['school_0', 'university_0', 'employer_0', 'regulator_0']
        >>> actions = {"school_0": 2, "university_0": 3, "employer_0": 3, "regulator_0": 4}
        >>> obs, rew, term, trunc, infos = env.step(actions)
        >>> sorted(infos["employer_0"]["reward_components"])
        ['productivity', 'wages']
    """

    metadata = {"name": "education_mafe_v0", "render_modes": ["ansi", "human"], "is_parallelizable": True}
    interventions = (None, "tutoring_subsidy", "admission_quota", "blind_hiring")
    config_cls = EducationConfig
    decision_name = "hiring"
    deciders = [UNIVERSITY, EMPLOYER]
    n_uniform = 3  # tutoring tie-break, tutoring success, admission success
    n_normal = 3  # test-score noise, hiring-signal noise, newcomer skill
    _paper = paper("mafe")

    def __init__(self, *, config: EducationConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        c, g = self.config, self.num_groups
        self._test_bias, self._hire_bias = c.test_biases(g), c.hire_biases(g)
        self._mu0 = c.level_probs(g) @ np.arange(self.num_levels)
        self._skill = np.arange(self.num_levels, dtype=np.float64)
        self._admit_pass = _pass_prob(self._skill, self._test_bias, c.test_noise, self.num_levels + 1)
        blind = INTENSITIES if self.intervention == "blind_hiring" else np.zeros(len(INTENSITIES))
        self._hire_pass = np.stack(
            [
                _pass_prob(self._skill, self._hire_bias * (1.0 - b), c.hire_noise, self.num_levels + 1)
                for b in blind
            ]
        )  # (intensity level, G, K, K + 1)

    def _agent_table(self) -> dict[str, tuple[spaces.Space, int]]:
        thr = self.threshold_space(self.num_levels + 1)
        return {
            SCHOOL: (spaces.Discrete(5), 1),
            UNIVERSITY: (thr, 2),
            EMPLOYER: (thr, 2),
            REGULATOR: (spaces.Discrete(5), 1 + self.num_groups),
        }

    def _reset_batch(self, batch: Batch) -> None:
        batch.extra["mu"] = np.repeat(self._mu0[None], len(batch.rngs), 0)
        batch.feats[:] = 0.0  # nothing tutored, admitted, hired or spent yet
        batch.feats[:, [2, 4]] = 0.5  # zero rewards of university and employer
        batch.feats[:, 6:] = self._mu0 / (self.num_levels - 1)

    def _simulate(
        self, batch: Batch, s: Sample, acts: dict[str, np.ndarray], u: np.ndarray, z: np.ndarray
    ) -> StepOutcome:
        c, g, k = self.config, self.num_groups, self.num_levels
        b, n = s.idx.shape
        rows, grp, lvl, dis = s.rows, s.groups, s.levels, s.disadvantaged
        li = batch.intensity
        slots = int(round(c.tutoring_slots * n))
        dis_slots = np.rint(INTENSITIES[acts[SCHOOL]] * slots).astype(np.int64)
        extra = np.zeros(b, dtype=np.int64)
        if self.intervention == "tutoring_subsidy":
            extra = np.rint(li * c.subsidy_slots_max * n).astype(np.int64)
        cap = np.stack([slots - dis_slots, dis_slots + extra], 1)
        tutored = select_by_capacity(np.ones((b, n), dtype=bool), dis.astype(np.int64), -lvl + u[0], cap)
        extra_used = np.maximum((tutored & dis).sum(1) - dis_slots, 0)
        lvl1 = np.minimum(lvl + (tutored & (u[1] < c.tutoring_gain)), k - 1)
        score = lvl1 + self._test_bias[grp] + c.test_noise * z[0]
        admit = score >= self._threshold(acts[UNIVERSITY], grp)
        ucap = int(round(c.university_capacity * n))
        admit = select_by_capacity(admit, np.zeros((b, n), dtype=np.int64), score, np.full((b, 1), ucap))
        if self.intervention == "admission_quota":
            admit = apply_quota(admit, grp, score, li * c.quota_max, g)
        lvl2 = np.minimum(lvl1 + (admit & (u[2] < c.admission_gain)), k - 1)
        bias = self._hire_bias[grp]
        if self.intervention == "blind_hiring":
            bias = bias * (1.0 - li[:, None])
        hire = lvl2 + bias + c.hire_noise * z[1] >= self._threshold(acts[EMPLOYER], grp)
        qualified = lvl2 >= c.skill_bar
        scale = 1.0 / ((k - 1) * n)
        n_adm, n_hire = admit.sum(1), hire.sum(1)
        tutoring_gain = (lvl1 - lvl).sum(1) * scale
        quality = ((lvl1 - c.admit_reference) * admit).sum(1) * scale
        productivity = (lvl2 * hire).sum(1) * scale
        wages = -c.wage * n_hire / n
        spent = c.subsidy_cost * extra_used / n
        comps = {
            SCHOOL: {
                "skill_gain": tutoring_gain,
                "tutoring_cost": -c.tutoring_cost * (tutored.sum(1) - extra_used) / n,
            },
            UNIVERSITY: {"admit_quality": quality, "skill_gain": (lvl2 - lvl1).sum(1) * scale},
            EMPLOYER: {"productivity": productivity, "wages": wages},
            REGULATOR: {"subsidy_cost": -spent},
        }
        key = (rows * g + grp).ravel()
        members = np.bincount(key, minlength=b * g).reshape(b, g)
        emp = np.bincount(key, hire.ravel(), minlength=b * g).reshape(b, g) / np.maximum(members, 1)
        present = members > 0
        emp_mean = (emp * present).sum(1, keepdims=True) / np.maximum(present.sum(1, keepdims=True), 1)
        mu = batch.extra["mu"]
        mu[:] = np.where(present, np.clip(mu + c.feedback * (emp - emp_mean), 0.0, k - 1), mu)
        newcomers = np.rint(pick(mu, grp) + c.init_std * z[2]).astype(np.int64)
        batch.level[rows, s.idx] = np.clip(newcomers, 0, k - 1)
        batch.feats[:] = np.column_stack(
            [
                tutoring_gain,
                n_adm / max(ucap, 1),
                (quality + 1.0) / 2.0,
                n_hire / n,
                (productivity + wages + 1.0) / 2.0,
                spent,
                mu / (k - 1),
            ]
        )
        own = [([SCHOOL], None, tutored, qualified), ([UNIVERSITY], None, admit, qualified)]
        return StepOutcome(comps, grp, hire, qualified, own)

    def _threshold(self, action: np.ndarray, grp: np.ndarray) -> np.ndarray:
        """``(B, n)`` threshold of each sampled student: ``(B,)`` actions or per-group ``(B, G)`` ones."""
        return pick(action, grp) if action.ndim == 2 else action[:, None]

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected one-step value per action from the observed histograms (no capacity, exact tutoring)."""
        c, k = self.config, self.num_levels
        d = self.decode_obs(obs)
        hist = d["hist"] * self.group_shares[:, None]  # (..., G, K)
        if agent == SCHOOL:
            room = 1.0 - d["hist"][..., -1]  # share of each group that tutoring can still raise
            others = np.delete(room, self.disadvantaged, axis=-1).mean(-1)
            gain = INTENSITIES * room[..., self.disadvantaged, None] + (1 - INTENSITIES) * others[..., None]
            return c.tutoring_slots * c.tutoring_gain * gain / (k - 1)
        if agent == UNIVERSITY:
            worth = (self._skill - c.admit_reference) / (k - 1)
            value = hist[..., None] * self._admit_pass * worth[:, None]
        else:
            level = np.rint(d["intensity"] * (len(INTENSITIES) - 1)).astype(np.int64)
            value = hist[..., None] * self._hire_pass[level] * (self._skill / (k - 1) - c.wage)[:, None]
        per_group = value.sum(-2)  # (..., G, K + 1)
        return per_group if self.group_thresholds else per_group.sum(-2)


raw_env = EducationMAFE


def parallel_env(**kwargs: Any) -> EducationMAFE:
    """The Education MAFE-style ``ParallelEnv`` (keyword arguments of :class:`EducationMAFE`)."""
    return EducationMAFE(**kwargs)


def env(**kwargs: Any) -> Any:
    """The AEC form, through ``pettingzoo.utils.parallel_to_aec``."""
    return parallel_to_aec(parallel_env(**kwargs))


def vector_env(num_envs: int = 16, **kwargs: Any) -> MAFEVectorEnv:
    """``num_envs`` lock-step copies of :class:`EducationMAFE` (keyword arguments as for ``parallel_env``)."""
    return MAFEVectorEnv(EducationMAFE(**kwargs), num_envs)
