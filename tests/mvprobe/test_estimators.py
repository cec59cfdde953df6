"""The scikit-learn estimators: conformance, end to end on a tiny zoo, models as X, and every bad input."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from hf_ext.estimators.mvprobe import (
    MVProbeClassifier,
    ProbeXClassifier,
    WeightMatrixExtractor,
    WeightStatsTransformer,
)
from hf_ext.mvprobe.core import per_label_accuracy
from hf_ext.mvprobe.zoo import build_member, make_model_zoo

SMALL = {"n_probes": 4, "proj_dim": 4, "rep_dim": 8, "random_state": 0}


@pytest.fixture(scope="module")
def zoo():
    return make_model_zoo(n_models=40, finetune_steps=(5, 10), ancestor_steps=20, random_state=0)


def _expected_failures(est):
    return {}


@parametrize_with_checks(
    [
        MVProbeClassifier(max_epochs=15, lr=2e-2, **SMALL),
        ProbeXClassifier(max_epochs=15, lr=2e-2, **SMALL),
        WeightStatsTransformer(),
        WeightMatrixExtractor(),
    ],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_conformance(estimator, check):
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`y` label columns")
        check(estimator)


@pytest.mark.parametrize("cls", [MVProbeClassifier, ProbeXClassifier])
def test_end_to_end_tiny_zoo(zoo, cls):
    W, Y = zoo.weights, zoo.targets
    clf = cls(max_epochs=20, eval_every=5, **SMALL).fit(W[:30], Y[:30])
    pred = clf.predict(W[30:])
    assert pred.shape == (10, 10) and set(np.unique(pred)) <= {0, 1}
    assert clf.predict_proba(W[30:]).shape == (10, 10)
    assert clf.transform(W[30:]).shape == (10, 8)
    assert 0.0 <= per_label_accuracy(Y[30:], pred) <= 1.0
    assert clf.multilabel_ and clf.weight_shape_ == (64, 64) and clf.n_features_in_ == 64 * 64
    assert len(clf.loss_curve_) == clf.n_iter_ == 20 and len(clf.validation_scores_) == 4
    again = cls(max_epochs=20, eval_every=5, **SMALL).fit(W[:30], Y[:30])
    np.testing.assert_array_equal(again.predict_proba(W[30:]), clf.predict_proba(W[30:]))
    restored = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(restored.predict_proba(W[30:]), clf.predict_proba(W[30:]))


def test_clone_get_set_params():
    clf = MVProbeClassifier(branches=("xu", "xtu"), **SMALL)
    twin = clone(clf)
    assert twin.get_params() == clf.get_params() and twin is not clf
    twin.set_params(n_probes=7, standardize=False)
    assert twin.get_params()["n_probes"] == 7 and clf.n_probes == 4
    assert "branches" not in ProbeXClassifier().get_params()
    assert ProbeXClassifier().get_params()["lr"] == 1e-3 and MVProbeClassifier().get_params()["lr"] == 3e-4


def test_models_state_dicts_and_safetensors_as_X(zoo, tmp_path):
    from safetensors.torch import save_file

    models = []
    for sd in zoo.state_dicts[:12]:
        m = build_member("mlp")
        m.load_state_dict(sd)
        models.append(m)
    paths = []
    for i, sd in enumerate(zoo.state_dicts[12:24]):
        paths.append(tmp_path / f"m{i}.safetensors")
        save_file({k: v.contiguous() for k, v in sd.items()}, str(paths[-1]))
    X = [*models, *paths]
    np.testing.assert_array_equal(WeightMatrixExtractor(layer="2.weight").transform(X), zoo.weights[:24])
    clf = MVProbeClassifier(layer="2.weight", max_epochs=3, **SMALL).fit(X, zoo.targets[:24])
    np.testing.assert_array_equal(clf.predict(zoo.state_dicts[24:]), clf.predict(zoo.weights[24:]))
    assert WeightStatsTransformer(layer="2.weight").fit_transform(models).shape == (12, 7)


def test_timm_and_transformers_models():
    from hf_ext.testing.models import tiny_llama, tiny_timm_model

    vits = [tiny_timm_model(seed=s) for s in range(2)]
    layer = next(k for k, v in vits[0].state_dict().items() if k.endswith("fc1.weight"))
    W = WeightMatrixExtractor(layer=layer).transform(vits)
    assert W.shape == (2, *vits[0].state_dict()[layer].shape)
    lms = [tiny_llama(seed=s) for s in range(2)]
    name = "model.layers.0.mlp.up_proj.weight"
    W = WeightMatrixExtractor(layer=name).transform(lms)
    assert W.shape == (2, *lms[0].state_dict()[name].shape)


def test_conv_reshape_rules():
    convs = [torch.nn.Conv2d(2, 3, 3) for _ in range(2)]
    with pytest.raises(ValueError, match=r"WeightMatrixExtractor\(conv_reshape=...\)"):
        WeightMatrixExtractor(layer="weight").transform(convs)
    flat = WeightMatrixExtractor(layer="weight", conv_reshape="flatten").transform(convs)
    np.testing.assert_array_equal(flat[0], convs[0].weight.detach().numpy().reshape(3, 18))
    quirk = WeightMatrixExtractor(layer="weight", conv_reshape="probex_resnet").transform(convs)
    np.testing.assert_array_equal(quirk[1], convs[1].weight.detach().numpy().reshape(-1, 3))
    bias = WeightMatrixExtractor(layer="bias").transform(convs)
    assert bias.shape == (2, 3, 1)


def test_weight_stats_hand_computed():
    X = np.array([[[1.0, 2.0], [3.0, 6.0]]])
    feats = WeightStatsTransformer().fit_transform(X)[0]
    np.testing.assert_allclose(feats, [3.0, np.std([1, 2, 3, 6], ddof=1), 1.0, 1.75, 2.5, 3.75, 6.0])


def test_weight_stats_feature_names_and_set_output():
    X = np.random.RandomState(0).randn(6, 3, 4)
    stats = WeightStatsTransformer().fit(X)
    names = ["mean", "std", "quantile_0", "quantile_25", "quantile_50", "quantile_75", "quantile_100"]
    assert stats.get_feature_names_out().tolist() == names
    with pytest.raises(NotFittedError):
        WeightStatsTransformer().get_feature_names_out()
    pd = pytest.importorskip("pandas")
    frame = WeightStatsTransformer().set_output(transform="pandas").fit_transform(X)
    assert isinstance(frame, pd.DataFrame) and list(frame.columns) == names
    np.testing.assert_array_equal(frame.to_numpy(), stats.transform(X))
    frame = stats.set_output(transform="pandas").transform(X)
    assert list(frame.columns) == names and frame.shape == (6, 7)


def test_weight_stats_names_flow_through_a_pipeline():
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    pipe = make_pipeline(WeightStatsTransformer(), StandardScaler()).fit(
        np.random.RandomState(1).randn(8, 3, 3)
    )
    assert pipe.get_feature_names_out()[[0, -1]].tolist() == ["mean", "quantile_100"]


def test_auto_sizes_follow_the_zoo_size():
    from hf_ext.estimators.mvprobe import probe_sizes

    assert probe_sizes(300) == {"n_probes": 16, "proj_dim": 16, "rep_dim": 64, "max_epochs": 150}
    assert probe_sizes(999)["n_probes"] == 16 and probe_sizes(1000)["n_probes"] == 32
    assert probe_sizes(2000)["n_probes"] == 64 and probe_sizes(4000)["n_probes"] == 128
    assert probe_sizes(10**6) == {"n_probes": 128, "proj_dim": 128, "rep_dim": 512, "max_epochs": 3000}
    assert probe_sizes(10**6, paper_epochs=500)["max_epochs"] == 500
    widths = [probe_sizes(n)["n_probes"] for n in range(1, 9000, 250)]
    assert widths == sorted(widths)
    # a layer with >= 64 rows or columns doubles the width once (up to 128); the epochs follow the zoo
    assert probe_sizes(300, weight_shape=(64, 64)) == {
        "n_probes": 32,
        "proj_dim": 32,
        "rep_dim": 128,
        "max_epochs": 150,
    }
    assert probe_sizes(300, weight_shape=(16, 72))["n_probes"] == 32
    assert probe_sizes(300, weight_shape=(63, 63))["n_probes"] == 16
    assert probe_sizes(1000, weight_shape=(64, 8)) == probe_sizes(1000) | {
        "n_probes": 64,
        "proj_dim": 64,
        "rep_dim": 256,
    }
    assert probe_sizes(5000, weight_shape=(4096, 4096)) == probe_sizes(5000)
    X, y = np.random.RandomState(0).randn(20, 4, 3), np.arange(20) % 2
    for cls in (MVProbeClassifier, ProbeXClassifier):
        clf = cls(max_epochs=2, random_state=0).fit(X, y)
        assert (clf.n_probes_, clf.proj_dim_, clf.rep_dim_, clf.max_epochs_) == (16, 16, 64, 2)
        assert clf.module_.encoder.in_features % (16 * 16) == 0
        assert cls(random_state=0).get_params()["n_probes"] == "auto"
    wide = MVProbeClassifier(max_epochs=1, random_state=0).fit(np.random.RandomState(0).randn(20, 2, 64), y)
    assert (wide.n_probes_, wide.proj_dim_, wide.rep_dim_) == (32, 32, 128)


def test_one_d_labels_use_softmax():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 3, 2)
    y = np.where(X[:, 0, 0] > 0, "pos", "neg")
    clf = ProbeXClassifier(max_epochs=40, lr=1e-2, **SMALL).fit(X, y)
    assert not clf.multilabel_ and list(clf.classes_) == ["neg", "pos"]
    np.testing.assert_allclose(clf.predict_proba(X).sum(1), 1.0)
    assert clf.decision_function(X).shape == (40,)
    assert clf.score(X, y) > 0.8


# ----- bad inputs -----


def test_ragged_matrices_name_indices():
    X = [np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((4, 2))]
    with pytest.raises(ValueError, match=r"item 2 has \(4, 2\)"):
        MVProbeClassifier(**SMALL).fit(X, [0, 1, 0])


def test_weight_shape_mismatch():
    with pytest.raises(ValueError, match="weight_shape"):
        MVProbeClassifier(weight_shape=(3, 3), **SMALL).fit(np.zeros((4, 8)), [0, 1, 0, 1])
    with pytest.raises(InvalidParameterError, match="weight_shape"):
        MVProbeClassifier(weight_shape=(3, 0), **SMALL).fit(np.zeros((4, 8)), [0, 1, 0, 1])
    X = np.random.RandomState(0).randn(4, 8)
    clf = MVProbeClassifier(weight_shape=(2, 4), max_epochs=1, **SMALL).fit(X, [0, 1, 0, 1])
    assert clf.weight_shape_ == (2, 4)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_inf(bad):
    X = np.random.RandomState(0).randn(4, 3, 2)
    X[1, 0, 0] = bad
    with pytest.raises(ValueError, match="Input X contains (NaN|infinity)"):
        MVProbeClassifier(**SMALL).fit(X, [0, 1, 0, 1])


def test_complex_rejected():
    with pytest.raises(ValueError, match="[Cc]omplex"):
        MVProbeClassifier(**SMALL).fit(np.ones((4, 3, 2), dtype=complex), [0, 1, 0, 1])


def test_target_checks():
    X = np.random.RandomState(0).randn(6, 3, 2)
    with pytest.raises(ValueError, match="needs samples of at least 2 classes"):
        MVProbeClassifier(**SMALL).fit(X, [1] * 6)
    with pytest.raises(ValueError, match="needs samples of at least 2 classes"):
        MVProbeClassifier(**SMALL).fit(X, np.ones((6, 3), dtype=int))
    Y = np.zeros((6, 3), dtype=int)
    Y[::2, 0] = 1
    with pytest.warns(UserWarning, match=r"columns \[1, 2\] are constant"):
        MVProbeClassifier(max_epochs=1, **SMALL).fit(X, Y)


def test_predict_with_other_shape_quotes_both():
    X = np.random.RandomState(0).randn(4, 3, 2)
    clf = MVProbeClassifier(max_epochs=1, **SMALL).fit(X, [0, 1, 0, 1])
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(3, 2\)"):
        clf.predict(np.zeros((2, 2, 3)))


@pytest.mark.parametrize(
    "params",
    [
        {"branches": ()},
        {"branches": ("xu", "xy")},
        {"n_probes": 0},
        {"proj_dim": 0},
        {"rep_dim": 0},
        {"batch_size": 0},
        {"max_epochs": 0},
        {"n_probes": "big"},
        {"max_epochs": "auto-ish"},
        {"validation_fraction": 1.0},
        {"validation_fraction": -0.1},
    ],
)
def test_invalid_parameters_raise_in_fit_not_init(params):
    key = next(iter(params))
    clf = MVProbeClassifier(**{**SMALL, **params})  # no error here
    with pytest.raises(InvalidParameterError, match=key):
        clf.fit(np.random.RandomState(0).randn(4, 3, 2), [0, 1, 0, 1])


def test_constant_layers_warn_with_count():
    X = np.random.RandomState(0).randn(5, 3, 2)
    X[1] = 0.0
    X[3] = 2.0
    with pytest.warns(UserWarning, match="2 model"):
        MVProbeClassifier(max_epochs=1, **SMALL).fit(X, [0, 1, 0, 1, 0])


def test_layer_errors():
    models = [torch.nn.Linear(3, 2)]
    with pytest.raises(ValueError, match="`layer` must name"):
        WeightMatrixExtractor().transform(models)
    with pytest.raises(ValueError, match="'wieght' is not a parameter"):
        WeightMatrixExtractor(layer="wieght").transform(models)


def test_predict_before_fit():
    with pytest.raises(NotFittedError):
        MVProbeClassifier().predict(np.zeros((2, 3, 2)))
