"""Every config field is checked when the config is built, with the house error form."""

from __future__ import annotations

import pytest

from hf_ext.mafe.config import EducationConfig, HealthcareConfig, LoanConfig


@pytest.mark.parametrize(
    ("cls", "kwargs", "error", "match"),
    [
        (LoanConfig, {"num_levels": 1}, ValueError, "`num_levels` must be an int >= 2, got 1"),
        (LoanConfig, {"num_levels": 2.5}, TypeError, "`num_levels` must be an int >= 2, got 2.5"),
        (LoanConfig, {"init_std": -1.0}, ValueError, r"`init_std` must be a finite float > 0, got -1.0"),
        (
            LoanConfig,
            {"init_means": (1.0, 9.0)},
            ValueError,
            r"`init_means\[1\]` must be a finite float in \[0, 6\]",
        ),
        (
            LoanConfig,
            {"repay_low": -0.1},
            ValueError,
            r"`repay_low` must be a finite float in \[0, 1\], got -0.1",
        ),
        (
            LoanConfig,
            {"repay_high": 1.5},
            ValueError,
            r"`repay_high` must be a finite float in \[0, 1\], got 1.5",
        ),
        (
            LoanConfig,
            {"repay_low": 0.9, "repay_high": 0.5},
            ValueError,
            "`repay_high` must be >= `repay_low`",
        ),
        (LoanConfig, {"loss": -2.0}, ValueError, "`loss` must be a finite float >= 0, got -2.0"),
        (LoanConfig, {"gain": float("nan")}, ValueError, "`gain` must be a finite float >= 0, got nan"),
        (LoanConfig, {"quota_max": 2}, ValueError, r"`quota_max` must be a finite float in \[0, 1\], got 2"),
        (LoanConfig, {"disadvantaged": -1}, ValueError, "`disadvantaged` must be an int >= 0, got -1"),
        (LoanConfig, {"init_level_probs": ((0.5, 0.6) + (0,) * 5,) * 2}, ValueError, "must sum to 1"),
        (HealthcareConfig, {"capacity": -5}, ValueError, "`capacity` must be an int >= 0, got -5"),
        (
            HealthcareConfig,
            {"p_cure": 1.2},
            ValueError,
            r"`p_cure` must be a finite float in \[0, 1\], got 1.2",
        ),
        (
            HealthcareConfig,
            {"p_worsen": 0.9, "p_recover": 0.5},
            ValueError,
            "`p_worsen` \\+ `p_recover` must",
        ),
        (HealthcareConfig, {"seek_uninsured": (0.5, 1.5)}, ValueError, r"`seek_uninsured\[1\]` must be"),
        (HealthcareConfig, {"premium_levels": 1}, ValueError, "`premium_levels` must be an int >= 2, got 1"),
        (HealthcareConfig, {"need_level": 9}, ValueError, r"`need_level` must be an int in \[0, 4\], got 9"),
        (
            EducationConfig,
            {"tutoring_slots": -0.1},
            ValueError,
            r"`tutoring_slots` must be a finite float in",
        ),
        (
            EducationConfig,
            {"test_noise": 0.0},
            ValueError,
            "`test_noise` must be a finite float > 0, got 0.0",
        ),
        (EducationConfig, {"wage": -1}, ValueError, "`wage` must be a finite float >= 0, got -1"),
        (EducationConfig, {"hire_bias": (0.0,)}, ValueError, "`hire_bias` must be a list of at least 2 item"),
    ],
)
def test_bad_fields_raise(cls, kwargs, error, match):
    with pytest.raises(error, match=match):
        cls(**kwargs)


def test_fields_have_help_and_defaults_validate():
    from dataclasses import fields

    for cls in (LoanConfig, HealthcareConfig, EducationConfig):
        cls()
        assert all(f.metadata.get("help") for f in fields(cls)), cls
