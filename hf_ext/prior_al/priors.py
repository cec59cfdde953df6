"""Foundation-model priors for PriorAL and the frozen encoders behind them.

A prior is any object with ``classes_`` (``(C,)`` labels) that maps ``X`` to a ``(n, C)`` array of class
probabilities when called. :class:`~hf_ext.estimators.prior_al.PriorALClassifier` aligns its columns to
its own ``classes_`` by label.

* :class:`CallablePrior` wraps any function (a transformers ``zero-shot-classification`` pipeline, an API).
* :class:`EstimatorPrior` wraps a fitted scikit-learn classifier.
* :class:`ZeroShotTextPrior` is a genuine zero-shot prior: all-MiniLM-L6-v2 similarity between a text and
  a sentence per class.
* :class:`PrototypePrior` is a **few-shot** prior: similarity to class prototypes of a few labelled support
  examples. With EfficientNet-lite0 features it is the image prior; no CLIP-like zero-shot image model ships
  offline, so image priors here are few-shot, not zero-shot.
* :class:`EncoderFeatures` gives the small model the same frozen features (cached on disk).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float

ENCODERS = ("minilm", "efficientnet_lite0")
_DIM = {"minilm": 384, "efficientnet_lite0": 1280}
_BATCH = 64


def _softmax(z: np.ndarray) -> np.ndarray:
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return np.asarray(e / e.sum(axis=1, keepdims=True))


def _normalise(z: np.ndarray) -> np.ndarray:
    z = np.asarray(z, dtype=np.float64)
    return np.asarray(z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12))


def _cache_path(encoder: str, payload: bytes) -> Path:
    from hf_ext.assets import cache_dir

    key = hashlib.sha256(encoder.encode() + b"\0" + payload).hexdigest()[:24]
    folder = cache_dir() / "prior_al"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{encoder}-{key}.npy"


def _cached(encoder: str, payload: bytes, compute: Callable[[], np.ndarray], use_cache: bool) -> np.ndarray:
    if not use_cache:
        return compute()
    path = _cache_path(encoder, payload)
    if path.is_file():
        return np.asarray(np.load(path))
    out = compute()
    tmp = path.with_suffix(".partial.npy")
    np.save(tmp, out)
    tmp.replace(path)
    return out


def encode_texts(texts: Sequence[str], *, cache: bool = True) -> np.ndarray:
    """all-MiniLM-L6-v2 sentence embeddings, ``(n, 384)`` float32, unit L2 (mask-weighted mean pooling).

    Cached under ``hf_ext.assets.cache_dir() / "prior_al"``, keyed by a SHA-256 of the texts.
    """
    texts = [str(t) for t in texts]
    if not texts:
        return np.zeros((0, 384), dtype=np.float32)

    def compute() -> np.ndarray:
        from hf_ext.assets import embed, minilm

        model, tokenizer = minilm()
        chunks = [embed(model, tokenizer, texts[i : i + _BATCH]) for i in range(0, len(texts), _BATCH)]
        return np.concatenate([c.numpy() for c in chunks]).astype(np.float32)

    return _cached("minilm", "\x1f".join(texts).encode(), compute, cache)


def encode_images(images: np.ndarray, *, cache: bool = True) -> np.ndarray:
    """EfficientNet-lite0 (ImageNet-1k) pooled pre-logit features, ``(n, 1280)`` float32.

    Args:
        images: ``(n, H, W)`` grey or ``(n, H, W, 3)`` RGB, values in [0, 1]. Grey images are repeated to 3
            channels; all are resized bilinearly to 224 px and normalised with timm's ImageNet mean and std.
        cache: Store the features under ``hf_ext.assets.cache_dir() / "prior_al"``, keyed by a SHA-256 of
            the pixels.
    """
    images = np.asarray(images, dtype=np.float32)
    if images.ndim not in (3, 4) or (images.ndim == 4 and images.shape[-1] != 3):
        raise ValueError(f"`images` must be (n, H, W) or (n, H, W, 3), got shape {images.shape}")

    def compute() -> np.ndarray:
        import torch
        import torch.nn.functional as F
        from timm.data import resolve_data_config

        from hf_ext.assets import efficientnet_lite0

        net = efficientnet_lite0()
        cfg = resolve_data_config({}, model=net)
        mean = torch.tensor(cfg["mean"]).view(1, 3, 1, 1)
        std = torch.tensor(cfg["std"]).view(1, 3, 1, 1)
        size = cfg["input_size"][-2:]
        out = []
        with torch.no_grad():
            for i in range(0, len(images), _BATCH):
                x = torch.from_numpy(images[i : i + _BATCH])
                x = x.unsqueeze(1).expand(-1, 3, -1, -1) if x.ndim == 3 else x.permute(0, 3, 1, 2)
                x = F.interpolate(x, size=size, mode="bilinear", align_corners=False)
                feats = net.forward_head(net.forward_features((x - mean) / std), pre_logits=True)
                out.append(feats.numpy())
        return np.concatenate(out).astype(np.float32)

    if len(images) == 0:
        return np.zeros((0, 1280), dtype=np.float32)
    shape = repr(images.shape).encode()
    return _cached("efficientnet_lite0", shape + images.tobytes(), compute, cache)


def _encode(encoder: str | Callable[[Any], np.ndarray] | None, X: Any) -> np.ndarray:
    if encoder is None:
        return np.asarray(X, dtype=np.float64)
    if callable(encoder):
        return np.asarray(encoder(X), dtype=np.float64)
    check_choice("encoder", encoder, ENCODERS)
    return encode_texts(X) if encoder == "minilm" else encode_images(X)


class CallablePrior:
    """Wrap ``fn(X) -> (n, C)`` probabilities whose columns follow ``classes``.

    Args:
        fn: The function (for example around a transformers zero-shot pipeline).
        classes: ``(C,)`` labels of the columns of ``fn``'s output.
    """

    _paper = paper("prior_al")

    def __init__(self, fn: Callable[[Any], Any], classes: Sequence[Any]) -> None:
        if not callable(fn):
            raise TypeError(f"`fn` must be callable, got {type(fn).__name__}")
        self.fn = fn
        self.classes_ = np.asarray(classes)

    def __call__(self, X: Any) -> np.ndarray:
        return np.asarray(self.fn(X), dtype=float)


class EstimatorPrior:
    """A fitted scikit-learn classifier as a prior: ``predict_proba`` with its ``classes_``."""

    _paper = paper("prior_al")

    def __init__(self, estimator: Any) -> None:
        if not hasattr(estimator, "predict_proba") or not hasattr(estimator, "classes_"):
            raise ValueError("`estimator` must be a fitted classifier with predict_proba and classes_")
        self.estimator = estimator
        self.classes_ = np.asarray(estimator.classes_)

    def __call__(self, X: Any) -> np.ndarray:
        return np.asarray(self.estimator.predict_proba(X), dtype=float)


class ZeroShotTextPrior:
    """Zero-shot text prior ``softmax_c(cos(e(x), e(template.format(text_c))) / T)`` [reconstructed].

    ``e`` is all-MiniLM-L6-v2 (mean pooling, unit L2). Called on a list of texts, or on their ``(n, 384)``
    embeddings (for example :class:`EncoderFeatures` output) to avoid encoding twice.

    Args:
        label_texts: ``{class: description}``; ``classes_`` keeps the mapping's order.
        template: Sentence around each description, with one ``{}``.
        temperature: Softmax temperature on cosine similarity.
    """

    _paper = paper("prior_al")

    def __init__(
        self,
        label_texts: Mapping[Any, str],
        template: str = "This text is about {}.",
        temperature: float = 0.05,
    ) -> None:
        if not isinstance(label_texts, Mapping) or len(label_texts) < 2:
            raise ValueError(f"`label_texts` must map at least 2 classes to texts, got {label_texts!r}")
        if "{}" not in template:
            raise ValueError(f"`template` must contain '{{}}', got {template!r}")
        self.label_texts = dict(label_texts)
        self.template = template
        self.temperature = check_float("temperature", temperature, low=0.0, low_open=True)
        self.classes_ = np.asarray(list(self.label_texts))
        self._anchors: np.ndarray | None = None

    def anchors(self) -> np.ndarray:
        """``(C, 384)`` unit embeddings of the class sentences."""
        if self._anchors is None:
            sentences = [self.template.format(t) for t in self.label_texts.values()]
            self._anchors = _normalise(encode_texts(sentences))
        return self._anchors

    def __call__(self, X: Any) -> np.ndarray:
        arr = np.asarray(X) if not isinstance(X, list | tuple) else None
        if arr is not None and arr.ndim == 2 and arr.dtype.kind == "f" and arr.shape[1] == 384:
            z = _normalise(arr)
        else:
            z = _normalise(encode_texts(list(X)))
        return _softmax(z @ self.anchors().T / self.temperature)


class PrototypePrior:
    """Few-shot prior: ``softmax_c(cos(e(x), m_c) / temperature)``, ``m_c`` the mean unit embedding of the
    support examples of class ``c`` (renormalised) [reconstructed].

    Args:
        encoder: ``"minilm"``, ``"efficientnet_lite0"``, a callable ``X -> (n, d)`` features, or ``None`` when
            ``X`` and ``support_X`` are features already.
        support_X: A few labelled examples per class, from data disjoint from the pool.
        support_y: Their labels; ``classes_`` is their sorted unique values.
        temperature: Softmax temperature on cosine similarity.
    """

    _paper = paper("prior_al")

    def __init__(
        self,
        encoder: str | Callable[[Any], np.ndarray] | None,
        support_X: Any,
        support_y: Any,
        temperature: float = 0.05,
    ) -> None:
        self.encoder = encoder
        self.temperature = check_float("temperature", temperature, low=0.0, low_open=True)
        support_y = np.asarray(support_y)
        self.classes_ = np.unique(support_y)
        if len(self.classes_) < 2:
            raise ValueError(f"`support_y` must hold at least 2 classes, got {self.classes_.tolist()}")
        z = _normalise(_encode(encoder, support_X))
        if len(z) != len(support_y):
            raise ValueError(f"`support_X` has {len(z)} rows but `support_y` has {len(support_y)}")
        self.prototypes_ = _normalise(np.stack([z[support_y == c].mean(axis=0) for c in self.classes_]))

    def __call__(self, X: Any) -> np.ndarray:
        z = _normalise(_encode(self.encoder, X))
        return _softmax(z @ self.prototypes_.T / self.temperature)


class EncoderFeatures(TransformerMixin, BaseEstimator):
    """Frozen encoder features for the small model: a scikit-learn transformer that learns nothing.

    ``"minilm"`` takes a list of texts and returns ``(n, 384)``; ``"efficientnet_lite0"`` takes
    ``(n, H, W)`` or ``(n, H, W, 3)`` images in [0, 1] (or ``(n, H*W)`` with ``image_shape``) and returns
    ``(n, 1280)``. Features are cached on disk, keyed by a content hash, so a pipeline refit in every
    active-learning round encodes each sample once.

    Args:
        encoder: ``"minilm"`` or ``"efficientnet_lite0"``.
        image_shape: ``(H, W)`` to reshape flat image rows, for images only.
        cache: Cache features on disk.
    """

    _paper = paper("prior_al")

    def __init__(
        self, encoder: str = "minilm", image_shape: tuple[int, int] | None = None, cache: bool = True
    ) -> None:
        self.encoder = encoder
        self.image_shape = image_shape
        self.cache = cache

    def fit(self, X: Any, y: Any = None) -> EncoderFeatures:
        """Check the settings; nothing is learned."""
        check_choice("encoder", self.encoder, ENCODERS)
        self.n_features_out_ = _DIM[self.encoder]
        return self

    def transform(self, X: Any) -> np.ndarray:
        """``(n, 384)`` or ``(n, 1280)`` float32 features."""
        check_choice("encoder", self.encoder, ENCODERS)
        if self.encoder == "minilm":
            return encode_texts(list(X), cache=self.cache)
        images = np.asarray(X, dtype=np.float32)
        if self.image_shape is not None:
            images = images.reshape(len(images), *self.image_shape)
        return encode_images(images, cache=self.cache)
