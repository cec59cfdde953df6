"""PettingZoo conformance of the three MAFE-style environments (and determinism over full episodes)."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = [requires("pettingzoo"), pytest.mark.filterwarnings("ignore::UserWarning")]

ENVS = ["loan_mafe_v0", "healthcare_mafe_v0", "education_mafe_v0"]


def _module(name):
    return importlib.import_module(f"hf_ext.mafe.{name}")


def _random_actions(env, rng):
    out = {}
    for a in env.agents:
        space = env.action_space(a)
        out[a] = rng.integers(0, space.nvec) if hasattr(space, "nvec") else int(rng.integers(space.n))
    return out


@pytest.mark.parametrize("name", ENVS)
def test_pettingzoo_suites(name):
    from pettingzoo.test import (
        api_test,
        max_cycles_test,
        parallel_api_test,
        parallel_seed_test,
        render_test,
        seed_test,
        state_test,
    )

    mod = _module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_api_test(mod.parallel_env(), num_cycles=1000)
        api_test(mod.env(), num_cycles=1000)
        parallel_seed_test(mod.parallel_env)
        seed_test(mod.env)
        max_cycles_test(mod)
        state_test(mod.env(), mod.parallel_env())
        render_test(mod.env)


def _matrix():
    out = []
    for name in ENVS:
        ivs = _module(name).raw_env.interventions
        counts = {"loan_mafe_v0": ("n_banks", (1, 3)), "healthcare_mafe_v0": ("n_hospitals", (1, 3))}.get(
            name
        )
        for iv in ivs:
            for n in counts[1] if counts else (None,):
                for gt in (False, True):
                    kw = {"intervention": iv, "group_thresholds": gt, **({counts[0]: n} if counts else {})}
                    out.append(pytest.param(name, kw, id=f"{name}-{iv}-{n}-{gt}"))
    return out


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kw"), _matrix())
def test_api_matrix(name, kw):
    from pettingzoo.test import api_test, parallel_api_test, parallel_seed_test

    mod = _module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_api_test(mod.parallel_env(**kw), num_cycles=1000)
        api_test(mod.env(**kw), num_cycles=1000)
        parallel_seed_test(lambda **k: mod.parallel_env(**kw, **k))


def _episode(mod, seed, **kw):
    from gymnasium.utils.env_checker import data_equivalence

    env = mod.parallel_env(max_cycles=15, **kw)
    rng = np.random.default_rng(123)  # same action sequence for both runs
    trace = [env.reset(seed=seed)]
    while env.agents:
        trace.append(env.step(_random_actions(env, rng)))
    return trace, data_equivalence


@pytest.mark.parametrize("name", ENVS)
def test_full_episode_determinism(name):
    mod = _module(name)
    iv = mod.raw_env.interventions[1]
    a, eq = _episode(mod, 7, intervention=iv)
    b, _ = _episode(mod, 7, intervention=iv)
    c, _ = _episode(mod, 8, intervention=iv)
    assert eq(a, b)
    assert not eq(a, c)


@pytest.mark.parametrize("name", ENVS)
def test_infos_are_json_and_never_nan(name):
    import json
    import math

    mod = _module(name)
    env = mod.parallel_env(
        max_cycles=5,
        intervention=mod.raw_env.interventions[-1],
        n_per_step=3,
        population_size=6,
        groups=("A", "B", "C"),
    )
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    while env.agents:
        _, rew, _, _, infos = env.step(_random_actions(env, rng))
        json.dumps(infos)
        for a, info in infos.items():
            assert type(rew[a]) is float
            values = [*info["reward_components"].values(), *info["fairness_components"].values()]
            assert all(isinstance(v, float) and math.isfinite(v) for v in values)
