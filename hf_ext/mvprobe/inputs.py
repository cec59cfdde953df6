"""From models, state dicts, safetensors files or arrays to one batch of weight matrices ``(n, d_H, d_W)``.

A model is a torch ``nn.Module`` (plain, timm or transformers: anything with ``state_dict()``), a mapping of
parameter names to tensors or arrays (a state dict), or a path to a ``.safetensors`` file. One named parameter
is read from each: 2-D weights as they are, 1-D ones (biases, norms) as ``(d, 1)`` columns, and tensors of 3
or more dimensions (conv kernels) only under an explicit ``conv_reshape`` rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Any

import numpy as np

CONV_RESHAPES = ("flatten", "probex_resnet")


def _is_model(obj: Any) -> bool:
    return isinstance(obj, Mapping | str | PathLike) or hasattr(obj, "state_dict")


def _state(obj: Any) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    if isinstance(obj, str | PathLike):
        from safetensors.numpy import load_file

        return load_file(str(obj))
    return obj.state_dict()  # type: ignore[no-any-return]


def _numpy(t: Any) -> np.ndarray:
    if hasattr(t, "detach"):
        t = t.detach().cpu()
        if str(t.dtype) in ("torch.bfloat16", "torch.float16"):
            t = t.float()
        return np.asarray(t.numpy())
    return np.asarray(t)


def as_matrix(w: Any, conv_reshape: str | None = None) -> np.ndarray:
    """One parameter as a 2-D matrix: 1-D -> ``(d, 1)``; 2-D as is; ``(out, in, *k)`` by ``conv_reshape``.

    ``conv_reshape="flatten"`` gives ``(out, in·prod(k))``; ``"probex_resnet"`` reproduces the official ProbeX
    ResNet loader, ``reshape(-1, out)`` (a reshape, not a permute: it scrambles kernels; reproduction only).
    """
    w = _numpy(w)
    if w.ndim == 0:
        raise ValueError(f"a weight must have at least one dimension, got a scalar {w!r}.")
    if w.ndim == 1:
        return w.reshape(-1, 1)
    if w.ndim == 2:
        return w
    if conv_reshape is None:
        raise ValueError(
            f"a weight of shape {w.shape} has {w.ndim} dimensions and needs a reshape rule: use "
            f"WeightMatrixExtractor(conv_reshape=...) with one of {CONV_RESHAPES} "
            '("flatten" gives (out, in*k*k)).'
        )
    if conv_reshape == "flatten":
        return w.reshape(w.shape[0], -1)
    if conv_reshape == "probex_resnet":
        return w.reshape(-1, w.shape[0])
    raise ValueError(f"`conv_reshape` must be one of {CONV_RESHAPES} or None, got {conv_reshape!r}.")


def weight_matrix(model: Any, layer: str | None = None, conv_reshape: str | None = None) -> np.ndarray:
    """Parameter ``layer`` of ``model`` (module, state dict or safetensors path) as a matrix.

    >>> import torch
    >>> weight_matrix(torch.nn.Linear(3, 2), "weight").shape
    (2, 3)
    """
    if not _is_model(model):
        return as_matrix(model, conv_reshape)
    state = _state(model)
    if layer is None:
        names = [k for k, v in state.items() if len(getattr(v, "shape", ())) >= 2][:5]
        raise ValueError(f"`layer` must name the parameter to read (matrices: {names}), got None.")
    if layer not in state:
        import difflib

        close = difflib.get_close_matches(layer, list(state), n=3)
        raise ValueError(f"`layer` {layer!r} is not a parameter of the model; closest: {close}.")
    return as_matrix(state[layer], conv_reshape)


def stack_matrices(items: Sequence[Any], layer: str | None, conv_reshape: str | None) -> np.ndarray:
    """``(n, d_H, d_W)`` from ``n`` models or matrices; ragged shapes raise ``ValueError`` naming them."""
    mats = [weight_matrix(m, layer, conv_reshape) for m in items]
    if not mats:
        raise ValueError("`X` must hold at least one model, got an empty sequence.")
    shapes = [m.shape for m in mats]
    if len(set(shapes)) > 1:
        first = shapes[0]
        odd = [(i, s) for i, s in enumerate(shapes) if s != first][:10]
        raise ValueError(
            f"every weight matrix in `X` must have one shape; item 0 has {first}, but "
            + ", ".join(f"item {i} has {s}" for i, s in odd)
            + "."
        )
    return np.stack(mats)


def is_model_list(X: Any) -> bool:
    """Whether ``X`` is a sequence of models / state dicts / paths / matrices (not a plain numeric array)."""
    if isinstance(X, np.ndarray) or hasattr(X, "detach") or isinstance(X, str | bytes | Mapping):
        return False
    if not isinstance(X, Sequence) or len(X) == 0:
        return False
    first = X[0]
    return _is_model(first) or isinstance(first, np.ndarray) or hasattr(first, "detach")
