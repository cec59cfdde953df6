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

Reward components (per step, divided by ``n_per_step``): ``school_0``: ``skill_gain``, ``tutoring_cost``;
``university_0``: ``admit_quality`` = ``sum (skill - admit_reference) / (K - 1)`` over admissions;
``employer_0``: ``productivity`` = ``sum skill / (K - 1)`` over hires, ``wages``; ``regulator_0``:
``subsidy_cost``, ``welfare`` (mean skill gain through the pipeline). Interventions at intensity ``l``:
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
from hf_ext.marl.mafe.config import EducationConfig
from hf_ext.marl.mafe.core import INTENSITIES, REGULATOR, StepOutcome, apply_quota, select_by_capacity
from hf_ext.marl.mafe.env_base import MAFEParallelEnv

__all__ = ["EducationMAFE", "env", "parallel_env", "raw_env"]

SCHOOL, UNIVERSITY, EMPLOYER = "school_0", "university_0", "employer_0"
_erf = np.vectorize(math.erf)


def _pass_prob(levels: np.ndarray, bias: np.ndarray, noise: float, num_thresholds: int) -> np.ndarray:
    """``P(level + bias_g + N(0, noise) >= tau)``, shape ``(G, K, num_thresholds)``."""
    z = (levels[None, :, None] + bias[:, None, None] - np.arange(num_thresholds)[None, None, :]) / noise
    return 0.5 * (1.0 + _erf(z / math.sqrt(2.0)))


