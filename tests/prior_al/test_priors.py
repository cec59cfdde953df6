"""Priors: hand-computed prototype and callable priors; the real encoders (slow, real weights)."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.prior_al.priors import CallablePrior, EstimatorPrior, PrototypePrior, ZeroShotTextPrior
from hf_ext.testing import requires


def test_prototype_prior_by_hand():
    support = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0]])
    prior = PrototypePrior(None, support, ["a", "a", "b"], temperature=1.0)
    p = prior(np.array([[1.0, 1.0]]))
    # cos to both prototypes is 1/sqrt(2): a tie
    np.testing.assert_allclose(p, [[0.5, 0.5]])
    p = prior(np.array([[1.0, 0.0]]))
    e = np.exp([1.0, 0.0])
    np.testing.assert_allclose(p, [e / e.sum()])
    assert prior.classes_.tolist() == ["a", "b"]


def test_callable_and_estimator_priors():
    from sklearn.linear_model import LogisticRegression

    prior = CallablePrior(lambda X: np.tile([0.25, 0.75], (len(X), 1)), classes=[3, 5])
    assert prior(np.zeros((2, 1))).shape == (2, 2) and prior.classes_.tolist() == [3, 5]
    X = np.array([[0.0], [1.0], [0.1], [0.9]])
    est = LogisticRegression().fit(X, [0, 1, 0, 1])
    np.testing.assert_allclose(EstimatorPrior(est)(X), est.predict_proba(X))


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: CallablePrior("not callable", [0, 1]), "fn"),
        (lambda: EstimatorPrior(object()), "estimator"),
        (lambda: PrototypePrior(None, np.zeros((2, 2)), [0, 0]), "support_y"),
        (lambda: PrototypePrior(None, np.zeros((3, 2)), [0, 1]), "support_X"),
        (lambda: PrototypePrior(None, np.eye(2), [0, 1], temperature=0), "temperature"),
        (lambda: ZeroShotTextPrior({"a": "x"}), "label_texts"),
        (lambda: ZeroShotTextPrior({"a": "x", "b": "y"}, template="no slot"), "template"),
    ],
)
def test_bad_prior_arguments(build, match):
    with pytest.raises((ValueError, TypeError), match=match):
        build()


SENTENCES = [
    ("The striker scored a late goal in the football match.", "sports"),
    ("The tennis player won the championship final.", "sports"),
    ("Our basketball team lost by three points.", "sports"),
    ("The marathon runners crossed the finish line.", "sports"),
    ("The new smartphone has a faster processor.", "tech"),
    ("Engineers released a software update for the laptop.", "tech"),
    ("The website crashed because of a server bug.", "tech"),
    ("The startup built an app that uses machine learning.", "tech"),
    ("The doctor prescribed antibiotics for the infection.", "health"),
    ("Regular exercise lowers the risk of heart disease.", "health"),
    ("The hospital opened a new cancer treatment ward.", "health"),
    ("Nurses gave the patients their flu vaccine.", "health"),
]


@pytest.mark.slow
@pytest.mark.real
@requires("real-models", "transformers")
def test_zero_shot_text_prior_on_real_minilm():
    prior = ZeroShotTextPrior({"sports": "sports", "tech": "technology", "health": "health and medicine"})
    texts, labels = zip(*SENTENCES)
    p = prior(list(texts))
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-6)
    accuracy = np.mean(prior.classes_[p.argmax(axis=1)] == np.array(labels))
    assert accuracy >= 2 / 3
    from hf_ext.prior_al.priors import encode_texts

    np.testing.assert_allclose(prior(encode_texts(list(texts))), p, atol=1e-6)


@pytest.mark.slow
@pytest.mark.real
@requires("real-models", "timm")
def test_efficientnet_features_and_five_shot_prior():
    from sklearn.datasets import load_digits

    from hf_ext.prior_al.priors import EncoderFeatures

    digits = load_digits()
    rng = np.random.default_rng(0)
    support = np.concatenate([np.flatnonzero(digits.target == c)[:5] for c in range(10)])
    test = rng.choice(np.setdiff1d(np.arange(len(digits.target)), support), 40, replace=False)
    enc = EncoderFeatures("efficientnet_lite0", image_shape=(8, 8), cache=False).fit(None)
    flat = digits.images.reshape(len(digits.images), 64) / 16.0
    first = enc.transform(flat[test[:4]])
    assert first.shape == (4, 1280)
    np.testing.assert_allclose(enc.transform(flat[test[:4]]), first, rtol=1e-5, atol=1e-5)
    prior = PrototypePrior(enc.transform, flat[support], digits.target[support])
    accuracy = np.mean(prior(flat[test]).argmax(axis=1) == digits.target[test])
    assert accuracy > 0.3  # chance is 0.1; measured 5-shot accuracy on digits is about 0.65
