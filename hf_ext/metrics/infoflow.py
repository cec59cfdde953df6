"""torchmetrics Metrics that rank confidence scores by how well they separate correct from incorrect answers
(see :mod:`hf_ext.metrics.functional.infoflow`).

States are per-sample ``cat`` lists (``confidence``, ``correct``), so DDP gathering and ``merge_state`` are
exact; both values are invariant to the row order.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from hf_ext._registry import paper
from hf_ext.metrics.functional.infoflow import _check, prediction_rejection_ratio, uncertainty_auroc


class _ConfidenceMetric(Metric):
    """Base: ``confidence`` and ``correct`` stored as float64 ``cat`` states."""

    is_differentiable = False
    full_state_update = False
    higher_is_better = True
    _paper = paper("infoflow_uq")
    confidence: list[Tensor]
    correct: list[Tensor]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_state("confidence", default=[], dist_reduce_fx="cat")
        self.add_state("correct", default=[], dist_reduce_fx="cat")

    def update(self, confidence: Any, correct: Any) -> None:
        """Add a batch: ``confidence`` ``(n,)`` finite, ``correct`` ``(n,)`` 0/1."""
        conf, corr = _check(confidence, correct)
        self.confidence.append(conf.to(self.device, torch.float64))
        self.correct.append(corr.to(self.device, torch.float64))

    def _data(self) -> tuple[Tensor, Tensor]:
        if isinstance(self.confidence, list) and not self.confidence:
            raise RuntimeError(f"{type(self).__name__}.compute() was called before any update().")
        return dim_zero_cat(self.confidence), dim_zero_cat(self.correct)


class UncertaintyAUROC(_ConfidenceMetric):
    """AUROC of a confidence score against answer correctness (correct answers are the positives).

    Args:
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``:
        - ``confidence``: finite floats ``(n,)``, higher = more confident.
        - ``correct``: 0/1 or bool ``(n,)``.

    As output of ``forward`` and ``compute``:
        - 0-d float64 tensor in ``[0, 1]``; 0 with a warning when only one class was seen.

    Example:
        >>> m = UncertaintyAUROC()
        >>> m.update(torch.tensor([0.9, 0.2]), torch.tensor([1, 0]))
        >>> m.update(torch.tensor([0.6, 0.4]), torch.tensor([0, 1]))
        >>> m.compute()
        tensor(0.7500, dtype=torch.float64)
    """

    plot_lower_bound = 0.0
    plot_upper_bound = 1.0

    def compute(self) -> Tensor:
        """AUROC over every sample seen."""
        return uncertainty_auroc(*self._data())


class PredictionRejectionRatio(_ConfidenceMetric):
    """PRR: how much of the oracle's gain in mean correctness the confidence ordering achieves when the
    least confident answers are rejected (1 perfect, 0 random, negative worse than random).

    Args:
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``: ``confidence`` ``(n,)`` and ``correct`` ``(n,)`` as in
    :class:`UncertaintyAUROC`.

    As output of ``forward`` and ``compute``: 0-d float64 tensor, at most 1 (no lower bound).

    Example:
        >>> m = PredictionRejectionRatio()
        >>> m.update(torch.tensor([0.9, 0.8, 0.2, 0.1]), torch.tensor([0, 0, 1, 1]))
        >>> round(float(m.compute()), 6)
        -1.0
    """

    plot_upper_bound = 1.0

    def compute(self) -> Tensor:
        """PRR over every sample seen."""
        return prediction_rejection_ratio(*self._data())


__all__ = ["PredictionRejectionRatio", "UncertaintyAUROC"]
