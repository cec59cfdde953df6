"""scikit-learn estimator for ERT: a coverage classifier whose held-out score is the excess risk of the target
coverage (Braun, Holzmüller, Jordan & Bach, ICML 2026, arXiv 2512.11779)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, _fit_context
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import check_is_fitted, validate_data

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_probability
from hf_ext.ert.classifiers import CLASSIFIERS, allows_nan, make_classifier
from hf_ext.ert.core import (
    FOLD_ORDERS,
    KEYS,
    LOSSES,
    NULLS,
    HeldOutTest,
    cross_fit_ert,
    ert_table,
    held_out_test,
    per_sample_excess_risk,
    positive_proba,
    uniformity_test,
)
from hf_ext.ert.inputs import check_covered, check_features, target_vector


def binary_coverage_target(estimator: BaseEstimator, y: Any) -> np.ndarray:
    """Set ``estimator.classes_`` from ``y`` and return the coverage indicator (``classes_[1]`` = covered).

    Raises:
        ValueError: more than two classes ("Only binary classification is supported") or a single class.
    """
    y_type = type_of_target(y, input_name="y", raise_unknown=True)
    if y_type not in ("binary", "unknown") and np.unique(y).size > 2:
        raise ValueError(
            f"Only binary classification is supported. The type of the target is {y_type}; "
            "`y` must be the coverage indicator 1{label in prediction set}."
        )
    classes = np.unique(y)
    if classes.size < 2:
        raise ValueError(
            f"`y` holds one class only ({classes[0]!r}); a coverage classifier needs both covered "
            "and uncovered samples."
        )
    if not (set(classes.tolist()) <= {0, 1} or set(classes.tolist()) <= {False, True}):
        warnings.warn(
            f"`y` labels {classes.tolist()} are not 0/1; treating {classes.tolist()[1]!r} as 'covered'.",
            UserWarning,
            stacklevel=3,
        )
    estimator.classes_ = classes
    return (np.asarray(y) == classes[1]).astype(np.float64)


@dataclass(frozen=True)
class AuditSummary:
    """What :meth:`CoverageAuditor.summary` reports on held-out rows; ``str()`` renders it.

    Attributes:
        n: Held-out rows.
        coverage: Their marginal coverage.
        target: Mean target coverage tau.
        ert: Held-out ERT per key (``l1, l2, kl`` and their ``_over`` / ``_under`` parts).
        test: The exact held-out test of ERT-L1 (``statistic``, ``p_value``, ``n_above``, ``n_below``).
        level: Level of the verdict.
        classifier: The auditor's classifier.
        null: The test's null hypothesis: ``"uniform"`` (coverage does not depend on x) or ``"target"``.
    """

    n: int
    coverage: float
    target: float
    ert: dict[str, float]
    test: HeldOutTest
    level: float
    classifier: str
    null: str = "uniform"

    def __str__(self) -> str:
        e, t = self.ert, self.test
        verdict = (
            "conditional miscoverage detected"
            if t.p_value <= self.level
            else "no conditional miscoverage detected (ERT is a lower bound: a weak classifier has low power)"
        )
        lines = [
            f"Coverage audit on {self.n} held-out rows (classifier {self.classifier})",
            f"  marginal coverage    {self.coverage:.4f}   target {self.target:.4f}",
            f"  ERT-L1               {e['l1']:+.4f}  (under {e['l1_under']:+.4f}, over {e['l1_over']:+.4f})",
            f"  ERT-L2 (Brier)       {e['l2']:+.5f} (under {e['l2_under']:+.5f}, over {e['l2_over']:+.5f})",
            f"  ERT-KL (log-loss)    {e['kl']:+.5f} (under {e['kl_under']:+.5f}, over {e['kl_over']:+.5f})",
            f"  p-value              {t.p_value:.3g}   (exact held-out test that coverage "
            + ("does not depend on x" if self.null == "uniform" else "equals the target")
            + f"; h above {'the marginal' if self.null == 'uniform' else 'tau'} on {t.n_above} rows, "
            f"below on {t.n_below})",
            f"  at level {self.level:g}: {verdict}",
        ]
        return "\n".join(lines)


class CoverageAuditor(ClassifierMixin, BaseEstimator):
    """Coverage classifier h(x) ~ P(Y in C(X) | X = x) scored by ERT, the excess risk of the target coverage.

    ``fit(X, covered)`` fits the classifier; on new rows, ``score`` returns the held-out ERT of the fitted h
    against the constant target, ``p_value`` the exact p-value of "coverage equals the target everywhere" and
    ``summary`` both with the over/under parts; ``cross_fit_ert`` runs the paper's cross-fitted estimator on
    one data set [paper].

    Sign convention: for the *audited* conformal method lower ERT is better; for the *auditor* a larger ERT is
    a tighter lower bound on the miscoverage distance, so ``GridSearchCV`` maximising ``score`` picks the most
    powerful auditor classifier (scikit-learn's greater-is-better rule). Every auditor of
    :mod:`hf_ext.estimators.conditional_coverage` scores with the same sign (higher = stronger evidence).

    Parameters
    ----------
    classifier : {"hgb", "covmetrics"} or classifier instance, default="hgb"
        ``"hgb"`` is calibrated ``HistGradientBoostingClassifier`` (an hf-ext choice [reconstructed]; the
        paper's LightGBM recipe is ``"covmetrics"`` and needs its optional dependencies). Instances are
        cloned.
    alpha : float, default=0.1
        Miscoverage level in (0, 1); the target coverage is ``1 - alpha``.
    loss : {"l1", "l2", "kl"}, default="l1"
        Loss used by ``score``.
    n_splits : int, default=5
        Folds of :meth:`cross_fit_ert`.
    random_state : int, default=42
        Seed of the folds and of the default classifier.
    n_jobs : int or None, default=None
        Folds of :meth:`cross_fit_ert` fitted at once through joblib (``-1``: every core; a
        ``joblib.parallel_config`` backend such as Dask or Ray applies). The result does not depend on it.
    fold_order : {"canonical", "as_given"}, default="canonical"
        Row order the folds of :meth:`cross_fit_ert` are drawn over: ``"canonical"`` makes the value
        independent of the row order; ``"as_given"`` is ``KFold`` over the rows as passed, as
        ``covmetrics.ERT.evaluate``.

    Attributes
    ----------
    classifier_ : estimator
        The fitted coverage classifier.
    classes_ : ndarray of shape (2,)
        Labels seen in ``fit``; ``classes_[1]`` means covered (a warning is raised when they are not 0/1).
    n_features_in_ : int
        Number of features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LogisticRegression
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(4000, 2))
    >>> covered = (rng.random(4000) < np.where(X[:, 0] > 0.3, 0.75, 0.98)).astype(int)
    >>> auditor = CoverageAuditor(classifier=LogisticRegression()).fit(X[:2000], covered[:2000])
    >>> bool(auditor.score(X[2000:], covered[2000:]) > 0.05)
    True
    """

    _paper = paper("ert")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "classifier": [StrOptions(set(CLASSIFIERS)), HasMethods(["fit", "predict_proba"])],
        "alpha": [Interval(Real, 0, 1, closed="neither")],
        "loss": [StrOptions(set(LOSSES))],
        "n_splits": [Interval(Integral, 2, None, closed="left")],
        "random_state": [Interval(Integral, 0, None, closed="left")],
        "n_jobs": [Integral, None],
        "fold_order": [StrOptions(set(FOLD_ORDERS))],
    }

    def __init__(
        self,
        classifier: Any = "hgb",
        alpha: float = 0.1,
        loss: str = "l1",
        n_splits: int = 5,
        random_state: int = 42,
        n_jobs: int | None = None,
        fold_order: str = "canonical",
    ) -> None:
        self.classifier = classifier
        self.alpha = alpha
        self.loss = loss
        self.n_splits = n_splits
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.fold_order = fold_order

    def _finite(self) -> bool | str:
        return "allow-nan" if allows_nan(self.classifier) else True

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, y: Any) -> CoverageAuditor:
        """Fit the coverage classifier.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Features (NaN allowed with the default classifier).
        y : array-like of shape (n_samples,)
            Coverage indicator 1{label in prediction set}.

        Returns
        -------
        self : CoverageAuditor
        """
        X, y = validate_data(self, X, y, ensure_all_finite=self._finite())
        z = binary_coverage_target(self, y)
        labels = z.astype(np.int64)
        self.classifier_ = make_classifier(self.classifier, labels, self.random_state).fit(X, labels)
        return self

    def predict_proba(self, X: Any) -> np.ndarray:
        """Estimated ``[P(not covered | x), P(covered | x)]``, shape (n_samples, 2)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, ensure_all_finite=self._finite())
        h = positive_proba(self.classifier_, X)
        return np.column_stack([1.0 - h, h])

    def predict(self, X: Any) -> np.ndarray:
        """Most likely label (``classes_[1]`` = covered), shape (n_samples,)."""
        proba = self.predict_proba(X)
        return self.classes_[(proba[:, 1] > 0.5).astype(int)]

    def score(self, X: Any, y: Any, sample_weight: Any = None, target_coverage: Any = None) -> float:
        """Held-out ERT (loss ``self.loss``) of the fitted classifier on ``(X, y)``; use data not seen in
        ``fit``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Coverage indicator, with the labels seen in ``fit``.
        sample_weight : None
            Not supported (must be None); present for scikit-learn's scorer signature.
        target_coverage : float or array-like of shape (n_samples,), optional
            Per-sample target; defaults to ``1 - alpha``.

        Returns
        -------
        ert : float
        """
        if sample_weight is not None:
            raise ValueError("`sample_weight` is not supported by CoverageAuditor.score; pass None.")
        h, z, tau = self._held_out(X, y, target_coverage)
        return float(per_sample_excess_risk(h, z, tau, self.loss).mean())

    def p_value(self, X: Any, y: Any, target_coverage: Any = None, null: str = "uniform") -> float:
        """One-sided p-value of conditional miscoverage on held-out ``(X, y)`` [reconstructed].

        Exact, given the fitted classifier h (fitted on other rows): with ``null="uniform"`` the held-out
        ERT-L1 against the held-out marginal coverage c, ``mean(sign(h - c) (covered - c))``, is compared with
        its distribution when coverage does not depend on X (a hypergeometric tail;
        :func:`hf_ext.ert.core.uniformity_test`), so a well-specified split-conformal predictor is not flagged
        for the marginal deviation its finite calibration set allows. ``null="target"`` tests "P(covered | x)
        = target for every x" (every ``covered`` Bernoulli(tau); :func:`hf_ext.ert.core.held_out_test`). The
        rows must not have been used in ``fit``, or the p-value is invalid.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
            Coverage indicator, with the labels seen in ``fit``.
        target_coverage : float or array-like of shape (n_samples,), optional
            Per-sample target; defaults to ``1 - alpha`` (only used by ``null="target"``).
        null : {"uniform", "target"}, default="uniform"
            Null hypothesis: coverage constant in x, or equal to the target everywhere.

        Returns
        -------
        p_value : float
        """
        return self._test(*self._held_out(X, y, target_coverage), null).p_value

    @staticmethod
    def _test(h: np.ndarray, z: np.ndarray, tau: np.ndarray, null: str) -> HeldOutTest:
        if check_choice("null", null, NULLS) == "uniform":
            return uniformity_test(h, z)
        return held_out_test(h, z, tau)

    def summary(
        self, X: Any, y: Any, target_coverage: Any = None, level: float = 0.05, null: str = "uniform"
    ) -> AuditSummary:
        """Held-out audit of ``(X, y)``: marginal coverage, the nine ERT values and the p-value.

        ``str(summary)`` renders a small report; the fields hold the figures. Use rows not seen in ``fit``.

        Parameters
        ----------
        X, y, target_coverage
            As :meth:`p_value`.
        level : float, default=0.05
            Test level of the verdict line, in (0, 1).
        null : {"uniform", "target"}, default="uniform"
            Null hypothesis of the p-value (see :meth:`p_value`).

        Returns
        -------
        summary : AuditSummary
        """
        level = check_probability("level", level, low_open=True, high_open=True)
        check_choice("null", null, NULLS)
        h, z, tau = self._held_out(X, y, target_coverage)
        table = ert_table(h, z, tau, np.zeros(z.size, dtype=np.int64))
        return AuditSummary(
            n=int(z.size),
            coverage=float(z.mean()),
            target=float(tau.mean()),
            ert={key: table[key] for key in KEYS},
            test=self._test(h, z, tau, null),
            level=level,
            classifier=repr(self.classifier),
            null=null,
        )

    def _held_out(self, X: Any, y: Any, target_coverage: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(h, covered, tau)`` on new rows, each ``(n,)``: predictions of the fitted classifier."""
        h = self.predict_proba(X)[:, 1]
        z = (np.asarray(y) == self.classes_[1]).astype(np.float64)
        if z.shape != h.shape:
            raise ValueError(
                f"`y` has shape {z.shape} but `X` has {h.shape[0]} rows; pass one label per row."
            )
        return h, z, target_vector(self.alpha, target_coverage, z.shape[0])

    def cross_fit_ert(self, X: Any, y: Any, target_coverage: Any = None) -> dict[str, Any]:
        """Cross-fitted ERT on one data set (``KFold(n_splits, shuffle=True, random_state)``), all losses.

        Does not change the fitted state. ``y`` must hold 0/1 here; all-covered data warns and gives 0.

        Returns
        -------
        result : dict
            Floats ``l1, l2, kl, l1_over, l1_under, l2_over, l2_under, kl_over, kl_under`` and
            ``fold_values``, an ndarray of shape (n_splits, 9).
        """
        self._validate_params()
        z = check_covered(y, "y")
        feats = check_features(X, z.shape[0], allow_nan=allows_nan(self.classifier), name="X")
        tau = target_vector(self.alpha, target_coverage, z.shape[0])
        return cross_fit_ert(
            feats, z, tau, self.classifier, self.n_splits, self.random_state, self.n_jobs, self.fold_order
        )

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = allows_nan(self.classifier)
        tags.target_tags.required = True
        tags.classifier_tags.multi_class = False
        return tags
