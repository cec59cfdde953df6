"""Wrappers, scripted policies and the single-agent Gymnasium view."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("pettingzoo")

from hf_ext.mafe import loan_mafe_v0  # noqa: E402
from hf_ext.mafe.policies import (  # noqa: E402
    ApproveAll,
    ApproveNone,
    FixedIntervention,
    GapTriggeredIntervention,
    ProfitGreedy,
    RandomPolicy,
    bind_all,
    run_episode,
)
from hf_ext.mafe.wrappers import (  # noqa: E402
    ComponentLogger,
    FairnessConstraint,
    ScalarizeFairness,
    SingleAgentView,
)

ACT = {"bank_0": 3, "bank_1": 2, "regulator_0": 1}


def _pair(wrapper_fn, seed=4):
    base = loan_mafe_v0.parallel_env(intervention="subsidy", max_cycles=3)
    wrapped = wrapper_fn(loan_mafe_v0.parallel_env(intervention="subsidy", max_cycles=3))
    base.reset(seed=seed)
    wrapped.reset(seed=seed)
    return base.step(ACT), wrapped.step(ACT)


def test_scalarize_matches_hand_formula():
    (_, rew, _, _, infos), (_, wrew, _, _, winfos) = _pair(
        lambda e: ScalarizeFairness(
            e,
            alpha=0.5,
            beta=2.0,
            penalty_keys=("dp_gap", "eo_gap"),
            reward_weights={"interest": 1.0, "subsidy_cost": 1.0},
        )
    )
    for a in rew:
        c, f = infos[a]["reward_components"], infos[a]["fairness_components"]
        want = (
            c.get("interest", 0.0)
            + c.get("subsidy_cost", 0.0)
            + 0.5 * (f["rate/A"] + f["rate/B"])
            - 2.0 * (f["dp_gap"] + f["eo_gap"])
        )
        assert wrew[a] == pytest.approx(want)
    assert winfos == infos


def test_scalarize_identity_and_shared():
    (_, rew, *_), (_, wrew, *_) = _pair(lambda e: ScalarizeFairness(e, alpha=0.0, beta=0.0, shared=False))
    assert wrew == pytest.approx(rew)
    (_, rew, _, _, infos), (_, team, *_) = _pair(lambda e: ScalarizeFairness(e, beta=5.0, shared=True))
    want = sum(rew.values()) - 5.0 * infos["bank_0"]["fairness_components"]["dp_gap"]
    assert all(v == pytest.approx(want) for v in team.values())


def test_fairness_constraint_cost():
    (_, rew, _, _, infos), (_, crew, _, _, cinfos) = _pair(
        lambda e: FairnessConstraint(e, limits={"dp_gap": 0.1, "eo_gap": 0.05})
    )
    assert crew == rew
    f = infos["bank_0"]["fairness_components"]
    want = max(0.0, f["dp_gap"] - 0.1) + max(0.0, f["eo_gap"] - 0.05)
    assert cinfos["bank_0"]["cost"] == pytest.approx(want)


def test_component_logger():
    env = ComponentLogger(loan_mafe_v0.parallel_env(max_cycles=4))
    env.reset(seed=0)
    while env.agents:
        env.step(ACT)
    assert env.series("dp_gap").shape == (4,)
    assert "bank_0/interest" in env.log[0]
    with pytest.raises(KeyError, match="available"):
        env.series("nope")


def test_wrappers_pass_parallel_api():
    from pettingzoo.test import parallel_api_test

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for wrap in (
            lambda e: ScalarizeFairness(e, beta=1.0),
            lambda e: FairnessConstraint(e, {"dp_gap": 0.1}),
            ComponentLogger,
        ):
            parallel_api_test(wrap(loan_mafe_v0.parallel_env(max_cycles=30)), num_cycles=200)


def test_unknown_keys_raise_with_available_keys():
    env = ScalarizeFairness(loan_mafe_v0.parallel_env(max_cycles=2), penalty_keys=("gap_of_doom",))
    env.reset(seed=0)
    with pytest.raises(KeyError, match="'gap_of_doom' is not in the components; available: .*'dp_gap'"):
        env.step(ACT)
    env = FairnessConstraint(loan_mafe_v0.parallel_env(max_cycles=2), {"bogus": 0.1})
    env.reset(seed=0)
    with pytest.raises(KeyError, match="'bogus'"):
        env.step(ACT)
    with pytest.raises(ValueError, match="`limits`"):
        FairnessConstraint(loan_mafe_v0.parallel_env(), {})


def test_single_agent_view_passes_gymnasium_checker():
    from gymnasium.utils.env_checker import check_env

    view = SingleAgentView(
        loan_mafe_v0.parallel_env(max_cycles=20),
        "bank_0",
        {"bank_1": ProfitGreedy(), "regulator_0": GapTriggeredIntervention(0.1, 2)},
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(view, skip_render_check=True)
    with pytest.raises(ValueError, match="missing \\['regulator_0'\\]"):
        SingleAgentView(loan_mafe_v0.parallel_env(), "bank_0", {"bank_1": ProfitGreedy()})
    with pytest.raises(ValueError, match="`agent` 'bank_9'"):
        SingleAgentView(loan_mafe_v0.parallel_env(), "bank_9", {})


def test_scripted_policies():
    env = loan_mafe_v0.parallel_env(intervention="subsidy", max_cycles=10)
    obs, _ = env.reset(seed=0)
    greedy = ProfitGreedy().bind(env)
    # no subsidy, u- = 2 u+: approve bins with rho_k >= 2/3, i.e. tau = 4 for rho = 0.2 + 0.125 k
    assert greedy(obs["bank_0"], "bank_0") == 4
    assert greedy(obs["regulator_0"], "regulator_0") == 0
    gap = GapTriggeredIntervention(0.1, 3).bind(env)
    obs, *_ = env.step({"bank_0": 3, "bank_1": 3, "regulator_0": 0})
    rates = env.decode_obs(obs["regulator_0"])["rates"]
    assert gap(obs["regulator_0"], "regulator_0") == (3 if rates.max() - rates.min() > 0.1 else 0)
    with pytest.raises(RuntimeError, match="bind"):
        ProfitGreedy()(obs["bank_0"], "bank_0")
    with pytest.raises(ValueError, match=r"`level` must be an int in \[0, 4\], got 5"):
        FixedIntervention(5)
    with pytest.raises(ValueError, match=r"`threshold` must be a finite float in \[0, 1\], got 2.0"):
        GapTriggeredIntervention(2.0, 1)
    grouped = loan_mafe_v0.parallel_env(intervention="subsidy", group_thresholds=True, max_cycles=3)
    obs, _ = grouped.reset(seed=0)
    act = ProfitGreedy().bind(grouped)(obs["bank_0"], "bank_0")
    assert grouped.action_space("bank_0").contains(act)


def test_random_policy_and_run_episode():
    env = loan_mafe_v0.parallel_env(max_cycles=6)
    pols = bind_all({a: RandomPolicy(0) for a in env.possible_agents}, env)
    log = run_episode(env, pols, seed=1)
    assert log.rewards.shape == (6, 3)
    assert log.fairness["dp_gap"].shape == (6,)
    with pytest.raises(ValueError, match="no policy for agents"):
        run_episode(env, {"bank_0": pols["bank_0"]}, seed=0)


def test_subsidy_lowers_gap_of_greedy_banks():
    env = loan_mafe_v0.parallel_env(intervention="subsidy", max_cycles=30)
    gaps = []
    for level in (0, 4):
        pols = bind_all(
            {"bank_0": ProfitGreedy(), "bank_1": ProfitGreedy(), "regulator_0": FixedIntervention(level)}, env
        )
        gaps.append(np.mean([run_episode(env, pols, seed=s).fairness["dp_gap"].mean() for s in range(3)]))
    assert gaps[1] < gaps[0]


def test_trivial_policies():
    env = loan_mafe_v0.parallel_env(group_thresholds=True, max_cycles=3)
    obs, _ = env.reset(seed=0)
    everyone, nobody = ApproveAll().bind(env), ApproveNone().bind(env)
    np.testing.assert_array_equal(everyone(obs["bank_0"], "bank_0"), [0, 0])
    np.testing.assert_array_equal(nobody(obs["bank_0"], "bank_0"), [7, 7])
    _, _, _, _, infos = env.step({"bank_0": [0, 0], "bank_1": [0, 0], "regulator_0": 0})
    assert infos["bank_0"]["fairness_components"]["rate/A"] == 1.0
    with pytest.raises(
        ValueError, match="`agent` must be one of \\['bank_0', 'bank_1'\\], got 'regulator_0'"
    ):
        everyone(obs["regulator_0"], "regulator_0")


def test_policies_take_batches():
    env = loan_mafe_v0.parallel_env(intervention="subsidy", group_thresholds=True, max_cycles=5)
    venv = loan_mafe_v0.vector_env(num_envs=4, intervention="subsidy", group_thresholds=True, max_cycles=5)
    obs, _ = venv.reset(seed=0)
    obs, *_ = venv.step(
        {a: np.stack([venv.single_action_space(a).sample() for _ in range(4)]) for a in venv.agents}
    )
    for policy in (ProfitGreedy(), GapTriggeredIntervention(0.05, 3), FixedIntervention(2), ApproveAll()):
        policy.bind(env)
        for agent in ("bank_0", "regulator_0"):
            if isinstance(policy, ApproveAll) and agent == "regulator_0":
                continue
            batch = policy(obs[agent], agent)
            rows = np.stack([np.asarray(policy(o, agent)) for o in obs[agent]])
            np.testing.assert_array_equal(batch, rows)
    random = RandomPolicy(0).bind(env)
    assert venv.action_space("bank_0").contains(random(obs["bank_0"], "bank_0"))
