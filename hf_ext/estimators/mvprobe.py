"""Weight-space probes as scikit-learn estimators: ``MVProbeClassifier``, ``ProbeXClassifier``, and the
``WeightMatrixExtractor`` / ``WeightStatsTransformer`` transformers.

``X`` is one weight matrix per model, given as any of:

- a sequence of models (torch ``nn.Module``, timm, transformers), state dicts or ``.safetensors`` paths, with
  ``layer`` naming the parameter to read (see :mod:`hf_ext.mvprobe.inputs`);
- a sequence of matrices, or an array ``(n, d_H, d_W)``;
- a 2-D array ``(n, f)``: each row is one ``(f, 1)`` matrix, or is reshaped to ``weight_shape``.
"""

from __future__ import annotations

import copy
import numbers
import warnings
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin, _fit_context
from sklearn.preprocessing import LabelEncoder
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, InvalidParameterError, StrOptions
from sklearn.utils.multiclass import check_classification_targets, type_of_target
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from hf_ext._registry import paper
from hf_ext.mvprobe.inputs import CONV_RESHAPES, is_model_list, stack_matrices

_INPUT = {
    "layer": [str, None],
    "conv_reshape": [StrOptions(set(CONV_RESHAPES)), None],
    "weight_shape": [tuple, list, None],
}


def _weights(est: BaseEstimator, X: Any, *, reset: bool) -> np.ndarray:
    """``X`` as float ``(n, d_H, d_W)``; sets or checks ``n_features_in_`` and ``weight_shape_``."""
    shape = est.weight_shape  # type: ignore[attr-defined]
    if shape is not None:
        ok = len(shape) == 2 and all(
            isinstance(d, numbers.Integral) and not isinstance(d, bool) and int(d) >= 1 for d in shape
        )
        if not ok:
            raise InvalidParameterError(
                f"`weight_shape` must be None or (d_H, d_W) of ints >= 1, got {shape!r}."
            )
    if not is_model_list(X) and not hasattr(X, "ndim"):
        X = np.asarray(X)
    if is_model_list(X):
        W = stack_matrices(X, est.layer, est.conv_reshape)  # type: ignore[attr-defined]
        W = check_array(W, allow_nd=True, dtype=[np.float64, np.float32], input_name="X")
    elif X.ndim == 3:
        W = check_array(_dense(X), allow_nd=True, dtype=[np.float64, np.float32], input_name="X")
    else:
        X2 = validate_data(est, X, reset=reset, dtype=[np.float64, np.float32])
        if shape is None:
            W = X2[:, :, None]
        elif shape[0] * shape[1] != X2.shape[1]:
            raise ValueError(
                f"`weight_shape` {tuple(shape)} has {shape[0] * shape[1]} entries, but X has "
                f"{X2.shape[1]} features per row."
            )
        else:
            W = X2.reshape(len(X2), *shape)
        if not reset:
            _check_shape(est, W)
        return W
    if reset:
        est.n_features_in_ = W.shape[1] * W.shape[2]  # type: ignore[attr-defined]
    else:
        _check_shape(est, W)
    return W


def _dense(X: Any) -> np.ndarray:
    return np.asarray(X.detach().cpu().numpy() if hasattr(X, "detach") else X)


def _check_shape(est: BaseEstimator, W: np.ndarray) -> None:
    fitted = tuple(est.weight_shape_)  # type: ignore[attr-defined]
    if tuple(W.shape[1:]) != fitted:
        raise ValueError(
            f"X has weight matrices of shape {tuple(W.shape[1:])}, but {type(est).__name__} was fitted on "
            f"shape {fitted}."
        )


#: Epochs of the smallest probe that ``"auto"`` builds (``r = p = 16``).
EPOCHS_SMALL = 150


#: Points on a probed layer's longer side from which ``"auto"`` doubles the probe width.
LARGE_LAYER = 64


