"""Tiny image trees written by the tests: an image folder (train/validation), ImageNet-C and CIFAR-10-C."""

from __future__ import annotations

import numpy as np
import pytest


def _write_images(folder, n, seed, size=32, ext="png"):
    from PIL import Image

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for i in range(n):
        Image.fromarray(rng.integers(0, 256, (size, size, 3), dtype=np.uint8)).save(folder / f"img{i}.{ext}")


@pytest.fixture
def image_folder(tmp_path):
    """``<root>/{train,validation}/<class>/*.png``: 3 classes, 4 train and 2 validation images each."""
    for split, n in (("train", 4), ("validation", 2)):
        for c in ("n01", "n02", "n03"):
            _write_images(tmp_path / "folder" / split / c, n, seed=hash((split, c)) % 1000)
    return tmp_path / "folder"


@pytest.fixture
def imagenet_c_tree(tmp_path):
    """``<root>/<corruption>/<severity>/<wnid>/*.JPEG`` for two corruptions x two severities x two classes."""
    root = tmp_path / "imagenet-c"
    for corruption in ("gaussian_noise", "fog"):
        for severity in (1, 2):
            for k, wnid in enumerate(("n01440764", "n01443537")):
                _write_images(root / corruption / str(severity) / wnid, 3, seed=k, ext="JPEG")
    return root


@pytest.fixture
def cifar10_c_tree(tmp_path):
    """``<root>/<corruption>.npy`` (5 x 4 images; the pixel value encodes the severity) and ``labels.npy``."""
    root = tmp_path / "cifar-10-c"
    root.mkdir()
    images = np.repeat(np.arange(1, 6, dtype=np.uint8) * 40, 4)[:, None, None, None] * np.ones(
        (1, 32, 32, 3), np.uint8
    )
    np.save(root / "contrast.npy", images)
    np.save(root / "labels.npy", np.tile(np.arange(4, dtype=np.uint8), 5))
    return root