class EducationMAFE(MAFEParallelEnv):
    """Education MAFE-style ``ParallelEnv`` (see the module docstring for the dynamics).

    Args:
        config: :class:`~hf_ext.marl.mafe.config.EducationConfig` constants.
        **kwargs: ``groups``, ``group_shares``, ``population_size``, ``n_per_step``, ``max_cycles``,
            ``intervention`` (``None``, ``"tutoring_subsidy"``, ``"admission_quota"``, ``"blind_hiring"``),
            ``group_thresholds``, ``render_mode``, as in :class:`~hf_ext.marl.mafe.core.MAFEParallelEnv`.

    Examples:
        >>> from hf_ext.marl import education_mafe_v0
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
    _paper = paper("mafe")

    def __init__(self, *, config: EducationConfig | None = None, **kwargs: Any) -> None:
        super().__init__(config=config, **kwargs)
        c, g = self.config, self.num_groups
        self._test_bias, self._hire_bias = c.test_biases(g), c.hire_biases(g)
        self._mu0 = self._level_probs @ np.arange(self.num_levels)
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

    def _reset_dynamics(self) -> None:
        self._mu = self._mu0.copy()
        self._last_feats = {SCHOOL: [0.5], UNIVERSITY: [0.0, 0.5], EMPLOYER: [0.0, 0.5]}
        self._spent = 0.0

    def _simulate(self, idx: np.ndarray, actions: dict[str, Any]) -> StepOutcome:
        c, rng, n, g, k = self.config, self._np_random, len(idx), self.num_groups, self.num_levels
        grp, lvl = self._group[idx], self._level[idx]
        u = rng.random((4, n))
        noise = rng.standard_normal((3, n))
        dis = grp == self.disadvantaged
        li = self._intensity
        slots = int(round(c.tutoring_slots * n))
        dis_slots = int(round(INTENSITIES[actions[SCHOOL]] * slots))
        extra = int(round(li * c.subsidy_slots_max * n)) if self.intervention == "tutoring_subsidy" else 0
        cap = np.array([slots - dis_slots, dis_slots + extra])
        tutored = select_by_capacity(np.ones(n, dtype=bool), dis.astype(np.int64), -lvl + u[0], cap)
        extra_used = max(0, int((tutored & dis).sum()) - dis_slots)
        lvl1 = np.minimum(lvl + (tutored & (u[1] < c.tutoring_gain)), k - 1)
        score = lvl1 + self._test_bias[grp] + c.test_noise * noise[0]
        admit = score >= self._threshold_of(actions[UNIVERSITY], grp)
        ucap = int(round(c.university_capacity * n))
        if admit.sum() > ucap:
            admit = select_by_capacity(admit, np.zeros(n, dtype=np.int64), score, np.array([ucap]))
        if self.intervention == "admission_quota":
            admit = apply_quota(admit, grp, score, li * c.quota_max, g)
        lvl2 = np.minimum(lvl1 + (admit & (u[2] < c.admission_gain)), k - 1)
        bias = self._hire_bias[grp] * (1.0 - li if self.intervention == "blind_hiring" else 1.0)
        hire = lvl2 + bias + c.hire_noise * noise[1] >= self._threshold_of(actions[EMPLOYER], grp)
        qualified = lvl2 >= c.skill_bar
        scale = 1.0 / ((k - 1) * n)
        skill_gain = float((lvl1 - lvl).sum()) / n
        n_tut, n_adm, n_hire = int(tutored.sum()), int(admit.sum()), int(hire.sum())
        quality = float((lvl1[admit] - c.admit_reference).sum()) * scale
        productivity = float(lvl2[hire].sum()) * scale
        wages = -c.wage * n_hire / n
        self._spent = c.subsidy_cost * extra_used / n
        comps = {
            SCHOOL: {"skill_gain": skill_gain, "tutoring_cost": -c.tutoring_cost * (n_tut - extra_used) / n},
            UNIVERSITY: {"admit_quality": quality},
            EMPLOYER: {"productivity": productivity, "wages": wages},
            REGULATOR: {"subsidy_cost": -self._spent},
        }
        self._last_feats = {
            SCHOOL: [skill_gain],
            UNIVERSITY: [n_adm / max(ucap, 1), (quality + 1.0) / 2.0],
            EMPLOYER: [n_hire / n, (productivity + wages + 1.0) / 2.0],
        }
        members = np.bincount(grp, minlength=g)
        emp = np.bincount(grp, weights=hire, minlength=g) / np.maximum(members, 1)
        ne = members > 0
        self._mu[ne] = np.clip(self._mu[ne] + c.feedback * (emp[ne] - emp[ne].mean()), 0.0, k - 1)
        self._gain = lvl2 - lvl
        newcomers = np.rint(self._mu[grp] + c.init_std * noise[2]).astype(np.int64)
        self._level[idx] = np.minimum(np.maximum(newcomers, 0), k - 1)
        own = [([SCHOOL], None, tutored, qualified), ([UNIVERSITY], None, admit, qualified)]
        return StepOutcome(comps, grp, hire, qualified, own)

    def _welfare(self, before: np.ndarray, after: np.ndarray) -> float:
        """Mean skill gain through the pipeline (the cohort is replaced afterwards)."""
        return float(self._gain.sum()) / len(self._gain)

    def _features(self, agent: str) -> list[float]:
        if agent == REGULATOR:
            return [self._spent, *(self._mu / (self.num_levels - 1)).tolist()]
        return self._last_feats[agent]

    def _myopic_values(self, obs: np.ndarray, agent: str) -> np.ndarray:
        """Expected one-step value per action from the observed histograms (no capacity, exact tutoring)."""
        c, k = self.config, self.num_levels
        d = self.decode_obs(obs)
        hist = d["hist"] * self.group_shares[:, None]
        if agent == SCHOOL:
            room = 1.0 - d["hist"][:, -1]  # share of each group that tutoring can still raise
            dis = self.disadvantaged
            others = np.delete(room, dis).mean()
            gain = INTENSITIES * room[dis] + (1 - INTENSITIES) * others
            return c.tutoring_slots * c.tutoring_gain * gain
        if agent == UNIVERSITY:
            value = (
                hist[:, :, None]
                * self._admit_pass
                * ((self._skill - c.admit_reference) / (k - 1))[None, :, None]
            )
        else:
            passp = self._hire_pass[int(round(float(d["intensity"]) * (len(INTENSITIES) - 1)))]
            value = hist[:, :, None] * passp * (self._skill / (k - 1) - c.wage)[None, :, None]
        per_group = value.sum(1)
        return per_group if self.group_thresholds else per_group.sum(0)


raw_env = EducationMAFE


def parallel_env(**kwargs: Any) -> EducationMAFE:
    """The Education MAFE-style ``ParallelEnv`` (keyword arguments of :class:`EducationMAFE`)."""
    return EducationMAFE(**kwargs)


def env(**kwargs: Any) -> Any:
    """The AEC form, through ``pettingzoo.utils.parallel_to_aec``."""
    return parallel_to_aec(parallel_env(**kwargs))
