"""Procedural multi-view objects: unions of coloured boxes in a voxel grid, rendered from fixed cameras.

[reconstructed demo data; GSO and 3D-FUTURE are not available offline] An object is a ``G^3`` voxel grid
(``z`` up) holding the union of 1-3 axis-aligned boxes (sides 2-6 at ``G = 8``), each one colour of a
6-colour palette; a later box paints over an earlier one where they overlap. Views are orthographic at
elevation 0 and azimuths 0, 90, 180, 270 degrees; a pixel takes the colour of the first occupied voxel along
its ray, on a white background, and one voxel covers ``pixels_per_voxel^2`` pixels. With these cameras the
silhouette at ``az + 180`` is exactly the horizontal mirror of the silhouette at ``az``.

Camera convention (voxel ``(x, y, z)``, image column ``u``, row ``v = G - 1 - z``): az 0 looks along ``+y``
with ``u = x``; az 90 along ``-x`` with ``u = y``; az 180 along ``-y`` with ``u = G-1-x``; az 270 along ``+x``
with ``u = G-1-y``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hf_ext._registry import paper
from hf_ext._validation import check_int

PALETTE = np.array(
    [
        [0.85, 0.1, 0.1],  # red
        [0.1, 0.7, 0.2],  # green
        [0.15, 0.25, 0.9],  # blue
        [0.95, 0.8, 0.1],  # yellow
        [0.6, 0.15, 0.75],  # purple
        [0.1, 0.1, 0.1],  # black
    ],
    dtype=np.float32,
)
COLOUR_NAMES = ("red", "green", "blue", "yellow", "purple", "black")
AZIMUTHS = (0, 90, 180, 270)
COUNT_WORDS = ("one", "two", "three")
PROMPT_WORDS = ("[PAD]", "[UNK]", *COUNT_WORDS, "box", "boxes", "and", *COLOUR_NAMES)


@dataclass(frozen=True)
class VoxelObject:
    """One procedural object.

    Attributes:
        colours: ``[G, G, G]`` int8 grid indexed ``[x, y, z]``: 0 empty, ``c + 1`` for palette colour ``c``.
        prompt: text naming the box count and colours, e.g. ``"two boxes red and blue"``.
        seed: the seed it was drawn from.
    """

    colours: np.ndarray
    prompt: str
    seed: int

    _paper = paper("viewmask")

    @property
    def occupancy(self) -> np.ndarray:
        """``[G, G, G]`` bool: occupied voxels."""
        return self.colours > 0


def random_voxel_object(seed: int, *, grid: int = 8, max_boxes: int = 3) -> VoxelObject:
    """Draw the union of ``1..max_boxes`` random boxes (sides ``2..grid-2``) from ``seed`` (deterministic).

    >>> random_voxel_object(3).colours.shape
    (8, 8, 8)
    """
    seed = check_int("seed", seed, low=0)
    grid = check_int("grid", grid, low=4)
    max_boxes = check_int("max_boxes", max_boxes, low=1, high=len(COUNT_WORDS))
    rng = np.random.default_rng(seed)
    colours = np.zeros((grid, grid, grid), dtype=np.int8)
    n = int(rng.integers(1, max_boxes + 1))
    picked = rng.choice(len(PALETTE), size=n, replace=False)
    for c in picked:
        side = rng.integers(2, grid - 1, size=3)
        lo = [int(rng.integers(0, grid - s + 1)) for s in side]
        colours[lo[0] : lo[0] + side[0], lo[1] : lo[1] + side[1], lo[2] : lo[2] + side[2]] = c + 1
    names = " and ".join(COLOUR_NAMES[c] for c in picked)
    prompt = f"{COUNT_WORDS[n - 1]} {'box' if n == 1 else 'boxes'} {names}"
    return VoxelObject(colours=colours, prompt=prompt, seed=seed)


def _view_grid(colours: np.ndarray, azimuth: int) -> np.ndarray:
    """``[G, G]`` colour ids (0 = background) seen at ``azimuth``, indexed ``[v, u]``."""
    # Reorder to [u, depth (front first), z] for the camera, then take the first occupied voxel.
    if azimuth == 0:
        vol = colours
    elif azimuth == 90:
        vol = colours.transpose(1, 0, 2)[:, ::-1]
    elif azimuth == 180:
        vol = colours[::-1, ::-1]
    elif azimuth == 270:
        vol = colours.transpose(1, 0, 2)[::-1]
    else:
        raise ValueError(f"`azimuths` must hold values of {AZIMUTHS}, got {azimuth!r}.")
    hit = vol > 0
    first = hit.argmax(axis=1)  # [u, z]
    seen = np.take_along_axis(vol, first[:, None, :], axis=1)[:, 0, :]
    seen = np.where(hit.any(axis=1), seen, 0)
    return seen.T[::-1]  # [v, u] with v = G - 1 - z


def render_views(
    obj: VoxelObject | np.ndarray,
    *,
    azimuths: tuple[int, ...] = AZIMUTHS,
    pixels_per_voxel: int = 4,
) -> np.ndarray:
    """Orthographic renders ``[V, G*s, G*s, 3]`` float32 in ``[0, 1]`` (white background), ``s`` =
    ``pixels_per_voxel``. ``obj``: a :class:`VoxelObject` or its ``[G, G, G]`` colour grid.

    >>> render_views(random_voxel_object(0)).shape
    (4, 32, 32, 3)
    """
    s = check_int("pixels_per_voxel", pixels_per_voxel, low=1)
    colours = obj.colours if isinstance(obj, VoxelObject) else np.asarray(obj)
    if colours.ndim != 3 or len(set(colours.shape)) != 1:
        raise ValueError(f"`obj` must be a cubic [G, G, G] colour grid, got shape {colours.shape}.")
    table = np.concatenate([np.ones((1, 3), np.float32), PALETTE])
    views = [table[_view_grid(colours, int(az))] for az in azimuths]
    return np.stack(views).repeat(s, axis=1).repeat(s, axis=2)


def procedural_dataset(seeds: range | list[int], *, pixels_per_voxel: int = 4) -> dict[str, Any]:
    """Renders and prompts of the objects drawn from ``seeds``.

    Returns:
        ``{"images": [N, 4, 3, H, W] float32 in [-1, 1], "prompts": list[str],
        "objects": list[VoxelObject]}``.
    """
    objects = [random_voxel_object(int(s)) for s in seeds]
    images = np.stack([render_views(o, pixels_per_voxel=pixels_per_voxel) for o in objects])
    images = images.transpose(0, 1, 4, 2, 3) * 2 - 1
    return {"images": images.astype(np.float32), "prompts": [o.prompt for o in objects], "objects": objects}


def viewmask_prompt_tokenizer(max_length: int = 12) -> Any:
    """A word-level ``PreTrainedTokenizerFast`` over the prompt vocabulary of the procedural objects.

    Built in code from a ``tokenizers`` ``WordLevel`` model (no hub download); ``[PAD]`` is id 0 and
    ``[UNK]`` id 1. Save it with the pipeline (``save_pretrained``) like any tokenizer.
    """
    from hf_ext._tokenizers import word_level_tokenizer

    return word_level_tokenizer(
        PROMPT_WORDS, unk_token="[UNK]", pad_token="[PAD]", model_max_length=max_length
    )
