"""PriorAL math: product of experts, imbalance-aware entropy, noise/clean split and query ranking.

Pure numpy, one pool-based round top to bottom. Shapes: ``n`` pool rows, ``C`` classes; probabilities are
``(n, C)`` float arrays whose rows sum to 1; entropies are in nats. Tags: ``[paper]`` for what the paper's
abstract and a third-party note describe, ``[reconstructed]`` for choices hf-ext made where they are silent.

>>> import numpy as np
>>> p = poe(np.array([[0.5, 0.3, 0.2]]), np.array([[0.6, 0.2, 0.2]]), eps=0.0)
>>> np.round(p, 2).tolist()
[[0.75, 0.15, 0.1]]
>>> round(float(entropy(p)[0]), 4)
0.7306
"""

from __future__ import annotations

import numpy as np

EPS = 1e-3
AGREEMENT_TAU = 0.05
CLASS_WEIGHTINGS = ("count_ratio", "inverse")


def smooth(p: np.ndarray, eps: float = EPS) -> np.ndarray:
    """``(p + eps) / (1 + C eps)`` row-wise, so no class has probability zero [reconstructed].

    Args:
        p: ``(n, C)`` probabilities.
        eps: Additive smoothing per class; rows still sum to 1.
    """
    p = np.asarray(p, dtype=float)
    return (p + eps) / (1.0 + p.shape[1] * eps)


def poe(p_model: np.ndarray, p_prior: np.ndarray, eps: float = EPS) -> np.ndarray:
    """Product of experts ``p_f * p_L / sum_j p_f p_L`` after :func:`smooth` [paper; smoothing reconstructed].

    Sharp only where both experts agree. Returns ``(n, C)``.
    """
    joint = smooth(p_model, eps) * smooth(p_prior, eps)
    return joint / joint.sum(axis=1, keepdims=True)


def entropy(p: np.ndarray) -> np.ndarray:
    """Shannon entropy ``-sum_i p_i ln p_i`` of each row, ``(n,)`` nats (``0 ln 0 = 0``)."""
    p = np.asarray(p, dtype=float)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(axis=1)


def margin(p: np.ndarray) -> np.ndarray:
    """Top-1 minus top-2 probability of each row, ``(n,)``; small means uncertain."""
    top = np.sort(np.asarray(p, dtype=float), axis=1)
    return top[:, -1] - top[:, -2] if top.shape[1] > 1 else np.ones(len(top))


def class_counts(p_prior: np.ndarray) -> np.ndarray:
    """``w_i = #{x : argmax p_L(x) = i}`` over the rows given, ``(C,)`` ints [paper]."""
    p_prior = np.asarray(p_prior)
    return np.bincount(p_prior.argmax(axis=1), minlength=p_prior.shape[1])


def class_weights(counts: np.ndarray, pseudo: np.ndarray, mode: str | None) -> np.ndarray:
    """Weight of each row from the count of its prior pseudo-label ``pseudo`` ``(n,)``.

    ``"count_ratio"``: ``w_y / w_max`` (the direction the note gives: predicted-minority rows get a low
    score and land in the clean, pseudo-labelled set) [paper, via the note]. ``"inverse"``: ``w_max / w_y``
    (predicted-minority rows go to the annotator) [reconstructed alternative]. ``None``: all ones.
    """
    counts = np.asarray(counts, dtype=float)
    if mode is None:
        return np.ones(len(pseudo))
    if mode not in CLASS_WEIGHTINGS:
        raise ValueError(f"`class_weighting` must be one of {CLASS_WEIGHTINGS} or None, got {mode!r}")
    w = counts[pseudo]
    return w / counts.max() if mode == "count_ratio" else counts.max() / w


def imbalance_entropy(p_bar: np.ndarray, p_prior: np.ndarray, mode: str | None = "count_ratio") -> np.ndarray:
    """``H_b(x) = H(p_bar(x)) * weight(yhat(x))`` with ``yhat = argmax p_L`` and counts over the rows given.

    Args:
        p_bar: ``(n, C)`` product-of-experts probabilities of the unlabelled pool.
        p_prior: ``(n, C)`` prior probabilities of the same rows (counts ``w`` are taken over them).
        mode: See :func:`class_weights`.

    Returns:
        ``(n,)`` scores in nats; higher means harder.
    """
    pseudo = np.asarray(p_prior).argmax(axis=1)
    return entropy(p_bar) * class_weights(class_counts(p_prior), pseudo, mode)


