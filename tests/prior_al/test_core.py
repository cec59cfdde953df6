"""PriorAL math on hand-computed cases and the split / query invariants."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.prior_al import core

P_F = np.array([[0.5, 0.3, 0.2]])
P_L = np.array([[0.6, 0.2, 0.2]])


def test_poe_and_entropy_by_hand():
    p = core.poe(P_F, P_L, eps=0.0)
    np.testing.assert_allclose(p, [[0.75, 0.15, 0.10]])
    # -(.75 ln .75 + .15 ln .15 + .1 ln .1)
    assert core.entropy(p)[0] == pytest.approx(0.7306, abs=1e-4)


@pytest.mark.parametrize(
    ("pseudo", "mode", "expected"),
    [(0, "count_ratio", 0.7306), (2, "count_ratio", 0.1218), (2, "inverse", 4.3836), (2, None, 0.7306)],
)
def test_imbalance_weight_by_hand(pseudo, mode, expected):
    h = core.entropy(core.poe(P_F, P_L, eps=0.0))
    w = core.class_weights(np.array([6, 3, 1]), np.array([pseudo]), mode)
    assert (h * w)[0] == pytest.approx(expected, abs=1e-4)


def test_imbalance_entropy_counts_prior_argmax_over_rows():
    prior = np.array([[0.8, 0.2], [0.7, 0.3], [0.9, 0.1], [0.3, 0.7]])  # counts w = [3, 1]
    p_bar = np.full((4, 2), 0.5)
    h = core.imbalance_entropy(p_bar, prior, "count_ratio")
    np.testing.assert_allclose(h, np.log(2) * np.array([1, 1, 1, 1 / 3]))
    np.testing.assert_allclose(core.imbalance_entropy(p_bar, prior, "inverse")[3], 3 * np.log(2))


def test_smoothing_keeps_rows_normalised_and_positive():
    p = np.array([[1.0, 0.0, 0.0], [0.2, 0.3, 0.5]])
    s = core.smooth(p)
    np.testing.assert_allclose(s.sum(axis=1), 1.0)
    assert (s > 0).all()
    # a zero in one expert does not erase the class from the product
    assert core.poe(np.array([[0.0, 1.0]]), np.array([[0.9, 0.1]]))[0, 0] > 0


def test_margin_by_hand():
    np.testing.assert_allclose(core.margin(np.array([[0.5, 0.3, 0.2], [0.4, 0.4, 0.2]])), [0.2, 0.0])


@pytest.mark.parametrize("rho", [0.3, 0.5, 0.7, 1.0])
def test_split_sizes_and_disjointness(rho):
    scores = np.random.default_rng(0).random(37)
    noise, clean = core.split_noise_clean(scores, rho)
    assert len(noise) == int(np.floor(rho * 37))
    assert set(noise).isdisjoint(clean) and set(noise) | set(clean) == set(range(37))
    if len(clean):
        assert scores[noise].min() >= scores[clean].max()


def test_select_queries_is_top_entropy_inside_noise_set():
    p = np.array([[0.5, 0.5], [0.9, 0.1], [0.6, 0.4], [0.99, 0.01], [0.55, 0.45]])
    noise = np.array([1, 2, 3, 4])
    q = core.select_queries(p, noise, 2)
    assert q.tolist() == [4, 2]  # row 0 is the most uncertain but outside the noise set
    assert len(core.select_queries(p, noise, 10)) == 4


def test_class_balanced_queries_by_hand():
    # predicted classes: rows 0,1 -> class 0 (entropies high, low); rows 2,3 -> class 1
    p = np.array([[0.55, 0.45], [0.9, 0.1], [0.4, 0.6], [0.2, 0.8]])
    # class 1 has fewer labels: its most uncertain row first, then tie 1-1 -> class 0 (lower index)
    assert core.class_balanced_queries(p, np.array([3, 2]), 3).tolist() == [2, 0, 3]


def test_agreement_filter_by_hand():
    p_bar = np.array([[0.97, 0.03], [0.5, 0.5]])
    assert core.agreement_keep(p_bar, np.array([1, 1])).tolist() == [False, True]


@pytest.mark.parametrize(
    ("p", "message"),
    [
        (np.array([[0.5, 0.6]]), "sum to 1"),
        (np.array([[1.2, -0.2]]), "negative"),
        (np.array([[np.nan, 1.0]]), "NaN"),
        (np.array([[0.5, 0.5], [0.5, 0.5]]), "shape"),
    ],
)
def test_check_probabilities_errors(p, message):
    with pytest.raises(ValueError, match=message):
        core.check_probabilities(p, "prior(X)", 1, 2)


def test_unknown_class_weighting():
    with pytest.raises(ValueError, match="class_weighting"):
        core.class_weights(np.array([1, 2]), np.array([0]), "log")


def test_coreset_is_greedy_k_center():
    X = np.array([[0.0], [1.0], [10.0], [4.0]])
    # farthest from the labelled point 0 is 10; then 4 (6 from 10, 4 from 0) beats 1
    assert core.coreset_queries(X, np.array([[0.0]]), 2).tolist() == [2, 3]
    assert core.coreset_queries(X, np.zeros((0, 1)), 1).tolist() == [2]  # farthest from the mean 3.75
    assert len(core.coreset_queries(X, np.array([[0.0]]), 9)) == 4


def test_badge_picks_largest_gradient_first_and_distinct_rows():
    rng = np.random.default_rng(0)
    p = np.array([[1.0, 0.0], [0.5, 0.5], [0.6, 0.4], [0.9, 0.1]])
    h = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [2.0, 2.0]])
    picks = core.badge_queries(p, h, 3, rng)
    # |g|^2 = |p - e_yhat|^2 (|h|^2 + 1): 0, 0.5 * 3, 0.32 * 2, 0.02 * 9
    assert picks[0] == 1 and len(set(picks.tolist())) == 3
    assert len(core.badge_queries(p, h, 10, rng)) == 4
    again = core.badge_queries(p, h, 3, np.random.default_rng(0))
    np.testing.assert_array_equal(picks, again)
