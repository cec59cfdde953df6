"""``CuedProcessor``: wrap any transformers processor so that images get the partition cue before
preprocessing, and the batch carries the partition -> image-token and symbol -> text-token maps.

By composition: the wrapped processor does all the work on the overlaid images, so its outputs (and its
``save_pretrained`` / ``from_pretrained``) are unchanged; the wrapper adds ``partition_token_index``,
``symbol_token_index`` and ``partition_boxes``. Geometry adapters [reconstructed]: ``"llava"`` (resize the
shortest edge, centre crop, ``patch_size``, ``num_additional_image_tokens``) and ``"qwen2_vl"``
(``image_grid_thw`` with the spatial merge).
"""

from __future__ import annotations

from typing import Any

from hf_ext._registry import paper
from hf_ext.grounding_ids.config import CueConfig
from hf_ext.grounding_ids.core import PartitionBox, llava_geometry, patch_partitions, qwen2_vl_geometry
from hf_ext.grounding_ids.cues import GroundingCueOverlay

ADAPTERS = ("llava", "qwen2_vl")
EXTRA_KEYS = ("partition_token_index", "symbol_token_index", "partition_boxes")
_NOUNS = {"rows": "rows", "columns": "columns", "grid": "cells"}


class CuedProcessor:
    """A processor that draws the cue on every image, then calls the wrapped processor.

    Args:
        processor: Any transformers ``ProcessorMixin`` of a vision-language model (e.g. ``LlavaProcessor``).
        overlay: The cue; ``None`` draws nothing (clean images, same token maps) for uncued comparisons.
        adapter: ``"llava"``, ``"qwen2_vl"`` or ``"auto"`` (recognised from the processor).
        require_all_symbols: Raise when a prompt lacks some partition's symbol tokens.

    Examples:
        >>> import torch
        >>> from hf_ext.grounding_ids import GroundingCueOverlay, tiny_grounding_vlm
        >>> model, base = tiny_grounding_vlm(["rows", "marked", ".", "describe", "@", "#"])
        >>> cue = GroundingCueOverlay(n_partitions=2, processed_size=32, patch_size=8, glyphs="bitmap")
        >>> proc = CuedProcessor(base, cue)
        >>> text = "<image> rows marked {symbols} . describe @"
        >>> enc = proc(images=torch.zeros(3, 32, 32), text=text.format(symbols="@ #"), return_tensors="pt")
        >>> enc["partition_token_index"][0]["#"].tolist()
        [9, 10, 11, 12, 13, 14, 15, 16]
        >>> model(**proc.model_inputs(enc)).logits.shape
        torch.Size([1, 24, 11])
    """

    _paper = paper("grounding_ids")

    def __init__(
        self,
        processor: Any,
        overlay: GroundingCueOverlay | None = None,
        adapter: str = "auto",
        *,
        require_all_symbols: bool = True,
        config: CueConfig | None = None,
    ) -> None:
        self.processor = processor
        self.overlay = overlay
        self.config = overlay.config if overlay is not None else (config or CueConfig())
        self.partitioner = overlay if overlay is not None else GroundingCueOverlay(self.config)
        self.adapter = _resolve_adapter(processor, adapter)
        self.require_all_symbols = bool(require_all_symbols)
        self.image_token_id = _image_token_id(processor)

    def __getattr__(self, name: str) -> Any:
        if name == "processor":
            raise AttributeError(name)
        return getattr(self.processor, name)

    def prompt(self, question: str) -> str:
        """The structured prompt [paper: refers to partitions by symbol; template reconstructed]:
        ``"The image is divided into <n> <rows|columns|cells> marked <symbols>. <question>"`` with
        ``{symbols}`` in ``question`` replaced by the symbols in partition order."""
        symbols = " ".join(self.config.symbols_used)
        noun = _NOUNS[self.config.layout]
        hint = f"The image is divided into {self.config.num_partitions} {noun} marked {symbols} ."
        return f"{hint} {question.replace('{symbols}', symbols)}"

    def cue(self, image: Any) -> tuple[Any, list[PartitionBox]]:
        """The overlaid image and its boxes, tiling the part of ``image`` the vision tower sees."""
        height, width = _size(image)
        region = self._region(height, width)
        if self.overlay is None:
            return image, self.partitioner.boxes(height, width, region)
        return self.overlay(image, region)

    def __call__(self, images: Any = None, text: Any = None, **kwargs: Any) -> Any:
        """Overlay, preprocess with the wrapped processor, then add the token maps (one image per text)."""
        if images is None:
            raise ValueError("`images` must be given: CuedProcessor draws cues on images.")
        batch = list(images) if isinstance(images, list | tuple) else [images]
        if text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            if len(texts) != len(batch):
                raise ValueError(f"`text` must hold one prompt per image ({len(batch)}), got {len(texts)}.")
        cued = [self.cue(im) for im in batch]
        enc = self.processor(images=[c[0] for c in cued], text=text, **kwargs)
        if text is None:
            enc["partition_boxes"] = [c[1] for c in cued]
            return enc
        import torch

        ids = torch.as_tensor(enc["input_ids"])
        enc["partition_boxes"] = [c[1] for c in cued]
        enc["partition_token_index"] = [
            self._partition_tokens(ids[b], batch[b], cued[b][1], enc, b) for b in range(len(batch))
        ]
        enc["symbol_token_index"] = [self._symbol_tokens(ids[b]) for b in range(len(batch))]
        return enc

    @staticmethod
    def model_inputs(enc: Any) -> dict[str, Any]:
        """``enc`` without the wrapper's keys: exactly what the model's ``forward`` accepts."""
        return {k: v for k, v in enc.items() if k not in EXTRA_KEYS}

    def _region(self, height: int, width: int) -> tuple[int, int, int, int]:
        if self.adapter == "llava":
            return self._llava(height, width)[0]
        return (0, 0, width, height)

    def _llava(self, height: int, width: int) -> Any:
        ip = self.processor.image_processor
        size = ip.size
        edge = size.get("shortest_edge") or min(size.get("height", 0), size.get("width", 0))
        crop = ip.crop_size if getattr(ip, "do_center_crop", True) else None
        crop_hw = (crop["height"], crop["width"]) if crop else (edge, edge)
        return llava_geometry(height, width, edge, crop_hw, self.processor.patch_size)

    def _partition_tokens(self, ids: Any, image: Any, boxes: list[PartitionBox], enc: Any, b: int) -> dict:
        import torch

        height, width = _size(image)
        if self.adapter == "llava":
            _, grid, to_original = self._llava(height, width)
            extra = self.processor.num_additional_image_tokens
            if self.processor.vision_feature_select_strategy == "default":
                extra -= 1
        else:
            thw = tuple(int(v) for v in enc["image_grid_thw"][b])
            merge = self.processor.image_processor.merge_size
            _, grid, to_original = qwen2_vl_geometry(height, width, thw, merge)  # type: ignore[arg-type]
            extra = 0
        positions = (ids == self.image_token_id).nonzero().flatten()
        expected = grid[0] * grid[1] + extra
        if positions.numel() != expected:
            raise ValueError(
                f"`text` row {b} holds {positions.numel()} image tokens; the {self.adapter} geometry gives "
                f"{expected} ({grid[0]}x{grid[1]} patches + {extra}). One image per prompt is supported."
            )
        owner = torch.tensor(patch_partitions(boxes, grid, to_original))
        patches = positions[extra:]
        return {bx.symbol: patches[owner == bx.index] for bx in boxes}

    def _symbol_tokens(self, ids: Any) -> dict[str, Any]:
        import torch

        tok = self.processor.tokenizer
        found, missing = {}, []
        row = ids.tolist()
        for symbol in self.config.symbols_used:
            hits: set[int] = set()
            for form in (symbol, " " + symbol):
                sub = tok(form, add_special_tokens=False)["input_ids"]
                if not sub or tok.unk_token_id in sub:
                    continue
                for s in range(len(row) - len(sub) + 1):
                    if row[s : s + len(sub)] == sub:
                        hits.update(range(s, s + len(sub)))
            if not hits:
                missing.append(symbol)
            found[symbol] = torch.tensor(sorted(hits), dtype=torch.long)
        if missing and self.require_all_symbols:
            raise ValueError(
                f"`text` lacks the tokens of symbol(s) {' '.join(missing)}; use CuedProcessor.prompt(...) or "
                "pass require_all_symbols=False."
            )
        return found


