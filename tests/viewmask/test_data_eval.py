"""Procedural voxel objects, their renders, the prompt tokenizer and the consistency figures."""

from __future__ import annotations

import numpy as np
import pytest

from hf_ext.viewmask.data import (
    PROMPT_WORDS,
    procedural_dataset,
    random_voxel_object,
    render_views,
)
from hf_ext.viewmask.eval import iou, mirror_iou, silhouettes, visual_hull


def test_same_seed_same_object_and_prompt_names_count_and_colours():
    a, b, c = random_voxel_object(11), random_voxel_object(11), random_voxel_object(12)
    assert np.array_equal(a.colours, b.colours) and a.prompt == b.prompt
    assert not np.array_equal(a.colours, c.colours)
    for seed in range(30):
        obj = random_voxel_object(seed)
        words = obj.prompt.split()
        assert set(words) <= set(PROMPT_WORDS)
        n = ("one", "two", "three").index(words[0]) + 1
        assert len(np.unique(obj.colours[obj.colours > 0])) <= n and obj.occupancy.any()


def test_single_voxel_lands_where_the_camera_convention_says():
    grid = np.zeros((4, 4, 4), np.int8)
    grid[0, 1, 3] = 1  # x=0, y=1, z=3 (top row), red
    sil = silhouettes(render_views(grid, pixels_per_voxel=1))
    v = 0  # row of z = 3
    assert sil[0, v, 0]  # az 0: u = x
    assert sil[1, v, 1]  # az 90: u = y
    assert sil[2, v, 3]  # az 180: u = G-1-x
    assert sil[3, v, 2]  # az 270: u = G-1-y
    assert sil.sum() == 4


def test_occlusion_takes_the_first_voxel_along_the_ray():
    grid = np.zeros((4, 4, 4), np.int8)
    grid[1, 0, 0], grid[1, 3, 0] = 1, 3  # red at y=0 (front for az 0), blue at y=3
    views = render_views(grid, pixels_per_voxel=1)
    assert np.allclose(views[0, 3, 1], [0.85, 0.1, 0.1])  # az 0 sees red
    assert np.allclose(views[2, 3, 2], [0.15, 0.25, 0.9])  # az 180 sees blue


def test_ground_truth_mirror_iou_is_one_and_hull_contains_every_voxel():
    data = procedural_dataset(range(40))
    assert data["images"].shape == (40, 4, 3, 32, 32) and data["images"].min() >= -1
    for obj in data["objects"]:
        sil = silhouettes(render_views(obj))
        assert mirror_iou(sil[0], sil[2]) == 1.0 and mirror_iou(sil[1], sil[3]) == 1.0
        hull = visual_hull(sil)
        assert hull[obj.occupancy].all()  # the hull contains every ground-truth voxel


def test_iou_and_bad_inputs():
    a = np.array([[1, 1, 0, 0]], bool)
    b = np.array([[0, 1, 1, 0]], bool)
    assert iou(a, b) == pytest.approx(1 / 3) and iou(~(a | b) & a, np.zeros_like(a)) == 1.0
    with pytest.raises(ValueError, match="`a` and `b`"):
        iou(a, b.T)
    with pytest.raises(ValueError, match="`images`"):
        silhouettes(np.zeros((4, 4)))
    with pytest.raises(ValueError, match=r"`sils`.*\(3, 8, 8\)"):
        visual_hull(np.zeros((3, 8, 8), bool))
    with pytest.raises(ValueError, match="`azimuths`.*45"):
        render_views(random_voxel_object(0), azimuths=(45,))
    with pytest.raises(ValueError, match=r"`obj`.*\(4, 4, 3\)"):
        render_views(np.zeros((4, 4, 3), np.int8))
    with pytest.raises(ValueError, match="`seed`.*-1"):
        random_voxel_object(-1)


def test_prompt_tokenizer_is_word_level_and_round_trips(tmp_path):
    pytest.importorskip("transformers")
    from transformers import PreTrainedTokenizerFast

    from hf_ext.viewmask.data import viewmask_prompt_tokenizer

    tok = viewmask_prompt_tokenizer(8)
    assert len(tok) == len(PROMPT_WORDS) and tok.pad_token_id == 0
    enc = tok(["two boxes red and blue", "one box zebra"], padding="max_length", max_length=8)
    assert enc.input_ids[0][:5] == [PROMPT_WORDS.index(w) for w in "two boxes red and blue".split()]
    assert enc.input_ids[1][2] == 1 and enc.attention_mask[1] == [1, 1, 1, 0, 0, 0, 0, 0]  # [UNK]
    tok.save_pretrained(tmp_path / "tok")
    back = PreTrainedTokenizerFast.from_pretrained(tmp_path / "tok")
    assert (
        back("three boxes black and yellow and green").input_ids
        == tok("three boxes black and yellow and green").input_ids
    )
    assert back.pad_token == "[PAD]" and back.model_max_length == 8
