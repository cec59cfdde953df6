"""The benchmark's best-constant baseline: the action grid and coordinate-wise optimality of the search."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("pettingzoo")


def test_action_grid_enumerates_every_action():
    from gymnasium import spaces

    from benchmarks.mafe._constant import action_grid

    assert action_grid(spaces.Discrete(3)).tolist() == [0, 1, 2]
    grid = action_grid(spaces.MultiDiscrete([2, 3]))
    assert grid.tolist() == [[0, 0], [0, 1], [0, 2], [1, 0], [1, 1], [1, 2]]
    with pytest.raises(TypeError, match="Discrete"):
        action_grid(spaces.Box(0, 1, (2,)))


def test_best_constant_is_coordinatewise_optimal():
    from benchmarks.mafe._constant import action_grid, best_constant, score
    from hf_ext.mafe import loan_mafe_v0

    env = loan_mafe_v0.parallel_env(max_cycles=4, population_size=200, n_per_step=40, intervention="subsidy")
    seeds = [5, 6]
    rng = np.random.default_rng(0)
    best, value, _ = best_constant(env, seeds, "dp_gap", 5.0, screen=8, sweeps=10, rng=rng)
    for agent in env.possible_agents:
        grid = action_grid(env.action_space(agent))
        joint = {a: np.repeat(np.asarray(best[a])[None], len(grid), 0) for a in env.possible_agents}
        joint[agent] = grid
        s = score(env, joint, seeds, "dp_gap", 5.0)
        assert s.max() <= value + 1e-12
        assert s[int(best[agent])] == pytest.approx(value)
