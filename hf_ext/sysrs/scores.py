"""Score checks shared by the schedulers, the simulator and the selector: bounded scores, NaN, ground truth.

The Successive Rejects guarantee needs bounded rewards, so every score is brought to [0, 1]: scores already in
[0, 1] pass, others need an explicit ``score_range=(lo, hi)``. NaN marks a failed evaluation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hf_ext._validation import check_float, check_sequence


def check_score_range(score_range: Any) -> tuple[float, float] | None:
    """``None`` or a finite pair ``(lo, hi)`` with ``lo < hi``."""
    if score_range is None:
        return None
    lo, hi = check_sequence("score_range", score_range, check_float, length=2)
    if not lo < hi:
        raise ValueError(f"`score_range` must be a pair (lo, hi) with lo < hi, got {score_range!r}.")
    return (lo, hi)


def to_unit_interval(
    scores: Any, score_range: tuple[float, float] | None, name: str = "scores"
) -> np.ndarray:
    """``scores`` as a float array in [0, 1] (NaN kept), rescaled from ``score_range`` when one is given.

    Raises:
        ValueError: a finite score lies outside [0, 1] after rescaling, or a score is infinite.
    """
    out = np.array(scores, dtype=float)  # a copy: rescaling never touches the caller's array
    if np.isinf(out).any():
        raise ValueError(f"`{name}` must not contain infinities; use NaN for failed evaluations.")
    if score_range is not None:
        lo, hi = score_range
        out = (out - lo) / (hi - lo)
    finite = out[~np.isnan(out)]
    if finite.size and (finite.min() < 0.0 or finite.max() > 1.0):
        bad = float(finite[(finite < 0.0) | (finite > 1.0)][0])
        where = "after rescaling by `score_range` " if score_range is not None else ""
        raise ValueError(
            f"`{name}` must lie in [0, 1] {where}(bounded scores), got {bad!r}. "
            "Pass score_range=(lo, hi) to rescale scores from another range."
        )
    return out


def check_score_matrix(S: Any, score_range: Any = None) -> np.ndarray:
    """A validated score matrix of shape ``(n_models, n_queries)``, floats in [0, 1], NaN kept.

    Raises:
        ValueError: ``S`` is not 2-D, is empty, holds infinities, or lies outside [0, 1] after the optional
            ``score_range=(lo, hi)`` rescaling.
    """
    shape = np.shape(S)
    if len(shape) != 2:
        raise ValueError(f"`S` must be a 2-D score matrix of shape (n_models, n_queries), got shape {shape}.")
    if 0 in shape:
        raise ValueError(f"`S` must have at least one model and one query, got shape {shape}.")
    return to_unit_interval(S, check_score_range(score_range), name="S")


def true_means(S: np.ndarray, nan_policy: str = "zero") -> np.ndarray:
    """Full-benchmark mean per model (the ground truth), shape ``(n_models,)``.

    NaN counts 0 (``"zero"``), or its query is dropped for every model (``"drop_query"``).
    """
    if nan_policy == "drop_query":
        keep = ~np.isnan(S).any(axis=0)
        return np.asarray(S[:, keep].mean(axis=1) if keep.any() else np.zeros(len(S)), dtype=float)
    return np.asarray(np.nan_to_num(S, nan=0.0).mean(axis=1), dtype=float)
