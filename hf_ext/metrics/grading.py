"""torchmetrics Metrics for AI grading: agreement with reference grades and run-to-run stability (see
:mod:`hf_ext.metrics.functional.grading`).

States are per-answer ``cat`` lists, so DDP gathering and ``merge_state`` are exact; the functional form
puts the rows in a canonical order before bootstrapping, so the values do not depend on batch order,
world size or merge order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int, check_probability, check_sequence
from hf_ext.metrics.functional.grading import check_runs, check_scores, grading_agreement, run_stability


class GradingAgreement(Metric):
    """MAE, NMAE, signed bias, harsher/lenient rates, exact and within-tolerance agreement, quadratic
    weighted kappa, Spearman and Pearson between AI and reference scores, with optional bootstrap intervals.

    Args:
        tolerances: Tolerances ``t`` (points) of the ``within_<t>`` rates, defaults to ``(0.5, 1.0)``.
        bin_width: QWK bin width in points, defaults to 0.5.
        max_points: Default maximum score when ``update`` gets none.
        n_bootstrap: Bootstrap resamples for ``<stat>_lo`` / ``<stat>_hi`` intervals (0 = none).
        level: Interval level, defaults to 0.95.
        seed: Bootstrap seed.
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``:
        - ``preds``: AI scores ``(n,)`` in points, ``0 <= preds <= max_points``.
        - ``target``: reference (TA) scores ``(n,)``.
        - ``max_points``: scalar or ``(n,)``, *optional* when given to the constructor.

    As output of ``forward`` and ``compute``: a dict of 0-d float64 tensors (the keys of
    :func:`~hf_ext.metrics.functional.grading.grading_agreement`).

    Example:
        >>> m = GradingAgreement(max_points=3.0)
        >>> m.update(torch.tensor([2, 3, 1.0]), torch.tensor([2, 2, 1.0]))
        >>> m.update(torch.tensor([0, 2.5, 1.5]), torch.tensor([1, 3, 1.5]))
        >>> round(float(m.compute()["qwk"]), 6)
        0.742857
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False
    _paper = paper("ai_grading")
    preds: list[Tensor]
    target: list[Tensor]
    max_points: list[Tensor]

    def __init__(
        self,
        tolerances: Sequence[float] = (0.5, 1.0),
        bin_width: float = 0.5,
        max_points: float | None = None,
        n_bootstrap: int = 0,
        level: float = 0.95,
        seed: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.tolerances = tuple(
            check_sequence("tolerances", tolerances, lambda n, v: check_float(n, v, low=0))
        )
        self.bin_width = check_float("bin_width", bin_width, low=0, low_open=True)
        self.default_max = (
            None if max_points is None else check_float("max_points", max_points, low=0, low_open=True)
        )
        self.n_bootstrap = check_int("n_bootstrap", n_bootstrap, low=0)
        self.level = check_probability("level", level, low_open=True, high_open=True)
        self.seed = check_int("seed", seed)
        for name in ("preds", "target", "max_points"):
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, preds: Any, target: Any, max_points: Any = None) -> None:
        """Add a batch of ``(n,)`` scores."""
        if max_points is None:
            if self.default_max is None:
                raise ValueError("`max_points` must be given to update() or to the constructor, got None.")
            max_points = self.default_max
        a, g, m = check_scores(preds, target, max_points)
        for state, arr in (("preds", a), ("target", g), ("max_points", m)):
            getattr(self, state).append(torch.as_tensor(arr, dtype=torch.float64, device=self.device))

    def compute(self) -> dict[str, Tensor]:
        """Every statistic over all answers seen."""
        if isinstance(self.preds, list) and not self.preds:
            raise RuntimeError("GradingAgreement.compute() was called before any update().")
        return grading_agreement(
            dim_zero_cat(self.preds).cpu(),
            dim_zero_cat(self.target).cpu(),
            dim_zero_cat(self.max_points).cpu(),
            tolerances=self.tolerances,
            bin_width=self.bin_width,
            n_bootstrap=self.n_bootstrap,
            level=self.level,
            seed=self.seed,
        )


class RunStability(Metric):
    """Run-to-run stability of a grader: mean per-answer SD (ddof=1), mean range and the share of answers
    whose range exceeds ``tau``.

    Args:
        tau: Range threshold in points, defaults to 1.0.
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``: ``runs`` ``(n, R)``, the R run totals of each answer.

    As output of ``forward`` and ``compute``: ``{"sd", "range", "frac_range_gt_tau", "n"}``, 0-d float64.

    Example:
        >>> m = RunStability()
        >>> m.update(torch.tensor([[1.0, 2.0, 3.0]])); m.update(torch.tensor([[2.0, 2.0, 2.0]]))
        >>> m.compute()["frac_range_gt_tau"]
        tensor(0.5000, dtype=torch.float64)
    """

    is_differentiable = False
    higher_is_better = None
    full_state_update = False
    _paper = paper("ai_grading")
    runs: list[Tensor]

    def __init__(self, tau: float = 1.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.tau = check_float("tau", tau, low=0)
        self.add_state("runs", default=[], dist_reduce_fx="cat")

    def update(self, runs: Any) -> None:
        """Add ``(n, R)`` run scores (R fixed across updates)."""
        arr = check_runs(runs)
        if self.runs and not isinstance(self.runs, Tensor) and self.runs[0].shape[1] != arr.shape[1]:
            raise ValueError(
                f"`runs` must keep R={self.runs[0].shape[1]} runs per answer, got {arr.shape[1]}."
            )
        self.runs.append(torch.as_tensor(arr, dtype=torch.float64, device=self.device))

    def compute(self) -> dict[str, Tensor]:
        """Stability over all answers seen."""
        if isinstance(self.runs, list) and not self.runs:
            raise RuntimeError("RunStability.compute() was called before any update().")
        return run_stability(dim_zero_cat(self.runs).cpu(), tau=self.tau)


__all__ = ["GradingAgreement", "RunStability"]
