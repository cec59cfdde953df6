"""mCE: functional and Metric against references, torchmetrics conformance; robustness evaluation end to
end."""

from __future__ import annotations

import contextlib
import io
import pickle

import numpy as np
import pytest
import torch

from hf_ext.testing import requires, tiny_timm_model

pytestmark = requires("timm", "metrics")


def test_alexnet_errors_give_100_and_half_gives_50():
    from hf_ext.metrics.functional.corruption import ALEXNET_CE, mean_corruption_error

    ref = torch.tensor(list(ALEXNET_CE.values()), dtype=torch.float64)
    err = ref[:, None].expand(-1, 5)
    assert float(mean_corruption_error(err, 0.2, ref)["mCE"]) == pytest.approx(100.0)
    assert float(mean_corruption_error(err / 2, 0.2, ref)["mCE"]) == pytest.approx(50.0)


def test_relative_mce_against_alexnet():
    """AlexNet's own errors give 100; a model whose errors sit halfway to its clean error gives 50."""
    from hf_ext.metrics.functional.corruption import ALEXNET_CE, ALEXNET_CLEAN_ERROR, mean_corruption_error

    ref = torch.tensor(list(ALEXNET_CE.values()), dtype=torch.float64)
    out = mean_corruption_error(ref[:, None].expand(-1, 5), ALEXNET_CLEAN_ERROR, ref, ALEXNET_CLEAN_ERROR)
    assert float(out["relative_mCE"]) == pytest.approx(100.0)
    ours = 0.2 + (ref - ALEXNET_CLEAN_ERROR) / 2
    out = mean_corruption_error(ours[:, None].expand(-1, 5), 0.2, ref, ALEXNET_CLEAN_ERROR)
    expected = np.mean((ours.numpy() - 0.2) / (ref.numpy() - ALEXNET_CLEAN_ERROR))
    assert float(out["relative_mCE"]) == pytest.approx(100 * expected) == pytest.approx(50.0)


def test_metric_with_alexnet_reference_reports_relative_mce():
    from hf_ext.metrics.corruption import MeanCorruptionError

    metric = MeanCorruptionError(["gaussian_noise"], reference="alexnet")
    target = torch.zeros(10, dtype=torch.long)
    metric.update(torch.zeros(10, dtype=torch.long), target)  # clean error 0
    for s in range(1, 6):
        metric.update(torch.ones(10, dtype=torch.long), target, "gaussian_noise", s)  # error 1
    out = metric.compute()
    assert float(out["mCE"]) == pytest.approx(100 / 0.886428)
    assert float(out["relative_mCE"]) == pytest.approx(100 / (0.886428 - 0.4348))
    with pytest.raises(ValueError, match=r"needs severities \(1, 2, 3, 4, 5\)"):
        MeanCorruptionError(["gaussian_noise"], severities=(1, 3), reference="alexnet")


def test_relative_mce_matches_numpy():
    from hf_ext.metrics.functional.corruption import mean_corruption_error

    rng = np.random.default_rng(0)
    e, r = rng.uniform(0.3, 0.9, (4, 5)), rng.uniform(0.3, 0.9, (4, 5))
    ce, rce = e.sum(1) / r.sum(1), (e - 0.1).sum(1) / (r - 0.2).sum(1)
    out = mean_corruption_error(torch.tensor(e), 0.1, torch.tensor(r), 0.2)
    assert float(out["mCE"]) == pytest.approx(100 * ce.mean())
    assert float(out["relative_mCE"]) == pytest.approx(100 * rce.mean())


def _fill(metric, seed, batches=4):
    g = torch.Generator().manual_seed(seed)
    for _ in range(batches):
        y = torch.randint(0, 3, (6,), generator=g)
        metric.update(torch.randn(6, 3, generator=g), y)
        for c in metric.corruptions:
            for s in metric.severities:
                metric.update(torch.randn(6, 3, generator=g), y, c, s)
    return metric


def _metric():
    from hf_ext.metrics.corruption import MeanCorruptionError

    return MeanCorruptionError(
        ["gaussian_noise", "fog"], (1, 3), reference=torch.full((2, 2), 0.8), reference_clean_error=0.3
    )


def test_metric_batched_equals_one_shot_and_merges():
    a, b = _fill(_metric(), 0), _fill(_metric(), 1)
    both = _fill(_fill(_metric(), 0), 1)
    a.merge_state(b)
    for k in ("mCE", "relative_mCE", "clean_accuracy"):
        torch.testing.assert_close(a.compute()[k], both.compute()[k])
    manual = 1 - both.correct.double() / both.total.double()
    torch.testing.assert_close(both.compute()["error"], manual)


def test_metric_reset_pickle_and_state_dict():
    m = _fill(_metric(), 0)
    value = m.compute()["mCE"]
    clone = pickle.loads(pickle.dumps(m))
    torch.testing.assert_close(clone.compute()["mCE"], value)
    m.reset()
    assert int(m.total.sum()) == 0 and int(m.clean_total) == 0
    assert set(m.state_dict()) == set()  # states are not persistent by default, as in torchmetrics


def test_metric_full_state_property():
    from torchmetrics.utilities import check_forward_full_state_property

    from hf_ext.metrics.corruption import MeanCorruptionError

    class CleanAndFog(MeanCorruptionError):
        """Each update feeds the clean set and the single tracked cell, so compute() is defined."""

        def update(self, preds, target):
            super().update(preds, target)
            super().update(preds.flip(0), target, "fog", 1)

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        check_forward_full_state_property(
            CleanAndFog,
            init_args={"corruptions": ["fog"], "severities": (1,)},
            input_args={"preds": torch.randn(8, 3), "target": torch.randint(0, 3, (8,))},
            num_update_to_compare=[2, 4],
            reps=1,
        )
    text = buf.getvalue()
    assert "Full state for" in text, text


