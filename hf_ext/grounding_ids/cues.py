"""``GroundingCueOverlay``: draw partition lines and one symbol per partition on an image [paper: lines +
symbols; sizes, placement and colours reconstructed].

Works on PIL images and on ``(3, H, W)`` (or ``(1, H, W)``) uint8 / float tensors and returns the same type
plus the :class:`~hf_ext.grounding_ids.core.PartitionBox` list. Marks are computed as boolean masks at the
original resolution, so a tensor and the equivalent PIL image get the same pixels.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hf_ext._registry import paper
from hf_ext.grounding_ids.config import CueConfig
from hf_ext.grounding_ids.core import PartitionBox, partition_boxes

_BITMAPS = {  # 5x5 glyphs, one string per row, "X" = ink
    "@": (".XXX.", "X.XXX", "X.X.X", "X.XX.", ".XXXX"),
    "#": (".X.X.", "XXXXX", ".X.X.", "XXXXX", ".X.X."),
    "$": (".XXXX", "X.X..", ".XXX.", "..X.X", "XXXX."),
    "%": ("XX..X", "XX.X.", "..X..", ".X.XX", "X..XX"),
    "&": (".XX..", "X..X.", ".XX.X", "X..X.", ".XX.X"),
    "*": ("X.X.X", ".XXX.", "XXXXX", ".XXX.", "X.X.X"),
    "+": ("..X..", "..X..", "XXXXX", "..X..", "..X.."),
    "=": (".....", "XXXXX", ".....", "XXXXX", "....."),
}
_PIL_MODES = ("RGB", "RGBA", "L", "LA", "P", "1")


class GroundingCueOverlay:
    """Callable cue transform: ``overlay(image) -> (cued image, boxes)``.

    Args:
        config: A :class:`CueConfig`; keyword arguments build one when omitted.

    Examples:
        >>> import torch
        >>> overlay = GroundingCueOverlay(n_partitions=2, processed_size=32, patch_size=8, glyphs="bitmap")
        >>> cued, boxes = overlay(torch.zeros(3, 32, 32, dtype=torch.uint8))
        >>> [(b.symbol, b.top, b.bottom) for b in boxes]
        [('@', 0, 16), ('#', 16, 32)]
    """

    _paper = paper("grounding_ids")

    def __init__(self, config: CueConfig | None = None, **kwargs: Any) -> None:
        if config is not None and kwargs:
            raise ValueError(
                f"pass either `config` or keyword settings, got both (config and {sorted(kwargs)})."
            )
        self.config = config if config is not None else CueConfig(**kwargs)

    def boxes(
        self, height: int, width: int, region: tuple[int, int, int, int] | None = None
    ) -> list[PartitionBox]:
        """The partition boxes of a ``height x width`` image, tiling ``region`` (default: the whole image)."""
        c = self.config
        shape = {"rows": (c.n_partitions, 1), "columns": (1, c.n_partitions), "grid": c.grid}[c.layout]
        return partition_boxes(region or (0, 0, width, height), c.layout, shape, c.symbols_used)

    def masks(
        self, height: int, width: int, region: tuple[int, int, int, int] | None = None
    ) -> tuple[np.ndarray, list[np.ndarray], list[PartitionBox]]:
        """``(line mask [H, W], one glyph mask [H, W] per partition, boxes)`` at the original resolution."""
        c = self.config
        region = region or (0, 0, width, height)
        boxes = self.boxes(height, width, region)
        scale = (
            min(region[2] - region[0], region[3] - region[1]) / c.processed_size
        )  # original px per proc px
        lw = max(1, round(c.line_width_px * scale))
        lines = np.zeros((height, width), dtype=bool)
        if c.draw_lines:
            for b in boxes:
                if b.top > region[1]:
                    y = b.top - lw // 2
                    lines[max(0, y) : y + lw, b.left : b.right] = True
                if b.left > region[0]:
                    x = b.left - lw // 2
                    lines[b.top : b.bottom, max(0, x) : x + lw] = True
        glyphs = []
        for b in boxes:
            mask = np.zeros((height, width), dtype=bool)
            if c.draw_symbols:
                ink = self._glyph(b.symbol, max(1, round(c.glyph_size_px * scale)))
                gh, gw = ink.shape
                x0 = b.left + (lw + 1) // 2 + (1 if b.left > region[0] else 0)
                y0 = b.top + (b.bottom - b.top - gh) // 2 if c.layout == "rows" else b.top + (lw + 1) // 2 + 1
                y0 = max(b.top, y0)
                h, w = min(gh, b.bottom - y0), min(gw, b.right - x0)
                if h > 0 and w > 0:
                    mask[y0 : y0 + h, x0 : x0 + w] = ink[:h, :w]
            glyphs.append(mask)
        return lines, glyphs, boxes

    def _glyph(self, symbol: str, size: int) -> np.ndarray:
        if self.config.glyphs == "bitmap":
            if symbol not in _BITMAPS:
                raise ValueError(
                    f"`symbols` entry {symbol!r} has no built-in bitmap; bitmaps exist for "
                    f"{' '.join(_BITMAPS)}. Use glyphs='font'."
                )
            bits = np.array([[ch == "X" for ch in row] for row in _BITMAPS[symbol]])
            k = max(1, size // 5)
            return np.kron(bits, np.ones((k, k), dtype=bool)).astype(bool)
        from PIL import Image, ImageDraw, ImageFont

        font = ImageFont.load_default(size=max(1, round(size / 0.75)))  # em size whose glyphs are ~size tall
        left, top, right, bottom = font.getbbox(symbol)
        canvas = Image.new("L", (max(1, int(right - left)), max(1, int(bottom - top))))
        ImageDraw.Draw(canvas).text((-left, -top), symbol, fill=255, font=font)
        return np.asarray(canvas) > 80

    def __call__(
        self, image: Any, region: tuple[int, int, int, int] | None = None
    ) -> tuple[Any, list[PartitionBox]]:
        """Overlay the cue on ``image`` (PIL image or ``(C, H, W)`` tensor); returns ``(same type, boxes)``.

        ``region = (left, top, right, bottom)`` limits the partitions to the area the vision tower sees
        (:class:`CuedProcessor` passes the centre-crop window).
        """
        array, restore = _to_hwc(image)
        lines, glyphs, boxes = self.masks(array.shape[0], array.shape[1], region)
        out = array.copy()
        high = 255.0 if out.dtype == np.uint8 else 1.0
        c = self.config
        if c.draw_lines and lines.any():  # one partition draws no line
            _paint(out, lines, _pick(array, lines, c.line_color, high))
        for mask in glyphs:
            if not mask.any():
                continue
            colour = _pick(array, mask, c.glyph_color, high)
            if c.glyph_background:
                ys, xs = np.nonzero(mask)
                box = np.zeros_like(mask)
                box[ys.min() : ys.max() + 1, xs.min() : xs.max() + 1] = True
                _paint(out, box, high - colour)
            _paint(out, mask, colour)
        return restore(out), boxes


def _to_hwc(image: Any) -> tuple[np.ndarray, Any]:
    """``(H, W, 3)`` array view of ``image`` and a function turning an array back into its type."""
    import torch

    if isinstance(image, torch.Tensor):
        if image.ndim != 3 or image.shape[0] not in (1, 3, 4):
            raise ValueError(
                f"`image` tensor must be (C, H, W) with C in 1, 3, 4, got shape {tuple(image.shape)}."
            )
        t = image[:3] if image.shape[0] == 4 else image.expand(3, -1, -1)
        dtype, device = image.dtype, image.device
        np_dtype = np.uint8 if dtype == torch.uint8 else np.float64
        array = t.detach().cpu().permute(1, 2, 0).numpy().astype(np_dtype)
        return array, lambda a: torch.from_numpy(a).permute(2, 0, 1).to(dtype=dtype, device=device)
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"`image` must be a PIL image or a (C, H, W) tensor, got {type(image).__name__}.")
    if image.mode not in _PIL_MODES:
        raise ValueError(f"`image` mode must be one of {', '.join(_PIL_MODES)}, got {image.mode!r}.")
    return np.asarray(image.convert("RGB")), lambda a: Image.fromarray(a.astype(np.uint8), "RGB")


def _pick(array: np.ndarray, mask: np.ndarray, colour: Any, high: float) -> np.ndarray:
    if colour != "auto":
        return np.asarray(colour, dtype=np.float64) * (high / 255.0)
    luma = float((array[mask].astype(np.float64) @ np.array([0.299, 0.587, 0.114])).mean()) / high
    return np.full(3, 0.0 if luma > 0.5 else high)


def _paint(out: np.ndarray, mask: np.ndarray, colour: np.ndarray) -> None:
    out[mask] = colour.astype(out.dtype)
