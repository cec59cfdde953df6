"""Types and scaffolding shared by every ``hf-ext bench <id>`` benchmark and the tour.

A benchmark is a module with ``run(*, quick: bool, seed: int) -> BenchReport``, which runs the method and its
baselines side by side in one process, and ``grid() -> list[dict]``, the settings of its full run (data set,
problem, budget, context length...), computed without running anything. It measures; it never asserts. The
``--quick`` run, which is also the method's tour entry, measures a slice of that grid (fewer settings, seeds,
steps or items, never a setting of its own) and says which in ``BenchReport.settings``. The CLI adds the
method id, the ``quick``/``seed`` flags and the environment, prints the rows as a table and writes the JSON
schema::

    {"method": str, "quick": bool, "seed": int, "config": {...},
     "rows": [{"system": str, "is_baseline": bool, "<figure>": number, ...}],
     "headline": {"figure": str, "higher_is_better": bool, "method": number,
                  "best_baseline_system": str, "best_baseline": number},
     "env": {"python": str, "torch": str, "cpu_count": int}}

Scaffolding every ``bench.py`` uses rather than re-writing it: :func:`pinned_threads` (restores the count),
:class:`Timer` and :func:`interleaved_times` (device-synchronised), :func:`mean_se` and :func:`bootstrap_ci`,
:func:`verdict` (target lines), :func:`seeded`, :func:`progress` (a bar over arms x seeds).
"""

from __future__ import annotations

import math
import os
import platform
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from hf_ext._timing import Timer

T = TypeVar("T")


@dataclass(frozen=True)
class Headline:
    """The one figure a benchmark is judged by: the method's value against the best baseline's."""

    figure: str
    higher_is_better: bool
    method: float
    best_baseline_system: str
    best_baseline: float

    @classmethod
    def from_rows(
        cls,
        rows: Sequence[dict[str, Any]],
        figure: str,
        *,
        higher_is_better: bool,
        method_system: str,
        where: dict[str, Any] | None = None,
    ) -> Headline:
        """Pick the method's row and the best baseline row for ``figure``.

        Args:
            rows: The benchmark rows.
            figure: Column to compare.
            higher_is_better: Direction of ``figure``.
            method_system: ``system`` value of the method's row.
            where: Optional column filters (e.g. ``{"context": 32768}``) selecting the rows compared.
        """
        pool = [r for r in rows if all(r.get(k) == v for k, v in (where or {}).items())]
        mine = [r for r in pool if r["system"] == method_system and not r["is_baseline"]]
        bases = [r for r in pool if r["is_baseline"] and _finite(r.get(figure))]
        if len(mine) != 1:
            raise ValueError(
                f"expected one row for system {method_system!r} with filters {where}, got {len(mine)}"
            )
        value = float(mine[0][figure]) if _finite(mine[0].get(figure)) else math.nan
        if not bases:  # e.g. a small run with no failures to recover: nothing to compare, not an error
            return cls(figure, higher_is_better, value, "", math.nan)
        pick = max if higher_is_better else min
        best = pick(bases, key=lambda r: float(r[figure]))
        return cls(figure, higher_is_better, value, best["system"], float(best[figure]))

    @property
    def comparable(self) -> bool:
        """Both figures are finite: a run too small to measure one (no baseline row with a finite value,
        or a method value of NaN) has nothing to compare."""
        return math.isfinite(self.method) and math.isfinite(self.best_baseline)

    @property
    def ratio(self) -> float:
        """Method over best baseline (``inf`` when the baseline is zero)."""
        return self.method / self.best_baseline if self.best_baseline else math.inf

    @property
    def beats_baseline(self) -> bool:
        return self.method > self.best_baseline if self.higher_is_better else self.method < self.best_baseline

    @property
    def verdict(self) -> str:
        """``"ahead"``, ``"behind"`` or ``"level"`` of the best baseline, or ``"no comparison"``."""
        if not self.comparable:
            return "no comparison"
        if self.method == self.best_baseline:
            return "level"
        return "ahead" if self.beats_baseline else "behind"

    def text(self) -> str:
        """One line: ``"<figure> <method> vs <baseline> (<system>), x<ratio>, higher is better"``."""
        arrow = "higher" if self.higher_is_better else "lower"
        if not self.comparable:
            return (
                f"{self.figure} {self.method:.4g}: no comparison at this size (no finite baseline or value)"
            )
        return (
            f"{self.figure} {self.method:.4g} vs {self.best_baseline:.4g} ({self.best_baseline_system}), "
            f"x{self.ratio:.3g}, {arrow} is better"
        )


