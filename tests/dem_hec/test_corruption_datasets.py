"""ImageNet-C and CIFAR-10-C loaders on tiny trees written by the tests, and evaluation on them."""

from __future__ import annotations

import pytest
import torch

from hf_ext.testing import requires, tiny_timm_model

pytestmark = requires("timm", "metrics")


def test_imagenet_c_layout(imagenet_c_tree):
    from torchvision.transforms import v2

    from hf_ext.dem_hec import ImageNetC

    ds = ImageNetC(
        imagenet_c_tree, "fog", 2, transform=v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, True)])
    )
    assert len(ds) == 6 and ds.classes == ["n01440764", "n01443537"]
    image, label = ds[5]
    assert image.shape == (3, 32, 32) and label == 1
    shifted = ImageNetC(imagenet_c_tree, "fog", 2, class_to_idx={"n01440764": 0, "n01443537": 7, "n99": 3})
    assert shifted[5][1] == 7


def test_cifar10_c_blocks(cifar10_c_tree):
    from torchvision.transforms import v2

    from hf_ext.dem_hec import CIFAR10C

    ds = CIFAR10C(cifar10_c_tree, "contrast", 3, transform=v2.PILToTensor())
    assert len(ds) == 4
    image, label = ds[2]
    assert image.shape == (3, 32, 32) and int(image[0, 0, 0]) == 120 and label == 2  # severity 3 block


def test_loaders_bad_inputs(imagenet_c_tree, cifar10_c_tree, tmp_path):
    from hf_ext.dem_hec import CIFAR10C, ImageNetC

    with pytest.raises(KeyError, match="unknown corruptions"):
        ImageNetC(imagenet_c_tree, "rain", 1)
    with pytest.raises(ValueError, match="`severity` must be an int in"):
        CIFAR10C(cifar10_c_tree, "contrast", 6)
    with pytest.raises(FileNotFoundError, match="no ImageNet-C folder"):
        ImageNetC(imagenet_c_tree, "fog", 5)
    with pytest.raises(FileNotFoundError, match="missing CIFAR-10-C file"):
        CIFAR10C(cifar10_c_tree, "fog", 1)
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        CIFAR10C(tmp_path / "nowhere", "fog", 1)
    with pytest.raises(ValueError, match="not in `class_to_idx`"):
        ImageNetC(imagenet_c_tree, "fog", 1, class_to_idx={"n01440764": 0})


def test_evaluate_on_pre_rendered_imagenet_c(imagenet_c_tree):
    from torch.utils.data import DataLoader
    from torchvision.transforms import v2

    from hf_ext.dem_hec import ImageNetC, evaluate_corruptions

    to_tensor = v2.Compose([v2.ToImage(), v2.ToDtype(torch.float32, True)])
    clean = DataLoader(ImageNetC(imagenet_c_tree, "fog", 1, transform=to_tensor), batch_size=4)
    model = tiny_timm_model("test_efficientnet", num_classes=2)
    rep = evaluate_corruptions(
        model,
        clean,
        ["gaussian_noise", "fog"],
        (1, 2),
        corrupted=lambda c, s: DataLoader(
            ImageNetC(imagenet_c_tree, c, s, transform=to_tensor), batch_size=4
        ),
    )
    assert rep["error"].shape == (2, 2) and set(rep["accuracy"]["fog"]) == {1, 2}
