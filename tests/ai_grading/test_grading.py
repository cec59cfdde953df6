"""Agreement metrics: hand-computed values, references (sklearn, torchmetrics, scipy), the Metric contract
(batching, reset, merge, pickling, state_dict, forward) and bad inputs."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("metrics", "sklearn")

A = torch.tensor([2, 3, 1, 0, 2.5, 1.5], dtype=torch.float64)
G = torch.tensor([2, 2, 1, 1, 3, 1.5], dtype=torch.float64)


def test_hand_example():
    from hf_ext.metrics.functional.grading import grading_agreement

    out = {k: float(v) for k, v in grading_agreement(A, G, 3.0).items()}
    assert out["mae"] == pytest.approx(5 / 12)
    assert out["nmae"] == pytest.approx(5 / 36)
    assert out["bias"] == pytest.approx(-1 / 12)
    assert out["exact"] == pytest.approx(0.5)
    assert out["within_0.5"] == pytest.approx(2 / 3)
    assert out["within_1.0"] == pytest.approx(1.0)
    assert out["harsher"] == pytest.approx(1 / 3)
    assert out["lenient"] == pytest.approx(1 / 6)
    assert out["qwk"] == pytest.approx(26 / 35)
    assert out["spearman"] == pytest.approx(0.88273, abs=1e-5)
    assert out["pearson"] == pytest.approx(0.79361, abs=1e-5)
    assert out["n"] == 6


def test_qwk_full_class_range_vs_sklearn_without_labels():
    from sklearn.metrics import cohen_kappa_score

    from hf_ext.metrics.functional.grading import quadratic_weighted_kappa

    ca, cg = (A * 2).long().numpy(), (G * 2).long().numpy()
    full = cohen_kappa_score(cg, ca, weights="quadratic", labels=np.arange(7))
    assert float(quadratic_weighted_kappa(A, G, max_points=3)) == pytest.approx(full)
    # classes 0..6 with 1 (0.5 points) absent: sklearn without labels re-indexes and differs
    assert cohen_kappa_score(cg, ca, weights="quadratic") == pytest.approx(0.7931, abs=1e-4)


def test_random_cases_match_references():
    from scipy.stats import pearsonr, spearmanr
    from sklearn.metrics import cohen_kappa_score, mean_absolute_error
    from torchmetrics.functional.classification import multiclass_cohen_kappa

    from hf_ext.metrics.functional.grading import grading_agreement

    rng = np.random.default_rng(0)
    contiguous = 0
    for case in range(200):
        n, top = int(rng.integers(5, 40)), float(rng.choice([1.0, 2.0, 3.0, 5.0]))
        g = rng.integers(0, int(top * 2) + 1, n) / 2
        a = np.clip(g + rng.choice([-1, -0.5, 0, 0, 0.5, 1], n), 0, top)
        if np.unique(g).size < 2 or np.unique(a).size < 2:
            continue
        out = grading_agreement(torch.from_numpy(a), torch.from_numpy(g), top)
        k = int(top * 2) + 1
        ca, cg = (a * 2).astype(int), (g * 2).astype(int)
        ref = cohen_kappa_score(cg, ca, weights="quadratic", labels=np.arange(k))
        assert float(out["qwk"]) == pytest.approx(ref, abs=1e-10), case
        tm = multiclass_cohen_kappa(
            torch.from_numpy(ca), torch.from_numpy(cg), num_classes=k, weights="quadratic"
        )
        assert float(out["qwk"]) == pytest.approx(float(tm), abs=1e-5), case
        present = np.union1d(ca, cg)
        if present.size == present.max() - present.min() + 1:  # contiguous classes: labels do not matter
            contiguous += 1
            assert float(out["qwk"]) == pytest.approx(
                cohen_kappa_score(cg, ca, weights="quadratic"), abs=1e-10
            )
        assert float(out["mae"]) == pytest.approx(mean_absolute_error(g, a))
        assert float(out["spearman"]) == pytest.approx(spearmanr(a, g).statistic, abs=1e-10)
        assert float(out["pearson"]) == pytest.approx(pearsonr(a, g).statistic, abs=1e-10)
    assert contiguous > 50


def test_undefined_values_are_nan_with_warning():
    from hf_ext.metrics.functional.grading import grading_agreement, quadratic_weighted_kappa

    with pytest.warns(UserWarning, match="undefined"):
        out = grading_agreement(torch.ones(4), torch.ones(4), 2.0)
    assert np.isnan(float(out["qwk"])) and np.isnan(float(out["spearman"])) and float(out["mae"]) == 0
    with pytest.warns(UserWarning, match="undefined"):
        assert np.isnan(float(quadratic_weighted_kappa(torch.ones(3), torch.ones(3))))


def test_bootstrap_intervals_bracket_and_ignore_row_order():
    from hf_ext.metrics.functional.grading import grading_agreement

    rng = np.random.default_rng(1)
    g = rng.integers(0, 7, 80) / 2
    a = np.clip(g + rng.choice([-0.5, 0, 0.5], 80), 0, 3)
    out = grading_agreement(a, g, 3.0, n_bootstrap=300, seed=3)
    for k in ("mae", "bias", "qwk", "exact", "within_0.5"):
        assert float(out[f"{k}_lo"]) <= float(out[k]) <= float(out[f"{k}_hi"]), k
    perm = rng.permutation(80)
    shuffled = grading_agreement(a[perm], g[perm], 3.0, n_bootstrap=300, seed=3)
    assert {k: float(v) for k, v in shuffled.items()} == {k: float(v) for k, v in out.items()}


def test_run_stability_and_deferral_curve_by_hand():
    from hf_ext.metrics.functional.grading import deferral_curve, run_stability

    out = run_stability(torch.tensor([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [0.0, 2.0, 2.0]]), tau=1.5)
    assert float(out["sd"]) == pytest.approx((1.0 + 0.0 + np.std([0, 2, 2], ddof=1)) / 3)
    assert float(out["range"]) == pytest.approx(4 / 3)
    assert float(out["frac_range_gt_tau"]) == pytest.approx(2 / 3)
    assert np.isnan(float(run_stability(torch.ones(2, 1))["sd"]))
    a, g = torch.tensor([0.0, 2.0, 1.0, 3.0]), torch.tensor([0.0, 0.0, 1.0, 1.0])
    curve = deferral_curve(a, g, torch.tensor([0.1, 0.9, 0.2, 0.5]), budgets=(0.0, 0.25, 0.5))
    assert curve["mae_kept"].tolist() == pytest.approx([1.0, 2 / 3, 0.0])
    assert curve["large_captured"].tolist() == pytest.approx([0.0, 0.5, 1.0])
    # safest first: errors 0, 0, 2, 2 -> running MAE 0, 0, 2/3, 1
    assert float(curve["aurc"]) == pytest.approx((0 + 0 + 2 / 3 + 1) / 4)


@pytest.mark.parametrize(
    "preds, target, max_points, name",
    [
        (torch.ones(3), torch.ones(4), 3.0, "target"),
        (torch.tensor([1.0, float("nan")]), torch.ones(2), 3.0, "preds"),
        (torch.ones(2), torch.tensor([1.0, float("inf")]), 3.0, "target"),
        (torch.tensor([-1.0, 1.0]), torch.ones(2), 3.0, "preds"),
        (torch.tensor([3.5, 1.0]), torch.ones(2), 3.0, "preds"),
        (torch.ones(2), torch.ones(2), 0.0, "max_points"),
        (torch.ones(2), torch.ones(2), torch.ones(3), "max_points"),
        (torch.ones(2, 2), torch.ones(2, 2), 3.0, "preds"),
        (torch.ones(0), torch.ones(0), 3.0, "preds"),
    ],
)
def test_bad_inputs_name_the_argument(preds, target, max_points, name):
    from hf_ext.metrics.functional.grading import grading_agreement
    from hf_ext.metrics.grading import GradingAgreement

    with pytest.raises(ValueError, match=f"`{name}`"):
        grading_agreement(preds, target, max_points)
    with pytest.raises(ValueError, match=f"`{name}`"):
        GradingAgreement().update(preds, target, max_points)


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_bad_settings_name_the_argument():
    from hf_ext.metrics.functional.grading import deferral_curve, run_stability
    from hf_ext.metrics.grading import GradingAgreement, RunStability

    for kwargs, name in (
        ({"bin_width": 0}, "bin_width"),
        ({"n_bootstrap": -1}, "n_bootstrap"),
        ({"level": 1.0}, "level"),
        ({"tolerances": (-1,)}, "tolerances"),
        ({"max_points": -2.0}, "max_points"),
    ):
        with pytest.raises(ValueError, match=name):
            GradingAgreement(**kwargs)
    with pytest.raises(ValueError, match="max_points"):
        GradingAgreement().update(A, G)
    with pytest.raises(ValueError, match="runs"):
        run_stability(torch.ones(3))
    with pytest.raises(ValueError, match="tau"):
        RunStability(tau=-1)
    with pytest.raises(ValueError, match="R=3"):
        m = RunStability()
        m.update(torch.ones(2, 3))
        m.update(torch.ones(2, 2))
    with pytest.raises(ValueError, match="risk"):
        deferral_curve(A, G, torch.ones(2))
    with pytest.raises(RuntimeError, match="before any update"):
        GradingAgreement(max_points=3.0).compute()


def _same(x, y):
    assert x.keys() == y.keys()
    for k in x:
        assert float(x[k]) == pytest.approx(float(y[k]), nan_ok=True), k


@pytest.mark.filterwarnings("ignore:The ``compute`` method")
def test_metric_batches_reset_merge_pickle_state_dict():
    from hf_ext.metrics.functional.grading import grading_agreement
    from hf_ext.metrics.grading import GradingAgreement

    rng = np.random.default_rng(2)
    g = torch.from_numpy(rng.integers(0, 7, 60) / 2)
    a = torch.from_numpy(np.clip(g.numpy() + rng.choice([-1, 0, 0.5], 60), 0, 3))
    single = grading_agreement(a, g, 3.0, n_bootstrap=100)
    m = GradingAgreement(max_points=3.0, n_bootstrap=100)
    for s in (slice(0, 13), slice(13, 40), slice(40, 60)):
        m.update(a[s], g[s])
    _same(m.compute(), single)
    other = GradingAgreement(max_points=3.0, n_bootstrap=100)
    first = GradingAgreement(max_points=3.0, n_bootstrap=100)
    other.update(a[30:], g[30:], torch.full((30,), 3.0))
    first.update(a[:30], g[:30])
    first.merge_state(other)
    _same(first.compute(), single)
    clone = pickle.loads(pickle.dumps(m))
    _same(clone.compute(), single)
    m.persistent(True)
    fresh = GradingAgreement(max_points=3.0, n_bootstrap=100)
    fresh.persistent(True)
    fresh.load_state_dict(m.state_dict())
    _same(fresh.compute(), single)
    m.reset()
    m.update(A, G)
    assert float(m.compute()["qwk"]) == pytest.approx(26 / 35)
    assert float(m(A[:3], G[:3])["n"]) == 3  # forward returns the batch value


def test_full_state_update_false_is_justified():
    from torchmetrics.utilities.checks import check_forward_full_state_property

    from hf_ext.metrics.grading import GradingAgreement, RunStability

    check_forward_full_state_property(
        GradingAgreement,
        init_args={"max_points": 3.0},
        input_args={"preds": A, "target": G},
        num_update_to_compare=[2],
    )
    check_forward_full_state_property(
        RunStability, input_args={"runs": torch.tensor([[1.0, 2.0], [0.0, 3.0]])}, num_update_to_compare=[2]
    )


def test_run_stability_metric_matches_functional():
    from hf_ext.metrics.functional.grading import run_stability
    from hf_ext.metrics.grading import RunStability

    runs = torch.rand(20, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    m = RunStability(tau=0.5)
    m.update(runs[:7])
    m.update(runs[7:])
    _same(m.compute(), run_stability(runs, tau=0.5))


def test_qwk_scorer_in_cross_val_score():
    from sklearn.dummy import DummyRegressor
    from sklearn.linear_model import LinearRegression
    from sklearn.model_selection import cross_val_score
    from sklearn.neighbors import KNeighborsRegressor

    from hf_ext.metrics.functional.grading import quadratic_weighted_kappa, qwk_scorer

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 1))
    y = np.clip(np.round(X[:, 0] + 1.5), 0, 3)
    scorer = qwk_scorer(max_points=3.0)
    assert cross_val_score(DummyRegressor(), X, y, scoring=scorer, cv=4).tolist() == [0.0] * 4
    assert scorer(KNeighborsRegressor(1).fit(X, y), X, y) == pytest.approx(1.0)
    linear = LinearRegression().fit(X, y)
    direct = quadratic_weighted_kappa(np.clip(linear.predict(X), 0, 3), y, max_points=3.0)
    assert scorer(linear, X, y) == pytest.approx(float(direct))
    assert np.isfinite(cross_val_score(linear, X, y, scoring=scorer, cv=4)).all()
    with pytest.raises(ValueError, match="bin_width"):
        qwk_scorer(bin_width=0)
