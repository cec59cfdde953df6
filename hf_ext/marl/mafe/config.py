"""Default constants of the MAFE-style environments, one dataclass per environment.

**[reconstructed]** Every value here is an hf-ext choice, not the paper's calibration. Pass your own
initial distributions (``init_level_probs``) or per-group constants to mimic a calibration. Per-group
tuples are indexed by group (group 0 first); ``None`` means "spread linearly between the two end values
over the groups", so any number of groups ``G >= 2`` works.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def _spread(
    values: tuple[float, ...] | None, ends: tuple[float, float], num_groups: int, name: str
) -> np.ndarray:
    if values is None:
        return np.linspace(ends[0], ends[1], num_groups)
    if len(values) != num_groups:
        raise ValueError(f"`{name}` needs one value per group ({num_groups}), got {values!r}.")
    return np.asarray(values, dtype=np.float64)


@dataclass(frozen=True)
class _PopulationConfig:
    """Initial level distribution shared by all environments.

    Attributes:
        num_levels: Number of discrete levels ``K`` (credit bins, severities, skills).
        init_means: Per-group mean initial level (discretised normal); ``None`` = the environment default.
        init_std: Standard deviation of the discretised normal, in levels.
        init_level_probs: Optional ``G x K`` initial level distributions; overrides ``init_means``.
        disadvantaged: Group index targeted by interventions; ``None`` = the group with the worst initial
            mean level.
    """

    num_levels: int = 7
    init_means: tuple[float, ...] | None = None
    init_std: float = 1.2
    init_level_probs: tuple[tuple[float, ...], ...] | None = None
    disadvantaged: int | None = None
    _default_means = (4.0, 2.5)
    _higher_level_is_better = True

    def __post_init__(self) -> None:
        if not isinstance(self.num_levels, int) or self.num_levels < 2:
            raise ValueError(f"`num_levels` must be an int >= 2, got {self.num_levels!r}.")
        if self.init_std <= 0:
            raise ValueError(f"`init_std` must be > 0, got {self.init_std!r}.")

    def level_probs(self, num_groups: int) -> np.ndarray:
        """``(G, K)`` initial level distribution of each group."""
        k = self.num_levels
        if self.init_level_probs is not None:
            p = np.asarray(self.init_level_probs, dtype=np.float64)
            if p.shape != (num_groups, k) or (p < 0).any() or not np.allclose(p.sum(1), 1.0):
                raise ValueError(
                    f"`init_level_probs` must be {num_groups}x{k} non-negative rows summing to 1, got shape {p.shape}."
                )
            return p
        means = _spread(self.init_means, self._default_means, num_groups, "init_means")
        z = np.arange(k)[None, :] - means[:, None]
        p = np.exp(-0.5 * (z / self.init_std) ** 2)
        return p / p.sum(1, keepdims=True)

    def disadvantaged_group(self, num_groups: int) -> int:
        """The group interventions target (explicit, or worst initial mean level)."""
        if self.disadvantaged is not None:
            if not 0 <= self.disadvantaged < num_groups:
                raise ValueError(f"`disadvantaged` must be in [0, {num_groups}), got {self.disadvantaged!r}.")
            return self.disadvantaged
        mean = self.level_probs(num_groups) @ np.arange(self.num_levels)
        return int(np.argmin(mean) if self._higher_level_is_better else np.argmax(mean))


@dataclass(frozen=True)
class LoanConfig(_PopulationConfig):
    """Loan MAFE-style constants (after Liu et al. 2018's delayed-impact lending).

    Attributes:
        repay_low, repay_high: Repayment probability of the lowest / highest credit bin (linear in between).
        gain, loss: Bank gain per repaid loan ``u+`` and loss per default ``u-``.
        subsidy_max: Largest share of ``u-`` the regulator reimburses per default in the disadvantaged group.
        quota_max: Largest minimum approval rate per group under ``intervention="quota"``.
        score_boost_bins: Observed-score boost of the disadvantaged group under ``"score_boost"``.
    """

    num_levels: int = 7
    repay_low: float = 0.2
    repay_high: float = 0.95
    gain: float = 1.0
    loss: float = 1.0
    subsidy_max: float = 1.0
    quota_max: float = 0.6
    score_boost_bins: int = 1
    _default_means = (4.0, 2.5)


@dataclass(frozen=True)
class HealthcareConfig(_PopulationConfig):
    """Healthcare MAFE-style constants; levels are severities (0 = healthy, higher = sicker).

    Attributes:
        premium_levels: Number of premium choices of the insurer (``Discrete``).
        premium_max: Premium of the highest choice, per enrolled individual per step.
        enrol_base: Enrolment probability at zero premium.
        price_sensitivity: Per-group drop of enrolment probability per unit premium.
        seek_insured: Probability that a sick insured individual seeks care.
        seek_uninsured: Per-group probability that a sick uninsured individual seeks care.
        capacity: Patients each hospital can treat per step.
        bill_base, bill_per_level: Bill of a treatment at severity ``k``: ``bill_base + bill_per_level * k``.
        self_pay: Share of the bill an uninsured patient pays.
        cost_base, cost_per_level: Hospital cost of a treatment at severity ``k``.
        p_cure, p_worsen, p_sick, p_recover: Treated sick -1 level; untreated sick +1 / -1; healthy -> 1.
        need_level: Severity at or above which an individual "needs care" (the ``tpr`` qualification).
        premium_subsidy_max, reserve_max, outreach_boost, outreach_cost: Intervention strengths.
    """

    num_levels: int = 5
    init_std: float = 1.0
    premium_levels: int = 5
    premium_max: float = 1.0
    enrol_base: float = 0.95
    price_sensitivity: tuple[float, ...] | None = None
    seek_insured: float = 0.9
    seek_uninsured: tuple[float, ...] | None = None
    capacity: int = 40
    bill_base: float = 0.6
    bill_per_level: float = 0.3
    self_pay: float = 0.4
    cost_base: float = 0.3
    cost_per_level: float = 0.15
    p_cure: float = 0.8
    p_worsen: float = 0.3
    p_sick: float = 0.15
    p_recover: float = 0.15
    need_level: int = 2
    premium_subsidy_max: float = 1.0
    reserve_max: float = 0.5
    outreach_boost: float = 0.4
    outreach_cost: float = 0.05
    _default_means = (0.8, 1.8)
    _higher_level_is_better = False

    def sensitivity(self, num_groups: int) -> np.ndarray:
        return _spread(self.price_sensitivity, (0.4, 0.9), num_groups, "price_sensitivity")

    def seek_uninsured_rates(self, num_groups: int) -> np.ndarray:
        return _spread(self.seek_uninsured, (0.6, 0.3), num_groups, "seek_uninsured")


@dataclass(frozen=True)
class EducationConfig(_PopulationConfig):
    """Education MAFE-style constants; levels are skills (0..K-1).

    Attributes:
        tutoring_slots: Tutoring places per step, as a share of ``n_per_step``.
        tutoring_gain: Probability that tutoring raises skill by one level.
        tutoring_cost: School cost per tutored student.
        test_bias, test_noise: Per-group bias and noise std of the university's observed test score.
        university_capacity: Admissions per step, as a share of ``n_per_step``.
        admission_gain: Probability that admission raises skill by one level.
        admit_reference: Skill at which an admission is quality-neutral for the university.
        hire_bias, hire_noise: Per-group bias and noise std of the employer's productivity signal.
        wage: Employer wage per hire (productivity of a hire is ``skill / (K - 1)``).
        skill_bar: Skill at or above which a graduate is "qualified" (the ``tpr`` qualification).
        feedback: ``kappa`` of the cohort feedback ``mu_g <- mu_g + kappa * (emp_g - mean emp)``.
        subsidy_slots_max, subsidy_cost, quota_max: Intervention strengths.
    """

    num_levels: int = 6
    init_std: float = 1.0
    tutoring_slots: float = 0.3
    tutoring_gain: float = 0.6
    tutoring_cost: float = 0.2
    test_bias: tuple[float, ...] | None = None
    test_noise: float = 0.75
    university_capacity: float = 0.4
    admission_gain: float = 0.7
    admit_reference: float = 2.5
    hire_bias: tuple[float, ...] | None = None
    hire_noise: float = 0.5
    wage: float = 0.5
    skill_bar: int = 3
    feedback: float = 0.5
    subsidy_slots_max: float = 0.2
    subsidy_cost: float = 0.2
    quota_max: float = 0.5
    _default_means = (3.0, 2.0)

    def test_biases(self, num_groups: int) -> np.ndarray:
        return _spread(self.test_bias, (0.0, -0.75), num_groups, "test_bias")

    def hire_biases(self, num_groups: int) -> np.ndarray:
        return _spread(self.hire_bias, (0.0, -0.5), num_groups, "hire_bias")
