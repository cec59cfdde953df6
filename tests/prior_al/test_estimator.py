"""PriorALClassifier and ActiveLearnerClassifier end to end, the round invariants and every bad input."""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.datasets import load_digits  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

from hf_ext.estimators.prior_al import ActiveLearnerClassifier, PriorALClassifier  # noqa: E402
from hf_ext.prior_al import core  # noqa: E402
from hf_ext.prior_al.priors import CallablePrior, EstimatorPrior  # noqa: E402


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    src, pool = order[:200], order[200:500]
    prior = EstimatorPrior(LogisticRegression(C=0.05, max_iter=500).fit(X[src], y[src]))
    return X[pool], y[pool], prior


def _start(y, n=20, seed=0):
    lab = np.full(len(y), -1)
    idx = np.random.default_rng(seed).choice(len(y), n, replace=False)
    lab[idx] = y[idx]
    return lab


def _learner(prior, **kw):
    kw.setdefault("batch_size", 5)
    return PriorALClassifier(LogisticRegression(max_iter=200), prior, random_state=0, **kw)


def test_three_rounds_end_to_end(digits):
    X, y, prior = digits
    t0 = time.perf_counter()
    al = _learner(prior).fit(X, _start(y))
    counts = [al.n_labelled_]
    for _ in range(2):
        idx = al.query()
        assert len(idx) == 5 and set(idx) <= set(al.noise_set_)
        al.teach(idx, y[idx])
        counts.append(al.n_labelled_)
    assert time.perf_counter() - t0 < 5
    assert np.diff(counts).tolist() == [5, 5]
    assert len(al.history_) == 3
    assert al.score(X, y) > 0.6


def test_round_invariants(digits):
    X, y, prior = digits
    al = _learner(prior, noise_ratio=0.4).fit(X, _start(y))
    idx = al.query()
    al.teach(idx, y[idx])
    U = np.flatnonzero(al.labels_ == -1)
    assert len(al.noise_set_) == int(np.floor(0.4 * len(U)))
    assert set(al.noise_set_) | set(al.clean_set_) == set(U)
    assert not set(al.clean_set_) & set(np.flatnonzero(al.labels_ != -1))
    # pseudo-labels are argmax of the product of experts of the model that made the split
    assert not set(al.query()) & set(idx)
    assert np.isnan(al.scores_[al.labels_ != -1]).all()


def test_default_pseudo_labels_are_prior_argmax_and_deploy_is_poe(digits):
    X, y, prior = digits
    al = PriorALClassifier(LogisticRegression(max_iter=200), prior, batch_size=5, random_state=0)
    al.fit(X, _start(y))
    idx = al.query()
    al.teach(idx, y[idx])
    np.testing.assert_array_equal(
        al.pseudo_labels_, al.classes_[al.prior_proba_[al.clean_set_].argmax(axis=1)]
    )
    p_f = np.zeros((len(X), 10))
    p_f[:, al.estimator_.classes_] = al.estimator_.predict_proba(X)
    np.testing.assert_allclose(al.predict_proba(X), core.poe(p_f, prior(X)))


def test_pseudo_labels_are_poe_argmax_and_query_is_fresh(digits):
    X, y, prior = digits
    al = _learner(prior, pseudo_label="poe").fit(X, _start(y))
    idx = al.query()
    al.teach(idx, y[idx])
    # the split and the next query use the model refit on the new labels
    model = al.estimator_
    p_f = np.zeros((len(X), 10))
    p_f[:, model.classes_] = model.predict_proba(X)
    p_bar = core.poe(p_f, al.prior_proba_)
    np.testing.assert_array_equal(al.pseudo_labels_, al.classes_[p_bar[al.clean_set_].argmax(axis=1)])
    later = al.noise_set_[core.top_k(core.entropy(p_f[al.noise_set_]), 5)]
    np.testing.assert_array_equal(al.query(), later)


def test_cold_start_model_sees_labels_only_then_pseudo_labels(digits):
    X, y, prior = digits
    al = _learner(prior).fit(X, _start(y))
    n_clean = len(al.clean_set_)
    assert n_clean > 0 and al.history_[0]["n_pseudo"] == n_clean
    idx = al.query()
    al.teach(idx, y[idx])
    assert len(al.estimator_.coef_) == 10


def test_same_random_state_same_queries(digits):
    X, y, prior = digits
    runs = []
    for _ in range(2):
        al = _learner(prior).fit(X, _start(y))
        q = [al.query()]
        al.teach(q[0], y[q[0]])
        q.append(al.query())
        runs.append(np.concatenate(q))
    np.testing.assert_array_equal(*runs)


