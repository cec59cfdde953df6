"""Score matrices (models x queries) for best-model identification: a scikit-learn zoo and IRT draws.

``sklearn_correctness_matrix`` is real data: each row is one classifier, each column one sample of a built-in
scikit-learn dataset, and the entry is 1 when the classifier's out-of-fold prediction for that sample is
right. ``irt_matrix`` is synthetic: a Rasch (1-parameter IRT) model whose question-difficulty spread controls
how similar the models' mistakes are (a large spread makes every model fail on the same hard questions).
"""

from __future__ import annotations

import logging
import warnings
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

DATASETS = ("digits", "breast_cancer", "wine")


def classifier_zoo() -> list[tuple[str, Any]]:
    """The 11 scikit-learn classifiers of the benchmark's real matrix, as ``(name, estimator)`` pairs.

    Only fast models (each fits in seconds on two cores); boosted trees and large forests are left out on
    purpose.
    """
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression, RidgeClassifier
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier, NearestCentroid
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    return [
        ("svc_c10", make_pipeline(StandardScaler(), SVC(C=10))),
        ("knn7", make_pipeline(StandardScaler(), KNeighborsClassifier(7))),
        ("random_forest20", RandomForestClassifier(n_estimators=20, random_state=0)),
        ("logistic", make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))),
        ("lda", LinearDiscriminantAnalysis()),
        ("ridge", make_pipeline(StandardScaler(), RidgeClassifier())),
        ("gaussian_nb", GaussianNB()),
        ("tree_depth8", DecisionTreeClassifier(max_depth=8, random_state=0)),
        ("nearest_centroid", NearestCentroid()),
        ("knn25", make_pipeline(StandardScaler(), KNeighborsClassifier(25))),
        ("tree_depth4", DecisionTreeClassifier(max_depth=4, random_state=0)),
    ]


def sklearn_correctness_matrix(
    dataset: str = "digits", zoo: list[tuple[str, Any]] | None = None, *, cv_seed: int = 0
) -> tuple[np.ndarray, list[str]]:
    """Out-of-fold correctness of a classifier zoo on a built-in scikit-learn dataset (real data).

    Predictions come from ``cross_val_predict`` with
    ``StratifiedKFold(5, shuffle=True, random_state=cv_seed)``.

    Args:
        dataset: ``"digits"`` (1797 samples), ``"breast_cancer"`` (569) or ``"wine"`` (178).
        zoo: ``(name, estimator)`` pairs; defaults to :func:`classifier_zoo`.
        cv_seed: Seed of the fold split.

    Returns:
        ``(S, names)``: ``S`` is a float array of shape ``(n_models, n_samples)`` with entries in {0, 1};
        ``names`` lists the model names in row order.
    """
    from sklearn import datasets
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    loaders = {
        "digits": datasets.load_digits,
        "breast_cancer": datasets.load_breast_cancer,
        "wine": datasets.load_wine,
    }
    if dataset not in loaders:
        raise ValueError(f"`dataset` must be one of {sorted(loaders)}, got {dataset!r}.")
    X, y = loaders[dataset](return_X_y=True)
    cv = StratifiedKFold(5, shuffle=True, random_state=cv_seed)
    rows, names = [], []
    for name, est in zoo if zoo is not None else classifier_zoo():
        with warnings.catch_warnings():  # NearestCentroid / LDA warn about constant pixels; harmless here
            warnings.simplefilter("ignore", UserWarning)
            rows.append(cross_val_predict(est, X, y, cv=cv) == y)
        names.append(name)
        logger.debug("%s on %s: accuracy %.4f", name, dataset, rows[-1].mean())
    return np.asarray(rows, dtype=float), names


def irt_matrix(
    n_models: int = 10,
    n_queries: int = 3000,
    *,
    ability_range: tuple[float, float] = (0.0, 0.3),
    difficulty_scale: float = 3.0,
    seed: int = 0,
) -> np.ndarray:
    """Synthetic 0/1 correctness from a Rasch model, ``P(S[m, q] = 1) = sigmoid(theta_m - b_q)``.

    Abilities ``theta`` are evenly spaced over ``ability_range``; difficulties
    ``b_q ~ N(0, difficulty_scale**2)``. A larger ``difficulty_scale`` makes models fail on the same
    questions, i.e. raises their similarity (mean pairwise correlation about 0.02 at 0.3 and 0.55 at 3 with
    the defaults).

    Returns:
        Float array of shape ``(n_models, n_queries)`` with entries in {0, 1}.
    """
    rng = np.random.default_rng(seed)
    theta = np.linspace(*ability_range, n_models)
    b = rng.normal(0.0, difficulty_scale, n_queries)
    p = 1.0 / (1.0 + np.exp(-(theta[:, None] - b[None, :])))
    return (rng.random(p.shape) < p).astype(float)


def mean_pairwise_correlation(S: np.ndarray) -> float:
    """Mean Pearson correlation between the rows of ``S`` (models' scores across queries).

    Constant rows are skipped; ``nan`` when fewer than two rows vary.
    """
    S = np.asarray(S, dtype=float)
    keep = S.std(axis=1) > 0
    if keep.sum() < 2:
        return float("nan")
    C = np.corrcoef(S[keep])
    return float(C[np.triu_indices_from(C, k=1)].mean())


def coupled_matrix(
    accuracies: Any, n_queries: int = 3000, *, correlation: float = 0.5, seed: int = 0
) -> np.ndarray:
    """Synthetic 0/1 correctness with given accuracies and a chosen similarity between the models.

    Each query is *shared* with probability ``correlation``: one uniform draw ``u_q`` decides every model
    (model ``m`` is right when ``u_q < accuracies[m]``, so stronger models are right whenever weaker ones
    are); otherwise every model draws its own uniform. Two models with accuracies near ``p`` then have
    correlation about ``correlation`` (exactly ``correlation`` for equal accuracies).

    Returns:
        Float array of shape ``(len(accuracies), n_queries)`` with entries in {0, 1}.
    """
    from hf_ext._validation import check_float, check_int, check_probability, check_sequence

    p = np.asarray(check_sequence("accuracies", accuracies, check_probability, min_length=1))
    n_queries = check_int("n_queries", n_queries, low=1)
    rho = check_float("correlation", correlation, low=0, high=1)
    rng = np.random.default_rng(seed)
    shared = rng.random(n_queries) < rho
    u = np.where(shared[None, :], rng.random(n_queries)[None, :], rng.random((len(p), n_queries)))
    return (u < p[:, None]).astype(float)
