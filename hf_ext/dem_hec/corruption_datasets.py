"""Datasets of the published corruption benchmarks, read from their released files.

* :class:`ImageNetC`: the ImageNet-C folder layout ``<root>/<corruption>/<severity>/<wnid>/*.JPEG``.
* :class:`CIFAR10C`: CIFAR-10-C's ``<root>/<corruption>.npy`` (50 000 x 32 x 32 x 3 uint8, severities 1-5 in
  blocks of 10 000) with ``<root>/labels.npy``.

Both follow torchvision's dataset conventions (a PIL image through ``transform``, an int label through
``target_transform``), so timm's ``create_loader`` and the ``transform`` of ``timm.data.create_transform``
work with them. Pass them to :func:`~hf_ext.dem_hec.robust_eval.evaluate_corruptions` through its
``corrupted`` argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from torchvision.datasets import ImageFolder
from torchvision.datasets.vision import VisionDataset

from hf_ext._registry import paper
from hf_ext._validation import check_int
from hf_ext.dem_hec.corruptions import corruption_names


def _check(root: str | Path, corruption: str, severity: int) -> Path:
    corruption_names([corruption])
    check_int("severity", severity, low=1, high=5)
    root = Path(root)
    if not root.is_dir():
        raise FileNotFoundError(f"`root` {str(root)!r} is not a directory.")
    return root


class ImageNetC(ImageFolder):
    """One corruption and severity of ImageNet-C: ``<root>/<corruption>/<severity>/<wnid>/*.JPEG``.

    Labels index the sorted class folders, as ImageNet's own do when all 1000 are present; pass
    ``class_to_idx`` (e.g. from the clean validation ``ImageFolder``) when a tree holds fewer classes.

    Args:
        root: the ImageNet-C directory (holding one folder per corruption).
        corruption: corruption name, e.g. ``"gaussian_noise"``.
        severity: 1-5.
        transform: applied to the PIL image, e.g. ``timm.data.create_transform(**data_config)``.
        target_transform: applied to the label.
        class_to_idx: wnid -> label, *optional*, defaults to the sorted folders of this severity.

    Raises:
        KeyError: unknown ``corruption``.
        ValueError: ``severity`` outside 1-5.
        FileNotFoundError: ``root`` or the severity folder is missing.
    """

    _paper = paper("dem_hec")

    def __init__(
        self,
        root: str | Path,
        corruption: str,
        severity: int,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
        class_to_idx: Mapping[str, int] | None = None,
    ) -> None:
        folder = _check(root, corruption, severity) / corruption / str(severity)
        if not folder.is_dir():
            raise FileNotFoundError(
                f"no ImageNet-C folder {str(folder)!r} (expected <root>/<corruption>/<1-5>)."
            )
        self._class_to_idx = dict(class_to_idx) if class_to_idx is not None else None
        super().__init__(str(folder), transform=transform, target_transform=target_transform)
        self.corruption, self.severity = corruption, severity

    def find_classes(self, directory: str | Path) -> tuple[list[str], dict[str, int]]:
        if self._class_to_idx is None:
            return super().find_classes(directory)
        present = sorted(p.name for p in Path(directory).iterdir() if p.is_dir())
        unknown = [c for c in present if c not in self._class_to_idx]
        if unknown:
            raise ValueError(f"class folders {unknown[:5]} are not in `class_to_idx`.")
        return present, {c: self._class_to_idx[c] for c in present}


class CIFAR10C(VisionDataset):
    """One corruption and severity of CIFAR-10-C from ``<root>/<corruption>.npy`` and ``<root>/labels.npy``.

    The arrays are memory-mapped; severity ``s`` is the ``s``-th of five equal blocks.

    Args:
        root: the CIFAR-10-C directory.
        corruption: corruption name, e.g. ``"gaussian_noise"``.
        severity: 1-5.
        transform: applied to the PIL image (e.g. ``torchvision.transforms.v2.ToImage()``).
        target_transform: applied to the label.

    Raises:
        KeyError: unknown ``corruption``.
        ValueError: ``severity`` outside 1-5, or arrays that do not split into five blocks.
        FileNotFoundError: a missing ``.npy`` file.
    """

    _paper = paper("dem_hec")

    def __init__(
        self,
        root: str | Path,
        corruption: str,
        severity: int,
        transform: Callable[[Any], Any] | None = None,
        target_transform: Callable[[int], Any] | None = None,
    ) -> None:
        path = _check(root, corruption, severity)
        super().__init__(str(path), transform=transform, target_transform=target_transform)
        files = [path / f"{corruption}.npy", path / "labels.npy"]
        missing = [str(f) for f in files if not f.is_file()]
        if missing:
            raise FileNotFoundError(f"missing CIFAR-10-C file(s): {missing}.")
        images, labels = (np.load(f, mmap_mode="r") for f in files)
        if len(images) != len(labels) or len(images) % 5 or images.ndim != 4 or images.shape[-1] != 3:
            raise ValueError(
                f"expected (5 * N, H, W, 3) images and 5 * N labels, got {images.shape} and {labels.shape}."
            )
        block = len(images) // 5
        self.images = images[(severity - 1) * block : severity * block]
        self.labels = labels[(severity - 1) * block : severity * block]
        self.corruption, self.severity = corruption, severity

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        image: Any = Image.fromarray(np.asarray(self.images[index]))
        label: Any = int(self.labels[index])
        if self.transform is not None:
            image = self.transform(image)
        if self.target_transform is not None:
            label = self.target_transform(label)
        return image, label