def test_uniform_prior_reduces_to_entropy_sampling(digits):
    X, y, _ = digits
    lab = _start(y)
    al = PriorALClassifier(
        LogisticRegression(max_iter=200), None, noise_ratio=1.0, pseudo_label=None, batch_size=5
    ).fit(X, lab)
    base = ActiveLearnerClassifier(LogisticRegression(max_iter=200), "entropy", 5).fit(X, lab)
    idx = base.query()  # first PriorAL query is random by design; teach both the same rows
    al.teach(idx, y[idx])
    base.teach(idx, y[idx])
    np.testing.assert_array_equal(al.query(), base.query())
    assert al.scores_[al.noise_set_].std() > 0
    assert set(al.history_[-1]) >= {"n_noise", "n_clean", "n_pseudo"}


def test_predict_with_prior_and_poe(digits):
    X, y, prior = digits
    lab = _start(y)
    al = _learner(prior, predict_with="prior").fit(X, lab)
    np.testing.assert_array_equal(al.predict(X), prior(X).argmax(axis=1))
    poe = _learner(prior, predict_with="poe").fit(X, lab)
    np.testing.assert_allclose(poe.predict_proba(X).sum(axis=1), 1.0)


@pytest.mark.parametrize("mode", ["agreement_filter", "soft"])
def test_noise_handling_runs_and_keeps_labels(mode):
    rng = np.random.default_rng(0)
    X = np.r_[rng.normal(0, 0.3, (12, 1)), rng.normal(3, 0.3, (12, 1))]
    truth = np.repeat([0, 1], 12)
    y = np.full(24, -1)
    y[[0, 1, 2, 3, 12, 13, 14, 15]] = truth[[0, 1, 2, 3, 12, 13, 14, 15]]
    y[4] = 1  # a flipped annotation the sharp prior disagrees with
    prior = CallablePrior(lambda X: np.c_[X[:, 0] < 1.5, X[:, 0] >= 1.5] * 0.998 + 0.001, classes=[0, 1])
    al = PriorALClassifier(LogisticRegression(C=0.1), prior, batch_size=2, label_noise=mode, random_state=0)
    al.fit(X, y)
    idx = al.query()
    al.teach(idx, truth[idx])
    assert al.n_labelled_ == 11 and al.labels_[4] == 1  # filtered labels stay recorded
    if mode == "agreement_filter":
        assert al.history_[1]["n_filtered"] == 1


def test_prior_columns_aligned_by_label():
    X = np.array([[0.0], [0.1], [1.0], [1.1]])
    prior = CallablePrior(lambda X: np.c_[X[:, 0], 1 - X[:, 0]].clip(0, 1) / 1.0, classes=["b", "a"])
    y = np.array(["a", -1, "b", -1], dtype=object)
    al = PriorALClassifier(prior=prior, predict_with="prior").fit(X, y)
    assert al.classes_.tolist() == ["a", "b"]
    assert al.predict(np.array([[0.0], [1.0]])).tolist() == ["a", "b"]


@pytest.mark.parametrize("strategy", ["random", "entropy", "margin", "class_balanced", "badge", "coreset"])
def test_baselines_share_the_api(digits, strategy):
    X, y, _ = digits
    al = ActiveLearnerClassifier(LogisticRegression(max_iter=200), strategy, 5, random_state=0)
    al.fit(X, _start(y))
    idx = al.query()
    assert len(set(idx)) == 5 and (al.labels_[idx] == -1).all()
    al.teach(idx, y[idx])
    assert al.n_labelled_ == 25 and len(al.history_) == 2


def test_badge_and_coreset_embed_through_the_pipeline(digits):
    from sklearn.decomposition import PCA
    from sklearn.pipeline import make_pipeline

    X, y, _ = digits
    model = make_pipeline(PCA(5, random_state=0), LogisticRegression(max_iter=200))
    al = ActiveLearnerClassifier(model, "coreset", 5, random_state=0).fit(X, _start(y))
    U = np.flatnonzero(al.labels_ == -1)
    L = np.flatnonzero(al.labels_ != -1)
    emb = al.estimator_[:-1].transform(X)
    assert al._embed(X).shape == (len(X), 5)
    np.testing.assert_array_equal(al.query(), U[core.coreset_queries(emb[U], emb[L], 5)])


# ---------------------------------------------------------------------------------- bad inputs
def _tiny():
    X = np.array([[0.0], [0.2], [1.0], [1.2], [0.1], [1.1]])
    y = np.array([0, -1, 1, -1, -1, -1])
    return X, y