def probe_sizes(
    n_models: int, paper_epochs: int = 3000, weight_shape: tuple[int, ...] | None = None
) -> dict[str, int]:
    """What ``"auto"`` resolves to for a zoo of ``n_models`` weight matrices of shape ``weight_shape``
    ``(d_H, d_W)`` [reconstructed].

    The paper's sizes (``n_probes = proj_dim = 128``, ``rep_dim = 512``, 3000 epochs for MVProbe, 500 for
    ProbeX) suit zoos of thousands of models; a few hundred overfit such a probe and pay minutes for it. The
    zoo's width is 16 below 1000 models and doubles with every doubling of the zoo, up to 128 from 4000
    models on. A layer with at least ``LARGE_LAYER`` (64) rows or columns doubles it once more (up to 128):
    each branch's projection ``Linear(d -> p)`` squeezes ``d`` points into ``p``, and at ``p = 16`` a 64- or
    72-point side loses what a 32-wide probe keeps. ``r = p`` = that width, ``rep_dim = 4 r``; the epochs
    follow the zoo's width alone, from ``EPOCHS_SMALL`` at 16 to ``paper_epochs`` at 128.

    >>> probe_sizes(300)
    {'n_probes': 16, 'proj_dim': 16, 'rep_dim': 64, 'max_epochs': 150}
    >>> probe_sizes(300, weight_shape=(64, 64))
    {'n_probes': 32, 'proj_dim': 32, 'rep_dim': 128, 'max_epochs': 150}
    >>> probe_sizes(5000)["n_probes"], probe_sizes(5000)["max_epochs"]
    (128, 3000)
    """
    zoo_width = int(min(128, 16 * 2 ** max(0, int(np.floor(np.log2(max(n_models, 1) / 500))))))
    large = weight_shape is not None and max(weight_shape) >= LARGE_LAYER
    width = min(128, 2 * zoo_width) if large else zoo_width
    small = min(EPOCHS_SMALL, paper_epochs)
    epochs = int(round(small + (paper_epochs - small) * (zoo_width - 16) / (128 - 16)))
    return {"n_probes": width, "proj_dim": width, "rep_dim": 4 * width, "max_epochs": epochs}


