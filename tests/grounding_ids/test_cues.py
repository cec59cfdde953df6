import numpy as np
import pytest
import torch
from PIL import Image

from hf_ext.grounding_ids.config import CueConfig
from hf_ext.grounding_ids.cues import GroundingCueOverlay


def _overlay(**kw):
    base = dict(n_partitions=4, processed_size=32, patch_size=8, glyphs="bitmap")
    return GroundingCueOverlay(**{**base, **kw})


def test_lines_drawn_at_box_edges_and_image_unchanged_elsewhere():
    img = torch.full((3, 32, 32), 200, dtype=torch.uint8)
    cued, boxes = _overlay(draw_symbols=False)(img)
    changed = (cued != img).any(0)
    expected = torch.zeros(32, 32, dtype=torch.bool)
    expected[[8, 16, 24]] = True  # width max(1, round(32 / 128)) = 1, at the interior edges
    assert torch.equal(changed, expected)
    assert (cued[:, changed] == 0).all()  # auto colour: black on a light image
    assert [(b.top, b.bottom) for b in boxes] == [(0, 8), (8, 16), (16, 24), (24, 32)]


def test_glyph_pixels_lie_inside_their_box():
    overlay = _overlay(draw_lines=False, glyph_size=5)
    lines, glyphs, boxes = overlay.masks(32, 32)
    assert not lines.any()
    for mask, box in zip(glyphs, boxes):
        ys, xs = np.nonzero(mask)
        assert mask.sum() > 0
        assert ys.min() >= box.top and ys.max() < box.bottom and xs.min() >= box.left and xs.max() < box.right
    # every glyph is different: the symbols are distinguishable
    shapes = {mask[b.top : b.bottom].tobytes() for mask, b in zip(glyphs, boxes)}
    assert len(shapes) == 4


def test_sizes_are_in_processed_pixels():
    # processed 32 px shown on a 128 px original: 4 original px per processed px, so lines are 4 px wide
    overlay = _overlay(draw_symbols=False, n_partitions=2)
    lines, _, _ = overlay.masks(128, 128)
    assert lines[:, 0].sum() == 4 and lines[62:66, 5].all()


def test_tensor_and_pil_inputs_give_the_same_pixels():
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, (40, 48, 3), dtype=np.uint8)
    overlay = _overlay(layout="grid", grid=(2, 3), glyph_background=True)
    pil, boxes_pil = overlay(Image.fromarray(array))
    ten, boxes_ten = overlay(torch.from_numpy(array).permute(2, 0, 1))
    assert isinstance(pil, Image.Image) and ten.dtype == torch.uint8
    assert np.array_equal(np.asarray(pil), ten.permute(1, 2, 0).numpy())
    assert boxes_pil == boxes_ten
    flt, _ = overlay(torch.from_numpy(array).permute(2, 0, 1).float() / 255)
    assert flt.dtype == torch.float32
    assert torch.allclose(flt * 255, ten.float(), atol=1e-3)


def test_font_glyphs_and_fixed_colours():
    overlay = GroundingCueOverlay(n_partitions=2, processed_size=64, patch_size=14, glyph_color=(255, 0, 0))
    cued, _ = overlay(Image.new("RGB", (64, 64), (0, 0, 0)))
    red = (np.asarray(cued) == (255, 0, 0)).all(-1)
    assert red.sum() > 5 and red[:32].any() and red[32:].any()
    assert (np.asarray(cued)[32, :] == 255).all()  # auto line colour: white on black


@pytest.mark.parametrize("mode", ["RGBA", "L", "LA", "P"])
def test_other_modes_are_converted(mode):
    cued, _ = _overlay()(Image.new(mode, (32, 32)))
    assert cued.mode == "RGB"


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="`image` mode"):
        _overlay()(Image.new("CMYK", (32, 32)))
    with pytest.raises(ValueError, match="`image` tensor"):
        _overlay()(torch.zeros(2, 32, 32))
    with pytest.raises(TypeError, match="`image`"):
        _overlay()(np.zeros((32, 32, 3)))
    with pytest.raises(ValueError, match="`n_partitions`"):
        CueConfig(n_partitions=0)
    with pytest.raises(ValueError, match="`symbols`.*one symbol per partition"):
        CueConfig(n_partitions=3, symbols=("@", "#"))
    with pytest.raises(ValueError, match="`symbols` must be distinct"):
        CueConfig(n_partitions=2, symbols=("@", "@"))
    with pytest.raises(ValueError, match="`layout`"):
        CueConfig(layout="diagonal")
    with pytest.raises(ValueError, match="`line_color\\[2\\]`"):
        CueConfig(line_color=(0, 0, 300))
    with pytest.raises(ValueError, match="`glyphs`"):
        CueConfig(glyphs="svg")
    with pytest.raises(ValueError, match="`symbols` entry 'A'"):
        GroundingCueOverlay(n_partitions=1, symbols=("A",), glyphs="bitmap").masks(32, 32)
    with pytest.raises(ValueError, match="`shape`"):
        _overlay(n_partitions=8)(torch.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="either `config`"):
        GroundingCueOverlay(CueConfig(), n_partitions=2)
