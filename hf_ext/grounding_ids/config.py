"""``CueConfig``: how the partition cue is drawn (layout, symbols, line and glyph sizes, colours)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hf_ext._registry import paper
from hf_ext._validation import check_bool, check_choice, check_int, check_sequence

DEFAULT_SYMBOLS = ("@", "#", "$", "%", "&", "*", "+", "=")
LAYOUTS = ("rows", "columns", "grid")


def _colour(name: str, value: Any) -> str | tuple[int, int, int]:
    if value == "auto":
        return "auto"
    rgb = check_sequence(
        name,
        value,
        lambda n, v: check_int(n, v, low=0, high=255),
        length=3,
        hint='Give an (r, g, b) triple of 0..255 ints or "auto".',
    )
    return (rgb[0], rgb[1], rgb[2])


@dataclass
class CueConfig:
    """Settings of the partition cue [paper: lines + one symbol per partition; sizes reconstructed].

    Sizes are in **processed-image pixels** (the resolution the vision tower sees) and are converted back
    to the original resolution when drawing, so a cue never vanishes in the resize.

    Args:
        n_partitions (`int`, *optional*, defaults to `4`):
            Number of partitions for ``layout="rows"`` / ``"columns"``; ignored for ``"grid"``.
        layout (`str`, *optional*, defaults to `"rows"`):
            ``"rows"`` (horizontal strips), ``"columns"`` (vertical strips) or ``"grid"``.
        grid (`tuple[int, int]`, *optional*, defaults to `(2, 2)`):
            ``(rows, columns)`` of the ``"grid"`` layout; partitions are numbered row-major.
        symbols (`tuple[str, ...]`, *optional*, defaults to `("@", "#", "$", "%", "&", "*", "+", "=")`):
            One distinct symbol per partition, in partition order.
        processed_size (`int`, *optional*, defaults to `336`):
            Shortest side of the image the vision tower sees, in pixels.
        patch_size (`int`, *optional*, defaults to `14`):
            Vision patch size in processed pixels (sets the default glyph height).
        line_width (`int`, *optional*):
            Separator width in processed pixels; ``None`` means ``max(1, round(processed_size / 128))``.
        glyph_size (`int`, *optional*):
            Glyph height in processed pixels; ``None`` means ``max(5, round(0.6 * patch_size))``.
        glyphs (`str`, *optional*, defaults to `"font"`):
            ``"font"`` (Pillow's built-in ``ImageFont.load_default``) or ``"bitmap"`` (built-in 5x5 bitmaps,
            for images under about 64 px).
        draw_lines (`bool`, *optional*, defaults to `True`):
            Draw the separator lines.
        draw_symbols (`bool`, *optional*, defaults to `True`):
            Draw one symbol per partition.
        line_color (`"auto"` or `(r, g, b)`, *optional*, defaults to `"auto"`):
            Colour of the lines; ``"auto"`` picks black or white from the local luminance under the mark.
        glyph_color (`"auto"` or `(r, g, b)`, *optional*, defaults to `"auto"`):
            Colour of the glyphs; ``"auto"`` as for ``line_color``.
        glyph_background (`bool`, *optional*, defaults to `False`):
            Fill a box of the contrasting colour behind each glyph.

    Examples:
        >>> CueConfig(n_partitions=3).symbols_used
        ('@', '#', '$')
    """

    _paper = paper("grounding_ids")

    n_partitions: int = field(default=4, metadata={"help": "Partitions of a rows/columns layout."})
    layout: str = field(default="rows", metadata={"help": "rows, columns or grid."})
    grid: tuple[int, int] = field(default=(2, 2), metadata={"help": "(rows, columns) of the grid layout."})
    symbols: tuple[str, ...] = field(
        default=DEFAULT_SYMBOLS, metadata={"help": "Distinct symbols, one per partition, in order."}
    )
    processed_size: int = field(default=336, metadata={"help": "Shortest side the vision tower sees (px)."})
    patch_size: int = field(default=14, metadata={"help": "Vision patch size (processed px)."})
    line_width: int | None = field(default=None, metadata={"help": "Line width (processed px)."})
    glyph_size: int | None = field(default=None, metadata={"help": "Glyph height (processed px)."})
    glyphs: str = field(default="font", metadata={"help": "font (Pillow default font) or bitmap (5x5)."})
    draw_lines: bool = field(default=True, metadata={"help": "Draw the separator lines."})
    draw_symbols: bool = field(default=True, metadata={"help": "Draw one symbol per partition."})
    line_color: Any = field(default="auto", metadata={"help": '"auto" or an (r, g, b) triple.'})
    glyph_color: Any = field(default="auto", metadata={"help": '"auto" or an (r, g, b) triple.'})
    glyph_background: bool = field(default=False, metadata={"help": "Fill a contrasting box behind glyphs."})

    def __post_init__(self) -> None:
        self.layout = check_choice("layout", self.layout, LAYOUTS)
        self.n_partitions = check_int("n_partitions", self.n_partitions, low=1)
        grid = check_sequence("grid", self.grid, lambda n, v: check_int(n, v, low=1), length=2)
        self.grid = (grid[0], grid[1])
        self.symbols = tuple(check_sequence("symbols", self.symbols, _symbol, min_length=1))
        if len(set(self.symbols)) != len(self.symbols):
            raise ValueError(f"`symbols` must be distinct, got {self.symbols!r}.")
        if len(self.symbols) < self.num_partitions:
            raise ValueError(
                f"`symbols` must hold at least one symbol per partition ({self.num_partitions}), "
                f"got {len(self.symbols)}: {self.symbols!r}."
            )
        self.processed_size = check_int("processed_size", self.processed_size, low=1)
        self.patch_size = check_int("patch_size", self.patch_size, low=1, high=self.processed_size)
        if self.line_width is not None:
            self.line_width = check_int("line_width", self.line_width, low=1)
        if self.glyph_size is not None:
            self.glyph_size = check_int("glyph_size", self.glyph_size, low=1)
        self.glyphs = check_choice("glyphs", self.glyphs, ("font", "bitmap"))
        self.draw_lines = check_bool("draw_lines", self.draw_lines)
        self.draw_symbols = check_bool("draw_symbols", self.draw_symbols)
        self.line_color = _colour("line_color", self.line_color)
        self.glyph_color = _colour("glyph_color", self.glyph_color)
        self.glyph_background = check_bool("glyph_background", self.glyph_background)

    @property
    def num_partitions(self) -> int:
        """Partitions drawn: ``n_partitions``, or ``rows * columns`` for the grid layout."""
        return self.grid[0] * self.grid[1] if self.layout == "grid" else self.n_partitions

    @property
    def symbols_used(self) -> tuple[str, ...]:
        """The first ``num_partitions`` symbols, in partition order."""
        return self.symbols[: self.num_partitions]

    @property
    def line_width_px(self) -> int:
        """Line width in processed pixels."""
        return self.line_width or max(1, round(self.processed_size / 128))

    @property
    def glyph_size_px(self) -> int:
        """Glyph height in processed pixels."""
        return self.glyph_size or max(5, round(0.6 * self.patch_size))


def _symbol(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value or value != value.strip():
        raise ValueError(f"`{name}` must be a non-empty string without surrounding spaces, got {value!r}.")
    return value
