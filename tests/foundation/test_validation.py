"""The shared argument checks: canonical values back, one message form on failure."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hf_ext._validation import (
    check_bool,
    check_choice,
    check_float,
    check_int,
    check_power_of_two,
    check_probability,
    check_sequence,
)


def test_check_int_bounds_and_types():
    assert check_int("n", np.int64(3), low=1) == 3 and type(check_int("n", np.int64(3))) is int
    with pytest.raises(ValueError, match=r"^`n` must be an int >= 1, got 0\.$"):
        check_int("n", 0, low=1)
    with pytest.raises(ValueError, match=r"`n` must be an int in \[1, 4\], got 5\. E\.g\. n=2\."):
        check_int("n", 5, low=1, high=4, hint="E.g. n=2.")
    with pytest.raises(TypeError, match="`n` must be an int <= 4, got 1.5"):
        check_int("n", 1.5, high=4)
    with pytest.raises(TypeError, match="got True"):
        check_int("n", True)


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_check_float_rejects_non_finite(bad):
    with pytest.raises(ValueError, match="`x` must be a finite float"):
        check_float("x", bad)


def test_check_float_open_and_closed_ends():
    assert check_float("x", 1, low=0, high=1) == 1.0
    with pytest.raises(ValueError, match=r"`x` must be a finite float in \(0, 1\], got 0\."):
        check_float("x", 0, low=0, high=1, low_open=True)
    with pytest.raises(ValueError, match=r"`x` must be a finite float > 0, got -1"):
        check_float("x", -1, low=0, low_open=True)
    with pytest.raises(TypeError, match="`x` must be a finite float"):
        check_float("x", "0.5")
    assert check_probability("p", 0.0) == 0.0
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        check_probability("p", 1.5)


def test_check_choice_suggests_the_closest():
    assert check_choice("mode", "exact", ("fast", "exact")) == "exact"
    with pytest.raises(
        ValueError, match=r"`mode` must be one of 'fast', 'exact', got 'exakt'\. Did you mean 'exact'\?"
    ):
        check_choice("mode", "exakt", ("fast", "exact"))
    with pytest.raises(ValueError, match="one of"):
        check_choice("mode", ["unhashable"], {"fast"})


def test_check_bool_power_of_two_and_sequence():
    assert check_bool("flag", np.bool_(True)) is True
    with pytest.raises(TypeError, match="`flag` must be a bool, got 1"):
        check_bool("flag", 1)
    assert check_power_of_two("block", 64, low=16) == 64
    with pytest.raises(ValueError, match="`block` must be a power of two >= 16, got 48"):
        check_power_of_two("block", 48, low=16)
    assert check_sequence("w", np.array([1.0, 2.0]), lambda n, v: check_float(n, v, low=0)) == [1.0, 2.0]
    with pytest.raises(ValueError, match=r"`w\[1\]` must be a finite float >= 0, got -2"):
        check_sequence("w", [1.0, -2.0], lambda n, v: check_float(n, v, low=0))
    with pytest.raises(ValueError, match="`w` must be a list of length 3"):
        check_sequence("w", [1.0], length=3)
    with pytest.raises(ValueError, match="at least 1 item"):
        check_sequence("w", [], min_length=1)
    with pytest.raises(TypeError, match="`w` must be a list, got 'ab'"):
        check_sequence("w", "ab")
