"""UltraFeedback-style fine-grained ratings -> CAMP preference pairs, and checks of a CAMP dataset.

Two input layouts are accepted by :func:`ultrafeedback_to_camp`:

- **openbmb** (the ``openbmb/UltraFeedback`` card): ``instruction``, ``completions[j].response``,
  ``completions[j].annotations[aspect]`` holding ``{"Rating": "4", ...}`` (ratings are strings, ``"N/A"`` when
  missing; a one-element list per aspect is accepted too) and ``completions[j].overall_score``.
- **flat**: ``prompt``, ``chosen``, ``rejected`` plus per-aspect rating columns ``chosen_<aspect>`` and
  ``rejected_<aspect>``.

The normalised gaps ``t`` (truth) and ``h`` (help) are [reconstructed]: ``(s(y_w) - s(y_l)) / S`` with
``s`` the mean rating over the chosen aspects and ``S`` the width of the rating scale.
"""

from __future__ import annotations

import logging
import math
import random
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

PAIRINGS = ("best_vs_random", "best_vs_worst")
INCONSISTENT_SHARE = 0.05  # share of worse-on-both pairs above which validate_camp_dataset warns
OVERALL = ("mean", "overall_score")


def _rating(value: Any, *, row: int, aspect: str, scale: tuple[float, float]) -> float | None:
    """A rating as float, ``None`` for ``"N/A"``; raises on values that are not numbers or off the scale."""
    if isinstance(value, Sequence) and not isinstance(value, str):  # one-element list per aspect
        value = value[0] if value else None
    if isinstance(value, Mapping):
        value = value.get("Rating")
    if value is None or (isinstance(value, str) and value.strip().upper() in {"N/A", "NA", ""}):
        return None
    try:
        rating = float(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"row {row}: rating of aspect {aspect!r} must be a number or 'N/A', got {value!r}."
        ) from None
    lo, hi = scale
    if not (lo <= rating <= hi):
        raise ValueError(
            f"row {row}: rating {rating:g} of aspect {aspect!r} is outside the declared `scale` {scale}; "
            "pass the right `scale=(low, high)`."
        )
    return rating


def _mean(values: Iterable[float | None]) -> float | None:
    vals = list(values)
    return None if any(v is None for v in vals) else sum(vals) / len(vals)  # type: ignore[arg-type]


def _openbmb_pairs(
    row: Mapping[str, Any],
    i: int,
    aspects: Sequence[str],
    scale: tuple[float, float],
    pairing: str,
    overall: str,
    rng: random.Random,
    counts: dict[str, int],
) -> tuple[str, dict[str, Any], dict[str, Any]] | str:
    """(prompt, chosen completion, rejected completion), or the reason the row is dropped."""
    scored = []
    for comp in row["completions"]:
        ratings = {a: _rating(comp["annotations"].get(a), row=i, aspect=a, scale=scale) for a in aspects}
        if any(r is None for r in ratings.values()):
            counts["n/a completions"] += 1
            continue
        score = _mean(ratings.values()) if overall == "mean" else comp.get("overall_score")
        if score is None or (isinstance(score, float) and math.isnan(score)):
            continue
        scored.append((float(score), comp["response"], ratings))
    if len(scored) < 2:
        return "n/a"
    best = max(scored, key=lambda s: s[0])
    worse = [s for s in scored if s[0] < best[0]]
    if not worse:
        return "tie"
    rejected = min(worse, key=lambda s: s[0]) if pairing == "best_vs_worst" else rng.choice(worse)
    return row["instruction"], {"text": best[1], **best[2]}, {"text": rejected[1], **rejected[2]}


def _flat_pair(
    row: Mapping[str, Any], i: int, aspects: Sequence[str], scale: tuple[float, float]
) -> tuple[str, dict[str, Any], dict[str, Any]] | str:
    sides = []
    for side in ("chosen", "rejected"):
        missing = [f"{side}_{a}" for a in aspects if f"{side}_{a}" not in row]
        if missing:
            raise ValueError(
                f"flat layout needs per-aspect rating columns; missing {missing}. "
                "Name them `chosen_<aspect>` and `rejected_<aspect>`."
            )
        ratings = {a: _rating(row[f"{side}_{a}"], row=i, aspect=a, scale=scale) for a in aspects}
        if any(r is None for r in ratings.values()):
            return "n/a"
        sides.append({"text": row[side], **ratings})
    return row["prompt"], sides[0], sides[1]


