"""The MAFE-style environments under the MARL libraries people use: typed flat infos, joint ``Discrete``
actions, torchrl's ``PettingZooWrapper`` (with and without the state), SuperSuit + Stable-Baselines3 and
RLlib's ``ParallelPettingZooEnv`` (the ``rllib`` extra).

Short rollouts only; training belongs in the benchmark."""

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


@pytest.mark.parametrize("group_thresholds", [False, True])
@pytest.mark.parametrize("name", ENVS)
def test_flat_infos_are_members_of_the_info_space(name, group_thresholds):
    from hf_ext.mafe.wrappers import FlatInfos

    env = FlatInfos(_module(name).parallel_env(max_cycles=3, group_thresholds=group_thresholds))
    for a in env.possible_agents:
        env.action_space(a).seed(0)
    _, infos = env.reset(seed=0)
    keys = {a: list(env.info_space(a)) for a in env.possible_agents}
    for step in range(4):
        for a, info in infos.items():
            assert list(info) == keys[a], (step, a)
            assert env.info_space(a).contains(info), (step, a, info)
        if not env.agents:
            break
        _, _, _, _, infos = env.step({a: env.action_space(a).sample() for a in env.agents})
    assert step == 3


def test_flat_infos_match_the_nested_components():
    from hf_ext.mafe import loan_mafe_v0
    from hf_ext.mafe.wrappers import FlatInfos

    kw = {"max_cycles": 3, "group_shares": (0.995, 0.005), "population_size": 400, "n_per_step": 10}
    nested, flat = loan_mafe_v0.parallel_env(**kw), FlatInfos(loan_mafe_v0.parallel_env(**kw))
    nested.reset(seed=3)
    flat.reset(seed=3)
    actions = {"bank_0": 2, "bank_1": 4, "regulator_0": 1}
    seen_empty = False
    for _ in range(3):
        *_, ref = nested.step(actions)
        *_, out = flat.step(actions)
        for a in ref:
            for part in ("reward_components", "fairness_components"):
                for k, v in ref[a][part].items():
                    assert out[a][f"{part}/{k}"] == np.float32(v)
            empty = [g for g, e in zip(("A", "B"), out[a]["empty_groups"]) if e]
            assert empty == ref[a]["empty_groups"]
            assert out[a]["empty_groups"].dtype == np.int8
            seen_empty |= bool(empty)
    assert seen_empty  # group B (2 of 400) is missing from some 10-person samples


def test_discrete_actions_round_trip_and_bad_index():
    from hf_ext.mafe import loan_mafe_v0
    from hf_ext.mafe.wrappers import DiscreteActions

    env = DiscreteActions(loan_mafe_v0.parallel_env(group_thresholds=True, max_cycles=2))
    assert env.action_space("bank_0").n == 64 and env.action_space("regulator_0").n == 5
    assert env.action_space("bank_0") is env.action_space("bank_0")
    for index in range(64):
        taus = env.decode_action("bank_0", index)
        assert np.ravel_multi_index(tuple(taus), (8, 8)) == index
    assert env.decode_action("regulator_0", 3) == 3
    for bad in (64, -1, 1.5, "a"):
        with pytest.raises(ValueError, match="bank_0"):
            env.decode_action("bank_0", bad)
    ref = loan_mafe_v0.parallel_env(group_thresholds=True, max_cycles=2)
    env.reset(seed=1)
    ref.reset(seed=1)
    _, rew, *_ = env.step({"bank_0": 11, "bank_1": 63, "regulator_0": 0})
    _, ref_rew, *_ = ref.step({"bank_0": np.array([1, 3]), "bank_1": np.array([7, 7]), "regulator_0": 0})
    assert rew == ref_rew


@pytest.mark.parametrize("name", ENVS)
def test_wrappers_pass_the_parallel_api_test(name):
    from pettingzoo.test import parallel_api_test

    from hf_ext.mafe.wrappers import DiscreteActions, FlatInfos

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = FlatInfos(DiscreteActions(_module(name).parallel_env(max_cycles=20, group_thresholds=True)))
        parallel_api_test(env, num_cycles=30)


