"""Default constants of the MAFE-style environments, one dataclass per environment.

**[reconstructed]** Every value here is an hf-ext choice, not the paper's calibration. Pass your own
initial distributions (``init_level_probs``) or per-group constants to mimic a calibration. Per-group
tuples are indexed by group (group 0 first); ``None`` means "spread linearly between the two end values
over the groups", so any number of groups ``G >= 2`` works. Every field is checked when the config is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int, check_probability, check_sequence


def _opt_floats(name: str, value: Any, *, low: float | None = None, high: float | None = None) -> None:
    if value is not None:
        check_sequence(name, value, lambda n, v: check_float(n, v, low=low, high=high), min_length=2)


def _help(text: str, default: Any) -> Any:
    return field(default=default, metadata={"help": text})


@dataclass(frozen=True)
class _PopulationConfig:
    """Initial level distribution shared by all environments (fields documented in ``metadata["help"]``)."""

    num_levels: int = _help("Number of discrete levels `K` (credit bins, severities, skills).", 7)
    init_means: tuple[float, ...] | None = _help(
        "Per-group mean initial level (discretised normal); None = the environment default.", None
    )
    init_std: float = _help("Standard deviation of the discretised normal, in levels.", 1.2)
    init_level_probs: tuple[tuple[float, ...], ...] | None = _help(
        "Optional G x K initial level distributions (rows summing to 1); overrides `init_means`.", None
    )
    disadvantaged: int | None = _help(
        "Group index targeted by interventions; None = the group with the worst initial mean level.", None
    )
    _default_means = (4.0, 2.5)
    _higher_level_is_better = True
    _paper = paper("mafe")
    _probabilities: ClassVar[tuple[str, ...]] = ()  # fields checked to lie in [0, 1]
    _non_negative: ClassVar[tuple[str, ...]] = ()  # fields checked to be finite floats >= 0

    def __post_init__(self) -> None:
        for name in self._probabilities:
            check_probability(name, getattr(self, name))
        for name in self._non_negative:
            check_float(name, getattr(self, name), low=0)
        k = check_int("num_levels", self.num_levels, low=2)
        _opt_floats("init_means", self.init_means, low=0, high=k - 1)
        check_float("init_std", self.init_std, low=0, low_open=True)
        if self.init_level_probs is not None:
            rows = check_sequence(
                "init_level_probs",
                self.init_level_probs,
                lambda n, row: check_sequence(n, row, lambda m, p: check_float(m, p, low=0), length=k),
                min_length=2,
            )
            for i, row in enumerate(rows):
                if not math.isclose(sum(row), 1.0, abs_tol=1e-6):
                    raise ValueError(f"`init_level_probs[{i}]` must sum to 1, got {sum(row)!r}.")
        if self.disadvantaged is not None:
            check_int("disadvantaged", self.disadvantaged, low=0)

    def level_probs(self, num_groups: int) -> Any:
        """``(G, K)`` initial level distribution of each group (numpy)."""
        import numpy as np

        k = self.num_levels
        if self.init_level_probs is not None:
            p = np.asarray(self.init_level_probs, dtype=np.float64)
            if p.shape != (num_groups, k):
                raise ValueError(
                    f"`init_level_probs` must be {num_groups}x{k} (one row per group), got shape {p.shape}."
                )
            return p
        means = self.spread(self.init_means, self._default_means, num_groups, "init_means")
        z = np.arange(k)[None, :] - means[:, None]
        p = np.exp(-0.5 * (z / self.init_std) ** 2)
        return p / p.sum(1, keepdims=True)

    def disadvantaged_group(self, num_groups: int) -> int:
        """The group interventions target (explicit, or worst initial mean level)."""
        import numpy as np

        if self.disadvantaged is not None:
            return check_int("disadvantaged", self.disadvantaged, low=0, high=num_groups - 1)
        mean = self.level_probs(num_groups) @ np.arange(self.num_levels)
        return int(np.argmin(mean) if self._higher_level_is_better else np.argmax(mean))

    @staticmethod
    def spread(
        values: tuple[float, ...] | None, ends: tuple[float, float], num_groups: int, name: str
    ) -> Any:
        """``(G,)`` per-group values: ``values`` as given, or linear between ``ends`` when ``None``."""
        import numpy as np

        if values is None:
            return np.linspace(ends[0], ends[1], num_groups)
        check_sequence(name, values, length=num_groups, hint=f"Give one value per group ({num_groups}).")
        return np.asarray(values, dtype=np.float64)


@dataclass(frozen=True)
class LoanConfig(_PopulationConfig):
    """Loan MAFE-style constants (after Liu et al. 2018's delayed-impact lending)."""

    num_levels: int = _help("Number of credit-score bins `K`.", 7)
    repay_low: float = _help(
        "Repayment probability of the lowest credit bin (linear up to `repay_high`).", 0.2
    )
    repay_high: float = _help("Repayment probability of the highest credit bin.", 0.95)
    gain: float = _help("Bank gain `u+` per repaid loan.", 1.0)
    loss: float = _help("Bank loss `u-` per defaulted loan (the principal lost).", 2.0)
    subsidy_max: float = _help(
        "Largest share of `u-` the regulator reimburses per default in the disadvantaged group.", 1.0
    )
    quota_max: float = _help("Largest minimum approval rate per group under intervention='quota'.", 0.6)
    score_boost_bins: int = _help(
        "Observed-score boost (bins) of the disadvantaged group under 'score_boost'.", 1
    )
    _default_means = (4.0, 2.5)
    _probabilities = ("repay_low", "repay_high", "subsidy_max", "quota_max")
    _non_negative = ("gain", "loss")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.repay_high < self.repay_low:
            raise ValueError(
                f"`repay_high` must be >= `repay_low` ({self.repay_low!r}), got {self.repay_high!r}."
            )
        check_int("score_boost_bins", self.score_boost_bins, low=0, high=self.num_levels - 1)


@dataclass(frozen=True)
class HealthcareConfig(_PopulationConfig):
    """Healthcare MAFE-style constants; levels are severities (0 = healthy, higher = sicker)."""

    num_levels: int = _help("Number of severity levels `K` (0 = healthy).", 5)
    init_std: float = _help("Standard deviation of the initial severity, in levels.", 1.0)
    premium_levels: int = _help("Number of premium choices of the insurer (Discrete).", 5)
    premium_max: float = _help("Premium of the highest choice, per enrolled individual per step.", 1.0)
    enrol_base: float = _help("Enrolment probability at zero premium.", 0.95)
    price_sensitivity: tuple[float, ...] | None = _help(
        "Per-group drop of enrolment probability per unit premium; None = 0.4 .. 0.9 over the groups.", None
    )
    seek_insured: float = _help("Probability that a sick insured individual seeks care.", 0.9)
    seek_uninsured: tuple[float, ...] | None = _help(
        "Per-group probability that a sick uninsured individual seeks care; None = 0.6 .. 0.3.", None
    )
    capacity: int = _help("Patients each hospital can treat per step.", 40)
    bill_base: float = _help("Bill of a treatment at severity 0 (plus `bill_per_level` per level).", 0.6)
    bill_per_level: float = _help("Extra bill per severity level.", 0.3)
    self_pay: float = _help("Share of the bill an uninsured patient pays.", 0.4)
    cost_base: float = _help("Hospital cost of a treatment at severity 0 (plus `cost_per_level`).", 0.3)
    cost_per_level: float = _help("Extra treatment cost per severity level.", 0.15)
    p_cure: float = _help("Probability that treatment lowers severity by one level.", 0.8)
    p_worsen: float = _help("Probability that an untreated sick individual gets one level sicker.", 0.3)
    p_sick: float = _help("Probability that a healthy individual falls sick (severity 1).", 0.15)
    p_recover: float = _help("Probability that an untreated sick individual recovers one level.", 0.15)
    need_level: int = _help(
        "Severity at or above which an individual needs care (the `tpr` qualification).", 2
    )
    premium_subsidy_max: float = _help(
        "Largest share of the premium the regulator pays for the disadvantaged group.", 1.0
    )
    reserve_max: float = _help(
        "Largest share of each hospital's capacity reserved for the disadvantaged.", 0.5
    )
    outreach_boost: float = _help("Largest rise of care seeking of uninsured disadvantaged individuals.", 0.4)
    outreach_cost: float = _help("Regulator cost of outreach per disadvantaged individual sampled.", 0.05)
    _default_means = (0.8, 1.8)
    _higher_level_is_better = False
    _probabilities = (
        "enrol_base",
        "seek_insured",
        "self_pay",
        "p_cure",
        "p_worsen",
        "p_sick",
        "p_recover",
        "premium_subsidy_max",
        "reserve_max",
        "outreach_boost",
    )
    _non_negative = (
        "premium_max",
        "bill_base",
        "bill_per_level",
        "cost_base",
        "cost_per_level",
        "outreach_cost",
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        check_int("premium_levels", self.premium_levels, low=2)
        if self.p_worsen + self.p_recover > 1:
            raise ValueError(
                f"`p_worsen` + `p_recover` must be <= 1, got {self.p_worsen!r} + {self.p_recover!r}."
            )
        _opt_floats("price_sensitivity", self.price_sensitivity, low=0)
        _opt_floats("seek_uninsured", self.seek_uninsured, low=0, high=1)
        check_int("capacity", self.capacity, low=0)
        check_int("need_level", self.need_level, low=0, high=self.num_levels - 1)

    def sensitivity(self, num_groups: int) -> Any:
        return self.spread(self.price_sensitivity, (0.4, 0.9), num_groups, "price_sensitivity")

    def seek_uninsured_rates(self, num_groups: int) -> Any:
        return self.spread(self.seek_uninsured, (0.6, 0.3), num_groups, "seek_uninsured")


@dataclass(frozen=True)
class EducationConfig(_PopulationConfig):
    """Education MAFE-style constants; levels are skills (0..K-1)."""

    num_levels: int = _help("Number of skill levels `K`.", 6)
    init_std: float = _help("Standard deviation of a newcomer's skill around the group mean, in levels.", 1.0)
    tutoring_slots: float = _help("Tutoring places per step, as a share of `n_per_step`.", 0.3)
    tutoring_gain: float = _help("Probability that tutoring raises skill by one level.", 0.6)
    tutoring_cost: float = _help("School cost per tutored student.", 0.2)
    test_bias: tuple[float, ...] | None = _help(
        "Per-group bias of the university's observed test score; None = 0 .. -0.75 over the groups.", None
    )
    test_noise: float = _help("Noise standard deviation of the test score, in levels.", 0.75)
    university_capacity: float = _help("Admissions per step, as a share of `n_per_step`.", 0.4)
    admission_gain: float = _help("Probability that admission raises skill by one level.", 0.7)
    admit_reference: float = _help("Skill at which an admission is quality-neutral for the university.", 2.5)
    hire_bias: tuple[float, ...] | None = _help(
        "Per-group bias of the employer's productivity signal; None = 0 .. -0.5 over the groups.", None
    )
    hire_noise: float = _help("Noise standard deviation of the productivity signal, in levels.", 0.5)
    wage: float = _help("Employer wage per hire (a hire's productivity is skill / (K - 1)).", 0.5)
    skill_bar: int = _help("Skill at or above which a graduate is qualified (the `tpr` qualification).", 3)
    feedback: float = _help("`kappa` of the cohort feedback mu_g <- mu_g + kappa * (emp_g - mean emp).", 0.5)
    subsidy_slots_max: float = _help("Largest extra tutoring places for the disadvantaged, share of n.", 0.2)
    subsidy_cost: float = _help("Regulator cost per subsidised tutoring place.", 0.2)
    quota_max: float = _help("Largest minimum admission rate per group under 'admission_quota'.", 0.5)
    _default_means = (3.0, 2.0)
    _probabilities = (
        "tutoring_slots",
        "tutoring_gain",
        "university_capacity",
        "admission_gain",
        "subsidy_slots_max",
        "quota_max",
    )
    _non_negative = ("tutoring_cost", "wage", "feedback", "subsidy_cost")

    def __post_init__(self) -> None:
        super().__post_init__()
        check_float("test_noise", self.test_noise, low=0, low_open=True)
        check_float("hire_noise", self.hire_noise, low=0, low_open=True)
        check_float("admit_reference", self.admit_reference)
        _opt_floats("test_bias", self.test_bias)
        _opt_floats("hire_bias", self.hire_bias)
        check_int("skill_bar", self.skill_bar, low=0, high=self.num_levels - 1)

    def test_biases(self, num_groups: int) -> Any:
        return self.spread(self.test_bias, (0.0, -0.75), num_groups, "test_bias")

    def hire_biases(self, num_groups: int) -> Any:
        return self.spread(self.hire_bias, (0.0, -0.5), num_groups, "hire_bias")
