"""The batched entry: copy i of the vector env is the ParallelEnv with copy i's seed; bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("pettingzoo")

from hf_ext.mafe import education_mafe_v0, healthcare_mafe_v0, loan_mafe_v0  # noqa: E402
from hf_ext.mafe.core import episode_gap  # noqa: E402
from hf_ext.mafe.policies import FixedIntervention, ProfitGreedy, bind_all, run_episode  # noqa: E402
from hf_ext.mafe.vector import MAFEVectorEnv  # noqa: E402

MODULES = [loan_mafe_v0, healthcare_mafe_v0, education_mafe_v0]


@pytest.mark.parametrize("mod", MODULES)
@pytest.mark.parametrize("group_thresholds", [False, True])
def test_copy_equals_the_parallel_env_with_its_seed(mod, group_thresholds):
    seeds = [5, 9, 11]
    for intervention in mod.raw_env.interventions:
        kw = {"max_cycles": 4, "intervention": intervention, "group_thresholds": group_thresholds}
        venv = mod.vector_env(num_envs=len(seeds), **kw)
        vobs, _ = venv.reset(seed=seeds)
        rng = np.random.default_rng(0)
        plan = []
        while venv.agents:
            acts = {}
            for a in venv.agents:
                space = venv.single_action_space(a)
                high = space.nvec if hasattr(space, "nvec") else space.n
                acts[a] = rng.integers(0, high, size=(len(seeds), *np.shape(high)))
            plan.append((acts, venv.step(acts)))
        for i, seed in enumerate(seeds):
            env = mod.parallel_env(**kw)
            obs, _ = env.reset(seed=seed)
            assert all(np.array_equal(obs[a], vobs[a][i]) for a in obs)
            for acts, (vo, vr, _, vtr, vi) in plan:
                o, r, _, tr, info = env.step({a: acts[a][i] for a in acts})
                for a in o:
                    assert np.array_equal(o[a], vo[a][i]) and r[a] == vr[a][i] and tr[a] == vtr[a][i]
                    for part in ("reward_components", "fairness_components"):
                        assert info[a][part] == {k: v[i] for k, v in vi[a][part].items()}


def test_int_seed_and_run_episode():
    venv = loan_mafe_v0.vector_env(num_envs=3, max_cycles=5)
    a, _ = venv.reset(seed=7)
    b, _ = venv.reset(seed=[7, 8, 9])
    np.testing.assert_array_equal(a["bank_0"], b["bank_0"])
    pols = bind_all(
        {"bank_0": ProfitGreedy(), "bank_1": ProfitGreedy(), "regulator_0": FixedIntervention(0)}, venv
    )
    log = run_episode(venv, pols, seed=0)
    assert log.rewards.shape == (5, 3, 3) and log.fairness["dp_gap"].shape == (5, 3)
    assert log.present.shape == (5, 3, 2) and log.episode_gap("dp_gap").shape == (3,)
    single = run_episode(loan_mafe_v0.parallel_env(max_cycles=5), pols, seed=1)
    np.testing.assert_allclose(single.rewards, log.rewards[:, 1])
    assert single.episode_gap("dp_gap") == pytest.approx(log.episode_gap("dp_gap")[1])


def test_episode_gap_hand_computed():
    # two steps, two groups; group B is absent in step 2, so its mean is its step-1 value
    rates = np.array([[0.5, 0.2], [0.7, 0.0]])
    present = np.array([[True, True], [True, False]])
    assert float(episode_gap(rates, present)) == pytest.approx(0.6 - 0.2)
    assert float(episode_gap(rates, np.array([[True, False], [True, False]]))) == 0.0  # one group only


def test_bad_inputs():
    with pytest.raises(ValueError, match="`num_envs` must be an int >= 1, got 0"):
        loan_mafe_v0.vector_env(num_envs=0)
    with pytest.raises(TypeError, match="`env` must be a MAFE-style ParallelEnv"):
        MAFEVectorEnv(object(), 2)  # type: ignore[arg-type]
    venv = loan_mafe_v0.vector_env(num_envs=2, max_cycles=1)
    with pytest.raises(RuntimeError, match="call reset\\(\\)"):
        venv.step({})
    with pytest.raises(ValueError, match="`seed` must hold 2 seeds"):
        venv.reset(seed=[1, 2, 3])
    venv.reset(seed=0)
    ok = {"bank_0": np.array([3, 3]), "bank_1": np.array([3, 3]), "regulator_0": np.array([0, 0])}
    with pytest.raises(ValueError, match="actions of agent 'bank_0' must be integers of shape \\(2,\\)"):
        venv.step({**ok, "bank_0": np.array([3, 9])})
    with pytest.raises(ValueError, match="actions of agent 'bank_1' must be integers of shape \\(2,\\)"):
        venv.step({**ok, "bank_1": np.array([3])})
    with pytest.raises(ValueError, match="one array per agent"):
        venv.step({"bank_0": ok["bank_0"]})
    venv.step(ok)
    with pytest.raises(RuntimeError, match="call reset\\(\\)"):
        venv.step(ok)
