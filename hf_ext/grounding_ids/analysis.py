"""Binding analyses on a forward pass: per-layer alignment margin, within-partition alignment, modality gap
and matched-part attention (``binding_report``), and the activation-swap test (``swap_test``)
[paper: the quantities; formulas and protocol reconstructed].

``enc`` is a :class:`~hf_ext.grounding_ids.processor.CuedProcessor` output: its ``partition_token_index`` and
``symbol_token_index`` select the tokens; ``outputs`` come from the model with ``output_hidden_states=True``
(and ``output_attentions=True`` under eager attention for the attention figures).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from hf_ext.grounding_ids.core import (
    alignment_margin,
    attention_mass,
    modality_gap,
    within_partition_alignment,
)


def _layers_to_use(n: int, layers: Sequence[int] | None, what: str) -> list[int]:
    chosen = list(range(n)) if layers is None else [int(v) for v in layers]
    for v in chosen:
        if not -n <= v < n:
            raise IndexError(f"`layers` entry {v} is out of range for {n} {what}.")
    return [v % n for v in chosen]


def binding_report(outputs: Any, enc: Any, layers: Sequence[int] | None = None) -> list[dict[str, Any]]:
    """One dict per layer, averaged over the batch.

    Keys: ``layer`` (``0`` = embeddings, ``l`` = after decoder layer ``l``), ``alignment_margin``,
    ``within_partition``, ``modality_gap``, and with attentions ``attention_matched`` / ``attention_other``
    (mass ratio to chance on the matching / other partitions; attention layer ``l`` is read at hidden-state
    layer ``l``) plus ``attention_direction`` (``"text->image"`` when the symbols come after the image, else
    ``"image->text"``: causal attention only looks back).
    """
    import torch

    hidden = outputs.hidden_states
    if hidden is None:
        raise ValueError("`outputs` has no hidden_states; call the model with output_hidden_states=True.")
    attentions = getattr(outputs, "attentions", None)
    report = []
    for layer in _layers_to_use(len(hidden), layers, "hidden-state layers"):
        rows: dict[str, list[float]] = {}
        direction = ""
        for b, (parts, syms) in enumerate(zip(enc["partition_token_index"], enc["symbol_token_index"])):
            keep = [s for s in parts if parts[s].numel() and syms[s].numel()]
            h = hidden[layer][b]
            img = torch.stack([h[parts[s]].mean(0) for s in keep])
            sym = torch.stack([h[syms[s]].mean(0) for s in keep])
            labels = torch.full((h.shape[0],), -1, dtype=torch.long, device=h.device)
            for i, s in enumerate(keep):
                labels[parts[s]] = i
            image_pos = torch.cat([parts[s] for s in keep])
            text_pos = torch.ones(h.shape[0], dtype=torch.bool, device=h.device)
            text_pos[image_pos] = False
            text_pos[enc["input_ids"][b] == enc["input_ids"][b][image_pos[0]]] = False
            if "attention_mask" in enc:
                text_pos &= enc["attention_mask"][b].bool()
            values = {
                "alignment_margin": alignment_margin(img, sym),
                "within_partition": within_partition_alignment(h, labels),
                "modality_gap": modality_gap(h[image_pos], h[text_pos]),
            }
            if attentions is not None and 1 <= layer <= len(attentions):
                forward = min(int(syms[s].min()) for s in keep) > int(image_pos.max())
                queries, keys = ([syms[s] for s in keep], [parts[s] for s in keep])
                if not forward:
                    queries, keys = keys, queries
                direction = "text->image" if forward else "image->text"
                _, ratio = attention_mass(attentions[layer - 1][b], queries, keys)
                p = ratio.shape[0]
                off = ~torch.eye(p, dtype=torch.bool, device=ratio.device)
                values["attention_matched"] = ratio.diagonal().mean()
                values["attention_other"] = ratio[off].mean() if p > 1 else torch.tensor(float("nan"))
            for k, v in values.items():
                rows.setdefault(k, []).append(float(v))
        entry: dict[str, Any] = {"layer": layer, **{k: sum(v) / len(v) for k, v in rows.items()}}
        if direction:
            entry["attention_direction"] = direction
        report.append(entry)
    return report


def analysis_forward(model: Any, inputs: dict[str, Any], *, attentions: bool = True) -> Any:
    """``model(**inputs)`` with hidden states (and attention maps), without gradients.

    Raises:
        ValueError: attention maps are requested while the model does not run eager attention (sdpa and
            flash attention return none).
    """
    import torch

    if attentions:
        configs = [model.config, *(getattr(model.config, k, None) for k in ("text_config", "vision_config"))]
        impls = {str(getattr(c, "_attn_implementation", None)) for c in configs if c is not None} - {"None"}
        if impls - {"eager"}:
            raise ValueError(
                f"attention maps need eager attention, the model runs {sorted(impls)}; build it with "
                'attn_implementation="eager" (or call with attentions=False).'
            )
    with torch.no_grad():
        return model(**inputs, output_hidden_states=True, output_attentions=attentions)


def decoder_layers(model: Any) -> Any:
    """The language model's decoder layers (LLaVA-style ``model.model.language_model.layers`` and kin)."""
    for path in ("model.language_model.layers", "language_model.model.layers", "model.layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        return obj
    raise ValueError(
        f"cannot find the decoder layers of {type(model).__name__}; expected model.language_model."
    )


@contextmanager
def swap_hidden_states(model: Any, layer: int, first: Sequence[Any], second: Sequence[Any]) -> Iterator[None]:
    """Within the block, the hidden states entering decoder layer ``layer`` have the positions ``first[b]``
    and ``second[b]`` exchanged for each batch row ``b`` (equal-size index tensors); ``layer = 0`` swaps the
    projected image features before any text token reads them. The hook is removed on exit.
    """
    layers = decoder_layers(model)
    if not -len(layers) <= layer < len(layers):
        raise IndexError(f"`layer` {layer} is out of range for {len(layers)} decoder layers.")
    with swap_inputs(layers[layer], first, second):
        yield


@contextmanager
def swap_inputs(module: Any, first: Sequence[Any], second: Sequence[Any]) -> Iterator[None]:
    """Within the block, the hidden states entering ``module`` (any layer taking ``[B, T, D]`` first or as
    ``hidden_states``, e.g. a vision encoder layer) have the positions ``first[b]`` and ``second[b]``
    exchanged for each batch row ``b`` (equal-size index tensors). The hook is removed on exit."""
    for b, (a, c) in enumerate(zip(first, second)):
        if a.numel() != c.numel():
            raise ValueError(
                f"swap needs equal token counts; row {b} has {a.numel()} and {c.numel()} (`first`, `second`)."
            )

    def swap(h: Any) -> Any:
        h = h.clone()
        for b, (a, c) in enumerate(zip(first, second)):
            h[b, a], h[b, c] = h[b, c].clone(), h[b, a].clone()
        return h

    def hook(_module: Any, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if args:
            return (swap(args[0]), *args[1:]), kwargs
        return args, {**kwargs, "hidden_states": swap(kwargs["hidden_states"])}

    handle = module.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def swap_test(
    model: Any,
    inputs: dict[str, Any],
    first: Sequence[Any],
    second: Sequence[Any],
    layer: int,
    expected: Any,
    candidates: Any | None = None,
) -> float:
    """Fraction of rows whose last-position answer under the swap equals ``expected`` (``[B]`` token ids:
    the answer implied by the swapped binding); ``candidates`` restricts the argmax to answer ids."""
    import torch

    with torch.no_grad(), swap_hidden_states(model, layer, first, second):
        logits = model(**inputs).logits[:, -1]
    if candidates is not None:
        cand = torch.as_tensor(candidates, device=logits.device)
        pred = cand[logits[:, cand].argmax(-1)]
    else:
        pred = logits.argmax(-1)
    return float((pred == torch.as_tensor(expected, device=pred.device)).float().mean())
