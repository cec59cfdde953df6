"""Benchmark data: long-tailed, label-noised pools of scikit-learn digits and a hand-written topic set.

Every split is drawn from one seed: a balanced test set, a disjoint source set for the prior, and a
long-tailed pool (largest class 120, imbalance ratio 20, class order permuted) whose oracle labels are
flipped to a different class at the noise rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

HEAD, RATIO = 120, 20.0


@dataclass
class Task:
    """One seeded active-learning problem; ``X_*`` are the small model's features."""

    name: str
    X_pool: np.ndarray
    y_pool: np.ndarray  # true labels
    y_noisy: np.ndarray  # what the oracle answers
    X_test: np.ndarray
    y_test: np.ndarray
    prior: Any  # callable with classes_
    classes: np.ndarray
    rare: np.ndarray  # the 3 rarest classes of the pool
    project: Any = None  # fixed unsupervised projection the small model applies first (or None)


def long_tail_counts(n_classes: int, head: int = HEAD, ratio: float = RATIO) -> np.ndarray:
    """``round(head * ratio ** (-k / (C - 1)))`` for ``k = 0..C-1``: 120 ... 6 for ten classes."""
    k = np.arange(n_classes)
    return np.round(head * ratio ** (-k / (n_classes - 1))).astype(int)


def flip_labels(y: np.ndarray, rate: float, n_classes: int, rng: np.random.Generator) -> np.ndarray:
    """Symmetric noise: each label moves to a uniformly drawn *other* class with probability ``rate``."""
    y = np.asarray(y).copy()
    flip = rng.random(len(y)) < rate
    shift = rng.integers(1, n_classes, size=int(flip.sum()))
    y[flip] = (y[flip] + shift) % n_classes
    return y


def split_indices(
    y: np.ndarray,
    n_test: int,
    n_source: int,
    rng: np.random.Generator,
    head: int = HEAD,
    ratio: float = RATIO,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-class disjoint ``(test, source, pool)`` row indices; the pool follows :func:`long_tail_counts`."""
    classes = np.unique(y)
    counts = long_tail_counts(len(classes), head=head, ratio=ratio)[np.argsort(rng.permutation(len(classes)))]
    test, source, pool = [], [], []
    for c, n_pool in zip(classes, counts):
        rows = rng.permutation(np.flatnonzero(y == c))
        test.append(rows[:n_test])
        source.append(rows[n_test : n_test + n_source])
        pool.append(rows[n_test + n_source :][:n_pool])
    return np.concatenate(test), np.concatenate(source), rng.permutation(np.concatenate(pool))


def _rare(y_pool: np.ndarray, classes: np.ndarray) -> np.ndarray:
    counts = np.array([(y_pool == c).sum() for c in classes])
    return np.asarray(classes[np.argsort(counts, kind="stable")[:3]])


def digits_task(seed: int, *, sigma: float, noise: float = 0.2) -> Task:
    """Setting A: raw pixels / 16, prior = ``LogisticRegression(C=0.05)`` fitted on the source images
    (25 per class) with Gaussian pixel noise ``sigma`` added (a simulated foundation model)."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression

    from hf_ext.prior_al.priors import EstimatorPrior

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    rng = np.random.default_rng(seed)
    test, source, pool = split_indices(y, 30, 25, rng)
    noisy_src = X[source] + rng.normal(0.0, sigma, size=X[source].shape)
    prior = EstimatorPrior(LogisticRegression(C=0.05, max_iter=2000).fit(noisy_src, y[source]))
    classes = np.arange(10)
    return Task(
        f"digits-pixels sigma={sigma:g}",
        X[pool],
        y[pool],
        flip_labels(y[pool], noise, 10, rng),
        X[test],
        y[test],
        prior,
        classes,
        _rare(y[pool], classes),
    )


def digits_features() -> tuple[np.ndarray, np.ndarray]:
    """EfficientNet-lite0 features ``(1797, 1280)`` of the digits (8 px grey upsampled to 224, 3
    channels), cached on disk, and the labels."""
    from sklearn.datasets import load_digits

    from hf_ext.prior_al.priors import encode_images

    digits = load_digits()
    return encode_images(digits.images / 16.0), digits.target


def digits_encoder_task(
    seed: int, features: np.ndarray, y: np.ndarray, *, shots: int = 5, noise: float = 0.2
) -> Task:
    """Setting B: EfficientNet-lite0 features; prior = :class:`PrototypePrior` of ``shots`` source images
    per class (few-shot)."""
    from sklearn.decomposition import PCA

    from hf_ext.prior_al.priors import PrototypePrior

    rng = np.random.default_rng(seed)
    test, source, pool = split_indices(y, 30, 25, rng)
    support = np.concatenate([source[y[source] == c][:shots] for c in range(10)])
    prior = PrototypePrior(None, features[support], y[support])
    pca = PCA(64, random_state=seed).fit(features[np.concatenate([pool, source])])
    scale = float(np.std(pca.transform(features[pool])))
    classes = np.arange(10)
    task = Task(
        f"digits-efficientnet {shots}-shot",
        features[pool],
        y[pool],
        flip_labels(y[pool], noise, 10, rng),
        features[test],
        y[test],
        prior,
        classes,
        _rare(y[pool], classes),
    )
    task.project = _Projection(pca, scale)
    return task


class _Projection:
    """A PCA fitted on the unlabelled pool and source features, scaled to unit overall std (picklable)."""

    def __init__(self, pca: Any, scale: float) -> None:
        self.pca, self.scale = pca, scale

    def __call__(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.pca.transform(X) / self.scale)


def text_embeddings() -> tuple[np.ndarray, np.ndarray]:
    """all-MiniLM-L6-v2 embeddings ``(240, 384)`` of the topic set (cached on disk) and its labels."""
    from benchmarks.prior_al.text import topic_sentences
    from hf_ext.prior_al.priors import encode_texts

    texts, labels = topic_sentences()
    return encode_texts(texts).astype(np.float64), labels


def text_task(seed: int, embeddings: np.ndarray, labels: np.ndarray, *, noise: float = 0.2) -> Task:
    """Setting C: a long-tailed pool (36 ... 4 per topic) of MiniLM embeddings, 10 test sentences per
    topic; prior = :class:`ZeroShotTextPrior` (zero-shot)."""
    from benchmarks.prior_al.text import LABEL_TEXTS
    from hf_ext.prior_al.priors import ZeroShotTextPrior

    rng = np.random.default_rng(seed)
    test, _, pool = split_indices(labels, 10, 0, rng, head=36, ratio=9.0)
    prior = ZeroShotTextPrior(LABEL_TEXTS)
    classes = np.arange(len(LABEL_TEXTS))
    return Task(
        "topics-minilm zero-shot",
        embeddings[pool],
        labels[pool],
        flip_labels(labels[pool], noise, len(classes), rng),
        embeddings[test],
        labels[test],
        prior,
        classes,
        _rare(labels[pool], classes),
    )
