"""Zeroing a neuron set with forward hooks (nothing edited in place), and random control sets."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn

from hf_ext._validation import check_int
from hf_ext.keystone.sets import KeystoneSet, linear_module, model_fingerprint, out_features

logger = logging.getLogger(__name__)

DEFAULT_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj")


def base_causal_lm(model: nn.Module) -> nn.Module:
    """The causal LM inside a ``PeftModel`` (its wrappers stay in place), or ``model`` itself."""
    get_base_model = getattr(model, "get_base_model", None)
    return get_base_model() if callable(get_base_model) else model


def pool_modules(model: nn.Module, target_modules: Sequence[str] = DEFAULT_TARGETS) -> dict[str, nn.Module]:
    """The neuron pool: every module whose last name component is in ``target_modules``, in model order.

    Raises:
        ValueError: a name in ``target_modules`` matches no module, or names an embedding / the LM head.
        TypeError: a matching module is not ``nn.Linear``.
    """
    if isinstance(target_modules, str) or not target_modules:
        raise ValueError(f"`target_modules` must be a non-empty sequence of names, got {target_modules!r}.")
    lm = base_causal_lm(model)
    found: dict[str, nn.Module] = {}
    for target in target_modules:
        names = [n for n, _ in lm.named_modules() if n.rsplit(".", 1)[-1] == target]
        if not names:
            raise ValueError(f"`target_modules` entry {target!r} matches no module of the model.")
        for name in names:
            found[name] = linear_module(lm, name)
    order = {n: i for i, (n, _) in enumerate(lm.named_modules())}
    return dict(sorted(found.items(), key=lambda kv: order[kv[0]]))


def _zero_hook(idx: torch.Tensor) -> Any:
    def hook(module: nn.Module, args: Any, out: torch.Tensor) -> torch.Tensor:
        return out.index_fill(-1, idx.to(out.device), 0.0)

    return hook


@contextmanager
def ablate_neurons(model: nn.Module, keystone_set: KeystoneSet) -> Iterator[nn.Module]:
    """Zero the output channels of ``keystone_set`` inside the block; the model is restored exactly on exit.

    A forward hook on the module currently at each path (the SHiRA wrapper inside a ``PeftModel``, since
    SHiRA's forward ignores hooks on its base layer) returns ``out.index_fill(-1, idx, 0)``. No weight is
    edited; the hooks are removed on exit, also when the block raises. Contexts nest.

    Args:
        model: A transformers causal LM or a ``PeftModel`` around one.
        keystone_set: The neurons to zero; its fingerprint and indices are checked against ``model``.

    Example:
        >>> import torch
        >>> from hf_ext.testing import tiny_llama
        >>> lm = tiny_llama()
        >>> ks = KeystoneSet({"model.layers.0.self_attn.o_proj": [0, 5]})
        >>> ids = torch.tensor([[1, 5, 7]])
        >>> before = lm(ids).logits
        >>> with ablate_neurons(lm, ks):
        ...     changed = lm(ids).logits
        >>> bool(torch.equal(lm(ids).logits, before)), bool(torch.equal(changed, before))
        (True, False)
    """
    lm = base_causal_lm(model)
    keystone_set.validate(lm)
    handles = []
    try:
        for name, rows in keystone_set.indices.items():
            idx = torch.tensor(rows, dtype=torch.long)
            handles.append(lm.get_submodule(name).register_forward_hook(_zero_hook(idx)))
        yield model
    finally:
        for h in handles:
            h.remove()


def random_neuron_set(
    model: nn.Module,
    k: int | None = None,
    *,
    like: KeystoneSet | None = None,
    target_modules: Sequence[str] = DEFAULT_TARGETS,
    seed: int = 0,
) -> KeystoneSet:
    """A control set of neurons drawn uniformly without replacement.

    Either ``k`` neurons from the whole pool of ``target_modules``, or (``like=``) as many rows per module
    type (``o_proj``, ``q_proj``...) as ``like`` has, drawn from all modules of that type.

    Example:
        >>> from hf_ext.testing import tiny_llama
        >>> len(random_neuron_set(tiny_llama(), 5, seed=1))
        5
    """
    if (k is None) == (like is None):
        raise ValueError("Pass exactly one of `k` and `like` to `random_neuron_set`.")
    pool = pool_modules(
        model, target_modules if like is None else sorted({n.rsplit(".", 1)[-1] for n in like.indices})
    )
    gen = torch.Generator().manual_seed(seed)
    if like is not None:
        groups: dict[str, int] = {}
        for name, rows in like.indices.items():
            groups[name.rsplit(".", 1)[-1]] = groups.get(name.rsplit(".", 1)[-1], 0) + len(rows)
    else:
        groups = {"": k}  # type: ignore[dict-item]
    picked: dict[str, list[int]] = {}
    for suffix, count in groups.items():
        mods = [(n, out_features(m)) for n, m in pool.items() if not suffix or n.rsplit(".", 1)[-1] == suffix]
        total = sum(o for _, o in mods)
        check_int("k", count, low=1, high=total, hint=f"The pool has {total} neurons.")
        flat = torch.randperm(total, generator=gen)[:count].tolist()
        starts = torch.tensor([0] + [o for _, o in mods]).cumsum(0)
        for f in flat:
            j = int(torch.searchsorted(starts, f, right=True)) - 1
            picked.setdefault(mods[j][0], []).append(f - int(starts[j]))
    lm = base_causal_lm(model)
    meta = {"random": True, "seed": seed, "target_modules": sorted({n.rsplit(".", 1)[-1] for n in picked})}
    return KeystoneSet(picked, {}, getattr(lm.config, "_name_or_path", ""), model_fingerprint(lm), meta)
