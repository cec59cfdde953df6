"""The multi-perspective evaluation protocol: agreement with reference grades (overall, per question, per
stratum, per rubric item, per score band), stability, deferral, failure modes, and the survey and
feedback-review perspectives.

The perspectives are the paper's [paper]; every statistic and tag rule here is [reconstructed]:

- P1 reference agreement: :func:`~hf_ext.metrics.functional.grading.grading_agreement` with bootstrap CIs.
- P2 student survey: Likert 1-5 items, mean and share agreeing (>= 4), bootstrap 95% CIs.
- P3 feedback review: correct / acceptable / incorrect rates with Wilson 95% CIs.
- P4 stability: run-to-run SD and range, aggregation bias (aggregated minus first-run total).
- P5 failure modes: each answer with a parse failure or a large error (``|a - g| >= large``) gets one tag:
  ``parse_failure``, ``segmentation``, ``ocr_misread`` (from the OCR flags given), or
  ``rubric_misapplied`` (otherwise).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int
from hf_ext.ai_grading.pipeline import GradeReport

FAILURE_MODES = ("parse_failure", "segmentation", "ocr_misread", "rubric_misapplied")
STATS = ("n", "mae", "bias", "exact", "qwk")


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a binomial rate (95% by default)."""
    if n == 0:
        return math.nan, math.nan
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _floats(d: Mapping[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in d.items()}


@dataclass
class ProtocolResult:
    """What :meth:`EvaluationProtocol.evaluate` returns: ``data`` (a JSON-ready dict) plus renderings."""

    data: dict[str, Any]

    def to_markdown(self) -> str:
        """The overall figures, the per-stratum tables and the failure-mode table as Markdown."""
        d = self.data
        o = d["overall"]
        lines = [
            f"**{d['n']} answers**, {d['n_scored']} scored, {d['n_deferred']} deferred, "
            f"parse failures {d['parse_failure_rate']:.1%}; bin width {d['bin_width']} for QWK.",
            "",
            "| scope | n | MAE | bias | exact | QWK [95% CI] |",
            "|---|---|---|---|---|---|",
            f"| all scored | {o['n']:.0f} | {o['mae']:.3f} | {o['bias']:+.3f} | {o['exact']:.2f} | "
            f"{o['qwk']:.3f} [{o.get('qwk_lo', math.nan):.3f}, {o.get('qwk_hi', math.nan):.3f}] |",
        ]
        for group, table in d["breakdowns"].items():
            for value, s in table.items():
                lines.append(
                    f"| {group}={value} | {s['n']:.0f} | {s['mae']:.3f} | {s['bias']:+.3f} | "
                    f"{s['exact']:.2f} | {s['qwk']:.3f} |"
                )
        lines += ["", "| failure mode | count | share of large errors |", "|---|---|---|"]
        for mode, row in d["failure_modes"].items():
            lines.append(f"| {mode} | {row['count']} | {row['share']:.2f} |")
        return "\n".join(lines)

    def plot(self, path: str | Path, *, max_bars: int = 12) -> str:
        """Bar charts of MAE per breakdown (those with at most ``max_bars`` groups) and the failure-mode
        counts, saved to ``path`` (PNG)."""
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        groups = [g for g, t in self.data["breakdowns"].items() if len(t) <= max_bars]
        fig, axes = plt.subplots(1, len(groups) + 1, figsize=(4 * (len(groups) + 1), 3.2))
        for ax, group in zip(np.atleast_1d(axes), groups):
            table = self.data["breakdowns"][group]
            ax.bar(list(table), [s["mae"] for s in table.values()], color="tab:blue")
            ax.set_title(f"MAE by {group}", fontsize=9)
            ax.tick_params(axis="x", rotation=60, labelsize=7)
        ax = np.atleast_1d(axes)[-1]
        modes = self.data["failure_modes"]
        ax.bar(list(modes), [m["count"] for m in modes.values()], color="tab:red")
        ax.set_title("failure modes (large errors)", fontsize=9)
        ax.tick_params(axis="x", rotation=60, labelsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
        plt.close(fig)
        return str(path)


class EvaluationProtocol:
    """Judge a grader's reports against reference grades from several perspectives.

    Args:
        tolerances: ``within_<t>`` tolerances in points.
        bin_width: QWK bin width in points.
        n_bootstrap: Bootstrap resamples of the overall intervals.
        large: An error ``|a - g| >= large`` points is a large error (P5, deferral capture).
        seed: Bootstrap seed.

    Example:
        >>> from hf_ext.ai_grading import GradeReport
        >>> mk = lambda a: GradeReport("k", "q1", a, 3.0, {}, "", [], 0.0, 1.0, ())
        >>> out = EvaluationProtocol(n_bootstrap=0).evaluate([mk(3.0), mk(1.0), mk(2.0)], [3.0, 2.0, 0.0])
        >>> overall, modes = out.data["overall"], out.data["failure_modes"]
        >>> round(overall["mae"], 3), {mode: row["count"] for mode, row in modes.items()}
        (1.0, {'parse_failure': 0, 'segmentation': 0, 'ocr_misread': 0, 'rubric_misapplied': 2})
    """

    _paper = paper("ai_grading")

    def __init__(
        self,
        *,
        tolerances: Sequence[float] = (0.5, 1.0),
        bin_width: float = 0.5,
        n_bootstrap: int = 1000,
        large: float = 1.0,
        seed: int = 0,
    ) -> None:
        self.tolerances = tuple(tolerances)
        self.bin_width = check_float("bin_width", bin_width, low=0, low_open=True)
        self.n_bootstrap = check_int("n_bootstrap", n_bootstrap, low=0)
        self.large = check_float("large", large, low=0, low_open=True)
        self.seed = check_int("seed", seed)

    def _agreement(self, a: np.ndarray, g: np.ndarray, m: np.ndarray, boot: int) -> dict[str, float]:
        import warnings

        from hf_ext.metrics.functional.grading import grading_agreement

        if a.size == 0:
            return {k: math.nan for k in STATS} | {"n": 0.0}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            out = grading_agreement(
                a,
                g,
                m,
                tolerances=self.tolerances,
                bin_width=self.bin_width,
                n_bootstrap=boot,
                seed=self.seed,
            )
        return _floats(out)

    def evaluate(
        self,
        reports: Sequence[GradeReport],
        reference: Sequence[float],
        *,
        strata: Mapping[str, Sequence[Any]] | None = None,
        reference_items: Sequence[Mapping[str, float]] | None = None,
        ocr_misread: Sequence[bool] | None = None,
        segmentation: Sequence[bool] | None = None,
    ) -> ProtocolResult:
        """P1, P4 and P5 over ``reports`` against ``reference`` totals (one per report, in points).

        Args:
            strata: Extra breakdowns, name -> one label per report (e.g. error type, item family).
            reference_items: Reference points per rubric item, one mapping per report (per-item P1).
            ocr_misread: Whether the OCR text of each answer differs from the clean text (P5 tags).
            segmentation: Whether a line moved between questions in each answer (P5 tags).
        """
        n = len(reports)
        g_all = np.asarray(reference, dtype=np.float64)
        if g_all.shape != (n,):
            raise ValueError(f"`reference` must hold one score per report ({n}), got shape {g_all.shape}.")
        for name, col in (("ocr_misread", ocr_misread), ("segmentation", segmentation)):
            if col is not None and len(col) != n:
                raise ValueError(f"`{name}` must hold one flag per report ({n}), got {len(col)}.")
        scored = np.array([r.final is not None for r in reports], dtype=bool)
        a_all = np.array([r.final if r.final is not None else np.nan for r in reports], dtype=np.float64)
        m_all = np.array([r.max_points for r in reports], dtype=np.float64)
        a, g, m = a_all[scored], g_all[scored], m_all[scored]
        groups: dict[str, Sequence[Any]] = {"question": [r.question_id for r in reports]}
        groups |= dict(strata or {})
        groups["score band"] = [f"{math.floor(x + 1e-9):g}" for x in g_all]
        breakdowns: dict[str, dict[str, dict[str, float]]] = {}
        for name, labels in groups.items():
            if len(labels) != n:
                raise ValueError(
                    f"`strata[{name!r}]` must hold one label per report ({n}), got {len(labels)}."
                )
            lab = np.asarray([str(x) for x in labels])[scored]
            breakdowns[name] = {
                v: {k: self._agreement(a[lab == v], g[lab == v], m[lab == v], 0)[k] for k in STATS}
                for v in sorted(set(lab.tolist()))
            }
        kept = scored & ~np.array([r.deferred for r in reports], dtype=bool)
        data: dict[str, Any] = {
            "n": n,
            "n_scored": int(scored.sum()),
            "n_deferred": int(sum(r.deferred for r in reports)),
            "parse_failure_rate": float(np.mean([bool(r.parse_errors) for r in reports])) if n else math.nan,
            "bin_width": self.bin_width,
            "overall": self._agreement(a, g, m, self.n_bootstrap),
            "kept": self._agreement(a_all[kept], g_all[kept], m_all[kept], 0),
            "breakdowns": breakdowns,
            "per_item": self._per_item(reports, reference_items, scored),
            "stability": self._stability(reports),
            "failure_modes": self._failures(reports, a_all, g_all, ocr_misread, segmentation),
        }
        return ProtocolResult(data)

    def _per_item(
        self, reports: Sequence[GradeReport], reference_items: Any, scored: np.ndarray
    ) -> dict[str, dict[str, float]]:
        if reference_items is None:
            return {}
        if len(reference_items) != len(reports):
            raise ValueError(
                f"`reference_items` must hold one mapping per report, got {len(reference_items)}."
            )
        diffs: dict[str, list[float]] = {}
        for r, ref, ok in zip(reports, reference_items, scored):
            if ok:
                for k, v in ref.items():
                    diffs.setdefault(k, []).append(r.items.get(k, math.nan) - v)
        return {
            k: {"n": float(len(d)), "mae": float(np.nanmean(np.abs(d))), "bias": float(np.nanmean(d))}
            for k, d in diffs.items()
        }

    @staticmethod
    def _stability(reports: Sequence[GradeReport]) -> dict[str, float]:
        multi = [r for r in reports if len(r.runs) >= 2]
        if not multi:
            return {"n": 0.0}
        totals = [[run.total for run in r.runs] for r in multi]
        sds = [float(np.std(t, ddof=1)) for t in totals]
        ranges = [max(t) - min(t) for t in totals]
        bias = [r.final - r.runs[0].total for r in multi if r.final is not None]
        return {
            "n": float(len(multi)),
            "sd": float(np.mean(sds)),
            "range": float(np.mean(ranges)),
            "aggregation_bias": float(np.mean(bias)),
        }

    def _failures(
        self,
        reports: Sequence[GradeReport],
        a: np.ndarray,
        g: np.ndarray,
        ocr_misread: Sequence[bool] | None,
        segmentation: Sequence[bool] | None,
    ) -> dict[str, dict[str, float]]:
        counts = dict.fromkeys(FAILURE_MODES, 0)
        for i, r in enumerate(reports):
            if r.final is None:
                counts["parse_failure"] += 1
            elif abs(a[i] - g[i]) >= self.large - 1e-9:
                if segmentation is not None and segmentation[i]:
                    counts["segmentation"] += 1
                elif ocr_misread is not None and ocr_misread[i]:
                    counts["ocr_misread"] += 1
                else:
                    counts["rubric_misapplied"] += 1
        total = sum(counts.values())
        return {k: {"count": v, "share": v / total if total else 0.0} for k, v in counts.items()}

    @staticmethod
    def survey(
        likert: Mapping[str, Sequence[int]], *, n_bootstrap: int = 2000, seed: int = 0
    ) -> dict[str, Any]:
        """P2: per Likert item (1-5), the mean and the share agreeing (>= 4), each with a bootstrap 95% CI."""
        rng = np.random.default_rng(seed)
        out = {}
        for item, values in likert.items():
            v = np.asarray(values, dtype=np.float64)
            if v.ndim != 1 or v.size == 0 or not np.isin(v, [1, 2, 3, 4, 5]).all():
                raise ValueError(f"`likert[{item!r}]` must hold answers in 1..5, got {values!r:.60}.")
            draws = v[rng.integers(0, v.size, (n_bootstrap, v.size))]
            out[item] = {
                "n": int(v.size),
                "mean": float(v.mean()),
                "mean_ci": tuple(np.quantile(draws.mean(1), [0.025, 0.975]).tolist()),
                "agree": float((v >= 4).mean()),
                "agree_ci": tuple(np.quantile((draws >= 4).mean(1), [0.025, 0.975]).tolist()),
            }
        return out

    @staticmethod
    def feedback_review(labels: Sequence[str]) -> dict[str, Any]:
        """P3: rates of ``correct``, ``acceptable`` and ``incorrect`` feedback with Wilson 95% CIs."""
        allowed = ("correct", "acceptable", "incorrect")
        bad = sorted({x for x in labels if x not in allowed})
        if bad:
            raise ValueError(f"`labels` must be among {allowed}, got {bad}.")
        n = len(labels)
        return {
            k: {"rate": labels.count(k) / n if n else math.nan, "ci": wilson_interval(labels.count(k), n)}
            for k in allowed
        }
