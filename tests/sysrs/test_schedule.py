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
    steep_schedule,
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


def test_steep_schedule_hand_computed() -> None:
    # K = 4, B = 20, a = 1.75: Z = 2 * 2^-1.75 + 3^-1.75 + 4^-1.75 = 0.82923; n_k = 16 / (Z (5 - k)^1.75)
    # = 1.71, 2.82, 5.74 -> (2, 3, 6), cost 2 + 3 + 6 + 6 = 17.
    assert steep_schedule(4, 20) == (2, 3, 6)
    assert steep_schedule(5, 2000) == (135, 199, 329, 668)
    assert steep_schedule(2, 10) == sr_schedule(2, 10) == (4,)  # one duel: every exponent gives (B - 2) / 2
    assert steep_schedule(11, 3000, exponent=1) == sr_schedule(11, 3000)


def test_steep_schedule_within_budget_and_monotone() -> None:
    pairs = [(k, b) for k in range(2, 51) for b in (k + 1, k + 2, 2 * k, 3 * k, 1000, 1275, 10**5)]
    pairs += [(int(k), int(b)) for k, b in np.random.default_rng(1).integers((2, 3), (51, 10**5), (500, 2))]
    for k, b in pairs:
        b = max(b, k + 1)
        for a in (1.75, 2.0, 3.0):
            n = steep_schedule(k, b, a)
            assert sum(n) + n[-1] <= b, (k, b, a)
            assert all(x <= y for x, y in zip(n, n[1:])), (k, b, a)
            assert n[0] >= 1, (k, b, a)
    big, sr = steep_schedule(10, 6000), sr_schedule(10, 6000)
    assert big[-1] > sr[-1] and big[0] < sr[0]  # queries move from the first eliminations to the last


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"budget": 5}, ValueError, "`budget` must be an int >= 6, got 5"),
        ({"n_models": 1}, ValueError, "`n_models` must be an int >= 2, got 1"),
        ({"exponent": 0}, ValueError, "`exponent` must be a finite float > 0, got 0"),
        ({"exponent": "steep"}, TypeError, "`exponent` must be a finite float > 0, got 'steep'"),
    ],
)
def test_steep_schedule_bad_inputs(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        steep_schedule(**({"n_models": 5, "budget": 100} | kwargs))


def test_schedule_option_sets_the_plan_and_the_config() -> None:
    default = SySRs(5, 3000, budget=2000)
    assert default.schedule == "steep" and [c for c, _ in default._plan] == list(steep_schedule(5, 2000))
    assert SuccessiveRejects(5, 3000, budget=2000).schedule == "sr"  # classical SR keeps its schedule
    paper = SySRs(5, 3000, budget=2000, schedule="sr")
    assert [c for c, _ in paper._plan] == list(sr_schedule(5, 2000))
    halving = SuccessiveRejects(5, 3000, budget=2000, synchronized=True, schedule="halving")
    assert [c for c, _ in halving._plan] == list(halving_last_phase_schedule(5, 2000))
    assert halving.state_dict()["config"]["schedule"] == "halving"
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
