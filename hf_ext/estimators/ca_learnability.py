"""``LearnabilityPredictor``: regress a cellular-automaton rule's learned error on its Boolean features.

With the features of :func:`hf_ext.ca_learnability.rule_features` as ``X`` (e.g. average sensitivity alone, or
the degree profile) and the normalised error of one architecture as ``y``, the cross-validated R² of this
estimator says how much of learnability a feature set explains [reconstructed analysis].
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context, clone
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import HasMethods
from sklearn.utils.validation import check_is_fitted, validate_data

from hf_ext._registry import paper


class LearnabilityPredictor(RegressorMixin, BaseEstimator):
    """Standardise the rule features, then fit a regressor (ridge by default) to the learned error.

    Parameters
    ----------
    regressor : estimator object or None, default=None
        Any scikit-learn regressor; cloned at ``fit``. ``None`` uses ``Ridge(alpha=1.0)``.
    standardize : bool, default=True
        Scale each feature to zero mean and unit variance first (features such as AS and the degree shares
        live on different scales).

    Attributes
    ----------
    model_ : Pipeline
        The fitted scaler and regressor.
    n_features_in_ : int
        Number of features seen at ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[0.1], [0.4], [0.5], [0.9]]); y = 2 * X[:, 0] + 0.1
    >>> LearnabilityPredictor().fit(X, y).score(X, y) > 0.8
    True
    """

    _paper = paper("ca_learnability")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "regressor": [HasMethods(["fit", "predict"]), None],
        "standardize": ["boolean"],
    }

    def __init__(self, regressor: Any = None, standardize: bool = True) -> None:
        self.regressor = regressor
        self.standardize = standardize

    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, y: Any) -> LearnabilityPredictor:
        """Fit on features ``X`` ``(n_rules, n_features)`` and errors ``y`` ``(n_rules,)``."""
        X, y = validate_data(self, X, y, y_numeric=True)
        base = Ridge(alpha=1.0) if self.regressor is None else clone(self.regressor)
        self.model_ = make_pipeline(StandardScaler(), base) if self.standardize else make_pipeline(base)
        self.model_.fit(X, y)
        return self

    def predict(self, X: Any) -> np.ndarray:
        """Predicted error of each rule, shape ``(n_rules,)``."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return np.asarray(self.model_.predict(X))