def ultrafeedback_to_camp(
    raw: Any,
    *,
    truth_aspects: Sequence[str] = ("honesty", "truthfulness"),
    help_aspects: Sequence[str] = ("helpfulness",),
    pairing: str = "best_vs_random",
    overall: str = "mean",
    scale: tuple[float, float] = (1.0, 5.0),
    seed: int = 0,
) -> Any:
    """Turn per-aspect ratings into ``prompt/chosen/rejected`` pairs with CAMP's normalised gaps.

    The overall preference (which completion is chosen) comes from the mean rating over all the aspects used,
    or from each completion's ``overall_score`` (``overall="overall_score"``, openbmb layout only). The output
    adds ``truth_margin = (s_T(y_w) - s_T(y_l)) / S`` and ``help_margin = (s_H(y_w) - s_H(y_l)) / S`` (``S =
    high - low``, 4 for a 1-5 scale; so both lie in [-1, 1]) and an informational ``conflict`` column (``t * h
    < 0``). Pairs with an ``"N/A"`` rating are dropped and counted in a log message. [reconstructed: the gap
    definition, the aspect grouping and the pairing rule.]

    Args:
        raw: A ``datasets.Dataset`` or a list of dicts in the openbmb or flat layout (module docstring).
        truth_aspects: Aspects averaged into the truthfulness score ``s_T``.
        help_aspects: Aspects averaged into the helpfulness score ``s_H``.
        pairing: ``"best_vs_random"`` (best vs a random strictly worse completion, the UltraFeedback-binarized
            recipe) or ``"best_vs_worst"``. Ignored by the flat layout, which is already paired.
        overall: ``"mean"`` or ``"overall_score"``.
        scale: ``(low, high)`` of the rating scale; ratings outside it raise ``ValueError`` with the row
            index.
        seed: Seed of the random rejected pick.

    Returns:
        A ``datasets.Dataset`` with ``prompt``, ``chosen``, ``rejected``, ``truth_margin``, ``help_margin``,
        ``conflict``.

    Example:
        >>> rows = [{"prompt": "2+2?", "chosen": "4", "rejected": "5", "chosen_honesty": 5,
        ...          "rejected_honesty": 2, "chosen_helpfulness": 4, "rejected_helpfulness": 4}]
        >>> ds = ultrafeedback_to_camp(rows, truth_aspects=("honesty",))
        >>> row = ds[0]
        >>> row["truth_margin"], row["help_margin"], row["conflict"]
        (0.75, 0.0, False)
    """
    from datasets import Dataset

    if pairing not in PAIRINGS:
        raise ValueError(f"`pairing` must be one of {PAIRINGS}, got {pairing!r}.")
    if overall not in OVERALL:
        raise ValueError(f"`overall` must be one of {OVERALL}, got {overall!r}.")
    lo, hi = (float(s) for s in scale)
    if not (math.isfinite(lo) and math.isfinite(hi) and hi > lo):
        raise ValueError(f"`scale` must be (low, high) with finite low < high, got {scale!r}.")
    if not truth_aspects or not help_aspects:
        raise ValueError(
            f"`truth_aspects` and `help_aspects` must be non-empty, got {truth_aspects!r} and "
            f"{help_aspects!r}."
        )
    aspects = list(dict.fromkeys([*truth_aspects, *help_aspects]))
    rows = list(raw)
    if not rows:
        raise ValueError("`raw` is empty.")
    nested = "completions" in rows[0]
    if not nested and not {"prompt", "chosen", "rejected"} <= set(rows[0]):
        raise ValueError(
            "`raw` must be in the openbmb layout (`instruction`, `completions`) or the flat layout "
            f"(`prompt`, `chosen`, `rejected` + rating columns); got columns {sorted(rows[0])}."
        )
    if overall == "overall_score" and not nested:
        raise ValueError(
            "`overall='overall_score'` needs the openbmb layout (a per-completion `overall_score`)."
        )
    rng = random.Random(seed)
    out: dict[str, list[Any]] = {
        k: [] for k in ("prompt", "chosen", "rejected", "truth_margin", "help_margin")
    }
    dropped = {"n/a": 0, "tie": 0, "n/a completions": 0}
    width = hi - lo
    for i, row in enumerate(rows):
        pair = (
            _openbmb_pairs(row, i, aspects, (lo, hi), pairing, overall, rng, dropped)
            if nested
            else _flat_pair(row, i, aspects, (lo, hi))
        )
        if isinstance(pair, str):
            dropped[pair] += 1
            continue
        prompt, win, lose = pair
        out["prompt"].append(prompt)
        out["chosen"].append(win["text"])
        out["rejected"].append(lose["text"])
        for key, group in (("truth_margin", truth_aspects), ("help_margin", help_aspects)):
            gap = (_mean(win[a] for a in group) - _mean(lose[a] for a in group)) / width  # type: ignore[operator]
            out[key].append(gap)
    if any(dropped.values()):
        logger.warning(
            "ultrafeedback_to_camp dropped %d of %d rows (%d with fewer than two rated completions, "
            "%d where every completion ties) and skipped %d completions with 'N/A' ratings.",
            dropped["n/a"] + dropped["tie"],
            len(rows),
            dropped["n/a"],
            dropped["tie"],
            dropped["n/a completions"],
        )
    if not out["prompt"]:
        raise ValueError(
            f"no pair survived: {dropped['n/a']} rows with 'N/A' ratings, {dropped['tie']} ties."
        )
    out["conflict"] = [t * h < 0 for t, h in zip(out["truth_margin"], out["help_margin"])]
    return Dataset.from_dict(out)


