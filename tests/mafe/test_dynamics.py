"""MAFE-style dynamics: hand-computed fairness components, empty groups, invariants, bad inputs."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.testing import requires

pytestmark = requires("pettingzoo", "metrics")

from hf_ext.mafe import education_mafe_v0, healthcare_mafe_v0, loan_mafe_v0  # noqa: E402
from hf_ext.mafe.core import StepOutcome, apply_quota, fairness_stats, select_by_capacity  # noqa: E402

MODULES = [loan_mafe_v0, healthcare_mafe_v0, education_mafe_v0]


def test_step_components_hand_computed():
    groups = np.array([[0, 0, 0, 1, 1, 1]])
    dec = np.array([[1, 1, 0, 1, 0, 0]], bool)
    qual = np.array([[1, 0, 1, 1, 0, 0]], bool)
    bank = np.array([[0, 1, 0, 1, 0, 1]])
    out = StepOutcome({}, groups, dec, qual, [(["bank_0", "bank_1"], bank, dec, qual)])
    owners, means, counts, gaps = fairness_stats(out, np.array([[9.0, 3.0]]), np.array([[3.0, 3.0]]))
    means, gaps = means[0], gaps[0]
    assert owners == [None, "bank_0", "bank_1"]
    np.testing.assert_allclose(means[0], [2 / 3, 1 / 3])  # rate/A, rate/B
    assert gaps[0] == pytest.approx(1 / 3)  # dp_gap
    np.testing.assert_allclose(means[3], [1 / 2, 1.0])  # tpr/A (1 of 2 qualified), tpr/B (1 of 1)
    assert gaps[3] == pytest.approx(0.5)  # eo_gap
    np.testing.assert_allclose(means[1], [1 / 2, 0.0])  # bank_0: A 1/2 approved, B 0/1
    assert gaps[1] == pytest.approx(0.5)
    assert means[-1].tolist() == [3.0, 1.0] and gaps[-1] == pytest.approx(2.0)  # mean_level, level_gap


def test_components_match_metrics_on_the_same_step():
    import torch

    from hf_ext.metrics.fairness import DemographicParityDifference, EqualOpportunityDifference

    env = loan_mafe_v0.parallel_env(max_cycles=3)
    env.reset(seed=3)
    seen = {}

    def spy(*args, _orig=env._simulate):
        seen["out"] = _orig(*args)
        return seen["out"]

    env._simulate = spy
    _, _, _, _, infos = env.step({"bank_0": 3, "bank_1": 2, "regulator_0": 0})
    out = seen["out"]
    fair = infos["bank_0"]["fairness_components"]
    dec, grp = torch.tensor(out.decisions[0]), torch.tensor(out.groups[0])
    dp = DemographicParityDifference(num_groups=2)(dec, grp)
    eo = EqualOpportunityDifference(num_groups=2)(dec, grp, torch.tensor(out.qualified[0]))
    assert fair["dp_gap"] == float(dp) and fair["eo_gap"] == float(eo)


def test_empty_group_is_flagged():
    env = loan_mafe_v0.parallel_env(groups=("A", "B"), group_shares=(1.0, 0.0), max_cycles=2)
    env.reset(seed=0)
    obs, _, _, _, infos = env.step({"bank_0": 0, "bank_1": 0, "regulator_0": 0})
    info = infos["bank_0"]
    assert np.isfinite(obs["bank_0"]).all() and np.isfinite(env.state()).all()
    assert info["empty_groups"] == ["B"]
    assert info["fairness_components"]["rate/B"] == 0.0
    assert info["fairness_components"]["dp_gap"] == 0.0
    assert info["fairness_components"]["rate/A"] == 1.0


@pytest.mark.parametrize("mod", MODULES)
def test_population_conserved_and_levels_in_range(mod):
    env = mod.parallel_env(max_cycles=20)
    env.reset(seed=1)
    raw = env.unwrapped
    counts = np.bincount(raw._group, minlength=raw.num_groups)
    rng = np.random.default_rng(0)
    while env.agents:
        env.step({a: int(rng.integers(env.action_space(a).n)) for a in env.agents})
        level, hist = raw._batch.level[0], raw._batch.hist[0]
        assert len(level) == raw.population_size
        assert level.min() >= 0 and level.max() <= raw.num_levels - 1
        np.testing.assert_array_equal(hist.sum(1), counts)
        want = np.bincount(raw._group * raw.num_levels + level, minlength=hist.size)
        np.testing.assert_array_equal(hist.ravel(), want)


def test_loan_level_moves():
    env = loan_mafe_v0.parallel_env(max_cycles=5)
    env.reset(seed=2)
    raw = env.unwrapped
    seen = {}

    def spy(batch, sample, *args, _orig=raw._simulate):
        seen["idx"], seen["out"] = sample.idx[0], _orig(batch, sample, *args)
        return seen["out"]

    raw._simulate = spy
    before = raw._batch.level[0].copy()
    env.step({"bank_0": raw.num_levels, "bank_1": raw.num_levels, "regulator_0": 0})  # approve nobody
    np.testing.assert_array_equal(raw._batch.level[0], before)
    _, rew, _, _, infos = env.step({"bank_0": 0, "bank_1": 0, "regulator_0": 0})  # approve everyone sampled
    idx, repaid = seen["idx"], seen["out"].qualified[0]
    want = before.copy()
    want[idx] = np.clip(before[idx] + np.where(repaid, 1, -1), 0, raw.num_levels - 1)
    np.testing.assert_array_equal(raw._batch.level[0], want)
    # each loan outcome is counted once: interest u+ per repaid, loss u- per default, summed into the reward
    c, n = raw.config, raw.n_per_step
    profit = sum(rew[b] for b in raw.banks)
    assert profit == pytest.approx((c.gain * repaid.sum() - c.loss * (~repaid).sum()) / n)
    for b in raw.banks:
        assert rew[b] == pytest.approx(sum(infos[b]["reward_components"].values()))
    welfare = infos["regulator_0"]["reward_components"]["welfare"]
    assert welfare == pytest.approx((want[idx] - before[idx]).mean())


def test_subsidy_conserves_money():
    totals = []
    for level in (0, 4):
        env = loan_mafe_v0.parallel_env(intervention="subsidy", max_cycles=10)
        env.reset(seed=5)
        bank, reg = 0.0, 0.0
        while env.agents:
            _, _, _, _, infos = env.step({"bank_0": 2, "bank_1": 3, "regulator_0": level})
            bank += sum(sum(infos[b]["reward_components"].values()) for b in ("bank_0", "bank_1"))
            reg += infos["regulator_0"]["reward_components"]["subsidy_cost"]
        totals.append((bank, reg))
    (bank0, reg0), (bank1, reg1) = totals
    assert reg0 == 0.0 and reg1 < 0
    assert bank1 + reg1 == pytest.approx(bank0)


def test_decision_core_is_permutation_equivariant():
    rng = np.random.default_rng(0)
    n = 40
    groups, score = rng.integers(0, 2, n), rng.permutation(n).astype(float)
    dec = score > 25
    perm = rng.permutation(n)
    half = np.array([0.5])
    q = apply_quota(dec[None], groups[None], score[None], half, 2)[0]
    np.testing.assert_array_equal(
        apply_quota(dec[perm][None], groups[perm][None], score[perm][None], half, 2)[0], q[perm]
    )
    assert (q >= dec).all()
    for g in (0, 1):
        assert q[groups == g].mean() >= 0.5
    cap = np.array([[3, 5]])
    s = select_by_capacity(np.ones((1, n), bool), groups[None], score[None], cap)[0]
    np.testing.assert_array_equal(
        select_by_capacity(np.ones((1, n), bool), groups[perm][None], score[perm][None], cap)[0], s[perm]
    )
    assert np.bincount(groups[s], minlength=2).tolist() == [3, 5]
    tau = 20
    np.testing.assert_array_equal((score >= tau)[perm], score[perm] >= tau)


@pytest.mark.parametrize("mod", MODULES)
def test_myopic_values_shapes(mod):
    for gt in (False, True):
        env = mod.parallel_env(max_cycles=2, group_thresholds=gt)
        obs, _ = env.reset(seed=0)
        for a in env.agents:
            v = env.unwrapped.myopic_values(obs[a], a)
            space = env.action_space(a)
            expected = (len(space.nvec), int(space.nvec[0])) if hasattr(space, "nvec") else (space.n,)
            assert v.shape == expected and np.isfinite(v).all()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"groups": ("A",)}, ValueError, "`groups` must be a list of at least 2 item"),
        ({"groups": ("A", "A")}, ValueError, "`groups` must have distinct names"),
        ({"group_shares": (0.7, 0.7)}, ValueError, "`group_shares` must sum to 1"),
        ({"group_shares": (1.5, -0.5)}, ValueError, r"`group_shares\[1\]` must be a finite float >= 0"),
        ({"intervention": "bogus"}, ValueError, r"`intervention` must be one of None, 'subsidy'"),
        ({"max_cycles": 0}, ValueError, "`max_cycles` must be an int >= 1, got 0"),
        ({"population_size": -5}, ValueError, "`population_size` must be an int >= 2, got -5"),
        (
            {"n_per_step": 300, "population_size": 200},
            ValueError,
            r"`n_per_step` must be an int in \[1, 200\]",
        ),
        ({"n_banks": 0}, ValueError, "`n_banks` must be an int >= 1, got 0"),
        ({"render_mode": "rgb_array"}, ValueError, "`render_mode`"),
    ],
)
def test_bad_constructor_inputs(kwargs, error, match):
    with pytest.raises(error, match=match):
        loan_mafe_v0.parallel_env(**kwargs)


def test_bad_other_env_inputs():
    with pytest.raises(ValueError, match="`n_hospitals` must be an int >= 1"):
        healthcare_mafe_v0.parallel_env(n_hospitals=0)
    with pytest.raises(ValueError, match="`intervention` must be one of None, 'tutoring_subsidy'"):
        education_mafe_v0.parallel_env(intervention="subsidy")
    with pytest.raises(TypeError, match="`config` must be a EducationConfig"):
        education_mafe_v0.parallel_env(config=object())


def test_bad_step_inputs():
    env = loan_mafe_v0.parallel_env(max_cycles=1)
    with pytest.raises(RuntimeError, match="call reset\\(\\)"):
        env.step({"bank_0": 0, "bank_1": 0, "regulator_0": 0})
    env.reset(seed=0)
    with pytest.raises(
        ValueError, match="action 9 of agent 'bank_0' is not in its action space Discrete\\(8\\)"
    ):
        env.step({"bank_0": 9, "bank_1": 0, "regulator_0": 0})
    with pytest.raises(ValueError, match="action 1.5 of agent 'bank_1'"):
        env.step({"bank_0": 0, "bank_1": 1.5, "regulator_0": 0})
    with pytest.raises(ValueError, match="unknown or finished agents \\['bank_7'\\]"):
        env.step({"bank_0": 0, "bank_1": 0, "regulator_0": 0, "bank_7": 0})
    with pytest.raises(ValueError, match="missing live agents \\['regulator_0'\\]"):
        env.step({"bank_0": 0, "bank_1": 0})
    env.step({"bank_0": 0, "bank_1": 0, "regulator_0": 0})
    with pytest.raises(RuntimeError, match="call reset\\(\\)"):
        env.step({"bank_0": 0, "bank_1": 0, "regulator_0": 0})
    grouped = loan_mafe_v0.parallel_env(group_thresholds=True)
    grouped.reset(seed=0)
    with pytest.raises(ValueError, match="of agent 'bank_0' is not in its action space MultiDiscrete"):
        grouped.step({"bank_0": np.array([1, 9]), "bank_1": np.array([1, 1]), "regulator_0": 0})


def test_config_validation():
    from hf_ext.mafe.config import LoanConfig

    with pytest.raises(ValueError, match=r"`init_level_probs\[0\]` must be a list of length 7"):
        LoanConfig(init_level_probs=((1.0,), (1.0,)))
    with pytest.raises(ValueError, match="`init_level_probs` must be 3x7"):
        loan_mafe_v0.parallel_env(
            groups=("A", "B", "C"), config=LoanConfig(init_level_probs=((1.0,) + (0.0,) * 6,) * 2)
        )
    with pytest.raises(ValueError, match="`num_levels` must be an int >= 2"):
        LoanConfig(num_levels=1)
    with pytest.raises(ValueError, match=r"`disadvantaged` must be an int in \[0, 1\], got 5"):
        loan_mafe_v0.parallel_env(config=LoanConfig(disadvantaged=5))


def test_capacity_reservation_treats_the_disadvantaged_past_the_threshold():
    from hf_ext.mafe.policies import FixedIntervention, ProfitGreedy, bind_all, run_episode

    rates = []
    for level in (0, 4):
        env = healthcare_mafe_v0.parallel_env(
            intervention="capacity_reservation", group_thresholds=True, max_cycles=20
        )
        pols = bind_all(
            {
                "insurer_0": ProfitGreedy(),
                "hospital_0": ProfitGreedy(),
                "regulator_0": FixedIntervention(level),
            },
            env,
        )
        log = run_episode(env, pols, seed=3)
        rates.append(log.fairness[f"tpr/{env.groups[env.disadvantaged]}"].mean())
    assert rates[1] > rates[0] + 0.05
