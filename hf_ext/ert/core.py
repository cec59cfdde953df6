"""ERT: excess risk of the target coverage (Braun, Holzmüller, Jordan & Bach, ICML 2026, arXiv 2512.11779).

Notation: coverage Z = 1{Y in C(X)}, target tau(X) in (0, 1) (usually 1 - alpha), coverage classifier h(X) in
[0, 1]. For a proper loss l, ``ERT_l(h) = E[l(tau, Z)] - E[l(h, Z)]``; its supremum over h is ``E[d_l(p(X),
tau(X))]`` with p the true conditional coverage, so any fitted h gives a lower bound [paper].

Losses (``q`` the prediction, ``z`` the indicator, ``tau`` the target) [paper, formulas as in
``covmetrics.losses``]:

* ``"l1"``: ``sign(q - tau) * (tau - z)`` (only the side of tau matters; the constant predictor scores 0).
  ERT-L1 <= E|p - tau|.
* ``"l2"`` (Brier): ``(q - z)**2``. ERT-L2 <= E(p - tau)^2.
* ``"kl"`` (log-loss, natural log, q clipped to [1e-6, 1 - 1e-6]). ERT-KL <= E KL(Ber p || Ber tau).

Over/under split: ``over`` scores ``max(h, tau)``, ``under`` scores ``min(h, tau)``. One of the two clipped
predictions equals tau exactly, so ``over + under == total`` sample by sample, for every loss.

All arrays here are float64 numpy of shape ``(n,)`` unless stated; :func:`per_sample_excess_risk` also takes
torch tensors (it is the differentiable training-time monitor behind ``ert_from_predictions``).
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple

import numpy as np

from hf_ext._validation import check_choice, check_int, check_n_jobs
from hf_ext.ert.inputs import shuffled_order

LOSSES = ("l1", "l2", "kl")
#: Row orders the cross-fitting folds can be drawn over (see :func:`cross_fit_ert`).
FOLD_ORDERS = ("canonical", "as_given")
#: Null hypotheses of the held-out tests: p(x) constant (:func:`uniformity_test`) or p(x) = tau(x).
NULLS = ("uniform", "target")
SIDES = ("both", "over", "under")
#: Keys of every ERT result dict, in the column order of ``fold_values``.
KEYS = ("l1", "l2", "kl", "l1_over", "l1_under", "l2_over", "l2_under", "kl_over", "kl_under")
LOG_EPS = 1e-6
MIN_PER_FOLD = 50


def _xp(q: Any) -> Any:
    """numpy or torch namespace matching ``q`` (torch is only imported when a tensor is passed)."""
    if hasattr(q, "detach"):
        import torch

        return torch
    return np


def pointwise_loss(q: Any, z: Any, tau: Any, loss: str) -> Any:
    """Loss ``l(q, z)`` per sample; ``tau`` is only used by ``"l1"``. Same type (numpy/torch) as ``q``."""
    check_choice("loss", loss, LOSSES)
    xp = _xp(q)
    if loss == "l1":
        return xp.sign(q - tau) * (tau - z)
    if loss == "l2":
        return (q - z) ** 2
    qc = xp.clip(q, LOG_EPS, 1 - LOG_EPS)
    return -z * xp.log(qc) - (1 - z) * xp.log(1 - qc)


def per_sample_excess_risk(h: Any, z: Any, tau: Any, loss: str = "l1", side: str = "both") -> Any:
    """``l(tau_i, z_i) - l(g(h_i), z_i)`` per sample, with g = identity, ``max(., tau)`` or ``min(., tau)``.

    Args:
        h: Predicted coverage probabilities, shape ``(n,)`` (numpy or torch; torch keeps autograd for l2/kl).
        z: Coverage indicators, shape ``(n,)``, same type as ``h``.
        tau: Target coverage, scalar or shape ``(n,)``.
        loss: ``"l1"``, ``"l2"`` or ``"kl"``.
        side: ``"both"``, ``"over"`` or ``"under"``.
    """
    check_choice("side", side, SIDES)
    check_choice("loss", loss, LOSSES)
    xp = _xp(h)
    if xp is np:
        tau = np.broadcast_to(np.asarray(tau, dtype=np.float64), np.shape(h))
    else:
        tau = xp.as_tensor(tau, dtype=h.dtype, device=h.device).expand_as(h)
        z = xp.as_tensor(z, dtype=h.dtype, device=h.device)
    if side != "both":
        h = xp.maximum(h, tau) if side == "over" else xp.minimum(h, tau)
    return pointwise_loss(tau, z, tau, loss) - pointwise_loss(h, z, tau, loss)


def ert_table(h: np.ndarray, z: np.ndarray, tau: np.ndarray, fold_id: np.ndarray) -> dict[str, Any]:
    """All nine ERT values from held-out predictions.

    Each fold's value is the mean per-sample excess risk on that fold; the result is the unweighted mean of
    fold values, as ``covmetrics.ERT.evaluate`` (the paper may weight by fold size [reconstructed]; KFold
    sizes differ by at most one).

    Args:
        h: Out-of-fold predictions, shape ``(n,)``.
        z: Coverage indicators, shape ``(n,)``.
        tau: Targets, shape ``(n,)``.
        fold_id: Fold of each sample, ints in ``[0, n_folds)``, shape ``(n,)``.

    Returns:
        ``{key: float for key in KEYS}`` plus ``"fold_values"``, an array of shape ``(n_folds, 9)``.
    """
    folds = np.unique(fold_id)
    table = np.empty((folds.size, len(KEYS)))
    for j, key in enumerate(KEYS):
        loss, _, side = key.partition("_")
        diffs = per_sample_excess_risk(h, z, tau, loss, side or "both")
        table[:, j] = [diffs[fold_id == f].mean() for f in folds]
    out: dict[str, Any] = {key: float(table[:, j].mean()) for j, key in enumerate(KEYS)}
    out["fold_values"] = table
    return out


def positive_proba(model: Any, X: np.ndarray) -> np.ndarray:
    """``P(covered = 1 | x)`` of a fitted classifier: its ``predict_proba`` column of class 1, ``(n,)``."""
    proba = np.asarray(model.predict_proba(X), dtype=np.float64)
    classes = list(model.classes_)
    if 1 in classes:
        return proba[:, classes.index(1)]
    return np.zeros(X.shape[0]) if 0 in classes else proba[:, -1]


def cross_fit_predictions(
    features: np.ndarray,
    covered: np.ndarray,
    classifier: Any = "hgb",
    n_splits: int = 5,
    random_state: int = 42,
    n_jobs: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold coverage predictions with ``KFold(n_splits, shuffle=True, random_state)`` [paper].

    A fresh classifier (see :func:`hf_ext.ert.classifiers.make_classifier`) is fitted on each training part
    and predicts the held-out part. A training part holding a single class predicts its constant rate. The
    folds are fitted through joblib, so a ``joblib.parallel_config(backend=...)`` (Dask, Ray) spreads them
    out; every fold is seeded alike, so the result does not depend on ``n_jobs``.

    Args:
        features: ``(n, d)`` float64.
        covered: ``(n,)`` float64 in {0, 1}.
        classifier: ``"hgb"``, ``"covmetrics"`` or a scikit-learn classifier (cloned per fold).
        n_splits: Number of folds, ``2 <= n_splits <= n``.
        random_state: Seed of the fold shuffle and of the default classifier.
        n_jobs: Folds fitted at once (joblib's ``n_jobs``; ``None`` is one unless a joblib context says
            otherwise, ``-1`` every core).

    Returns:
        ``(h, fold_id)``: predictions and fold index, both of shape ``(n,)``.
    """
    from sklearn.model_selection import KFold
    from sklearn.utils.parallel import Parallel, delayed

    n = covered.shape[0]
    check_int("n_splits", n_splits, low=2, high=n)
    check_n_jobs("n_jobs", n_jobs)
    if n / n_splits < MIN_PER_FOLD:
        warnings.warn(
            f"only {n // n_splits} samples per held-out fold (n={n}, n_splits={n_splits}); ERT estimates "
            f"are noisy below {MIN_PER_FOLD}.",
            UserWarning,
            stacklevel=3,
        )
    h = np.empty(n)
    fold_id = np.empty(n, dtype=np.int64)
    folds = list(KFold(n_splits=n_splits, shuffle=True, random_state=random_state).split(features))
    held_out = Parallel(n_jobs=n_jobs)(
        delayed(_fit_predict_fold)(features, covered, tr, te, classifier, random_state) for tr, te in folds
    )
    for f, ((_, te), h_te) in enumerate(zip(folds, held_out)):
        fold_id[te] = f
        h[te] = h_te
    return h, fold_id