def _resolve_adapter(processor: Any, adapter: str) -> str:
    if adapter not in (*ADAPTERS, "auto"):
        raise ValueError(f"`adapter` must be one of {', '.join(ADAPTERS)} or 'auto', got {adapter!r}.")
    if adapter != "auto":
        return adapter
    ip = getattr(processor, "image_processor", None)
    if ip is not None and hasattr(ip, "merge_size") and "qwen2" in type(processor).__name__.lower():
        return "qwen2_vl"
    if all(hasattr(processor, a) for a in ("patch_size", "num_additional_image_tokens")) and ip is not None:
        if processor.patch_size is not None:
            return "llava"
    raise ValueError(
        f"cannot recover the image-token geometry of {type(processor).__name__}; pass `adapter=` "
        f"(one of {', '.join(ADAPTERS)})."
    )


def _image_token_id(processor: Any) -> int:
    value = getattr(processor, "image_token_id", None)
    if value is None:
        tok = processor.tokenizer
        value = tok.convert_tokens_to_ids(getattr(processor, "image_token", "<image>"))
    return int(value)


def _size(image: Any) -> tuple[int, int]:
    """``(height, width)`` of a PIL image or a ``(C, H, W)`` tensor."""
    if hasattr(image, "shape"):
        return int(image.shape[-2]), int(image.shape[-1])
    width, height = image.size
    return int(height), int(width)
