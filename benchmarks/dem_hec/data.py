"""Data and the shared starting checkpoint of ``hf-ext bench dem_hec``: scikit-learn digits as RGB images, the
offline photos of the observation panel, and a linear probe that fits a new head on frozen features."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hf_ext.dem_hec.core import timm_classifier


def digits_rgb(
    size: int, n_train: int = 1200
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """scikit-learn digits as ``(N, 3, size, size)`` images in [0, 1] (bicubic upsampling), with a fixed
    train/test split: ``(x_train, y_train, x_test, y_test)``."""
    from sklearn.datasets import load_digits

    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32)[:, None] / 16
    x = F.interpolate(x, size=(size, size), mode="bicubic", align_corners=False).clamp(0, 1)
    x = x.expand(-1, 3, -1, -1)
    y = torch.tensor(d.target)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(1234))
    x, y = x[order].contiguous(), y[order]
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def offline_photos(size: int = 224) -> torch.Tensor:
    """The 22 offline photos of the observation panel (scikit-image and scikit-learn samples; grey ones
    replicated to RGB), resized to 256 px on the shorter side and centre-cropped to ``size``."""
    from skimage import data
    from sklearn.datasets import load_sample_images

    names = (
        "astronaut chelsea coffee rocket cat clock colorwheel logo camera coins moon page text brick grass "
        "gravel hubble_deep_field immunohistochemistry retina"
    ).split()
    arrays = [getattr(data, n)() for n in names]
    arrays += [data.stereo_motorcycle()[0], *load_sample_images().images]
    out = []
    for a in arrays:
        t = torch.tensor(a, dtype=torch.float32)
        t = t[..., None].expand(-1, -1, 3) if t.ndim == 2 else t[..., :3]
        t = t.permute(2, 0, 1)[None] / (255.0 if t.max() > 1 else 1.0)
        h, w = t.shape[-2:]
        scale = 256 / min(h, w)
        t = F.interpolate(t, size=(round(h * scale), round(w * scale)), mode="bicubic", align_corners=False)
        top, left = (t.shape[-2] - size) // 2, (t.shape[-1] - size) // 2
        out.append(t[0, :, top : top + size, left : left + size].clamp(0, 1))
    return torch.stack(out)


@torch.no_grad()
def linear_probe(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, steps: int = 300) -> None:
    """Fit the classifier of ``model`` on its frozen pre-logits features of ``inputs`` (normalised images),
    full-batch AdamW, in place."""
    net = timm_classifier(model).eval()
    feats = torch.cat([net.forward_head(net.forward_features(x), pre_logits=True) for x in inputs.split(128)])
    head = net.get_classifier()
    with torch.enable_grad():
        opt = torch.optim.AdamW(head.parameters(), lr=1e-2, weight_decay=1e-3)
        for _ in range(steps):
            opt.zero_grad()
            F.cross_entropy(head(feats), labels).backward()
            opt.step()
