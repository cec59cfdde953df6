"""Coverage classifiers h(x) ~ P(Y in C(X) | X = x) used to cross-fit ERT.

* ``"hgb"`` (default) [reconstructed — hf-ext project choice, not the paper's recipe]:
  ``HistGradientBoostingClassifier(max_iter=200, learning_rate=0.05, max_leaf_nodes=15, early_stopping=True)``
  wrapped in ``CalibratedClassifierCV(method="isotonic" if n_train >= 1000 else "sigmoid", cv=3)``. Only
  scikit-learn is needed; calibration matters for the L2/KL variants (L1 only uses the side of tau).
* ``"covmetrics"`` [paper]: the reference ``CheapLGBMClassifier`` of the ``covmetrics`` package (8 LightGBM
  models averaged + a ``probmetrics`` logistic calibrator). Needs ``covmetrics``, ``lightgbm``, ``catboost``
  and ``probmetrics``; it opens a ``multiprocessing.Pool`` per fit, so avoid it inside DataLoader workers or
  DDP.
* Any scikit-learn classifier instance (cloned before every fit). Classifiers other than HGB generally do not
  accept NaN features.
"""

from __future__ import annotations

from typing import Any

from hf_ext._validation import check_choice

CLASSIFIERS = ("hgb", "covmetrics")
ISOTONIC_MIN_TRAIN = 1000


def default_classifier(n_train: int, random_state: int | None = 42) -> Any:
    """The calibrated gradient-boosting default (module docstring) for ``n_train`` training rows."""
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