def _prior(classes=(0, 1), fn=None):
    return CallablePrior(fn or (lambda X: np.tile([0.5, 0.5], (len(X), 1))), classes=list(classes))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"noise_ratio": 0.0}, "noise_ratio"),
        ({"noise_ratio": 1.5}, "noise_ratio"),
        ({"batch_size": 0}, "batch_size"),
        ({"class_weighting": "log"}, "class_weighting"),
        ({"predict_with": "both"}, "predict_with"),
        ({"pseudo_weight": -1.0}, "pseudo_weight"),
    ],
)
def test_bad_parameters(kwargs, match):
    X, y = _tiny()
    with pytest.raises(ValueError, match=match):
        PriorALClassifier(**kwargs).fit(X, y)


def test_prior_class_mismatch_lists_both():
    X, y = _tiny()
    with pytest.raises(ValueError, match=r"\[0, 1, 2\].*\[0, 1\]"):
        PriorALClassifier(prior=_prior((0, 1, 2), lambda X: np.full((len(X), 3), 1 / 3)), classes=[0, 1]).fit(
            X, y
        )


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda X: np.tile([0.7, 0.7], (len(X), 1)), "sum to 1"),
        (lambda X: np.tile([1.5, -0.5], (len(X), 1)), "negative"),
        (lambda X: np.tile([np.nan, 1.0], (len(X), 1)), "NaN"),
        (lambda X: np.tile([0.5, 0.5], (len(X) + 1, 1)), "shape"),
    ],
)
def test_bad_prior_output(fn, match):
    X, y = _tiny()
    with pytest.raises(ValueError, match=match):
        PriorALClassifier(prior=_prior(fn=fn)).fit(X, y)


def test_small_pool_queries_all_with_warning():
    X, y = _tiny()
    al = PriorALClassifier(batch_size=3, noise_ratio=0.5).fit(X, y)
    with pytest.warns(UserWarning, match="querying all"):
        assert len(al.query()) == 2


def test_teach_errors():
    X, y = _tiny()
    al = PriorALClassifier(batch_size=1).fit(X, y)
    with pytest.raises(ValueError, match="already-labelled"):
        al.teach([0], [0])
    with pytest.raises(ValueError, match="unseen class"):
        al.teach([1], [7])
    with pytest.raises(ValueError, match="idx"):
        al.teach([1, 1], [0, 0])
    with pytest.raises(ValueError, match="idx"):
        al.teach([99], [0])
    with pytest.raises(ValueError, match="labels"):
        al.teach([1, 3], [0])


def test_string_dtype_y_suggests_object():
    X, _ = _tiny()
    with pytest.raises(ValueError, match="dtype object"):
        PriorALClassifier().fit(X, np.array(["a", "-1", "b", "-1", "-1", "-1"]))


def test_no_labels_and_no_class_source():
    X, _ = _tiny()
    with pytest.raises(ValueError, match="classes="):
        PriorALClassifier().fit(X, np.full(6, -1))
    # a prior with classes_ is a class source: the model stays uniform, PoE = prior
    al = PriorALClassifier(prior=_prior(fn=lambda X: np.c_[1 - X[:, 0] / 2, X[:, 0] / 2])).fit(
        X, np.full(6, -1)
    )
    assert al.estimator_ is not None or al.classes_.tolist() == [0, 1]


def test_degenerate_pseudo_labels_warn():
    X, y = _tiny()
    with pytest.warns(UserWarning, match="every pseudo-label"):
        al = PriorALClassifier(prior=_prior(fn=lambda X: np.tile([0.99, 0.01], (len(X), 1)))).fit(X, y)
    assert al.degenerate_pseudo_labels_


def test_unfitted_query_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        PriorALClassifier().query()


def test_cleanlab_option_needs_cleanlab(digits):
    X, y, prior = digits
    try:
        import cleanlab  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install cleanlab"):
            _learner(prior, label_noise="cleanlab").fit(X, _start(y, n=40))
    else:
        al = _learner(prior, label_noise="cleanlab").fit(X, _start(y, n=40))
        idx = al.query()
        assert al.teach(idx, y[idx]).n_labelled_ == 45


def test_pseudo_weight_reaches_a_pipeline(digits):
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, prior = digits
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=200))
    al = PriorALClassifier(model, prior, batch_size=5, pseudo_weight=0.5, random_state=0).fit(X, _start(y))
    idx = al.query()
    assert al.teach(idx, y[idx]).n_labelled_ == 25


def test_pseudo_weight_needs_sample_weight(digits):
    from sklearn.neighbors import KNeighborsClassifier

    X, y, prior = digits
    al = PriorALClassifier(KNeighborsClassifier(3), prior, batch_size=5, pseudo_weight=0.5).fit(X, _start(y))
    idx = al.query()
    with pytest.raises(ValueError, match="pseudo_weight"):
        al.teach(idx, y[idx])