def _fit_predict_fold(
    features: np.ndarray,
    covered: np.ndarray,
    tr: np.ndarray,
    te: np.ndarray,
    classifier: Any,
    random_state: int,
) -> np.ndarray:
    """Predictions ``(len(te),)`` of a classifier fitted on rows ``tr`` (their constant rate if one class)."""
    from hf_ext.ert.classifiers import make_classifier

    labels = covered.astype(np.int64)
    if np.unique(labels[tr]).size < 2:
        return np.full(te.size, covered[tr].mean())
    model = make_classifier(classifier, labels[tr], random_state)
    model.fit(features[tr], labels[tr])
    return positive_proba(model, features[te])


def cross_fit_ert(
    features: np.ndarray,
    covered: np.ndarray,
    tau: np.ndarray,
    classifier: Any = "hgb",
    n_splits: int = 5,
    random_state: int = 42,
    n_jobs: int | None = None,
    fold_order: str = "canonical",
) -> dict[str, Any]:
    """Cross-fitted ERT for all losses and sides (arguments as :func:`cross_fit_predictions`, ``tau (n,)``).

    ``fold_order="canonical"`` (default) first puts the rows in a seeded order of the *set* of rows
    (:func:`hf_ext.ert.inputs.shuffled_order` with ``random_state``), so the folds, and the value, do not
    depend on the order the rows came in [reconstructed]; every form (functional, Metric, estimator) goes
    through here. ``fold_order="as_given"`` draws ``KFold(n_splits, shuffle=True, random_state)`` over the
    rows as passed, exactly as ``covmetrics.ERT.evaluate`` does, so the value equals covmetrics' on the
    caller's own row order (and changes when the rows are permuted).
    All-covered or all-uncovered data carries no information about conditional coverage: a warning is raised
    and every value is 0."""
    check_int("n_splits", n_splits, low=2, high=covered.shape[0])
    check_n_jobs("n_jobs", n_jobs)
    check_choice("fold_order", fold_order, FOLD_ORDERS)
    if np.unique(covered).size < 2:
        warnings.warn(
            f"`covered` is constant ({covered[0]:g} for all {covered.size} samples); ERT is 0 by definition.",
            UserWarning,
            stacklevel=3,
        )
        out: dict[str, Any] = dict.fromkeys(KEYS, 0.0)
        out["fold_values"] = np.zeros((n_splits, len(KEYS)))
        return out
    if fold_order == "canonical":
        order = shuffled_order(random_state, features, covered, tau)
        features, covered, tau = features[order], covered[order], tau[order]
    h, fold_id = cross_fit_predictions(features, covered, classifier, n_splits, random_state, n_jobs)
    return ert_table(h, covered, tau, fold_id)


