"""``make_binding_task``: scenes of coloured squares in horizontal strips, with a question about one strip
[reconstructed: the paper evaluates on real images; this task is hf-ext's].

A scene of side ``image_size`` is split into ``n`` equal strips (``n`` drawn from ``rows``); each strip
holds one square (or none, with probability ``empty_prob``) of a random colour at a random position inside
it. The question names the strip by its cue symbol, after the structured hint; the answer is the square's
colour word or ``"none"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from hf_ext._validation import check_bool, check_float, check_int, check_sequence
from hf_ext.grounding_ids.config import DEFAULT_SYMBOLS
from hf_ext.grounding_ids.core import cuts

COLOURS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (50, 80, 230), "yellow": (235, 215, 40)}
NUMBERS = ("one", "two", "three", "four", "five", "six", "seven", "eight")


@dataclass
class BindingTask:
    """A generated task: ``images`` ``[N, 3, S, S]`` uint8, and per item the strip count, the last asked
    strip, the prompt (``<image>`` first, ending with the last question), its answer word, each strip's
    colour and symbol, and every ``(strip, answer)`` pair asked, in order."""

    images: Any
    n_rows: np.ndarray
    target: np.ndarray
    prompts: list[str]
    answers: list[str]
    row_colours: list[list[str]]
    row_symbols: list[tuple[str, ...]]
    qa: list[list[tuple[int, str]]]

    @property
    def answer_words(self) -> list[str]:
        return [*COLOURS, "none"]


def vocabulary(max_rows: int) -> list[str]:
    """Every word the prompts and answers use (for a word-level tokenizer)."""
    hint = "the image is divided into rows marked . colour of row ?".split()
    return [*hint, *NUMBERS[:max_rows], *DEFAULT_SYMBOLS[:max_rows], *COLOURS, "none"]


def make_binding_task(
    n: int,
    *,
    image_size: int = 32,
    rows: Sequence[int] = (4,),
    object_size: int = 5,
    object_width: int | None = None,
    empty_prob: float = 0.0,
    left_margin: int = 8,
    noise: float = 8.0,
    shuffle_symbols: bool = False,
    distinct_colours: bool = False,
    questions: int = 1,
    seed: int = 0,
) -> BindingTask:
    """Generate ``n`` scenes and questions.

    Args:
        n: Number of items.
        image_size: Side of the square image (px).
        rows: Strip counts to draw from, uniformly (each at most 8).
        object_size: Height of each object (px); must fit a strip.
        object_width: Width of each object (px); ``None`` means ``object_size`` (a square). An object as wide
            as the image (with ``left_margin=0``) is a bar across its strip, under the strip's cue glyph.
        empty_prob: Probability that a strip holds no square (answer ``"none"``).
        left_margin: Objects start at ``x >= left_margin`` (px); the default 8 keeps squares off the cue
            glyphs.
        noise: Standard deviation of the grey background noise (0..255 scale).
        shuffle_symbols: Label the strips with a random ordered draw from the first ``max(rows)`` symbols
            (the hint lists them top to bottom); ``False`` labels strip ``k`` with symbol ``k``.
        distinct_colours: Give the strips of a scene distinct colours (a random draw without replacement;
            needs ``max(rows) <= 4`` and ``empty_prob = 0``). With 4 strips every scene then holds each colour
            once, so no scene statistic (colour counts, most frequent colour) tells which strip holds which
            colour: the answer is uniform given the scene's colour counts and needs the strip's location.
        questions: Questions per item, about distinct strips (at most ``min(rows)``); all but the last are
            followed by their answer, so a model can be trained on every ``?`` position (teacher forcing).
        seed: Seed of the generator.

    Examples:
        >>> task = make_binding_task(2, seed=0)
        >>> task.images.shape, task.prompts[0].split()[0]
        (torch.Size([2, 3, 32, 32]), '<image>')
    """
    import torch

    n = check_int("n", n, low=1)
    image_size = check_int("image_size", image_size, low=4)
    rows = check_sequence("rows", rows, lambda k, v: check_int(k, v, low=1, high=8), min_length=1)
    object_size = check_int("object_size", object_size, low=1)
    if object_size > image_size // max(rows) - 1:
        raise ValueError(
            f"`object_size` must fit a strip below its line ({image_size // max(rows) - 1} px for "
            f"{max(rows)} rows of a {image_size} px image), got {object_size}."
        )
    empty_prob = check_float("empty_prob", empty_prob, low=0, high=1, high_open=True)
    width = (
        object_size
        if object_width is None
        else check_int("object_width", object_width, low=1, high=image_size)
    )
    left_margin = check_int("left_margin", left_margin, low=0, high=image_size - width)
    noise = check_float("noise", noise, low=0)
    shuffle_symbols = check_bool("shuffle_symbols", shuffle_symbols)
    distinct_colours = check_bool("distinct_colours", distinct_colours)
    if distinct_colours and (max(rows) > len(COLOURS) or empty_prob > 0):
        raise ValueError(
            f"`distinct_colours` needs at most {len(COLOURS)} strips and `empty_prob` = 0, got rows={rows} "
            f"and empty_prob={empty_prob}."
        )
    questions = check_int("questions", questions, low=1, high=max(rows))
    rng = np.random.default_rng(check_int("seed", seed, low=0))
    names = list(COLOURS)
    images = np.clip(128 + noise * rng.standard_normal((n, image_size, image_size, 3)), 0, 255)
    n_rows = rng.choice(rows, size=n)
    asked = [rng.permutation(k)[: min(questions, k)] for k in n_rows]
    target = np.array([a[-1] for a in asked])
    prompts, answers, row_colours, row_symbols, qa = [], [], [], [], []
    pool = DEFAULT_SYMBOLS[: max(rows)]
    for i in range(n):
        k = int(n_rows[i])
        ys = cuts(0, image_size, k)
        scene: list[str] = []
        drawn = rng.permutation(len(names))[:k] if distinct_colours else None
        for r in range(k):
            if drawn is None and rng.random() < empty_prob:
                scene.append("none")
                continue
            colour = names[drawn[r] if drawn is not None else rng.integers(len(names))]
            top = rng.integers(ys[r] + 1, ys[r + 1] - object_size + 1)
            left = rng.integers(left_margin, image_size - width + 1)
            images[i, top : top + object_size, left : left + width] = COLOURS[colour]
            scene.append(colour)
        labels = tuple(rng.permutation(pool)[:k]) if shuffle_symbols else pool[:k]
        pairs = [(int(r), scene[r]) for r in asked[i]]
        text = " ".join(f"colour of row {labels[r]} ? {a}" for r, a in pairs)
        prompts.append(
            f"<image> the image is divided into {NUMBERS[k - 1]} rows marked {' '.join(labels)} . "
            + text.rsplit(" ", 1)[0]
        )
        answers.append(scene[target[i]])
        qa.append(pairs)
        row_colours.append(scene)
        row_symbols.append(tuple(str(s) for s in labels))
    pixels = torch.from_numpy(images.astype(np.uint8)).permute(0, 3, 1, 2).contiguous()
    return BindingTask(pixels, n_rows, target, prompts, answers, row_colours, row_symbols, qa)
