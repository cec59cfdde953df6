"""Coverage classifiers h(x) ~ P(Y in C(X) | X = x) used to cross-fit ERT.

* ``"hgb"`` (default) [reconstructed — hf-ext project choice, not the paper's recipe]:
  ``HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15)`` wrapped in
  ``CalibratedClassifierCV`` over 3 shuffled stratified folds. From 1000 training rows on, HGB stops early
  (on a 10% validation split) and calibration is isotonic; below, HGB runs all iterations and calibration is
  sigmoid; with fewer than 3 rows in the smaller class, HGB is not calibrated. Only scikit-learn is needed;
  calibration matters for the L2/KL variants (L1 only uses the side of tau).
* ``"covmetrics"`` [paper]: the reference ``CheapLGBMClassifier`` of the ``covmetrics`` package (8 LightGBM
  models averaged + a ``probmetrics`` logistic calibrator). Needs ``covmetrics``, ``lightgbm``, ``catboost``
  and ``probmetrics``; it opens a ``multiprocessing.Pool`` per fit, so avoid it inside DataLoader workers or
  DDP.
* Any scikit-learn classifier instance, cloned before every fit; every ``random_state`` left at ``None`` in it
  is set to the caller's seed, so cross-fitting is reproducible (and equal on every DDP rank). Classifiers
  other than HGB generally do not accept NaN features.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hf_ext._validation import check_choice

CLASSIFIERS = ("hgb", "covmetrics")
LARGE_TRAIN = 1000
CALIBRATION_FOLDS = 3


def default_classifier(labels: np.ndarray, random_state: int | None = 42) -> Any:
    """The calibrated gradient-boosting default (module docstring) for training labels ``labels`` ``(n,)``."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import StratifiedKFold

    large = labels.size >= LARGE_TRAIN
    hgb = HistGradientBoostingClassifier(
        max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=large, random_state=random_state
    )
    if np.bincount(labels.astype(np.int64), minlength=2).min() < CALIBRATION_FOLDS:
        return hgb
    folds = StratifiedKFold(CALIBRATION_FOLDS, shuffle=True, random_state=random_state)
    return CalibratedClassifierCV(hgb, method="isotonic" if large else "sigmoid", cv=folds)


def check_classifier(classifier: Any) -> None:
    """Validate ``classifier`` before any data is seen.

    Raises:
        ValueError: an unknown name. TypeError: an object without ``fit``/``predict_proba``.
    """
    if isinstance(classifier, str):
        check_choice(
            "classifier", classifier, CLASSIFIERS, hint="Or pass a scikit-learn classifier instance."
        )
    elif not (hasattr(classifier, "fit") and hasattr(classifier, "predict_proba")):
        raise TypeError(
            "`classifier` must be a name or an object with fit and predict_proba (a scikit-learn "
            f"classifier), got {type(classifier).__name__}."
        )


def allows_nan(classifier: Any) -> bool:
    """Whether ``classifier`` accepts NaN features: the default HGB does; an instance says so in its
    scikit-learn tags; the ``"covmetrics"`` recipe is not relied on for it."""
    check_classifier(classifier)
    if isinstance(classifier, str):
        return classifier == "hgb"
    from sklearn.utils import get_tags

    try:
        return bool(get_tags(classifier).input_tags.allow_nan)
    except (AttributeError, TypeError):  # not a scikit-learn estimator: assume it needs finite inputs
        return False


def make_classifier(classifier: Any, labels: np.ndarray, random_state: int | None = 42) -> Any:
    """A fresh, unfitted classifier for the 0/1 training ``labels`` ``(n,)``, from a name in
    :data:`CLASSIFIERS` or an estimator instance (cloned, unset seeds set to ``random_state``).

    Raises:
        ValueError / TypeError: as :func:`check_classifier`.
        ImportError: ``"covmetrics"`` without its optional dependencies.
    """
    check_classifier(classifier)
    if classifier == "hgb":
        return default_classifier(labels, random_state)
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

    model = clone(classifier)
    unset = {
        k: random_state for k, v in model.get_params().items() if k.endswith("random_state") and v is None
    }
    return model.set_params(**unset)