def test_metric_bad_inputs():
    from hf_ext.metrics.corruption import MeanCorruptionError

    with pytest.raises(ValueError, match="not canonical: \\['rain'\\]"):
        MeanCorruptionError(["rain"], reference="alexnet")
    with pytest.raises(ValueError, match="`severities` must be values in 1..5"):
        MeanCorruptionError(["fog"], severities=(0,))
    with pytest.raises(ValueError, match=r"`reference` must have shape \(1, 5\)"):
        MeanCorruptionError(["fog"], reference=torch.zeros(2, 5))
    m = MeanCorruptionError(["fog"])
    with pytest.raises(ValueError, match="`target` must be a 1-D integer tensor"):
        m.update(torch.randn(4, 3), torch.rand(4))
    with pytest.raises(ValueError, match="`corruption` 'snow' is not tracked"):
        m.update(torch.randn(4, 3), torch.zeros(4, dtype=torch.long), "snow", 1)
    with pytest.raises(RuntimeError, match="at least one update"):
        m.compute()


def test_evaluate_corruptions_end_to_end():
    from hf_ext.dem_hec import evaluate_corruptions

    model = tiny_timm_model("test_efficientnet", num_classes=3)
    data = [(torch.rand(8, 3, 32, 32), torch.arange(8) % 3) for _ in range(2)]
    rep = evaluate_corruptions(
        model, data, ["gaussian_noise", "contrast"], (1, 2), reference=torch.full((2, 2), 0.5)
    )
    assert set(rep["accuracy"]) == {"gaussian_noise", "contrast"} and set(rep["accuracy"]["contrast"]) == {
        1,
        2,
    }
    assert set(rep["family_accuracy"]) == {"noise", "digital"}
    assert rep["error"].shape == (2, 2) and 0 <= rep["clean_accuracy"] <= 1 and "mCE" in rep
    with pytest.raises(KeyError, match="unknown corruptions \\['rain'\\]"):
        evaluate_corruptions(model, data, ["rain"])


def test_evaluate_many_models_in_either_input_space_and_rank_them():
    from hf_ext.dem_hec import evaluate_corruptions, robustness_table
    from hf_ext.dem_hec._pixels import mean_std
    from hf_ext.dem_hec.robust_eval import robustness_summary

    a = tiny_timm_model("test_efficientnet", num_classes=3)
    b = tiny_timm_model("test_efficientnet", seed=4, num_classes=3)
    data = [(torch.rand(8, 3, 32, 32), torch.arange(8) % 3) for _ in range(2)]
    args = (["gaussian_noise", "contrast"], (1, 2))
    both = evaluate_corruptions({"a": a, "b": b}, data, *args, reference=torch.full((2, 2), 0.5))
    alone = evaluate_corruptions(a, data, *args, reference=torch.full((2, 2), 0.5))
    torch.testing.assert_close(both["a"]["error"], alone["error"])
    mean, std = mean_std(a)
    normalized = [((x - mean) / std, y) for x, y in data]  # what timm's loaders yield
    again = evaluate_corruptions(a, normalized, *args, input_space="normalized")
    torch.testing.assert_close(again["error"], alone["error"])
    rows = robustness_summary(both)
    assert [r["rank"] for r in rows] == [1, 2] and rows[0]["robust_accuracy"] >= rows[1]["robust_accuracy"]
    table = robustness_table(both).splitlines()
    assert table[0] == "| Rank | Model | Clean accuracy | Robust accuracy | mCE |" and len(table) == 4
    with pytest.raises(ValueError, match="`input_space` must be one of 'pixel', 'normalized'"):
        evaluate_corruptions(a, data, *args, input_space="rgb")


def test_feature_entropy_profile_rows():
    from hf_ext.dem_hec import feature_entropy_profile

    model = tiny_timm_model("test_efficientnet", num_classes=3)
    rows = feature_entropy_profile(
        model, torch.rand(4, 3, 32, 32), ["gaussian_noise"], (1, 5), stages=(-2, -1)
    )
    assert len(rows) == (1 + 2) * 2
    clean = [r for r in rows if r["corruption"] == "clean"]
    assert all(r["top1_agreement"] == 1.0 for r in clean)
    assert all(0 <= r["token_entropy"] <= 1 for r in rows)


@pytest.mark.slow
@pytest.mark.real
@requires("real-models", "timm")
def test_observation_on_real_efficientnet():
    """The paper's observation on real weights (reduced panel of the bench's): mid-stage token entropy rises
    with severity from clean on; prediction entropy rises across severities 1..5 and ends above clean (at
    severity 1 it can dip below clean, as the full panel shows too)."""
    from benchmarks.dem_hec.data import offline_photos
    from hf_ext.assets import efficientnet_lite0
    from hf_ext.dem_hec import feature_entropy_profile

    net = efficientnet_lite0()
    images = offline_photos()[:12]
    corruptions = ["gaussian_noise", "shot_noise", "contrast"]
    rows = feature_entropy_profile(net, images, corruptions, (1, 3, 5), stages=(-2,))
    clean = next(r for r in rows if r["corruption"] == "clean")
    mean = {s: np.mean([r["token_entropy"] for r in rows if r["severity"] == s]) for s in (1, 3, 5)}
    pred = {s: np.mean([r["prediction_entropy_nats"] for r in rows if r["severity"] == s]) for s in (1, 3, 5)}
    assert clean["token_entropy"] < mean[1] < mean[3] < mean[5]
    assert pred[1] < pred[3] < pred[5] and clean["prediction_entropy_nats"] < pred[5]
    assert all(r["token_entropy"] > clean["token_entropy"] for r in rows if r["severity"] == 5)
