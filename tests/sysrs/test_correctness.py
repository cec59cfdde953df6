"""Identification behaviour: exact answers, ties, the paired advantage, a reference check of classical SR."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from hf_ext.sysrs.core import ALGORITHMS
from hf_ext.sysrs.simulation import simulate


@pytest.mark.parametrize("algorithm", list(ALGORITHMS))
def test_perfect_model_is_always_found(algorithm: str) -> None:
    rng = np.random.default_rng(0)
    S = (rng.random((6, 100)) < 0.3).astype(float)
    S[4] = 1.0
    out = simulate(S, budget=300, algorithm=algorithm, reps=30, seed=0)
    assert out["error_rate"] == 0.0 and out["best"].tolist() == [4]


def test_identical_rows_spread_picks_uniformly() -> None:
    rng = np.random.default_rng(1)
    S = np.tile((rng.random(60) < 0.5).astype(float), (4, 1))
    out = simulate(S, budget=40, algorithm="sysrs", reps=400, seed=0)
    counts = np.bincount(out["picks"], minlength=4)
    assert out["error_rate"] == 0.0  # all four are tied best
    assert stats.chisquare(counts).pvalue > 0.01, counts


def test_paired_sampling_finds_the_one_extra_answer() -> None:
    rng = np.random.default_rng(2)
    base = (rng.random(100) < 0.5).astype(float)
    better = base.copy()
    better[np.flatnonzero(base == 0)[0]] = 1.0
    worse = base.copy()
    worse[np.flatnonzero(base == 1)[0]] = 0.0
    S = np.stack([worse, base, better])
    sysrs = simulate(S, budget=240, algorithm="sysrs", reps=300, seed=0)
    sr = simulate(S, budget=240, algorithm="sr", reps=300, seed=0)
    assert sysrs["error_rate"] <= sr["error_rate"]
    assert sysrs["error_rate"] < 0.3 < sr["error_rate"]


def test_sr_two_arms_matches_binomial_reference() -> None:
    rng = np.random.default_rng(3)
    S = np.stack([rng.random(10_000) < 0.6, rng.random(10_000) < 0.5]).astype(float)
    out = simulate(S, budget=200, algorithm="sr", reps=1000, seed=0)  # n_1 = 99 pulls each
    p, q = S.mean(axis=1)
    k = np.arange(100)
    px, py = stats.binom.pmf(k, 99, p), stats.binom.pmf(k, 99, q)
    lose = sum(px[i] * (py[i + 1 :].sum() + 0.5 * py[i]) for i in k)
    assert out["spent"].max() == 198
    assert abs(out["error_rate"] - lose) <= 0.03, (out["error_rate"], lose)


def test_simulate_reports_regret_in_points() -> None:
    S = np.array([[1.0] * 10, [1.0] * 5 + [0.0] * 5])
    out = simulate(S, budget=3, algorithm="uniform", reps=50, seed=0)
    assert out["simple_regret"] == pytest.approx(50.0 * out["error_rate"])


@pytest.mark.parametrize(
    ("S", "kwargs", "match"),
    [
        (np.zeros(5), {}, "`S` must be a 2-D score matrix"),
        (np.zeros((0, 3)), {}, "`S` must have at least one model"),
        (np.full((2, 3), 2.0), {}, "`S` must lie in \\[0, 1\\]"),
        (np.array([[0.0, np.inf]]), {}, "`S` must not contain infinities"),
        (np.full((2, 3), 0.5), {"reps": 0}, "`reps` must be an int >= 1, got 0"),
        (np.full((2, 3), 0.5), {"algorithm": "ucb"}, "`algorithm` must be one of"),
        (np.full((2, 3), 0.5), {"nan_policy": "skip"}, "`nan_policy` must be one of"),
    ],
)
def test_simulate_bad_inputs(S: np.ndarray, kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        simulate(S, **({"budget": 4} | kwargs))


def test_simulate_rescales_with_score_range() -> None:
    S = np.array([[2.0, 4.0, 3.0], [5.0, 5.0, 4.0]])
    assert simulate(S, budget=6, algorithm="uniform", reps=3, score_range=(2, 5))["best"].tolist() == [1]