class HeldOutTest(NamedTuple):
    """Result of :func:`held_out_test`: the held-out ERT-L1, its exact p-value and the sides of tau."""

    statistic: float
    p_value: float
    n: int
    n_above: int
    n_below: int


def poisson_binomial_pmf(probs: np.ndarray) -> np.ndarray:
    """pmf of a sum of independent Bernoulli(probs), shape ``(len(probs) + 1,)`` (equal probs grouped)."""
    from scipy.stats import binom

    pmf = np.ones(1)
    values, counts = np.unique(probs, return_counts=True)
    for prob, count in zip(values, counts):
        pmf = np.convolve(pmf, binom.pmf(np.arange(count + 1), count, prob))
    return pmf


def held_out_test(h: np.ndarray, z: np.ndarray, tau: np.ndarray) -> HeldOutTest:
    """Exact one-sided test of conditional coverage from predictions ``h`` fitted on *other* data
    [reconstructed].

    H0: p(x) = tau(x) for almost every x. Given h (independent of these rows), the held-out ERT-L1 ``mean(s_i
    (z_i - tau_i))``, ``s_i = sign(h_i - tau_i)``, is increasing in ``W = sum(s_i z_i)``, and under H0 the
    ``z_i`` are independent Bernoulli(tau_i), so W is a difference of two Poisson-binomial counts (rows above
    and below tau). The p-value ``P_H0(W >= W_obs)`` is computed exactly, with no asymptotics; rows with ``h_i
    == tau_i`` carry no evidence (s_i = 0).

    Args:
        h: Held-out predictions ``(n,)``. z: coverage indicators ``(n,)``. tau: targets ``(n,)``.
    """
    s = np.sign(h - tau)
    above, below = s > 0, s < 0
    w_obs = int(round(float(z[above].sum() - z[below].sum())))
    pmf = np.convolve(poisson_binomial_pmf(tau[above]), poisson_binomial_pmf(tau[below])[::-1])
    p_value = float(np.clip(pmf[w_obs + int(below.sum()) :].sum(), 0.0, 1.0))
    return HeldOutTest(
        float(np.mean(s * (z - tau))), p_value, int(z.size), int(above.sum()), int(below.sum())
    )


