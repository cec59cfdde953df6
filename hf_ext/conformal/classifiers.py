"""Coverage classifiers h(x) ~ P(Y in C(X) | X = x) used to cross-fit ERT.

* ``"hgb"`` (default) [reconstructed — hf-ext project choice, not the paper's recipe]:
  ``HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=True)``
  wrapped in ``CalibratedClassifierCV(method="isotonic" if n_train >= 1000 else "sigmoid", cv=3)``. Only
  scikit-learn is needed; calibration matters for the L2/KL variants (L1 only uses the side of tau).
* ``"covmetrics"`` [paper]: the reference ``CheapLGBMClassifier`` of the ``covmetrics`` package (8 LightGBM
  models averaged + a ``probmetrics`` logistic calibrator). Needs ``covmetrics``, ``lightgbm``, ``catboost``
  and ``probmetrics``; it opens a ``multiprocessing.Pool`` per fit, so avoid it inside DataLoader workers or DDP.
* Any scikit-learn classifier instance (cloned before every fit). Classifiers other than HGB generally do not
  accept NaN features.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

CLASSIFIERS = ("hgb", "covmetrics")
ISOTONIC_MIN_TRAIN = 1000


def default_classifier(n_train: int, random_state: int | None = 42) -> Any:
    """The calibrated gradient-boosting default (see module docstring) for a training set of ``n_train`` rows."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier

    hgb = HistGradientBoostingClassifier(
        max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=True, random_state=random_state
    )
    method = "isotonic" if n_train >= ISOTONIC_MIN_TRAIN else "sigmoid"
    return CalibratedClassifierCV(hgb, method=method, cv=3)


def check_classifier(classifier: Any) -> None:
    """Validate ``classifier`` before any data is seen.

    Raises:
        ValueError: an unknown name. TypeError: an object without ``fit``/``predict_proba``.
    """
    if isinstance(classifier, str):
        if classifier not in CLASSIFIERS:
            raise ValueError(
                f"`classifier` must be one of {', '.join(repr(c) for c in CLASSIFIERS)} or a scikit-learn "
                f"classifier instance; got {classifier!r}."
            )
    elif not (hasattr(classifier, "fit") and hasattr(classifier, "predict_proba")):
        raise TypeError(
            "`classifier` must implement fit and predict_proba (a scikit-learn classifier), "
            f"got {type(classifier).__name__}."
        )


def make_classifier(classifier: Any, n_train: int, random_state: int | None = 42) -> Any:
    """A fresh, unfitted classifier from a name in :data:`CLASSIFIERS` or an estimator instance (cloned).

    Raises:
        ValueError / TypeError: as :func:`check_classifier`.
        ImportError: ``"covmetrics"`` without its optional dependencies.
    """
    check_classifier(classifier)
    if classifier == "hgb":
        return default_classifier(n_train, random_state)
    if classifier == "covmetrics":
        try:
            from covmetrics.classifiers import CheapLGBMClassifier
        except ImportError as err:
            raise ImportError(
                '`classifier="covmetrics"` needs the reference recipe: '
                "pip install covmetrics lightgbm catboost probmetrics"
            ) from err
        return CheapLGBMClassifier()
    from sklearn.base import clone

    return clone(classifier)
