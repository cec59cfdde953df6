import pytest
import torch

from hf_ext.grounding_ids.core import (
    alignment_margin,
    attention_mass,
    cuts,
    llava_geometry,
    modality_gap,
    partition_boxes,
    patch_partitions,
    qwen2_vl_geometry,
    within_partition_alignment,
)

SYM = "@#$%&*+="


@pytest.mark.parametrize("layout", ["rows", "columns", "grid"])
@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("region", [(0, 0, 37, 23), (5, 3, 69, 67)])
def test_boxes_tile_the_region_exactly(layout, n, region):
    shape = {"rows": (n, 1), "columns": (1, n), "grid": (n, max(1, 8 // n))}[layout]
    boxes = partition_boxes(region, layout, shape, SYM * 8)
    cover = torch.zeros(region[3], region[2], dtype=torch.int)
    for b in boxes:
        assert b.right > b.left and b.bottom > b.top
        cover[b.top : b.bottom, b.left : b.right] += 1
    assert (cover[region[1] :, region[0] :] == 1).all() and cover.sum() == (region[2] - region[0]) * (
        region[3] - region[1]
    )
    assert [b.index for b in boxes] == list(range(len(boxes)))


def test_cuts_round_to_nearest():
    assert cuts(0, 32, 3) == [0, 11, 21, 32]
    assert cuts(4, 12, 2) == [4, 8, 12]


def test_boxes_reject_more_partitions_than_pixels():
    with pytest.raises(ValueError, match="shape"):
        partition_boxes((0, 0, 4, 4), "rows", (5, 1), SYM)


def test_llava_token_map_four_rows_with_cls_offset():
    # 64 px, patch 8: 8x8 patches; 4 rows = patch rows {0-1}, {2-3}, {4-5}, {6-7}
    region, grid, to_orig = llava_geometry(64, 64, 64, (64, 64), 8)
    assert region == (0, 0, 64, 64) and grid == (8, 8)
    boxes = partition_boxes(region, "rows", (4, 1), SYM)
    owner = patch_partitions(boxes, grid, to_orig)
    assert owner == [i // 16 for i in range(64)]
    # 3 text tokens, then CLS at position 3: partition p -> positions 4 + 16 p .. 19 + 16 p
    positions = torch.arange(3, 3 + 65)
    patches = positions[1:]
    got = {p: patches[torch.tensor(owner) == p].tolist() for p in range(4)}
    assert got == {p: list(range(4 + 16 * p, 20 + 16 * p)) for p in range(4)}


def test_llava_geometry_centre_crops_a_wide_image_first():
    # 64 x 128 (h x w) -> shortest edge 64 (scale 1), crop 64x64 at x = 32
    region, grid, to_orig = llava_geometry(64, 128, 64, (64, 64), 8)
    assert region == (32, 0, 96, 64)
    boxes = partition_boxes(region, "columns", (1, 2), SYM)
    assert [(b.left, b.right) for b in boxes] == [(32, 64), (64, 96)]
    owner = patch_partitions(boxes, grid, to_orig)
    assert owner == [0, 0, 0, 0, 1, 1, 1, 1] * 8
    # downscaled tall image: 256 x 128 -> 128 x 64, crop 64 at y = 32 -> original rows 64..192
    region, _, to_orig = llava_geometry(256, 128, 64, (64, 64), 8)
    assert region == (0, 64, 128, 192)
    assert to_orig(0, 0) == (8.0, 72.0)


def test_qwen2_vl_token_map_hand_table():
    # 56 x 112 image, grid_thw (1, 4, 8) of 14 px patches, merge 2 -> 2 x 4 tokens of 28x28 px
    region, grid, to_orig = qwen2_vl_geometry(56, 112, (1, 4, 8), 2)
    assert region == (0, 0, 112, 56) and grid == (2, 4)
    boxes = partition_boxes(region, "grid", (2, 2), SYM)
    assert patch_partitions(boxes, grid, to_orig) == [0, 0, 1, 1, 2, 2, 3, 3]
    rows = partition_boxes(region, "rows", (2, 1), SYM)
    assert patch_partitions(rows, grid, to_orig) == [0, 0, 0, 0, 1, 1, 1, 1]


def test_alignment_margin_hand_values():
    codes = torch.eye(4)
    assert alignment_margin(codes, codes).item() == pytest.approx(1.0)
    same = torch.ones(4, 3)
    assert alignment_margin(same, same).item() == pytest.approx(0.0, abs=1e-6)
    # cos matrix [[1, 0], [0.6, 0.8]] vs sym = e1, e2: diag (1, 0.8), off (0, 0.6) -> margin 0.6
    img = torch.tensor([[1.0, 0.0], [0.6, 0.8]])
    assert alignment_margin(img, torch.eye(2)).item() == pytest.approx(0.6)
    with pytest.raises(ValueError, match="2 partitions"):
        alignment_margin(torch.ones(1, 3), torch.ones(1, 3))


def test_within_partition_alignment_and_gap():
    h = torch.tensor([[1.0, 0], [2.0, 0], [0, 1.0], [0, 3.0], [5.0, 5.0]])
    labels = torch.tensor([0, 0, 1, 1, -1])
    assert within_partition_alignment(h, labels).item() == pytest.approx(1.0)
    assert modality_gap(torch.randn(3, 4).abs() * 0 + 1, torch.ones(2, 4)).item() == pytest.approx(0.0)
    assert modality_gap(torch.tensor([[1.0, 0]]), torch.tensor([[0, 2.0]])).item() == pytest.approx(2**0.5)


def test_attention_mass_closed_form():
    # one head, 3 queries, 6 keys; query 0 is symbol @, query 1 is symbol #; keys {0,1} = @, {2,3,4} = #
    attn = torch.zeros(1, 3, 6)
    attn[0, 0] = torch.tensor([0.3, 0.3, 0.1, 0.1, 0.0, 0.2])  # 0.6 on @, 0.2 on #, 0.2 elsewhere
    attn[0, 1] = torch.tensor([0.1, 0.0, 0.3, 0.3, 0.3, 0.0])
    queries = [torch.tensor([0]), torch.tensor([1])]
    keys = [torch.tensor([0, 1]), torch.tensor([2, 3, 4])]
    mass, ratio = attention_mass(attn, queries, keys)
    torch.testing.assert_close(mass, torch.tensor([[0.75, 0.25], [0.1, 0.9]]))
    torch.testing.assert_close(ratio, torch.tensor([[0.75 / 0.4, 0.25 / 0.6], [0.1 / 0.4, 0.9 / 0.6]]))
    # heads are averaged
    two = torch.cat([attn, attn.flip(-1)])
    mass2, _ = attention_mass(two, queries, keys)
    flipped, _ = attention_mass(attn.flip(-1), queries, keys)
    torch.testing.assert_close(mass2, (mass + flipped) / 2)