@dataclass
class BenchReport:
    """What a benchmark returns.

    Attributes:
        rows: One dict per (system, setting): ``system`` and ``is_baseline`` plus measured figures.
            Settings (problem, budget, context length...) are ordinary columns.
        headline: The figure the method is judged by.
        config: The settings the run used (sizes, seeds, budgets), JSON-serialisable.
        what: One line saying what ran, shown in the tour (e.g. ``"set cover, 40 requests, eta=0..1"``).
        notes: Lines printed under the table: what is real and what synthetic, targets met or missed.
        files: Paths of artefacts written (plots), keyed by a short name.
        settings: The settings of the benchmark's grid that this run measured, each a dict of the keys that
            define a setting (data set, problem, budget, context length...; not seeds, steps or items).
            A ``--quick`` run (and the tour) measures a subset of the full run's :func:`grid` settings:
            :func:`check_slice` checks it.
    """

    rows: list[dict[str, Any]]
    headline: Headline
    config: dict[str, Any] = field(default_factory=dict)
    what: str = ""
    notes: list[str] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    settings: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self, *, method: str, quick: bool, seed: int) -> dict[str, Any]:
        """The JSON document of the common schema (module docstring)."""
        import torch

        h = self.headline
        return {
            "method": method,
            "quick": quick,
            "seed": seed,
            "config": self.config,
            "rows": [_jsonable(r) for r in self.rows],
            "headline": {
                "figure": h.figure,
                "higher_is_better": h.higher_is_better,
                "method": h.method if math.isfinite(h.method) else None,
                "best_baseline_system": h.best_baseline_system,
                "best_baseline": h.best_baseline if h.comparable else None,
                "verdict": h.verdict,
            },
            "settings": [_jsonable(setting) for setting in self.settings],
            "env": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "cpu_count": os.cpu_count() or 1,
            },
            "notes": self.notes,
            "files": self.files,
        }


def check_slice(settings: Sequence[dict[str, Any]], grid: Sequence[dict[str, Any]], *, method: str) -> None:
    """Check that every setting a run measured is a setting of the full run's ``grid``.

    Raises:
        ValueError: ``settings`` is empty, or one of them is not in ``grid`` (the message names it).
    """
    if not settings:
        raise ValueError(f"`{method}` reported no settings; a benchmark names the grid settings it measured")
    full = [_setting_key(g) for g in grid]
    for setting in settings:
        if _setting_key(setting) not in full:
            raise ValueError(f"`{method}` measured setting {setting} that is not in its full run's grid")


def _setting_key(setting: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, repr(v)) for k, v in setting.items()))


def interleaved_times(
    calls: dict[str, Callable[[], Any]], *, repeats: int, warmup: int = 1, device: Any = None
) -> dict[str, list[float]]:
    """Seconds of each call, measured round-robin (A, B, C, A, B, C, ...) so that drift in machine load falls
    on every arm alike; ``warmup`` untimed rounds first. Report ratios of medians, never one-off times.
    """
    for _ in range(warmup):
        for call in calls.values():
            call()
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            with Timer(device) as t:
                call()
            times[name].append(t.seconds)
    return times