def uniformity_test(h: np.ndarray, z: np.ndarray) -> HeldOutTest:
    """Exact one-sided test of "coverage does not depend on x" from predictions ``h`` fitted on *other* data
    [reconstructed].

    H0: p(x) = c for almost every x, for some unknown constant c. Split conformal guarantees its marginal
    coverage only up to the randomness of a finite calibration set (the coverage given the calibration set is
    Beta-distributed around 1 - alpha), so a test of p(x) = tau (:func:`held_out_test`) also rejects a
    well-specified predictor whose calibration set happened to land off tau; this test does not. The
    statistic is the held-out ERT-L1 against the held-out marginal coverage ``c = mean(z)``: ``mean(s_i (z_i
    - c))``, ``s_i = sign(h_i - c)``. Under H0 the ``z_i`` are exchangeable given h, so given their total
    (which fixes c and the signs) and the rows at ``h_i == c`` (no evidence), the covered rows among those
    above c are hypergeometric: the p-value is the one-sided Fisher exact tail ``P(A >= A_obs)``.

    Args:
        h: Held-out predictions ``(n,)``. z: coverage indicators ``(n,)``.

    Returns:
        ``HeldOutTest`` whose ``n_above`` / ``n_below`` count the rows h puts above / below ``c``.
    """
    from scipy.stats import hypergeom

    c = float(z.mean())
    s = np.sign(h - c)
    above, below = s > 0, s < 0
    n_a, n_b = int(above.sum()), int(below.sum())
    hits_a = int(round(float(z[above].sum())))
    hits = hits_a + int(round(float(z[below].sum())))
    p_value = float(hypergeom.sf(hits_a - 1, n_a + n_b, hits, n_a)) if n_a and n_b else 1.0
    return HeldOutTest(float(np.mean(s * (z - c))), min(max(p_value, 0.0), 1.0), int(z.size), n_a, n_b)


def split_test(
    features: np.ndarray,
    covered: np.ndarray,
    tau: np.ndarray,
    classifier: Any = "hgb",
    test_size: float = 0.5,
    random_state: int = 42,
    null: str = "uniform",
) -> HeldOutTest:
    """An exact held-out test on one data set: fit the classifier on a random ``1 - test_size`` of the rows
    (:func:`hf_ext.ert.inputs.shuffled_order` with ``random_state``), test on the rest [reconstructed].

    ``null="uniform"`` tests "coverage does not depend on x" (:func:`uniformity_test`; valid for split
    conformal whatever its calibration set); ``null="target"`` tests "coverage equals tau everywhere"
    (:func:`held_out_test`; also rejects a marginal deviation from tau). Unlike a normal approximation on
    cross-fitted differences, whose folds share training data, both have level <= alpha at every n."""
    check_choice("null", null, NULLS)
    from hf_ext.ert.classifiers import make_classifier

    n = covered.shape[0]
    n_test = int(round(test_size * n))
    if not 1 <= n_test <= n - 2:
        raise ValueError(f"`test_size`={test_size!r} leaves no training or no test rows with n={n}.")
    order = shuffled_order(random_state, features, covered, tau)
    test, fit = order[:n_test], order[n_test:]
    if np.unique(covered[fit]).size < 2:
        h = np.full(n_test, covered[fit].mean())
    else:
        labels = covered[fit].astype(np.int64)
        model = make_classifier(classifier, labels, random_state).fit(features[fit], labels)
        h = positive_proba(model, features[test])
    if null == "uniform":
        return uniformity_test(h, covered[test])
    return held_out_test(h, covered[test], tau[test])
