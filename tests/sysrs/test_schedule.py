"""The Successive Rejects and Sequential Halving schedules: worked values, budget accounting, empty phases."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from hf_ext.sysrs.baselines import sh_schedule
from hf_ext.sysrs.core import (
    SuccessiveRejects,
    SySRs,
    halving_last_phase_schedule,
    logbar,
    sr_schedule,
)


def test_logbar_values() -> None:
    assert logbar(2) == 1
    assert logbar(3) == Fraction(4, 3)
    assert float(logbar(5)) == pytest.approx(1.78333, abs=1e-5)
    assert float(logbar(11)) == pytest.approx(2.51988, abs=1e-5)


@pytest.mark.parametrize(
    ("k", "budget", "expected", "cost"),
    [
        (2, 10, (4,), 8),
        (3, 30, (7, 11), 29),
        (5, 100, (11, 14, 18, 27), 97),
        (11, 3000, (108, 119, 132, 149, 170, 198, 238, 297, 396, 594), 2995),
    ],
)
def test_sr_worked_values(k: int, budget: int, expected: tuple[int, ...], cost: int) -> None:
    n = sr_schedule(k, budget)
    assert n == expected
    assert sum(n) + n[-1] == cost


def test_sr_cost_never_exceeds_budget() -> None:
    rng = np.random.default_rng(0)
    pairs = [(k, b) for k in range(2, 51) for b in (k + 1, k + 2, 2 * k, 10**5)]
    pairs += [(int(k), int(rng.integers(k + 1, 10**5 + 1))) for k in rng.integers(2, 51, size=1500)]
    for k, b in pairs:
        n = sr_schedule(k, b)
        assert sum(n) + n[-1] <= b, (k, b)
        assert all(x <= y for x, y in zip(n, n[1:])), (k, b)
        assert n[0] >= 1, (k, b)


def test_sr_zero_size_phases_are_kept() -> None:
    n = sr_schedule(50, 1275)
    assert n[0] == n[1] == 7
    assert sum(n) + n[-1] <= 1275


def test_sr_schedule_rejects_small_budget() -> None:
    with pytest.raises(ValueError, match="`budget` must be an int >= 4, got 3"):
        sr_schedule(3, 3)


def test_halving_last_phase_gives_the_final_pair_halvings_count_within_budget() -> None:
    assert halving_last_phase_schedule(5, 2000) == (159, 199, 265, 688)  # SH's last pair: 688 (SR: 560)
    assert sh_schedule(5, 2000)[-1][0] == 688
    assert halving_last_phase_schedule(2, 10) == (5,)  # K = 2: SH's B // 2 beats SR's (B - 2) / 3
    pairs = [(k, b) for k in range(2, 51) for b in (k + 1, k + 2, 2 * k, 3 * k, 1000, 10**5)]
    for k, b in pairs:
        n, sr, sh = halving_last_phase_schedule(k, b), sr_schedule(k, b), sh_schedule(k, b)
        assert sum(n) + n[-1] <= b, (k, b)
        assert all(x <= y for x, y in zip(n, n[1:])), (k, b)
        assert n[-1] == max(sr[-1], sh[-1][0]), (k, b)
        assert n == sr or n[-1] > sr[-1], (k, b)  # unchanged unless the last phase grows


def test_last_phase_option_sets_the_plan_and_the_config() -> None:
    paper = SySRs(5, 3000, budget=2000)
    assert paper.last_phase == "sr" and [c for c, _ in paper._plan] == list(sr_schedule(5, 2000))
    halving = SuccessiveRejects(5, 3000, budget=2000, synchronized=True, last_phase="halving")
    assert [c for c, _ in halving._plan] == list(halving_last_phase_schedule(5, 2000))
    assert halving.state_dict()["config"]["last_phase"] == "halving"
    with pytest.raises(ValueError, match="saved with config"):
        paper.load_state_dict(halving.state_dict())


def test_sh_schedule_rounds_and_cost() -> None:
    for k in (2, 3, 5, 8, 11, 33):
        for b in (k + 1, 10 * k, 1000):
            plan = sh_schedule(k, b)
            assert len(plan) == math.ceil(math.log2(k))
            assert plan[-1][1] == 1
            sizes = [k] + [keep for _, keep in plan[:-1]]
            prev, cost = 0, 0
            for size, (cum, _) in zip(sizes, plan):
                assert cum - prev == b // (size * len(plan))
                cost += size * (cum - prev)
                prev = cum
            assert cost <= b