def split_noise_clean(scores: np.ndarray, noise_ratio: float) -> tuple[np.ndarray, np.ndarray]:
    """Top ``floor(rho * n)`` rows by score form the noise set, the rest the clean set [paper].

    Ties break by position (a stable sort), so the split is deterministic.

    Returns:
        ``(noise, clean)``: positions into ``scores``, each sorted ascending; disjoint, covering ``range(n)``.
    """
    scores = np.asarray(scores, dtype=float)
    n_noise = int(np.floor(noise_ratio * len(scores) + 1e-9))
    order = np.argsort(-scores, kind="stable")
    return np.sort(order[:n_noise]), np.sort(order[n_noise:])


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` highest scores, highest first (stable on ties)."""
    return np.argsort(-np.asarray(scores, dtype=float), kind="stable")[:k]


def select_queries(p_model: np.ndarray, noise: np.ndarray, batch_size: int) -> np.ndarray:
    """The ``min(B, |D_N|)`` rows of the noise set with the highest small-model entropy [paper].

    Args:
        p_model: ``(n, C)`` small-model probabilities of the pool.
        noise: Positions of the noise set.
        batch_size: ``B``.

    Returns:
        Positions into the pool, highest entropy first.
    """
    noise = np.asarray(noise, dtype=int)
    return noise[top_k(entropy(np.asarray(p_model)[noise]), batch_size)]


def class_balanced_queries(p_model: np.ndarray, labelled_counts: np.ndarray, batch_size: int) -> np.ndarray:
    """Class-balanced uncertainty sampling (Aggarwal et al., 2020) [reconstructed baseline].

    Each pick goes to the predicted class with the fewest labels so far (annotated plus already picked) that
    still has pool rows; within it, the row of highest entropy.

    Args:
        p_model: ``(n, C)`` small-model probabilities of the unlabelled pool.
        labelled_counts: ``(C,)`` annotated labels per class.
        batch_size: ``B``.

    Returns:
        ``min(B, n)`` positions into the pool, in pick order.
    """
    p_model = np.asarray(p_model, dtype=float)
    counts = np.asarray(labelled_counts, dtype=float).copy()
    predicted = p_model.argmax(axis=1)
    order = top_k(entropy(p_model), len(p_model))
    by_class = {c: [i for i in order if predicted[i] == c] for c in range(p_model.shape[1])}
    picks: list[int] = []
    while len(picks) < min(batch_size, len(p_model)):
        open_classes = [c for c, rows in by_class.items() if rows]
        c = min(open_classes, key=lambda k: (counts[k], k))
        picks.append(by_class[c].pop(0))
        counts[c] += 1
    return np.asarray(picks, dtype=int)


def badge_queries(
    p_model: np.ndarray, embedding: np.ndarray, batch_size: int, rng: np.random.Generator
) -> np.ndarray:
    """BADGE (Ash et al., 2020): k-means++ seeding on hallucinated last-layer gradients [paper's algorithm].

    The gradient of the cross-entropy at the predicted label ``yhat`` with respect to a linear last layer on
    ``embedding`` is ``g(x) = (p(x) - e_yhat) outer [h(x), 1]`` (the 1 is the bias). The first pick is the
    row of largest ``|g|``; each next pick is drawn with probability proportional to the squared distance
    to the nearest pick so far (k-means++ seeding), so the batch is both uncertain (large gradients) and
    diverse. Distances use ``<g_a, g_b> = <u_a, u_b> <h_a, h_b>`` without forming the outer products.

    Args:
        p_model: ``(n, C)`` small-model probabilities of the unlabelled pool.
        embedding: ``(n, d)`` the rows as the last layer sees them.
        batch_size: ``B``.
        rng: Draws the k-means++ picks.

    Returns:
        ``min(B, n)`` distinct positions into the pool, in pick order.
    """
    p_model = np.asarray(p_model, dtype=float)
    h = np.c_[np.asarray(embedding, dtype=float), np.ones(len(p_model))]
    u = p_model.copy()
    u[np.arange(len(u)), u.argmax(axis=1)] -= 1.0
    sq_norm = (u * u).sum(axis=1) * (h * h).sum(axis=1)
    k = min(batch_size, len(p_model))
    picks = [int(np.argmax(sq_norm))] if k else []
    nearest = np.full(len(p_model), np.inf)
    while len(picks) < k:
        last = picks[-1]
        dist = sq_norm + sq_norm[last] - 2.0 * (u @ u[last]) * (h @ h[last])
        nearest = np.minimum(nearest, np.maximum(dist, 0.0))
        nearest[picks] = 0.0
        total = nearest.sum()
        if total <= 0:  # every remaining gradient coincides with a pick: take the rest in order
            picks += [i for i in range(len(p_model)) if i not in set(picks)][: k - len(picks)]
            break
        picks.append(int(rng.choice(len(p_model), p=nearest / total)))
    return np.asarray(picks, dtype=int)


def coreset_queries(embedding: np.ndarray, labelled: np.ndarray, batch_size: int) -> np.ndarray:
    """Core-set by greedy k-center (Sener & Savarese, 2018) [paper's greedy algorithm].

    Each pick is the pool row farthest (Euclidean, in ``embedding``) from its nearest labelled row or pick
    so far; with no labelled row the first pick is the row farthest from the pool mean [reconstructed].

    Args:
        embedding: ``(n, d)`` the unlabelled pool rows.
        labelled: ``(m, d)`` the labelled rows in the same space (``m`` may be 0).
        batch_size: ``B``.

    Returns:
        ``min(B, n)`` distinct positions into the pool, in pick order.
    """
    X = np.asarray(embedding, dtype=float)
    L = np.asarray(labelled, dtype=float).reshape(-1, X.shape[1])
    centres = L if len(L) else X.mean(axis=0, keepdims=True)
    nearest = ((X[:, None, :] - centres[None, :, :]) ** 2).sum(axis=2).min(axis=1)
    picks: list[int] = []
    for _ in range(min(batch_size, len(X))):
        i = int(np.argmax(nearest))
        picks.append(i)
        nearest = np.minimum(nearest, ((X - X[i]) ** 2).sum(axis=1))
        nearest[i] = -1.0
    return np.asarray(picks, dtype=int)


def agreement_keep(p_bar: np.ndarray, labels: np.ndarray, tau: float = AGREEMENT_TAU) -> np.ndarray:
    """Keep an annotated label when ``p_bar(x, y) >= tau`` [hf-ext extension, not in the paper].

    Args:
        p_bar: ``(m, C)`` product-of-experts probabilities of the annotated rows.
        labels: ``(m,)`` class positions given by the annotator.
        tau: Threshold.

    Returns:
        ``(m,)`` boolean mask of labels to train on this round.
    """
    labels = np.asarray(labels, dtype=int)
    return np.asarray(p_bar)[np.arange(len(labels)), labels] >= tau


def check_probabilities(p: np.ndarray, name: str, n_rows: int, n_classes: int) -> np.ndarray:
    """Return ``p`` as a float ``(n_rows, n_classes)`` array, or raise ``ValueError`` naming ``name``.

    Rows must be finite, non-negative and sum to 1 within 1e-3.
    """
    p = np.asarray(p, dtype=float)
    if p.shape != (n_rows, n_classes):
        raise ValueError(f"`{name}` must have shape ({n_rows}, {n_classes}), got {p.shape}")
    if not np.isfinite(p).all():
        raise ValueError(f"`{name}` has NaN or infinite values")
    if (p < 0).any():
        raise ValueError(f"`{name}` has negative values (min {p.min():.3g})")
    worst = float(np.abs(p.sum(axis=1) - 1.0).max()) if n_rows else 0.0
    if worst > 1e-3:
        raise ValueError(f"`{name}` rows must sum to 1 within 1e-3, worst row is off by {worst:.3g}")
    return p
