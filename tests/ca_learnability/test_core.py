"""Exact Boolean analysis: hand values (Conway's Life, textbook functions), reference sums, bad inputs."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from hf_ext.ca_learnability.automata import life_like_rule
from hf_ext.ca_learnability.core import (
    average_sensitivity,
    degree_weights,
    fourier_spectrum,
    fwht,
    influences,
    junta_profile,
    spectral_features,
)


def _table(f, n: int) -> np.ndarray:
    """Truth table (entry t = f(bits of t), bit i = (t >> i) & 1) of a 0/1 function of n bits."""
    return np.array([f([(t >> i) & 1 for i in range(n)]) for t in range(1 << n)], dtype=np.uint8)


def _direct_spectrum(table: np.ndarray) -> np.ndarray:
    """f̂(S) = 2**-n sum_x f(x) chi_S(x) in the ±1 encoding, by the O(4**n) double sum."""
    size = table.size
    f = 1 - 2 * table.astype(np.float64)
    t = np.arange(size)
    signs = np.array([[(-1) ** bin(s & x).count("1") for x in t] for s in t])
    return signs @ f / size


def _flip_sensitivity(table: np.ndarray) -> float:
    n = table.size.bit_length() - 1
    t = np.arange(table.size)
    return float(sum((table != table[t ^ (1 << i)]).mean() for i in range(n)))


LIFE_DEGREES = [0.2053, 0.2273, 0.0308, 0.1743, 0.0205, 0.1025, 0.0649, 0.0308, 0.1316, 0.0120]


def test_conways_life_hand_values() -> None:
    spec = fourier_spectrum(life_like_rule([3], [2, 3]).table)
    inf = influences(spec)
    assert inf[4] == pytest.approx(28 / 256)  # the centre matters only when cnt == 2
    assert np.allclose(np.delete(inf, 4), 98 / 256)
    assert average_sensitivity(spec) == pytest.approx(812 / 256)
    assert average_sensitivity(spec, normalize=True) == pytest.approx(812 / 256 / 9)
    w = degree_weights(spec)
    assert w[0] == pytest.approx((232 / 512) ** 2)  # P(alive next) = 140/512
    assert np.allclose(w, LIFE_DEGREES, rtol=0, atol=1e-4)
    assert w.sum() == pytest.approx(1.0, abs=1e-12)


def test_textbook_functions() -> None:
    dictator = fourier_spectrum(_table(lambda b: b[2], 4))
    assert np.allclose(degree_weights(dictator), [0, 1, 0, 0, 0])
    assert average_sensitivity(dictator) == pytest.approx(1.0)
    for n in (1, 3, 6):
        parity = fourier_spectrum(_table(lambda b: sum(b) % 2, n))
        assert degree_weights(parity)[n] == pytest.approx(1.0)
        assert average_sensitivity(parity) == pytest.approx(n)
    maj = fourier_spectrum(_table(lambda b: int(sum(b) >= 2), 3))
    assert np.allclose(maj[[1, 2, 4]], 0.5) and maj[7] == pytest.approx(-0.5)
    assert np.allclose(degree_weights(maj), [0, 0.75, 0, 0.25])
    assert average_sensitivity(maj) == pytest.approx(1.5)
    assert np.allclose(fourier_spectrum([1, -1, -1, 1], encoding="pm1"), [0, 0, 0, 1])


def test_constant_function_has_no_profile() -> None:
    spec = fourier_spectrum(np.zeros(16, np.uint8))
    assert average_sensitivity(spec) == 0.0
    with pytest.warns(RuntimeWarning, match="constant"):
        assert np.isnan(degree_weights(spec, normalize=True)).all()
    assert np.allclose(degree_weights(spec), [1, 0, 0, 0, 0])


def test_normalised_degree_profile() -> None:
    w = degree_weights(fourier_spectrum(life_like_rule([3], [2, 3]).table), normalize=True)
    rest = 1 - (232 / 512) ** 2
    assert w[0] == 0.0 and w.sum() == pytest.approx(1.0)
    assert w[1] == pytest.approx(LIFE_DEGREES[1] / rest, abs=1e-4)
    feats = spectral_features(fourier_spectrum(life_like_rule([3], [2, 3]).table))
    assert feats["w_le2"] == pytest.approx(w[1] + w[2])
    assert feats["w_ge4"] == pytest.approx(w[4:].sum())
    assert feats["as"] == pytest.approx(812 / 256) and feats["n"] == 9


@pytest.mark.parametrize("n", [1, 2, 5, 8])
def test_fwht_matches_the_direct_sum(n: int) -> None:
    table = np.random.default_rng(n).integers(0, 2, 1 << n)
    assert np.allclose(fourier_spectrum(table), _direct_spectrum(table), atol=1e-12)


def test_fwht_direct_sum_n10_and_integer_exactness() -> None:
    table = np.random.default_rng(10).integers(0, 2, 1 << 10)
    assert np.allclose(fourier_spectrum(table), _direct_spectrum(table), atol=1e-12)
    out = fwht(np.array([1, 1, 1, -1]))
    assert out.dtype.kind == "i" and out.tolist() == [2, 2, 2, -2]
    x = np.array([3.0, 1.0])
    fwht(x)  # noqa: E702
    assert x.tolist() == [3.0, 1.0]  # input left untouched


@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 1e-6)])
def test_parseval(dtype, tol: float) -> None:  # noqa: ANN001
    table = np.random.default_rng(0).integers(0, 2, 1 << 16)
    spec = fourier_spectrum(table, dtype=dtype)
    assert spec.dtype == dtype
    assert abs(float(np.square(spec, dtype=np.float64).sum()) - 1.0) < tol


@pytest.mark.parametrize("n", [3, 7, 12])
def test_sensitivity_equals_flip_counting(n: int) -> None:
    table = (np.random.default_rng(n).random(1 << n) < 0.3).astype(np.uint8)
    spec = fourier_spectrum(table)
    assert average_sensitivity(spec) == pytest.approx(_flip_sensitivity(table), abs=1e-10)
    t = np.arange(table.size)
    flips = [(table != table[t ^ (1 << i)]).mean() for i in range(n)]
    assert np.allclose(influences(spec), flips)


@pytest.mark.slow
def test_junta_profile_hand_values() -> None:
    centre = fourier_spectrum(_table(lambda b: b[4], 9))
    corner = fourier_spectrum(_table(lambda b: b[0], 9))
    both = fourier_spectrum(_table(lambda b: b[4] & b[0], 9))  # AND: weights 1/4 each on {}, {4}, {0}, {0,4}
    assert np.allclose(junta_profile(centre), [1, 1])
    assert np.allclose(junta_profile(corner), [0, 1])
    assert np.allclose(junta_profile(both), [1 / 3, 1])
    # k = 2 window (25 bits): a function of the centre 3x3 only has J_1 = 1
    inner = [6, 7, 8, 11, 12, 13, 16, 17, 18]
    t = np.arange(1 << 25, dtype=np.int64)
    votes = sum((t >> i) & 1 for i in inner)
    spec = fourier_spectrum((votes >= 5).astype(np.uint8), dtype=np.float32)
    profile = junta_profile(spec)
    assert profile.shape == (3,) and np.allclose(profile[1:], 1, atol=1e-5) and profile[0] < 0.2


def test_junta_profile_grows_and_life_centre_share() -> None:
    spec = fourier_spectrum(life_like_rule([3], [2, 3]).table)
    profile = junta_profile(spec)
    expected = spec[16] ** 2 / (1 - spec[0] ** 2)  # the centre alone: S = {4}
    assert profile[0] == pytest.approx(expected) and profile[1] == pytest.approx(1.0)


def test_bad_tables_name_the_argument() -> None:
    with pytest.raises(ValueError, match=r"`table`.*power of two.*\(3,\)"):
        fourier_spectrum([0, 1, 1])
    with pytest.raises(ValueError, match=r"`table` entries must be in \{0, 1\}.*2 at index 1"):
        fourier_spectrum([0, 2, 1, 0])
    with pytest.raises(ValueError, match=r"encoding='pm1'.*0 at index 0"):
        fourier_spectrum([0, 1, 1, -1], encoding="pm1")
    with pytest.raises(ValueError, match="`encoding` must be one of"):
        fourier_spectrum([0, 1], encoding="bool")
    with pytest.raises(ValueError, match=r"n=27.*monte_carlo"):
        fourier_spectrum(np.broadcast_to(np.uint8(0), (1 << 27,)))
    with pytest.raises(ValueError, match="`spectrum`"):
        influences(np.ones(6))
    with pytest.raises(ValueError, match="odd"):
        junta_profile(fourier_spectrum(np.zeros(16, np.uint8)))
    with pytest.raises(ValueError, match="`x`"):
        fwht(np.ones(3))


def test_all_subsets_degree_bookkeeping() -> None:
    """Degree weights equal a per-subset popcount tally for a random 6-bit function."""
    spec = fourier_spectrum(np.random.default_rng(1).integers(0, 2, 64))
    want = np.zeros(7)
    for s, c in zip(itertools.count(), spec):
        want[bin(s).count("1")] += c**2
    assert np.allclose(degree_weights(spec), want)
