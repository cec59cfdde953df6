"""torchmetrics Metric for ERT, the excess risk of the target coverage (Braun et al., arXiv 2512.11779)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_int, check_n_jobs, check_probability
from hf_ext.ert.classifiers import allows_nan, check_classifier
from hf_ext.ert.core import FOLD_ORDERS, KEYS, cross_fit_ert
from hf_ext.metrics.conditional_coverage import _CatCoverageMetric
from hf_ext.metrics.functional.ert import _excess_risk_target_coverage_update


class ExcessRiskTargetCoverage(_CatCoverageMetric):
    """ERT: how much a cross-fitted classifier of the coverage beats the constant target coverage.

    Conditional coverage holds iff no classifier predicting Z = 1{Y in C(X)} from X has lower risk, under a
    proper loss, than the constant tau = 1 - alpha [paper]. ``compute`` cross-fits once on everything seen
    (``KFold(n_splits, shuffle=True, random_state)``) and reports the L1, Brier (L2) and log-loss (KL)
    variants with their over-/under-coverage parts (over + under = total). They are lower bounds on E|p -
    tau|, E(p - tau)^2 and E KL(p || tau). Lower is better for the audited conformal method; finite-sample
    values can be negative.

    The folds are drawn over the samples in a canonical order, so the value does not depend on batch order,
    DDP world size or ``merge_state`` order: all ranks compute the same value, and it equals
    :func:`~hf_ext.metrics.functional.excess_risk_target_coverage` on the same samples. The default classifier
    is an hf-ext choice [reconstructed]: calibrated ``HistGradientBoostingClassifier`` (see
    :mod:`hf_ext.ert.classifiers`). Call ``update`` in the loop and ``compute`` once: ``forward`` would
    cross-fit every batch.

    Args:
        alpha: Miscoverage level in (0, 1); target coverage ``1 - alpha`` unless ``target_coverage`` is
            passed.
        classifier: ``"hgb"``, ``"covmetrics"`` or a scikit-learn classifier instance (cloned per fold).
        n_splits: Cross-fitting folds, int >= 2 (and <= number of samples at compute time).
        random_state: Seed of the fold shuffle and of the default classifier.
        n_jobs: Folds fitted at once through joblib at ``compute`` (``-1``: every core); the value does not
            depend on it.
        fold_order: ``"canonical"`` (default: the value does not depend on batch, merge or rank order) or
            ``"as_given"`` (folds over the samples in update order, as ``covmetrics`` over an array; under DDP
            the order is rank by rank, so the value then depends on the world size).
        kwargs: Passed to :class:`torchmetrics.Metric`.

    As input to ``forward`` and ``update``:
        - ``features``: ``(n, d)`` float tensor (NaN only with the default gradient-boosting classifier).
        - ``covered``: ``(n,)`` 0/1 coverage indicator; or keywords ``y`` with ``prediction_sets``
          ``(n, K[, n_alpha])`` / ``intervals`` ``(n, 2[, n_alpha])`` and ``alpha_index``.
        - ``target_coverage`` (optional): per-sample target tau, scalar or ``(n,)`` in (0, 1).

    As output of ``forward`` and ``compute``:
        - dict of 0-d float64 tensors ``l1, l2, kl, l1_over, l1_under, l2_over, l2_under, kl_over, kl_under``
          and ``fold_values`` of shape ``(n_splits, 9)`` (columns in that key order).

    Example:
        >>> from sklearn.linear_model import LogisticRegression
        >>> g = torch.Generator().manual_seed(0)
        >>> metric = ExcessRiskTargetCoverage(alpha=0.1, classifier=LogisticRegression())
        >>> for _ in range(4):
        ...     x = torch.rand(500, 2, generator=g) * 2 - 1
        ...     covered = torch.rand(500, generator=g) < torch.where(x[:, 0] > 0.3, 0.75, 0.98)
        ...     metric.update(x, covered)
        >>> out = metric.compute()
        >>> bool(out["l1"] > 0.05), torch.isclose(out["l1_over"] + out["l1_under"], out["l1"]).item()
        (True, True)
    """

    _paper = paper("ert")
    higher_is_better = False
    _columns = ("features", "covered", "target")

    def __init__(
        self,
        alpha: float = 0.1,
        classifier: Any = "hgb",
        n_splits: int = 5,
        random_state: int = 42,
        n_jobs: int | None = None,
        fold_order: str = "canonical",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.alpha = check_probability("alpha", alpha, low_open=True, high_open=True)
        check_classifier(classifier)
        self.classifier = classifier
        self.n_splits = check_int("n_splits", n_splits, low=2)
        self.random_state = check_int("random_state", random_state, low=0)
        self.n_jobs = check_n_jobs("n_jobs", n_jobs)
        self.fold_order = check_choice("fold_order", fold_order, FOLD_ORDERS)

    def update(
        self,
        features: Any,
        covered: Any = None,
        target_coverage: Any = None,
        *,
        y: Any = None,
        prediction_sets: Any = None,
        intervals: Any = None,
        alpha_index: int | None = None,
    ) -> None:
        """Add a batch of features, coverage and (optionally) per-sample targets."""
        feats, cov, tau = _excess_risk_target_coverage_update(
            features,
            covered,
            self.alpha,
            target_coverage,
            y=y,
            prediction_sets=prediction_sets,
            intervals=intervals,
            alpha_index=alpha_index,
            allow_nan=allows_nan(self.classifier),
        )
        if isinstance(self.features, list) and self.features and self.features[0].shape[1] != feats.shape[1]:
            raise ValueError(
                f"`features` has {feats.shape[1]} columns but earlier batches had "
                f"{self.features[0].shape[1]}."
            )
        self._append(features=feats, covered=cov, target=tau)

    def compute(self) -> dict[str, Tensor]:
        """Cross-fitted ERT over all samples seen."""
        d = self._gather()
        table = cross_fit_ert(
            d["features"],
            d["covered"],
            d["target"],
            self.classifier,
            self.n_splits,
            self.random_state,
            self.n_jobs,
            self.fold_order,
        )
        out = {key: torch.tensor(table[key], dtype=torch.float64) for key in KEYS}
        out["fold_values"] = torch.as_tensor(table["fold_values"], dtype=torch.float64)
        return out