class _WeightProbe(ClassifierMixin, TransformerMixin, BaseEstimator):
    """Shared fit/predict of the probe classifiers; subclasses fix the branches and the standardisation."""

    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        "n_probes": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "proj_dim": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "rep_dim": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "x_center": ["boolean"],
        "x_row_norm": ["boolean"],
        **_INPUT,
        "lr": [Interval(numbers.Real, 0, None, closed="neither")],
        "weight_decay": [Interval(numbers.Real, 0, None, closed="left")],
        "batch_size": [Interval(numbers.Integral, 1, None, closed="left")],
        "max_epochs": [Interval(numbers.Integral, 1, None, closed="left"), StrOptions({"auto"})],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="left")],
        "eval_every": [Interval(numbers.Integral, 1, None, closed="left")],
        "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "threshold": [Interval(numbers.Real, 0, 1, closed="neither")],
        "device": [str],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    #: The paper's epochs at full width, the top of the ``max_epochs="auto"`` range.
    _PAPER_EPOCHS = 3000

    def _active(self) -> tuple[tuple[str, ...], bool]:
        raise NotImplementedError

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.classifier_tags.multi_label = True
        tags.target_tags.multi_output = True
        tags.non_deterministic = self.device != "cpu"
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any) -> _WeightProbe:
        """Train the probe on weight matrices ``X`` (see the module docstring) and labels ``y``.

        ``y`` is ``(n,)`` class labels (softmax cross-entropy) or an ``(n, L)`` multi-hot matrix (per-label
        BCE, the paper's setting). The checkpoint with the best validation score is kept.
        """
        import torch

        from hf_ext.mvprobe.core import MultiViewProbe

        branches, standardize = self._active()
        W = _weights(self, X, reset=True)
        Y = self._encode_targets(y, len(W))
        if standardize:
            _warn_constant(W)
        self.weight_shape_ = tuple(int(d) for d in W.shape[1:])
        sizes = probe_sizes(len(W), self._PAPER_EPOCHS, self.weight_shape_)
        self.n_probes_, self.proj_dim_, self.rep_dim_, self.max_epochs_ = (
            sizes[key] if getattr(self, key) == "auto" else int(getattr(self, key)) for key in sizes
        )
        rng = check_random_state(self.random_state)
        seed = int(rng.randint(np.iinfo(np.int32).max))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.module_ = MultiViewProbe(
                self.weight_shape_[0],
                self.weight_shape_[1],
                Y.shape[1] if self.multilabel_ else len(self.classes_),
                n_probes=self.n_probes_,
                proj_dim=self.proj_dim_,
                rep_dim=self.rep_dim_,
                branches=branches,
                standardize=standardize,
                x_center=self.x_center,
                x_row_norm=self.x_row_norm,
            ).to(self.device)
        self._train(W, Y, rng)
        return self

    def _encode_targets(self, y: Any, n: int) -> np.ndarray:
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None.")
        y = np.asarray(y)
        if len(y) != n:
            raise ValueError(f"`y` must have one entry per model in X ({n}), got {len(y)}.")
        check_classification_targets(y)
        self.multilabel_ = type_of_target(y) == "multilabel-indicator"
        if self.multilabel_:
            const = np.flatnonzero(np.all(y == y[:1], axis=0))
            if len(const) == y.shape[1]:
                raise ValueError(
                    "`y` needs samples of at least 2 classes in some label; every column is constant."
                )
            if len(const):
                warnings.warn(
                    f"`y` label columns {const.tolist()} are constant in training.", UserWarning, stacklevel=3
                )
            self.classes_ = np.arange(y.shape[1])
            return y.astype(np.float32)
        y = y.ravel() if y.ndim == 2 and y.shape[1] == 1 else y
        if y.ndim != 1:
            raise ValueError(f"`y` must be 1-D labels or a multi-hot matrix, got shape {y.shape}.")
        encoder = LabelEncoder().fit(y)
        self.classes_ = encoder.classes_
        if len(self.classes_) < 2:
            raise ValueError(f"`y` needs samples of at least 2 classes, got 1 class ({self.classes_[0]!r}).")
        return encoder.transform(y)  # type: ignore[no-any-return]

    def _train(self, W: np.ndarray, Y: np.ndarray, rng: np.random.RandomState) -> None:
        import torch

        n = len(W)
        n_val = int(self.validation_fraction * n)
        order = rng.permutation(n)
        train, val = (order[n_val:], order[:n_val]) if 0 < n_val < n else (order, order[:0])
        x = torch.as_tensor(W, dtype=torch.float32, device=self.device)
        y = torch.as_tensor(Y, device=self.device)
        y = y.float() if self.multilabel_ else y.long()
        loss_fn = torch.nn.BCEWithLogitsLoss() if self.multilabel_ else torch.nn.CrossEntropyLoss()
        opt = torch.optim.Adam(self.module_.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        self.loss_curve_: list[float] = []
        self.validation_scores_: list[float] = []
        best = (-np.inf, 0.0)
        best_state, self.best_epoch_, stale = None, 0, 0
        for epoch in range(1, self.max_epochs_ + 1):
            self.module_.train()
            perm = rng.permutation(train)
            total = 0.0
            for i in range(0, len(perm), self.batch_size):
                idx = torch.as_tensor(perm[i : i + self.batch_size], device=self.device)
                loss = loss_fn(self.module_(x[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += loss.item() * len(idx)
            self.loss_curve_.append(total / len(perm))
            self.n_iter_ = epoch
            if self.verbose:
                print(f"Epoch {epoch}, loss = {self.loss_curve_[-1]:.6f}")
            if not len(val) or (epoch % self.eval_every and epoch != self.max_epochs_):
                continue
            score = self._validate(x[val], y[val], loss_fn)
            self.validation_scores_.append(score[0])
            if score > best:
                best, best_state, self.best_epoch_, stale = (
                    score,
                    copy.deepcopy(self.module_.state_dict()),
                    epoch,
                    0,
                )
            else:
                stale += 1
                if self.n_iter_no_change is not None and stale >= self.n_iter_no_change:
                    break
        if best_state is not None:
            self.module_.load_state_dict(best_state)
        else:
            self.best_epoch_ = self.n_iter_
        self.module_.eval()

    def _validate(self, x: Any, y: Any, loss_fn: Any) -> tuple[float, float]:
        """(validation score, minus validation loss): accuracy first, loss breaks ties."""
        import torch

        self.module_.eval()
        with torch.no_grad():
            logits = self.module_(x)
            loss = float(loss_fn(logits, y))
            if self.multilabel_:
                hit = (torch.sigmoid(logits) > self.threshold).float() == y
            else:
                hit = logits.argmax(1) == y
        return float(hit.float().mean()), -loss

    def _forward(self, X: Any, what: str) -> np.ndarray:
        import torch

        check_is_fitted(self)
        W = _weights(self, X, reset=False)
        x = torch.as_tensor(W, dtype=torch.float64, device=self.device)
        module = copy.deepcopy(self.module_).double()  # float64 inference: independent of the batch split
        with torch.no_grad():
            fn = module.represent if what == "rep" else module
            out = torch.cat([fn(x[i : i + 1024]) for i in range(0, len(x), 1024)]) if len(x) else fn(x)
        return np.asarray(out.cpu().double().numpy())

    def decision_function(self, X: Any) -> np.ndarray:
        """Logits ``(n, C)``; ``(n,)`` for two classes (positive minus negative logit)."""
        z = self._forward(X, "logits")
        return z[:, 1] - z[:, 0] if not self.multilabel_ and z.shape[1] == 2 else z

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``(n, C)`` (softmax), or per-label probabilities (sigmoid) for multi-label."""
        z = self._forward(X, "logits")
        if self.multilabel_:
            return 1.0 / (1.0 + np.exp(-z))
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)  # type: ignore[no-any-return]

    def predict(self, X: Any) -> np.ndarray:
        """Class labels ``(n,)``, or a 0/1 matrix ``(n, L)`` (probability > ``threshold``) for multi-label."""
        proba = self.predict_proba(X)
        if self.multilabel_:
            return (proba > self.threshold).astype(int)
        return self.classes_[np.argmax(proba, axis=1)]  # type: ignore[no-any-return]

    def transform(self, X: Any) -> np.ndarray:
        """The learned representation ``(n, rep_dim)`` of each model."""
        return self._forward(X, "rep")


def _warn_constant(W: np.ndarray) -> None:
    flat = W.reshape(len(W), -1)
    count = int(np.sum(flat.max(axis=1) == flat.min(axis=1)))
    if count:
        warnings.warn(
            f"{count} model(s) have a constant weight matrix: their standardised branches have zero variance "
            "and carry no information.",
            UserWarning,
            stacklevel=3,
        )


_PROBE_DOC = """
    Parameters
    ----------
    n_probes : int or "auto", default="auto"
        ``r``, learned probe vectors per branch. ``"auto"`` sizes it by the number of models in ``fit`` and
        the probed layer's shape (:func:`probe_sizes`: 16 below 1000 models, 32 there if the layer has 64 or
        more rows or columns, the paper's 128 from 4000 models on).
    proj_dim : int or "auto", default="auto"
        ``p``, projection width of each branch's point axis; ``"auto"``: equal to ``r``.
    rep_dim : int or "auto", default="auto"
        Width of the representation returned by ``transform``; ``"auto"``: ``4 r`` (the paper's 512 at
        ``r = 128``).
    x_center, x_row_norm : bool, default=False
        Centre each view over its points / L2-normalise each point before probing.
    layer : str or None, default=None
        Parameter to read when ``X`` holds models or state dicts (e.g. ``"2.weight"``).
    conv_reshape : {"flatten", "probex_resnet"} or None, default=None
        Rule for parameters of 3+ dimensions; ``None`` rejects them.
    weight_shape : (int, int) or None, default=None
        Reshape rule for 2-D ``X`` rows; ``None`` makes each row an ``(f, 1)`` matrix.
    lr, weight_decay : float
        Adam learning rate and L2 weight decay (Adam's coupled form).
    batch_size : int, default=128
    max_epochs : int or "auto", default="auto"
        ``"auto"``: 150 epochs at ``r = 16``, growing with ``r`` to the paper's 3000 (MVProbe) / 500 (ProbeX)
        at ``r = 128``.
    validation_fraction : float in [0, 1), default=0.1
        Share of the models held out to pick the best checkpoint (0: keep the last epoch).
    eval_every : int, default=25
        Epochs between validation checks.
    n_iter_no_change : int or None, default=None
        Stop after this many validation checks without improvement (``None``: train ``max_epochs``).
    threshold : float, default=0.5
        Multi-label decision threshold on the sigmoid.
    device : str, default="cpu"
    random_state : int, RandomState or None, default=None
        Seeds the initialisation, the split and the batch order.
    verbose : int, default=0
        Print the training loss every epoch.

    Attributes
    ----------
    classes_ : ndarray
        Class labels, or label indices ``0..L-1`` for multi-label ``y``.
    multilabel_ : bool
    n_features_in_ : int
        ``d_H * d_W`` (the row width for 2-D ``X``).
    weight_shape_ : tuple of int
        ``(d_H, d_W)`` seen at ``fit``.
    module_ : MultiViewProbe
        The trained probe network (best validation checkpoint).
    n_probes_, proj_dim_, rep_dim_, max_epochs_ : int
        The sizes used (``"auto"`` resolved by :func:`probe_sizes`).
    n_iter_, best_epoch_ : int
        Epochs run, and the epoch of the kept checkpoint.
    loss_curve_, validation_scores_ : list of float
        Mean training loss per epoch; validation accuracy (per-label for multi-label) per check.
"""


class MVProbeClassifier(_WeightProbe):
    (
        """MVProbe: four probe branches (``XU``, ``XXᵀU``, ``XᵀU``, ``XᵀXU``) standardised per sample [paper].

    Predicts properties of trained networks (e.g. the classes a model was fine-tuned on) from one weight
    matrix each. ``score`` is scikit-learn's subset accuracy; the paper's per-label accuracy is
    :func:`hf_ext.mvprobe.core.per_label_accuracy`. Invariant to ``X -> cX`` (``c > 0``) with
    ``standardize=True``; not invariant to permuting hidden neurons (the zoo must share one ancestor).

    Parameters
    ----------
    branches : tuple of str, default=("xu", "xxtu", "xtu", "xtxu")
        Active branches (ablations: ``("xu", "xtu")`` first order, ``("xxtu", "xtxu")`` second order).
    standardize : bool, default=True
        Per-sample standardisation of every branch.
    """
        + _PROBE_DOC.split("Parameters\n    ----------\n", 1)[1]
        + """
    Examples
    --------
    >>> from hf_ext.mvprobe import make_model_zoo
    >>> zoo = make_model_zoo(n_models=40, finetune_steps=(5, 10), random_state=0)
    >>> clf = MVProbeClassifier(n_probes=4, proj_dim=4, rep_dim=8, max_epochs=5, random_state=0)
    >>> clf.fit(zoo.weights, zoo.targets).predict(zoo.weights).shape
    (40, 10)
    """
    )

    _paper = paper("mvprobe")
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = {
        **_WeightProbe._parameter_constraints,
        "branches": [tuple, list],
        "standardize": ["boolean"],
    }

    def __init__(
        self,
        n_probes: int | str = "auto",
        proj_dim: int | str = "auto",
        rep_dim: int | str = "auto",
        branches: tuple[str, ...] = ("xu", "xxtu", "xtu", "xtxu"),
        standardize: bool = True,
        x_center: bool = False,
        x_row_norm: bool = False,
        layer: str | None = None,
        conv_reshape: str | None = None,
        weight_shape: tuple[int, int] | None = None,
        lr: float = 3e-4,
        weight_decay: float = 1e-5,
        batch_size: int = 128,
        max_epochs: int | str = "auto",
        validation_fraction: float = 0.1,
        eval_every: int = 25,
        n_iter_no_change: int | None = None,
        threshold: float = 0.5,
        device: str = "cpu",
        random_state: Any = None,
        verbose: int = 0,
    ) -> None:
        self.n_probes = n_probes
        self.proj_dim = proj_dim
        self.rep_dim = rep_dim
        self.branches = branches
        self.standardize = standardize
        self.x_center = x_center
        self.x_row_norm = x_row_norm
        self.layer = layer
        self.conv_reshape = conv_reshape
        self.weight_shape = weight_shape
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.validation_fraction = validation_fraction
        self.eval_every = eval_every
        self.n_iter_no_change = n_iter_no_change
        self.threshold = threshold
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _active(self) -> tuple[tuple[str, ...], bool]:
        from hf_ext.mvprobe.core import BRANCHES

        names = tuple(self.branches)
        if not names or len(set(names)) != len(names) or not set(names) <= set(BRANCHES):
            raise InvalidParameterError(
                f"The 'branches' parameter of MVProbeClassifier must be a non-empty tuple of distinct names "
                f"out of {BRANCHES}. Got {self.branches!r} instead."
            )
        return names, self.standardize


class ProbeXClassifier(_WeightProbe):
    (
        """ProbeX: one probe branch ``XU``, no standardisation (Horwitz et al., CVPR 2025) [paper].

    The same network as ``MVProbeClassifier(branches=("xu",), standardize=False)``; its learning rate follows
    the official ProbeX code (``lr=1e-3``), its sizes the zoo (``"auto"``, up to the official 500 epochs).
    Sensitive to the scale of ``X``.
    """
        + _PROBE_DOC
    )

    _paper = paper("mvprobe")
    _PAPER_EPOCHS = 500

    def __init__(
        self,
        n_probes: int | str = "auto",
        proj_dim: int | str = "auto",
        rep_dim: int | str = "auto",
        x_center: bool = False,
        x_row_norm: bool = False,
        layer: str | None = None,
        conv_reshape: str | None = None,
        weight_shape: tuple[int, int] | None = None,
        lr: float = 1e-3,
        weight_decay: float = 1e-5,
        batch_size: int = 128,
        max_epochs: int | str = "auto",
        validation_fraction: float = 0.1,
        eval_every: int = 25,
        n_iter_no_change: int | None = None,
        threshold: float = 0.5,
        device: str = "cpu",
        random_state: Any = None,
        verbose: int = 0,
    ) -> None:
        self.n_probes = n_probes
        self.proj_dim = proj_dim
        self.rep_dim = rep_dim
        self.x_center = x_center
        self.x_row_norm = x_row_norm
        self.layer = layer
        self.conv_reshape = conv_reshape
        self.weight_shape = weight_shape
        self.lr = lr
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.validation_fraction = validation_fraction
        self.eval_every = eval_every
        self.n_iter_no_change = n_iter_no_change
        self.threshold = threshold
        self.device = device
        self.random_state = random_state
        self.verbose = verbose

    def _active(self) -> tuple[tuple[str, ...], bool]:
        return ("xu",), False


class WeightMatrixExtractor(TransformerMixin, BaseEstimator):
    """Read one weight matrix per model: ``transform(models) -> (n, d_H, d_W)`` (stateless).

    Accepts the inputs of the module docstring; use it in a ``Pipeline`` in front of a probe, or to cache
    the matrices of a large zoo once.

    Parameters
    ----------
    layer : str or None, default=None
        Parameter name, e.g. ``"2.weight"`` or ``"blocks.0.mlp.fc1.weight"``.
    conv_reshape : {"flatten", "probex_resnet"} or None, default=None
        Rule for 3+-dimensional parameters: ``"flatten"`` -> ``(out, in*k*k)``; ``"probex_resnet"`` is the
        official ProbeX loader's ``reshape(-1, out)`` (reproduction only).
    weight_shape : (int, int) or None, default=None
        Reshape rule for 2-D array input.

    Examples
    --------
    >>> import torch
    >>> models = [torch.nn.Sequential(torch.nn.Linear(4, 3)) for _ in range(2)]
    >>> WeightMatrixExtractor(layer="0.weight").transform(models).shape
    (2, 3, 4)
    """

    _paper = MVProbeClassifier._paper
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = dict(_INPUT)

    def __init__(
        self,
        layer: str | None = None,
        conv_reshape: str | None = None,
        weight_shape: tuple[int, int] | None = None,
    ) -> None:
        self.layer = layer
        self.conv_reshape = conv_reshape
        self.weight_shape = weight_shape

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        tags.requires_fit = False
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> WeightMatrixExtractor:
        """Record ``n_features_in_`` and ``weight_shape_``; nothing is learned."""
        self.weight_shape_ = tuple(_weights(self, X, reset=True).shape[1:])
        return self

    def transform(self, X: Any) -> np.ndarray:
        """Weight matrices ``(n, d_H, d_W)``."""
        if not hasattr(self, "weight_shape_"):
            self._validate_params()
            return _weights(self, X, reset=True)
        return _weights(self, X, reset=False)


class WeightStatsTransformer(TransformerMixin, BaseEstimator):
    """StatNN features: mean, std and the 0/25/50/75/100 % quantiles of each weight matrix, ``(n, 7)``.

    ``get_feature_names_out`` names the columns, so ``set_output(transform="pandas")`` (or ``"polars"``)
    returns a data frame with them.

    Parameters
    ----------
    layer, conv_reshape, weight_shape
        As in :class:`WeightMatrixExtractor`.

    Examples
    --------
    >>> import numpy as np
    >>> WeightStatsTransformer().fit_transform(np.array([[0.0, 1.0, 2.0]]))[0].round(2).tolist()
    [1.0, 1.0, 0.0, 0.5, 1.0, 1.5, 2.0]
    """

    _paper = MVProbeClassifier._paper
    _parameter_constraints: ClassVar[dict[str, list[Any]]] = dict(_INPUT)
    QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)

    def __init__(
        self,
        layer: str | None = None,
        conv_reshape: str | None = None,
        weight_shape: tuple[int, int] | None = None,
    ) -> None:
        self.layer = layer
        self.conv_reshape = conv_reshape
        self.weight_shape = weight_shape

    def __sklearn_tags__(self) -> Any:
        tags = super().__sklearn_tags__()
        tags.input_tags.three_d_array = True
        return tags

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X: Any, y: Any = None) -> WeightStatsTransformer:
        """Record the input shape; the statistics need no fitting."""
        self.weight_shape_ = tuple(_weights(self, X, reset=True).shape[1:])
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``(n, 7)`` float features."""
        check_is_fitted(self)
        W = _weights(self, X, reset=False)
        flat = W.reshape(len(W), -1)
        std = flat.std(axis=1, ddof=1) if flat.shape[1] > 1 else np.zeros(len(flat))
        return np.column_stack([flat.mean(axis=1), std, *np.quantile(flat, self.QUANTILES, axis=1)])

    def get_feature_names_out(self, input_features: Any = None) -> np.ndarray:
        """Names of the 7 output columns: ``mean``, ``std``, ``quantile_0`` ... ``quantile_100``.

        ``input_features`` is ignored (the statistics pool every entry of the matrix); it is accepted for
        scikit-learn's ``Pipeline`` / ``ColumnTransformer`` protocol.
        """
        check_is_fitted(self)
        names = ["mean", "std", *(f"quantile_{round(100 * q)}" for q in self.QUANTILES)]
        return np.asarray(names, dtype=object)
