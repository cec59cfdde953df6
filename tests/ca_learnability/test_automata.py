"""Rules, rule families, evolution and exact k-step truth tables."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.ca_learnability.automata import (
    CARule,
    ca_step,
    ca_truth_table,
    d4_orbits,
    d4_transforms,
    life_like_rule,
    random_rule,
    sample_rules,
    window_function,
)

LIFE = life_like_rule([3], [2, 3])


def _window_index(grid: np.ndarray, k: int) -> np.ndarray:
    """Each cell's wrapped (2k+1)-window as an integer, bit (2k+1)*dy + dx (top-left = bit 0)."""
    side = 2 * k + 1
    index = np.zeros(grid.shape, dtype=np.int64)
    for dy in range(side):
        for dx in range(side):
            shifted = np.roll(grid, (k - dy, k - dx), axis=(-2, -1)).astype(np.int64)
            index |= shifted << (side * dy + dx)
    return index


def test_life_table_by_hand() -> None:
    t = LIFE.table
    assert t[0b000_010_000] == 0  # lone live centre dies
    assert t[0b000_000_111] == 1  # dead centre, three live neighbours: birth
    assert t[0b000_010_011] == 1  # live centre, two neighbours: survives
    assert t[0b111_010_111] == 0  # live centre, six neighbours: dies
    assert int(t.sum()) == 140 and LIFE.name == "B3/S23"
    assert not LIFE.is_constant and LIFE.is_d4_invariant


def test_blinker_and_glider() -> None:
    g = np.zeros((6, 6), np.uint8)
    g[2, 1:4] = 1
    assert ca_step(g, LIFE)[1:4, 2].tolist() == [1, 1, 1] and ca_step(g, LIFE).sum() == 3
    assert (ca_step(g, LIFE, steps=2) == g).all()
    glider = np.zeros((10, 10), np.uint8)
    glider[0, 1] = glider[1, 2] = glider[2, 0] = glider[2, 1] = glider[2, 2] = 1
    assert (ca_step(glider, LIFE, steps=4) == np.roll(glider, (1, 1), axis=(0, 1))).all()


def test_d4_orbits_and_invariance() -> None:
    labels = d4_orbits()
    assert labels.shape == (512,) and len(np.unique(labels)) == 102  # Burnside
    maps = d4_transforms()
    assert (maps[0] == np.arange(512)).all()
    assert all(sorted(m) == list(range(512)) for m in maps)  # each is a permutation
    for seed in range(3):
        rule = random_rule("d4", seed=seed)
        assert rule.is_d4_invariant
        assert all((rule.table[m] == rule.table).all() for m in maps)
    assert random_rule("outer_totalistic", seed=4).is_d4_invariant  # Life-like rules are symmetric
    assert not CARule(np.eye(1, 512, 1, dtype=np.uint8)[0]).is_d4_invariant


def test_rule_families() -> None:
    rule = random_rule("outer_totalistic", p=1.0)
    assert rule.name == "B012345678/S012345678" and rule.is_constant
    assert random_rule("local", p=0.0).is_constant
    local = random_rule("local", seed=3)
    assert 150 < int(local.table.sum()) < 360 and not local.is_d4_invariant
    rules = sample_rules(6, seed=0)
    assert rules[0].name == "B3/S23" and len({r.table.tobytes() for r in rules}) == 6
    assert not any(r.is_constant for r in rules)
    assert [r.name for r in sample_rules(6, seed=0)] == [r.name for r in rules]  # seeded


@pytest.mark.parametrize("k", [1, 2])
@pytest.mark.parametrize("rule", [LIFE, random_rule("local", seed=1)], ids=["life", "local"])
def test_steps_equal_truth_table_lookup(k: int, rule: CARule) -> None:
    grids = np.random.default_rng(k).integers(0, 2, (4, 16, 16))
    table = ca_truth_table(rule, k)
    assert table.shape == (1 << (2 * k + 1) ** 2,) and table.dtype == np.uint8
    assert (ca_step(grids, rule, steps=k) == table[_window_index(grids, k)]).all()


def test_window_function_matches_table() -> None:
    rule = random_rule("d4", seed=2)
    table = ca_truth_table(rule, 2)
    idx = np.random.default_rng(0).integers(0, 1 << 25, 2000)
    bits = (idx[:, None] >> np.arange(25)) & 1
    assert (window_function(rule, 2)(bits) == table[idx]).all()
    assert (window_function(rule, 1)((np.arange(512)[:, None] >> np.arange(9)) & 1) == rule.table).all()


def test_torch_and_zero_boundary() -> None:
    torch = pytest.importorskip("torch")
    grids = np.random.default_rng(0).integers(0, 2, (2, 9, 11))
    out = ca_step(torch.as_tensor(grids), LIFE, steps=2)
    assert out.dtype == torch.uint8 and (out.numpy() == ca_step(grids, LIFE, steps=2)).all()
    zero = ca_step(grids, LIFE, boundary="zero")
    padded = np.pad(grids, ((0, 0), (1, 1), (1, 1)))
    assert (zero == ca_step(padded, LIFE)[:, 1:-1, 1:-1]).all()  # a dead frame on a torus


def test_small_torus_warns() -> None:
    with pytest.warns(UserWarning, match="smaller than the 5x5 window"):
        out = ca_step(np.ones((3, 4), np.uint8), LIFE, steps=2)
    assert out.shape == (3, 4)


def test_bad_inputs_name_the_argument() -> None:
    with pytest.raises(ValueError, match=r"`B\[1\]` must be an int in \[0, 8\], got 9"):
        life_like_rule([3, 9], [2])
    with pytest.raises(ValueError, match=r"`S\[0\]`.*-1"):
        life_like_rule([3], [-1])
    with pytest.raises(TypeError, match="`B` must be a list"):
        life_like_rule(3, [2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="`symmetric=True`.*not invariant"):
        CARule(np.eye(1, 512, 1, dtype=np.uint8)[0], symmetric=True)
    with pytest.raises(ValueError, match=r"`table` must be a 512-entry.*\(9,\)"):
        CARule(np.zeros(9))
    with pytest.raises(ValueError, match="`table` entries must be 0 or 1, got 2"):
        CARule(np.full(512, 2))
    with pytest.raises(ValueError, match="`steps` must be an int >= 1, got 0"):
        ca_step(np.zeros((5, 5)), LIFE, steps=0)
    with pytest.raises(ValueError, match="`steps` must be an int >= 1"):
        ca_truth_table(LIFE, 0)
    with pytest.raises(ValueError, match=r"n=49.*monte_carlo"):
        ca_truth_table(LIFE, 3)
    with pytest.raises(ValueError, match="`boundary`"):
        ca_step(np.zeros((5, 5)), LIFE, boundary="reflect")
    with pytest.raises(ValueError, match="`kind`"):
        random_rule("totalistic")
    with pytest.raises(ValueError, match="`p`"):
        random_rule("local", p=1.5)
    with pytest.raises(ValueError, match=r"`grid` must have shape \[..., H, W\]"):
        ca_step(np.zeros(5), LIFE)