def _column(dataset: Any, key: str) -> list[Any]:
    return list(dataset[key])


def _check_numbers(key: str, values: Sequence[Any], low: float, high: float) -> None:
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise ValueError(
                f"column `{key}` must hold numbers, but row {i} holds {v!r} ({type(v).__name__}). "
                "Cast it to float32, e.g. with `ultrafeedback_to_camp`."
            )
        if not math.isfinite(v):
            raise ValueError(f"column `{key}` must be finite, but row {i} holds {v!r}.")
        if not (low <= v <= high):
            raise ValueError(
                f"column `{key}` must lie in [{low:g}, {high:g}], but row {i} holds {v!r}. "
                "Margins are normalised by the rating-scale width (see `ultrafeedback_to_camp`)."
            )


def validate_camp_dataset(
    dataset: Any,
    *,
    truth_margin_key: str = "truth_margin",
    help_margin_key: str = "help_margin",
    conflict_key: str | None = None,
    rule: str = "sign",
    kappa: float = 10.0,
    require_margins: bool = True,
) -> dict[str, float]:
    """Check the CAMP columns of a preference dataset and summarise them.

    Raises ``ValueError`` (naming the column and the first bad row) for missing columns, non-numeric values,
    NaN/inf, ``|t|`` or ``|h|`` above 1, or conflict values outside [0, 1].

    Warns (``UserWarning``) when

    - the pairs look **swapped**: more pairs have a chosen answer worse on both objectives (``t <= 0`` and
      ``h <= 0``, not both ties) than better on both. Swapping chosen and rejected flips both gaps, so this
      share, not the conflict fraction, is what moves; gaps computed as rejected minus chosen look the same;
    - more than 5% of the pairs are **inconsistent** (worse on both): CAMP gives them a negative margin, but
      their overall label is likely wrong;
    - the conflict fraction is 0 or 1: CAMP then treats every pair alike.

    Args:
        dataset: A ``datasets.Dataset`` (or a dict of columns).
        truth_margin_key: Column of ``t``.
        help_margin_key: Column of ``h``.
        conflict_key: Optional column of a precomputed conflict ``c`` in [0, 1].
        rule: Conflict rule used for the summary when ``conflict_key`` is ``None``.
        kappa: Sharpness of the soft rule.
        require_margins: Whether ``t`` and ``h`` must be present (the weight mode with ``conflict_key`` needs
            neither).

    Returns:
        ``{"n_pairs", "conflict_frac", "tie_rate", "worse_both_frac", "better_both_frac"}``. ``tie_rate`` is
        the share of pairs with ``t == 0`` or ``h == 0`` (no conflict under the sign rule); the last two are
        the shares of pairs whose chosen answer is worse (better) on both objectives. Figures that need the
        margins are ``nan`` when they are absent.

    Example:
        >>> validate_camp_dataset({"truth_margin": [0.5, -0.5, 1.0], "help_margin": [0.5, 0.0, 0.25]})
        ... # doctest: +NORMALIZE_WHITESPACE
        {'n_pairs': 3, 'conflict_frac': 0.0, 'tie_rate': 0.333..., 'worse_both_frac': 0.333...,
         'better_both_frac': 0.666...}
    """
    import torch

    from hf_ext.camp.core import camp_conflict

    columns = set(getattr(dataset, "column_names", None) or dataset)
    needed = [k for k in (truth_margin_key, help_margin_key) if require_margins] + (
        [conflict_key] if conflict_key else []
    )
    missing = [k for k in needed if k not in columns]
    if missing:
        raise ValueError(
            f"the dataset lacks the CAMP column(s) {missing} (found {sorted(columns)}). Build them with "
            "`hf_ext.camp.ultrafeedback_to_camp`, or point "
            "`truth_margin_key`/`help_margin_key`/`conflict_key` at your columns."
        )
    stats: dict[str, float] = {"n_pairs": 0, "conflict_frac": math.nan, "tie_rate": math.nan}
    stats.update(worse_both_frac=math.nan, better_both_frac=math.nan)
    gaps = {}
    for key in (truth_margin_key, help_margin_key):
        if key in columns:
            gaps[key] = _column(dataset, key)
            _check_numbers(key, gaps[key], -1.0, 1.0)
            stats["n_pairs"] = len(gaps[key])
    if conflict_key:
        conflict = _column(dataset, conflict_key)
        _check_numbers(conflict_key, conflict, 0.0, 1.0)
        c = torch.tensor(conflict, dtype=torch.float64)
        stats["n_pairs"] = len(conflict)
    if len(gaps) == 2:
        t, h = (torch.tensor(gaps[k], dtype=torch.float64) for k in (truth_margin_key, help_margin_key))
        stats["tie_rate"] = ((t == 0) | (h == 0)).double().mean().item()
        stats.update(_order_check(t, h))
        if not conflict_key:
            c = camp_conflict(t, h, rule=rule, kappa=kappa)
    if conflict_key or len(gaps) == 2:
        frac = stats["conflict_frac"] = c.mean().item()
        if frac in (0.0, 1.0):
            warnings.warn(
                f"conflict fraction is {frac:g}: every pair is "
                f"{'consistent' if frac == 0 else 'in conflict'}, so CAMP treats every pair alike "
                "(a fixed per-pair margin or loss, no conflict handling).",
                UserWarning,
                stacklevel=2,
            )
    return stats


def _order_check(t: Any, h: Any) -> dict[str, float]:
    """Shares of pairs worse / better on both objectives, with the swapped and inconsistent warnings."""
    worse = ((t <= 0) & (h <= 0) & (t + h < 0)).double().mean().item()
    better = ((t >= 0) & (h >= 0) & (t + h > 0)).double().mean().item()
    if worse > better:
        warnings.warn(
            f"chosen and rejected look swapped: {worse:.1%} of the pairs have a chosen answer worse on "
            f"both objectives (t <= 0 and h <= 0), only {better:.1%} better on both. Check the pair order "
            "and that the gap columns are chosen minus rejected.",
            UserWarning,
            stacklevel=3,
        )
    elif worse > INCONSISTENT_SHARE:
        warnings.warn(
            f"{worse:.1%} of the pairs prefer an answer that is worse on both objectives "
            "(t <= 0 and h <= 0); CAMP gives them a negative margin, but their overall label is likely "
            "wrong.",
            UserWarning,
            stacklevel=3,
        )
    return {"worse_both_frac": worse, "better_both_frac": better}
