"""Corruption suite: identities, hand formulas, severity ordering, transforms, bad inputs."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires

pytestmark = requires("timm")


def _photo(size=64):
    import torch.nn.functional as F
    from skimage import data

    imgs = [data.astronaut(), data.coffee()]
    return torch.stack(
        [
            F.interpolate(
                torch.tensor(i).permute(2, 0, 1)[None].float() / 255, size=(size, size), mode="area"
            )[0]
            for i in imgs
        ]
    )


def test_every_corruption_keeps_shape_range_and_is_seeded():
    from hf_ext.timm.corruptions import CORRUPTIONS, corrupt

    x = torch.rand(2, 3, 32, 32)
    assert len(CORRUPTIONS) == 18
    for name in CORRUPTIONS:
        a = corrupt(x, name, 3, torch.Generator().manual_seed(1))
        b = corrupt(x, name, 3, torch.Generator().manual_seed(1))
        assert a.shape == x.shape and a.min() >= 0 and a.max() <= 1, name
        torch.testing.assert_close(a, b, msg=name)


def test_hand_formulas_on_a_4x4_image():
    from hf_ext.timm import corruptions as C

    g = torch.Generator().manual_seed(0)
    x = torch.linspace(0.1, 0.9, 48).view(1, 3, 4, 4)
    mean = x.mean(dim=(2, 3), keepdim=True)
    torch.testing.assert_close(C.corrupt(x, "contrast", 1), ((x - mean) * 0.4 + mean).clamp(0, 1))
    noise = torch.randn(x.shape, generator=torch.Generator().manual_seed(7)) * 0.08
    torch.testing.assert_close(
        C.corrupt(x, "gaussian_noise", 1, torch.Generator().manual_seed(7)), (x + noise).clamp(0, 1)
    )
    pix = C.corrupt(x, "pixelate", 5, g)  # 4 * .25 = 1 px: every channel becomes its mean
    torch.testing.assert_close(pix, mean.expand_as(x))
    hsv = C.rgb_to_hsv(x)
    torch.testing.assert_close(C.hsv_to_rgb(hsv), x, atol=1e-5, rtol=1e-5)
    bright = C.corrupt(x, "brightness", 1)
    torch.testing.assert_close(bright.amax(1), (x.amax(1) + 0.1).clamp(max=1), atol=1e-5, rtol=1e-5)


def test_identity_parameters_return_the_input():
    from hf_ext.timm import corruptions as C

    x = _photo(32)
    from torchvision.transforms.v2.functional import jpeg

    q100 = jpeg((x * 255).round().to(torch.uint8), 100).float() / 255
    q25 = C.corrupt(x, "jpeg_compression", 1)  # quality 25
    assert (q100 - x).abs().mean() < min(
        0.03, 0.5 * float((q25 - x).abs().mean())
    )  # chroma subsampling remains
    assert C._gaussian_filter(x, 0) is x
    torch.testing.assert_close(C._zoom_center(x, 1.0), x, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(C._conv_per_channel(x, torch.ones(1, 1)), x)
    torch.testing.assert_close(C._shift(x, 0, 0), x)


@pytest.mark.parametrize(
    "name",
    [
        "gaussian_noise",
        "shot_noise",
        "impulse_noise",
        "speckle_noise",
        "defocus_blur",
        "gaussian_blur",
        "motion_blur",
        "zoom_blur",
        "brightness",
        "contrast",
        "jpeg_compression",
    ],
)
def test_damage_grows_with_severity(name):
    from hf_ext.timm.corruptions import corrupt

    x = _photo()
    damage = [
        float((corrupt(x, name, s, torch.Generator().manual_seed(0)) - x).abs().mean()) for s in range(1, 6)
    ]
    assert all(a < b for a, b in zip(damage, damage[1:])), damage


def test_transform_in_a_torchvision_compose_and_dataset():
    from torchvision.transforms import v2

    from hf_ext.timm.corruptions import CorruptedDataset, CorruptionTransform

    pipe = v2.Compose(
        [v2.ToDtype(torch.float32, scale=True), CorruptionTransform("gaussian_noise", 2, seed=3)]
    )
    img = (torch.rand(3, 16, 16) * 255).to(torch.uint8)
    out = pipe(img)
    assert out.shape == (3, 16, 16) and out.dtype == torch.float32
    data = [(torch.rand(3, 8, 8), i) for i in range(3)]
    ds = CorruptedDataset(data, "contrast", 5)
    assert len(ds) == 3 and ds[1][1] == 1
    torch.testing.assert_close(ds[2][0], ds[2][0])


def test_bad_inputs():
    from hf_ext.timm.corruptions import CorruptionTransform, corrupt

    x = torch.rand(1, 3, 8, 8)
    with pytest.raises(KeyError, match="unknown corruption 'rain'; valid names: gaussian_noise"):
        corrupt(x, "rain", 1)
    with pytest.raises(ValueError, match="`severity` must be an int in 1..5, got 6"):
        corrupt(x, "fog", 6)
    with pytest.raises(ValueError, match=r"must be in \[0, 1\]"):
        corrupt(x * 255, "fog", 1)
    with pytest.raises(ValueError, match=r"shape \(B, 3, H, W\)"):
        corrupt(torch.rand(3, 8, 8), "fog", 1)
    with pytest.raises(ValueError, match="`severity`"):
        CorruptionTransform("fog", 0)