@contextmanager
def pinned_threads(n: int) -> Iterator[None]:
    """Run a block with ``n`` torch threads, restoring the previous count afterwards (also on error)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def mean_se(values: Iterable[float]) -> tuple[float, float, int]:
    """``(mean, standard error, n)`` over the finite values (``nan`` mean when none; SE 0 for one value)."""
    v = [float(x) for x in values if _finite(x)]
    if not v:
        return math.nan, math.nan, 0
    mean = sum(v) / len(v)
    if len(v) == 1:
        return mean, 0.0, 1
    var = sum((x - mean) ** 2 for x in v) / (len(v) - 1)
    return mean, math.sqrt(var / len(v)), len(v)


def bootstrap_ci(
    values: Sequence[float] | Any,
    statistic: Callable[[Any], float] | None = None,
    *,
    level: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of ``statistic`` (default: the mean) over the rows of ``values``.

    ``values`` may be 2-D (one row per unit, e.g. ``(score, label)`` pairs for an AUROC); rows are resampled.
    """
    import numpy as np

    data = np.asarray(values)
    if data.shape[0] == 0:
        return math.nan, math.nan
    stat = statistic or (lambda x: float(np.mean(x)))
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, data.shape[0], size=(n_resamples, data.shape[0]))
    draws = np.array([stat(data[i]) for i in idx], dtype=float)
    draws = draws[np.isfinite(draws)]
    if draws.size == 0:
        return math.nan, math.nan
    tail = (1 - level) / 2
    return float(np.quantile(draws, tail)), float(np.quantile(draws, 1 - tail))


_PROGRESS = {"enabled": False}


def set_progress(enabled: bool) -> None:
    """Turn benchmark progress bars on or off (the CLI: on for a terminal, off with ``--quiet``)."""
    _PROGRESS["enabled"] = enabled


def progress(
    iterable: Iterable[T], *, total: int | None = None, desc: str = "", unit: str = "it"
) -> Iterable[T]:
    """``iterable`` with a tqdm bar on stderr while progress is on (see :func:`set_progress`), else as is.

    Benchmarks wrap their outer loop (arms x seeds) in it, so a long run shows where it is.
    """
    if not _PROGRESS["enabled"]:
        return iterable
    try:
        from tqdm.auto import tqdm
    except ImportError:  # tqdm comes with every host; a core-only install runs without bars
        return iterable
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, disable=False)


def full_size_claim(method_id: str) -> str:
    """What a quick row says when its slice cannot show the claim: the method's last full-run verdict, read
    from its docs page's ``**Last full run:**`` line (one source for the figures, as in the README)."""
    from hf_ext._readme import last_full_run

    return f"claim shown at full size only (last full run: {last_full_run(method_id)})"


def verdict(target: str, met: bool, detail: str) -> str:
    """One note line judging a target from measured figures: ``"<target>: MET (<detail>)"`` or ``MISSED``."""
    return f"{target}: {'MET' if met else 'MISSED'} ({detail})"


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Seed python, numpy and torch for the duration of a block, restoring torch's RNG afterwards."""
    import random

    import numpy as np
    import torch

    state = torch.random.get_rng_state()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    try:
        yield
    finally:
        torch.random.set_rng_state(state)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """Render rows as a fixed-width text table; columns are the union of keys in first-seen order."""
    cols: list[str] = []
    for r in rows:
        cols += [k for k in r if k not in cols]
    cells = [[_fmt(r.get(c, "")) for c in cols] for r in rows]
    widths = [max([len(c)] + [len(row[i]) for row in cells]) for i, c in enumerate(cols)]
    line = "  ".join(c.ljust(w) for c, w in zip(cols, widths))
    rule = "  ".join("-" * w for w in widths)
    body = [
        "  ".join(v.rjust(w) if _numeric(v) else v.ljust(w) for v, w in zip(row, widths)) for row in cells
    ]
    return "\n".join([line, rule, *body])


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return str(v)
        if v != 0 and (abs(v) >= 1e5 or abs(v) < 1e-3):
            return f"{v:.3g}"
        return f"{v:.4g}" if abs(v) < 10 else f"{v:.1f}"
    return str(v)


def _numeric(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


def _finite(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in row.items():
        if hasattr(v, "item"):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        out[k] = v
    return out
