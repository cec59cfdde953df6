"""Mean corruption error (mCE) as a torchmetrics ``Metric``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torchmetrics import Metric

from hf_ext._registry import paper
from hf_ext.metrics.functional.corruption import (
    ALEXNET_CE,
    ALEXNET_CLEAN_ERROR,
    _mean_corruption_error_compute,
    _mean_corruption_error_update,
)


class MeanCorruptionError(Metric):
    """Top-1 accuracy per (corruption, severity) and on clean data, reduced to mCE against a reference.

    [reconstructed] ImageNet-C's mCE and relative mCE (see
    :func:`~hf_ext.metrics.functional.corruption.mean_corruption_error`);
    the Dem-HEC paper's exact metric is unconfirmed.

    As input to ``forward`` and ``update``:
        - ``preds``: ``(N, num_classes)`` scores or ``(N,)`` predicted ids.
        - ``target``: ``(N,)`` integer class ids.
        - ``corruption``: the corruption name of this batch, or ``None`` for clean data.
        - ``severity``: 1-5 (ignored for clean data).

    As output of ``forward`` and ``compute``: a dict with ``error`` ``(C, S)``, ``clean_error``,
    ``corruption_accuracy`` and ``clean_accuracy``; with a reference also ``mCE``, ``CE`` ``(C,)`` (percent,
    reference = 100) and, when the reference's clean error is known, ``relative_mCE``.

    Args:
        corruptions: corruption names, in table order.
        severities: severities tracked, *optional*, defaults to ``(1, 2, 3, 4, 5)``.
        reference: ``"alexnet"`` (ImageNet-C's AlexNet errors; canonical names and all five severities only,
            meaningful on real ImageNet-C), a ``(C, S)`` error tensor of a reference model on the same suite,
            or ``None`` (no mCE).
        reference_clean_error: clean error of the reference, for the relative mCE, *optional*, defaults to
            AlexNet's (0.4348) with ``reference="alexnet"``.

    Examples:
        >>> import torch
        >>> metric = MeanCorruptionError(["gaussian_noise"], severities=(1,), reference=torch.tensor([[0.5]]),
        ...                              reference_clean_error=0.1)
        >>> metric.update(torch.tensor([0, 1, 1, 1]), torch.tensor([0, 1, 1, 1]))
        >>> metric.update(torch.tensor([0, 0, 1, 1]), torch.tensor([0, 1, 1, 1]), "gaussian_noise", 1)
        >>> round(float(metric.compute()["mCE"]), 4)
        50.0
    """

    is_differentiable = False
    higher_is_better = False
    full_state_update = False
    plot_lower_bound = 0.0
    _paper = paper("dem_hec")
    correct: torch.Tensor
    total: torch.Tensor
    clean_correct: torch.Tensor
    clean_total: torch.Tensor

    def __init__(
        self,
        corruptions: Sequence[str],
        severities: Sequence[int] = (1, 2, 3, 4, 5),
        reference: str | torch.Tensor | None = None,
        reference_clean_error: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.corruptions = list(corruptions)
        self.severities = list(severities)
        if not self.corruptions or len(set(self.corruptions)) != len(self.corruptions):
            raise ValueError(
                f"`corruptions` must be a non-empty list of distinct names, got {self.corruptions!r}."
            )
        if not self.severities or any(s not in (1, 2, 3, 4, 5) for s in self.severities):
            raise ValueError(f"`severities` must be values in 1..5, got {self.severities!r}.")
        if isinstance(reference, str):
            if reference != "alexnet":
                raise ValueError(
                    f"`reference` must be 'alexnet', a (C, S) tensor or None, got {reference!r}."
                )
            unknown = [c for c in self.corruptions if c not in ALEXNET_CE]
            if unknown:
                raise ValueError(
                    f"`reference='alexnet'` needs canonical ImageNet-C names; not canonical: {unknown}. "
                    f"Valid: {', '.join(ALEXNET_CE)}."
                )
            if self.severities != [1, 2, 3, 4, 5]:
                raise ValueError(
                    "`reference='alexnet'` needs severities (1, 2, 3, 4, 5): AlexNet's errors are means over "
                    f"all five, got {self.severities!r}."
                )
            reference = torch.tensor([ALEXNET_CE[c] for c in self.corruptions], dtype=torch.float64)
            if reference_clean_error is None:
                reference_clean_error = ALEXNET_CLEAN_ERROR
        elif reference is not None:
            reference = torch.as_tensor(reference, dtype=torch.float64)
            if reference.shape != (len(self.corruptions), len(self.severities)):
                raise ValueError(
                    f"`reference` must have shape ({len(self.corruptions)}, {len(self.severities)}), "
                    f"got {tuple(reference.shape)}."
                )
        self.reference = reference
        self.reference_clean_error = reference_clean_error
        shape = (len(self.corruptions), len(self.severities))
        self.add_state("correct", torch.zeros(shape, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("total", torch.zeros(shape, dtype=torch.long), dist_reduce_fx="sum")
        self.add_state("clean_correct", torch.tensor(0), dist_reduce_fx="sum")
        self.add_state("clean_total", torch.tensor(0), dist_reduce_fx="sum")

    def update(
        self,
        preds: torch.Tensor,
        target: torch.Tensor,
        corruption: str | None = None,
        severity: int | None = None,
    ) -> None:
        correct, total = _mean_corruption_error_update(preds, target)
        if corruption is None:
            self.clean_correct += correct
            self.clean_total += total
            return
        if corruption not in self.corruptions:
            raise ValueError(f"`corruption` {corruption!r} is not tracked; tracked: {self.corruptions}.")
        if severity not in self.severities:
            raise ValueError(f"`severity` must be one of {self.severities}, got {severity!r}.")
        i, j = self.corruptions.index(corruption), self.severities.index(severity)
        self.correct[i, j] += correct
        self.total[i, j] += total

    def compute(self) -> dict[str, torch.Tensor]:
        if bool((self.total == 0).any()) or int(self.clean_total) == 0:
            raise RuntimeError(
                "every (corruption, severity) cell and the clean set need at least one update."
            )
        error = 1 - self.correct.double() / self.total.double()
        clean_error = 1 - self.clean_correct.double() / self.clean_total.double()
        out = {
            "error": error,
            "clean_error": clean_error,
            "corruption_accuracy": 1 - error.mean(),
            "clean_accuracy": 1 - clean_error,
        }
        if self.reference is not None:
            ref_clean = None
            if self.reference_clean_error is not None:
                ref_clean = torch.tensor(self.reference_clean_error, dtype=torch.float64)
            out.update(
                _mean_corruption_error_compute(error, clean_error, self.reference.to(error.device), ref_clean)
            )
        return out
