"""Pool-based active learning as scikit-learn meta-estimators: PriorAL and the classic baselines.

Both classes follow :class:`~sklearn.semi_supervised.SelfTrainingClassifier`: ``y = -1`` marks unlabelled
rows of ``X`` (so -1 cannot be a class), ``estimator`` is cloned in ``fit``, learned state ends in ``_``.
``fit(X, y)`` takes the pool and runs the first round; ``query()`` returns the row positions to annotate;
``teach(idx, labels)`` records the annotator's labels and runs the next round.

* :class:`PriorALClassifier`: a foundation-model prior and the small model decide together (Zhang et al.,
  ICML 2026, arXiv 2606.07630); the math is in :mod:`hf_ext.prior_al.core`.
* :class:`ActiveLearnerClassifier`: random, entropy, margin and class-balanced uncertainty sampling.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, _fit_context, clone
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, check_random_state, has_fit_parameter, validate_data

from hf_ext._registry import paper
from hf_ext.prior_al import core

UNLABELLED = -1


def _default_estimator() -> Any:
    return LogisticRegression(max_iter=1000, class_weight="balanced")


class _PoolLearner(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """Shared pool bookkeeping: labels, the small model, ``query`` and ``teach``."""

    _paper = paper("prior_al")

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "estimator": [HasMethods(["fit", "predict_proba"]), None],
        "batch_size": [Interval(Integral, 1, None, closed="left")],
        "classes": ["array-like", None],
        "random_state": ["random_state"],
    }

    estimator: Any
    batch_size: int
    classes: Any
    random_state: Any

    # ------------------------------------------------------------------ fit / query / teach
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, X: Any, y: Any) -> Any:
        """Take the pool and run the first round.

        Args:
            X: ``(n, d)`` features of the whole pool.
            y: ``(n,)`` labels, ``-1`` for unlabelled rows.
        """
        X, y = validate_data(self, X, y)
        if y.dtype.kind in ("U", "S"):
            raise ValueError(
                "`y` has dtype string. To use string labels, pass y with dtype object and -1 for "
                "the unlabelled rows."
            )
        labelled = y != UNLABELLED
        if labelled.any():
            check_classification_targets(y[labelled])
        self.classes_ = self._class_source(y[labelled])
        self._check_known("y", y[labelled])
        self.X_ = X
        self.labels_ = np.asarray(y, dtype=object if y.dtype.kind == "O" else y.dtype).copy()
        self._rng = check_random_state(self.random_state)
        self.history_: list[dict[str, Any]] = []
        self._start(X)
        self._refit()
        self._split(first=True)
        return self

    def query(self, batch_size: int | None = None) -> np.ndarray:
        """Row positions of ``X`` to annotate next, most wanted first, ``(min(B, candidates),)`` ints."""
        check_is_fitted(self)
        b = self.batch_size if batch_size is None else batch_size
        if isinstance(b, bool) or not isinstance(b, Integral) or b < 1:
            raise ValueError(f"`batch_size` must be an int >= 1, got {b!r}")
        if len(self.query_order_) < b:
            warnings.warn(
                f"only {len(self.query_order_)} candidates for a batch of {b}; querying all of them",
                UserWarning,
                stacklevel=2,
            )
        return np.asarray(self.query_order_[:b], dtype=int)

    def teach(self, idx: Any, labels: Any) -> Any:
        """Record the annotator's ``labels`` for rows ``idx`` of ``X`` and run the next round."""
        check_is_fitted(self)
        idx = np.asarray(idx).reshape(-1)
        labels = np.asarray(labels, dtype=object).reshape(-1)
        if idx.size and idx.dtype.kind not in "iu":
            raise ValueError(f"`idx` must hold integer row positions, got dtype {idx.dtype}")
        idx = idx.astype(int)
        if len(idx) != len(labels):
            raise ValueError(f"`idx` has {len(idx)} entries but `labels` has {len(labels)}")
        n = len(self.labels_)
        if ((idx < 0) | (idx >= n)).any():
            raise ValueError(f"`idx` must lie in [0, {n}), got {idx[(idx < 0) | (idx >= n)].tolist()}")
        if len(np.unique(idx)) != len(idx):
            raise ValueError(f"`idx` has repeated positions: {idx.tolist()}")
        done = idx[self.labels_[idx] != UNLABELLED]
        if len(done):
            raise ValueError(f"`idx` holds already-labelled positions {done.tolist()}")
        self._check_known("labels", labels)
        self.labels_[idx] = np.asarray(labels, dtype=self.labels_.dtype)
        self._refit()
        self._split(first=False)
        return self

    # ------------------------------------------------------------------ prediction
    def predict_proba(self, X: Any) -> np.ndarray:
        """``(n, C)`` class probabilities, columns in ``classes_`` order."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False)
        return self._deployed_proba(X)

    def predict(self, X: Any) -> np.ndarray:
        """``(n,)`` predicted labels."""
        proba = self.predict_proba(X)
        return np.asarray(self.classes_[proba.argmax(axis=1)])

    @property
    def n_labelled_(self) -> int:
        """Number of annotated rows of the pool."""
        check_is_fitted(self)
        return int((self.labels_ != UNLABELLED).sum())

    # ------------------------------------------------------------------ helpers
    def _class_source(self, y_lab: np.ndarray) -> np.ndarray:
        if self.classes is not None:
            classes = np.asarray(self.classes)
        elif getattr(self, "prior", None) is not None and hasattr(self.prior, "classes_"):  # type: ignore[attr-defined]
            classes = np.asarray(self.prior.classes_)  # type: ignore[attr-defined]
        elif len(y_lab):
            classes = np.unique(y_lab)
        else:
            raise ValueError(
                "no labelled rows in `y` and no class source: pass `classes=` or a prior with `classes_`"
            )
        if len(np.unique(classes)) != len(classes) or len(classes) == 0:
            raise ValueError(f"`classes` must be distinct and non-empty, got {list(classes)}")
        if any(c == UNLABELLED for c in classes.tolist()):
            raise ValueError("-1 marks unlabelled rows and cannot be a class in `classes`")
        return np.sort(classes) if self.classes is None else classes

    def _check_known(self, name: str, values: np.ndarray) -> None:
        known = set(self.classes_.tolist())
        unseen = sorted({v for v in np.asarray(values).tolist() if v not in known}, key=str)
        if unseen:
            raise ValueError(
                f"unseen class in `{name}`: {unseen}; known classes are {self.classes_.tolist()}"
            )

    def _positions(self, labels: np.ndarray) -> np.ndarray:
        lookup = {c: i for i, c in enumerate(self.classes_.tolist())}
        return np.asarray([lookup[v] for v in labels.tolist()], dtype=int)

    def _labelled_set(self) -> tuple[np.ndarray, np.ndarray]:
        idx = np.flatnonzero(self.labels_ != UNLABELLED)
        return idx, self._positions(self.labels_[idx])

    def _fit_small(self, idx: np.ndarray, pos: np.ndarray, weight: np.ndarray | None = None) -> Any:
        """Clone and fit the small model on pool rows ``idx`` with class positions ``pos``.

        Returns ``None`` when fewer than 2 classes are present (the model is then uniform).
        """
        if len(np.unique(pos)) < 2:
            return None
        model = clone(self.estimator) if self.estimator is not None else _default_estimator()
        y = self.classes_[pos]
        if weight is None or np.allclose(weight, 1.0):
            return model.fit(self.X_[idx], y)
        if has_fit_parameter(model, "sample_weight"):
            return model.fit(self.X_[idx], y, sample_weight=weight)
        if isinstance(model, Pipeline) and has_fit_parameter(model.steps[-1][1], "sample_weight"):
            return model.fit(self.X_[idx], y, **{f"{model.steps[-1][0]}__sample_weight": weight})
        raise ValueError(
            f"{type(model).__name__}.fit takes no sample_weight; use pseudo_weight=1.0 and "
            "label_noise other than 'soft'"
        )

    def _model_proba(self, X: np.ndarray) -> np.ndarray:
        """Small-model probabilities ``(n, C)`` on ``classes_`` columns; uniform with no model yet."""
        C = len(self.classes_)
        if self.estimator_ is None or len(X) == 0:
            return np.full((len(X), C), 1.0 / C)
        raw = np.asarray(self.estimator_.predict_proba(X), dtype=float)
        out = np.zeros((len(X), C))
        out[:, self._positions(np.asarray(self.estimator_.classes_))] = raw
        return out

    def _unlabelled(self) -> np.ndarray:
        return np.flatnonzero(self.labels_ == UNLABELLED)

    def _log(self, **row: Any) -> None:
        self.history_.append({"round": len(self.history_), "n_labelled": self.n_labelled_, **row})

    # hooks
    def _start(self, X: np.ndarray) -> None:
        """Per-pool setup before the first round (the prior's pass over the pool)."""

    def _refit(self) -> None:
        """Fit ``estimator_`` on the annotated rows (and whatever else the learner trains on)."""
        self.estimator_ = self._fit_small(*self._labelled_set())

    def _split(self, *, first: bool) -> None:
        """Rank the unlabelled rows for ``query`` with the current ``estimator_``."""
        raise NotImplementedError

    def _deployed_proba(self, X: np.ndarray) -> np.ndarray:
        return self._model_proba(X)

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags


class ActiveLearnerClassifier(_PoolLearner):
    """Classic pool-based active learning with one query strategy, in the same fit/query/teach API.

    Parameters
    ----------
    estimator : classifier with predict_proba or None, default=None
        The small model, cloned and refit on the annotated rows every round. ``None`` uses
        ``LogisticRegression(max_iter=1000, class_weight="balanced")``.
    strategy : {"random", "entropy", "margin", "class_balanced", "badge", "coreset"}, default="entropy"
        ``"random"``: uniform over the unlabelled rows. ``"entropy"``: highest predictive entropy.
        ``"margin"``: smallest top-1 minus top-2 probability. ``"class_balanced"``: each pick goes to the
        predicted class with the fewest labels so far, highest entropy within it (Aggarwal et al., 2020).
        ``"badge"``: k-means++ seeding on last-layer gradient embeddings (Ash et al., 2020).
        ``"coreset"``: greedy k-center in the small model's input space (Sener & Savarese, 2018). Both
        embed a row as the last step of a ``Pipeline`` sees it (the raw features otherwise), and their
        query order holds one batch (``query`` beyond ``batch_size`` warns and returns that batch).
        Before a model exists (fewer than 2 labelled classes) every strategy queries at random.
    batch_size : int, default=10
        Rows returned by ``query()``.
    classes : array-like or None, default=None
        The full label set; otherwise the labelled ``y`` at ``fit``.
    random_state : int, RandomState or None, default=None
        Seeds random queries and tie-free shuffles.

    Attributes
    ----------
    classes_, estimator_, labels_ (the pool labels, -1 unlabelled), query_order_, history_, n_features_in_.
    """

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **_PoolLearner._parameter_constraints,
        "strategy": [StrOptions({"random", "entropy", "margin", "class_balanced", "badge", "coreset"})],
    }

    def __init__(
        self,
        estimator: Any = None,
        strategy: str = "entropy",
        batch_size: int = 10,
        classes: Any = None,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.strategy = strategy
        self.batch_size = batch_size
        self.classes = classes
        self.random_state = random_state

    def _split(self, *, first: bool) -> None:
        U = self._unlabelled()
        p = self._model_proba(self.X_[U])
        if self.strategy == "random" or self.estimator_ is None:
            order = self._rng.permutation(len(U))
        elif self.strategy == "entropy":
            order = core.top_k(core.entropy(p), len(U))
        elif self.strategy == "margin":
            order = core.top_k(-core.margin(p), len(U))
        elif self.strategy == "class_balanced":
            _, pos = self._labelled_set()
            counts = np.bincount(pos, minlength=len(self.classes_))
            order = core.class_balanced_queries(p, counts, len(U))
        elif self.strategy == "badge":
            order = core.badge_queries(p, self._embed(self.X_[U]), self.batch_size, self._np_rng)
        else:
            L, _ = self._labelled_set()
            order = core.coreset_queries(self._embed(self.X_[U]), self._embed(self.X_[L]), self.batch_size)
        self.query_order_ = U[order]
        self._log(strategy=self.strategy)

    @property
    def _np_rng(self) -> np.random.Generator:
        """A numpy Generator drawn from the learner's seeded RandomState (k-means++ picks)."""
        return np.random.default_rng(self._rng.randint(2**31 - 1))

    def _embed(self, X: np.ndarray) -> np.ndarray:
        """``X`` as the small model's last step sees it: through a fitted ``Pipeline``'s transforms."""
        model = self.estimator_
        if isinstance(model, Pipeline) and len(model.steps) > 1:
            return np.asarray(model[:-1].transform(X), dtype=float)
        return np.asarray(X, dtype=float)


class PriorALClassifier(_PoolLearner):
    """PriorAL: a foundation-model prior and a small model make imbalance-aware co-decisions.

    One round, on the unlabelled pool ``U`` [paper, via a third-party note of the paper]:

    1. product of experts ``p_bar = p_f * p_L / sum`` of the small model ``p_f`` and the prior ``p_L``
       (both smoothed with ``eps = 1e-3`` first [reconstructed]);
    2. ``H_b(x) = H(p_bar(x)) * weight``, the weight from the prior's pseudo-label counts over ``U``
       (``class_weighting``);
    3. the top ``floor(noise_ratio * |U|)`` rows by ``H_b`` form the noise set, the rest the clean set,
       which gets free pseudo-labels (``argmax p_L`` by default; ``argmax p_bar`` with
       ``pseudo_label="poe"``) [reconstructed];
    4. ``query()`` returns the noise-set rows of highest small-model entropy; right after the cold start
       (the round run by ``fit``) it draws them at random within the noise set [reconstructed];
    5. ``teach`` refits the small model on the last split's pseudo-labelled clean set plus the annotated
       rows, then splits again with the refit model, so the next query and pseudo-labels use it.

    ``fit`` trains the cold-start model on the annotated rows only. With fewer than 2 labelled classes the
    small model is uniform, so ``p_bar = p_L`` [reconstructed]. The prior is evaluated once per pool, at
    ``fit``. The defaults are the best variant measured on the docs page, not the paper's: pseudo-labels
    from the prior (``argmax p_bar`` copies a weak cold-start model's confident mistakes into the clean
    set) and the product of experts deployed; ``pseudo_label="poe", predict_with="estimator"`` gives the
    paper's reading.

    Parameters
    ----------
    estimator : classifier with predict_proba or None, default=None
        The small model (the paper deploys it). ``None`` uses
        ``LogisticRegression(max_iter=1000, class_weight="balanced")``.
    prior : callable with ``classes_`` or None, default=None
        ``prior(X) -> (n, C)`` probabilities (see :mod:`hf_ext.prior_al.priors`); columns are aligned to
        ``classes_`` by label. ``None`` is a uniform prior, under which PriorAL reduces to the small model.
    noise_ratio : float in (0, 1], default=0.5
        ``rho``, the share of the unlabelled pool sent to the noise set; 1 leaves no clean set
        [reconstructed default].
    batch_size : int, default=10
        ``B``, rows returned by ``query()``.
    class_weighting : {"count_ratio", "inverse"} or None, default="count_ratio"
        ``"count_ratio"``: ``w_yhat / w_max`` as the note gives it (predicted-minority rows are scored low
        and pseudo-labelled); ``"inverse"``: ``w_max / w_yhat`` (sends them to the annotator); ``None``: 1.
    pseudo_label : {"prior", "poe"} or None, default="prior"
        Source of the clean set's pseudo-labels: ``argmax`` of the prior, or of the product of experts;
        ``None`` trains on annotated rows only (selection only).
    pseudo_weight : float >= 0, default=1.0
        ``sample_weight`` of each pseudo-label (annotated rows weigh 1).
    predict_with : {"poe", "estimator", "prior"}, default="poe"
        What ``predict`` deploys: the product of experts of the small model and the prior on new rows
        (an hf-ext extension; it calls the prior on ``X``), the small model alone (as in the paper), or
        the prior alone.
    label_noise : {"agreement_filter", "soft", "cleanlab"} or None, default=None
        hf-ext extensions, not in the paper. ``"agreement_filter"``: an annotated label with
        ``p_bar(x, y) < 0.05`` is left out of this round's training (it stays in ``labels_``).
        ``"soft"``: each pseudo-label weighs ``max_i p_bar(x, i)``. ``"cleanlab"``:
        ``cleanlab.filter.find_label_issues`` on the annotated rows with 3-fold out-of-fold probabilities
        (needs ``pip install cleanlab``).
    classes : array-like or None, default=None
        The full label set (early labelled sets often miss minority classes); otherwise ``prior.classes_``,
        then the labelled ``y``.
    random_state : int, RandomState or None, default=None
        Seeds the random first query.

    Attributes
    ----------
    classes_ : ndarray (C,)
    estimator_ : fitted small model, or None while fewer than 2 classes are known
    labels_ : ndarray (n,), the pool labels, -1 unlabelled
    prior_proba_ : ndarray (n, C), the prior on the pool, columns in ``classes_`` order
    noise_set_, clean_set_ : ndarray of int, row positions of the last split
    pseudo_labels_ : ndarray, labels given to ``clean_set_`` (empty when ``pseudo_label=None``)
    scores_ : ndarray (n,), ``H_b`` of the unlabelled rows at the last split (NaN for labelled rows)
    query_order_ : ndarray of int, noise-set rows in query order
    degenerate_pseudo_labels_ : bool, every pseudo-label fell in one class at the last split
    history_ : list of dict, one per round (labelled, noise and clean set sizes, filtered labels)

    Examples
    --------
    >>> import numpy as np
    >>> from hf_ext.prior_al.priors import CallablePrior
    >>> X = np.array([[0.0], [0.1], [0.2], [1.0], [1.1], [1.2]]); y = np.array([0, -1, -1, 1, -1, -1])
    >>> prior = CallablePrior(lambda X: np.c_[1 - X[:, 0] / 1.2, X[:, 0] / 1.2], classes=[0, 1])
    >>> al = PriorALClassifier(prior=prior, batch_size=1, random_state=0).fit(X, y)
    >>> idx = al.query(); al = al.teach(idx, [int(X[idx[0], 0] > 0.5)])
    >>> al.predict([[0.05], [1.15]]).tolist()
    [0, 1]
    """

    _paper = paper("prior_al")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **_PoolLearner._parameter_constraints,
        "prior": [callable, None],
        "noise_ratio": [Interval(Real, 0, 1, closed="right")],
        "class_weighting": [StrOptions(set(core.CLASS_WEIGHTINGS)), None],
        "pseudo_label": [StrOptions({"poe", "prior"}), None],
        "pseudo_weight": [Interval(Real, 0, None, closed="left")],
        "predict_with": [StrOptions({"estimator", "poe", "prior"})],
        "label_noise": [StrOptions({"agreement_filter", "soft", "cleanlab"}), None],
    }

    def __init__(
        self,
        estimator: Any = None,
        prior: Any = None,
        noise_ratio: float = 0.5,
        batch_size: int = 10,
        class_weighting: str | None = "count_ratio",
        pseudo_label: str | None = "prior",
        pseudo_weight: float = 1.0,
        predict_with: str = "poe",
        label_noise: str | None = None,
        classes: Any = None,
        random_state: Any = None,
    ) -> None:
        self.estimator = estimator
        self.prior = prior
        self.noise_ratio = noise_ratio
        self.batch_size = batch_size
        self.class_weighting = class_weighting
        self.pseudo_label = pseudo_label
        self.pseudo_weight = pseudo_weight
        self.predict_with = predict_with
        self.label_noise = label_noise
        self.classes = classes
        self.random_state = random_state

    def _prior_proba(self, X: np.ndarray) -> np.ndarray:
        C = len(self.classes_)
        if self.prior is None:
            return np.full((len(X), C), 1.0 / C)
        p_classes = np.asarray(getattr(self.prior, "classes_", np.arange(C)))
        if len(p_classes) != C or set(p_classes.tolist()) != set(self.classes_.tolist()):
            raise ValueError(
                f"`prior` classes {p_classes.tolist()} do not match the estimator's classes "
                f"{self.classes_.tolist()}"
            )
        raw = core.check_probabilities(self.prior(X), "prior(X)", len(X), C)
        return np.asarray(raw[:, self._positions(p_classes)])

    def _start(self, X: np.ndarray) -> None:
        self.prior_proba_ = self._prior_proba(X)
        self.clean_set_ = np.zeros(0, dtype=int)
        self.pseudo_labels_ = self.classes_[:0]
        self._p_bar: np.ndarray | None = None
        self._n_filtered = 0

    def _refit(self) -> None:
        """Step 5: the small model on the last split's pseudo-labelled clean set plus the annotated rows."""
        L, L_pos = self._labelled_set()
        still = self.labels_[self.clean_set_] == UNLABELLED  # rows taught since the split leave the set
        pseudo_idx = self.clean_set_[still]
        pseudo_pos = self._positions(self.pseudo_labels_[still])
        pseudo_w = np.full(len(pseudo_idx), float(self.pseudo_weight))
        if self.label_noise == "soft" and self._p_bar is not None:
            pseudo_w *= self._p_bar[pseudo_idx].max(axis=1)
        keep = self._keep_labels(L, L_pos)
        self._n_filtered = int((~keep).sum())
        idx = np.concatenate([L[keep], pseudo_idx])
        pos = np.concatenate([L_pos[keep], pseudo_pos])
        weight = np.concatenate([np.ones(int(keep.sum())), pseudo_w])
        self.estimator_ = self._fit_small(idx, pos, weight)

    def _split(self, *, first: bool) -> None:
        """Steps 1-4 with the current small model; see the class docstring."""
        U = self._unlabelled()
        p_f = self._model_proba(self.X_)
        p_bar = core.poe(p_f, self.prior_proba_)
        h_b = core.imbalance_entropy(p_bar[U], self.prior_proba_[U], self.class_weighting)
        noise, clean = core.split_noise_clean(h_b, self.noise_ratio)
        self.noise_set_, self._p_bar = U[noise], p_bar
        self.scores_ = np.full(len(self.X_), np.nan)
        self.scores_[U] = h_b
        if first:
            self.query_order_ = self._rng.permutation(self.noise_set_)
        else:
            self.query_order_ = self.noise_set_[core.top_k(core.entropy(p_f[self.noise_set_]), len(noise))]
        self.clean_set_ = U[clean] if self.pseudo_label is not None else np.zeros(0, dtype=int)
        source = p_bar if self.pseudo_label == "poe" else self.prior_proba_
        pseudo_pos = source[self.clean_set_].argmax(axis=1)
        self.pseudo_labels_ = self.classes_[pseudo_pos]
        self.degenerate_pseudo_labels_ = bool(
            len(pseudo_pos) > 1 and len(self.classes_) > 1 and len(np.unique(pseudo_pos)) == 1
        )
        if self.degenerate_pseudo_labels_:
            warnings.warn(
                f"every pseudo-label is class {self.pseudo_labels_[0]!r}: the prior and the small model "
                "agree on one class only; check the prior's quality",
                UserWarning,
                stacklevel=3,
            )
        self._log(
            n_noise=len(self.noise_set_),
            n_clean=len(U) - len(noise),
            n_pseudo=len(self.clean_set_),
            n_filtered=self._n_filtered,
            degenerate=self.degenerate_pseudo_labels_,
        )

    def _keep_labels(self, L: np.ndarray, L_pos: np.ndarray) -> np.ndarray:
        """Mask of annotated rows to train on this round (``label_noise``); the product of experts is the
        one of the last split."""
        if self.label_noise == "agreement_filter" and self._p_bar is not None:
            return core.agreement_keep(self._p_bar[L], L_pos)
        if self.label_noise == "cleanlab" and len(L):
            return self._cleanlab_keep(L, L_pos)
        return np.ones(len(L), dtype=bool)

    def _cleanlab_keep(self, L: np.ndarray, L_pos: np.ndarray) -> np.ndarray:
        try:
            from cleanlab.filter import find_label_issues
        except ImportError as err:
            raise ImportError("label_noise='cleanlab' needs cleanlab: pip install cleanlab") from err
        from sklearn.model_selection import cross_val_predict

        counts = np.bincount(L_pos, minlength=len(self.classes_))
        if (counts[counts > 0] < 3).any() or (counts > 0).sum() < 2:
            return np.ones(len(L), dtype=bool)  # too few labels per class for 3-fold out-of-fold estimates
        model = clone(self.estimator) if self.estimator is not None else _default_estimator()
        present = np.flatnonzero(counts)
        remap = np.searchsorted(present, L_pos)
        oof = cross_val_predict(model, self.X_[L], remap, cv=3, method="predict_proba")
        return ~np.asarray(find_label_issues(remap, oof), dtype=bool)

    def _deployed_proba(self, X: np.ndarray) -> np.ndarray:
        if self.predict_with == "estimator":
            return self._model_proba(X)
        p_prior = self._prior_proba(X)
        return p_prior if self.predict_with == "prior" else core.poe(self._model_proba(X), p_prior)