@requires("marl-libs")
@pytest.mark.parametrize("return_state", [False, True])
@pytest.mark.parametrize("name", ENVS)
def test_torchrl_pettingzoo_wrapper(name, return_state):
    from torchrl.envs.libs.pettingzoo import PettingZooWrapper

    from hf_ext.mafe.wrappers import FlatInfos

    base = _module(name).parallel_env(max_cycles=3, group_thresholds=True)
    env = PettingZooWrapper(FlatInfos(base), return_state=return_state, seed=0)
    td = env.rollout(3)
    assert td.batch_size == (3,)
    for group, agents in env.group_map.items():
        obs = td["next", group, "observation"]
        assert obs.shape == (3, len(agents), base.observation_space(agents[0]).shape[0])
        info = td["next", group, "info"]
        assert set(info.keys()) == set(base.info_space(agents[0]))
    assert bool(td["next", "done"][-1].all())
    if return_state:
        assert td["next", "state"].shape == (3, *base.state_space.shape)
        assert td["next", "state"].dtype.is_floating_point


@requires("marl-libs")
@pytest.mark.parametrize("group_thresholds", [False, True])
@pytest.mark.parametrize("name", ENVS)
def test_supersuit_padding_and_sb3(name, group_thresholds):
    import supersuit as ss
    from stable_baselines3 import PPO

    from hf_ext.mafe.wrappers import DiscreteActions

    env = _module(name).parallel_env(max_cycles=4, group_thresholds=group_thresholds)
    if group_thresholds:
        env = DiscreteActions(env)
    env = ss.pad_observations_v0(ss.pad_action_space_v0(env))
    venv = ss.concat_vec_envs_v1(ss.pettingzoo_env_to_vec_env_v1(env), 1, base_class="stable_baselines3")
    model = PPO("MlpPolicy", venv, n_steps=8, batch_size=8, n_epochs=1, device="cpu")
    model.learn(total_timesteps=8)
    obs = venv.reset()
    actions, _ = model.predict(obs, deterministic=True)
    assert actions.shape == (len(env.possible_agents),)
    venv.step(actions)
    venv.close()


@pytest.mark.slow  # importing RLlib takes ~4 s
@requires("rllib")
@pytest.mark.parametrize("name", ENVS)
def test_rllib_ppo_update_on_every_agent(name):
    """One PPO update of one module per agent through RLlib's own sampler and learner, in-process (no Ray
    cluster is started), on the fairness-penalised team reward."""
    import torch
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core import COMPONENT_RL_MODULE
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    from hf_ext.mafe.wrappers import ScalarizeFairness

    module = _module(name)

    def make(_config):
        env = module.parallel_env(max_cycles=4, group_thresholds=True)
        return ParallelPettingZooEnv(ScalarizeFairness(env, beta=5.0, shared=True))

    agents = module.parallel_env().possible_agents
    config = (
        PPOConfig()
        .environment(make)
        .env_runners(num_env_runners=0, rollout_fragment_length=8)
        .learners(num_learners=0)
        .training(train_batch_size_per_learner=8, minibatch_size=8, num_epochs=1)
        .multi_agent(policies=set(agents), policy_mapping_fn=lambda agent_id, *args, **kwargs: agent_id)
        .rl_module(model_config={"fcnet_hiddens": [8]})
        .debugging(seed=0)
    )
    runner = MultiAgentEnvRunner(config=config)
    episodes = runner.sample(num_timesteps=8)
    assert {a for ep in episodes for a in ep.agent_ids} == set(agents)
    learner = config.build_learner(spaces=runner.get_spaces())

    def weights(rl_module, agent):
        return rl_module[agent].state_dict()["encoder.actor_encoder.net.mlp.0.weight"].detach().clone()

    before = {a: weights(learner.module, a) for a in agents}
    results = learner.update(episodes=episodes)
    for a in agents:
        assert np.isfinite(results[a]["total_loss"].peek()), a
        assert not torch.equal(weights(learner.module, a), before[a]), a
    runner.set_state(learner.get_state(components=COMPONENT_RL_MODULE))  # the sampler plays the update
    for a in agents:
        assert torch.equal(weights(runner.module, a), weights(learner.module, a)), a
    assert sum(len(ep) for ep in runner.sample(num_timesteps=8)) >= 8


def test_supersuit_rejects_the_multidiscrete_mix_without_the_wrapper():
    ss = pytest.importorskip("supersuit")
    from hf_ext.mafe import loan_mafe_v0

    with pytest.raises(AssertionError, match="same general shape"):
        ss.pad_action_space_v0(loan_mafe_v0.parallel_env(group_thresholds=True))
