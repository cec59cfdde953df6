"""Batched image operations behind the corruption suite, each matching the library call ImageNet-C makes.

Images are ``(B, C, H, W)`` float tensors; every function runs on the input's device.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

Tensor = torch.Tensor


def conv_per_channel(x: Tensor, kernel: Tensor, mode: str = "reflect") -> Tensor:
    """Correlate each channel with a 2-D ``kernel`` of odd size.

    ``mode="reflect"`` mirrors without repeating the edge (OpenCV's default ``BORDER_REFLECT_101``);
    ``"replicate"`` repeats the edge (scikit-image's ``mode="nearest"``). Reflection falls back to replication
    when the kernel is wider than the image.
    """
    kh, kw = kernel.shape
    if mode == "reflect" and max(kh, kw) // 2 >= min(x.shape[-2:]):
        mode = "replicate"
    c = x.shape[1]
    weight = kernel.to(x).expand(c, 1, kh, kw)
    return F.conv2d(F.pad(x, (kw // 2, kw // 2, kh // 2, kh // 2), mode=mode), weight, groups=c)


def gaussian_kernel1d(sigma: float, truncate: float = 4.0) -> Tensor:
    """scipy's normalised 1-D Gaussian: standard deviation ``sigma`` px, radius ``int(truncate * sigma +
    0.5)``."""
    radius = int(truncate * sigma + 0.5)
    t = torch.arange(-radius, radius + 1, dtype=torch.float64)
    k = torch.exp(-0.5 * (t / max(sigma, 1e-12)) ** 2)
    return (k / k.sum()).float()


def gaussian_filter(x: Tensor, sigma: float) -> Tensor:
    """``skimage.filters.gaussian(x, sigma)`` per channel (truncate 4, edge mode ``"nearest"``)."""
    if sigma <= 0:
        return x
    k = gaussian_kernel1d(sigma)
    return conv_per_channel(conv_per_channel(x, k[None, :], "replicate"), k[:, None], "replicate")


def disk_kernel(radius: float, alias_blur: float) -> Tensor:
    """ImageNet-C's defocus kernel: a normalised disk of ``radius`` px on a grid of at least 17 x 17, smoothed
    by OpenCV's ``GaussianBlur`` with a 3 x 3 kernel (5 x 5 when ``radius > 8``) of standard deviation
    ``alias_blur``.
    """
    support = math.floor(radius) if radius > 8 else 8
    t = torch.arange(-support, support + 1, dtype=torch.float64)
    yy, xx = torch.meshgrid(t, t, indexing="ij")
    disk = ((xx**2 + yy**2) <= radius**2).double()
    disk /= disk.sum()
    ksize = 3 if radius <= 8 else 5
    taps = torch.exp(-((torch.arange(ksize) - ksize // 2).double() ** 2) / (2 * alias_blur**2))
    taps /= taps.sum()
    smoothed = conv_per_channel(disk[None, None], taps[:, None] * taps[None, :])
    return smoothed[0, 0].float()


def box_weights(size_in: int, size_out: int) -> Tensor:
    """``(size_out, size_in)`` weights of Pillow's ``Image.BOX`` resampling along one axis (float64).

    Output pixel ``o`` maps to centre ``(o + 0.5) * size_in / size_out``; the input pixels whose centres fall
    in the box of half-width ``0.5 * max(size_in / size_out, 1)`` around it get equal weight, as in Pillow's
    ``precompute_coeffs``.
    """
    scale = size_in / size_out
    filterscale = max(scale, 1.0)
    centre = (torch.arange(size_out, dtype=torch.float64) + 0.5) * scale
    pos = torch.arange(size_in, dtype=torch.float64)[None, :]
    lo = torch.floor(centre - 0.5 * filterscale + 0.5).clamp(min=0)[:, None]
    hi = torch.floor(centre + 0.5 * filterscale + 0.5).clamp(max=size_in)[:, None]
    t = (pos - centre[:, None] + 0.5) / filterscale
    w = ((t > -0.5) & (t <= 0.5) & (pos >= lo) & (pos < hi)).double()
    return w / w.sum(1, keepdim=True)


def box_resize(x: Tensor, size: tuple[int, int]) -> Tensor:
    """Resize ``(B, C, H, W)`` to ``size = (h, w)`` as Pillow's ``resize(..., Image.BOX)`` does (in float,
    without Pillow's rounding to 8 bits between its horizontal and vertical passes)."""
    wy = box_weights(x.shape[-2], size[0]).to(x)
    wx = box_weights(x.shape[-1], size[1]).to(x)
    return wy @ x @ wx.T


def clipped_zoom(x: Tensor, factor: float) -> Tensor:
    """ImageNet-C's ``clipped_zoom``: crop the centre ``ceil(H / factor)`` px, zoom it back by ``factor`` with
    linear interpolation (``scipy.ndimage.zoom(order=1)``: corners aligned) and trim to ``(H, W)``."""
    h, w = x.shape[-2:]
    ch, cw = math.ceil(h / factor), math.ceil(w / factor)
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = x[..., top : top + ch, left : left + cw]
    oh, ow = round(ch * factor), round(cw * factor)
    zoomed = F.interpolate(crop, size=(oh, ow), mode="bilinear", align_corners=True)
    trim_h, trim_w = (oh - h) // 2, (ow - w) // 2
    return zoomed[..., trim_h : trim_h + h, trim_w : trim_w + w]


def glass_shuffle(x: Tensor, delta: int, iterations: int, generator: torch.Generator) -> Tensor:
    """ImageNet-C's glass-blur pixel shuffle, image by image in lockstep (on CPU).

    Each round visits rows ``H - delta .. delta + 1`` and, within each, columns ``W - delta .. delta + 1``
    (descending) and swaps pixel ``(r, c)`` with ``(r + dy, c + dx)``, ``dx, dy`` drawn from ``U{-delta, ...,
    delta - 1}``; swaps are sequential, so a pixel can travel further than ``delta``.
    """
    arr = x.permute(0, 2, 3, 1).cpu().numpy().copy()
    b, h, w, _ = arr.shape
    batch = np.arange(b)
    for _ in range(iterations):
        rows, cols = range(h - delta, delta, -1), range(w - delta, delta, -1)
        shape = (len(rows), len(cols), 2, b)
        offsets = (
            torch.randint(-delta, delta, shape, generator=generator, device=generator.device).cpu().numpy()
        )
        for i, r in enumerate(rows):
            for j, c in enumerate(cols):
                dx, dy = offsets[i, j]
                r2, c2 = r + dy, c + dx
                pixel = arr[batch, r, c]
                arr[batch, r, c] = arr[batch, r2, c2]
                arr[batch, r2, c2] = pixel
    return torch.from_numpy(arr).permute(0, 3, 1, 2).to(x.device)


def shift(x: Tensor, dy: int, dx: int) -> Tensor:
    """Translate by whole pixels, repeating the edge."""
    h, w = x.shape[-2:]
    rows = (torch.arange(h, device=x.device) - dy).clamp(0, h - 1)
    cols = (torch.arange(w, device=x.device) - dx).clamp(0, w - 1)
    return x[..., rows, :][..., cols]


def line_blur(x: Tensor, radius: float, sigma: float, angle_deg: Tensor) -> Tensor:
    """One-sided motion blur: a half-Gaussian (``sigma`` px) over ``2 * radius + 1`` taps, image ``i`` along
    ``angle_deg[i]`` (the numpy motion blur of the ``imagecorruptions`` package, not ImageMagick's)."""
    width = 2 * max(1, round(radius)) + 1
    t = torch.arange(width, dtype=torch.float64)
    taps = torch.exp(-(t**2) / (2 * max(sigma, 1e-6) ** 2))
    kernel = (taps / taps.sum()).tolist()
    out = torch.zeros_like(x)
    for i, image in enumerate(x):
        a = math.radians(float(angle_deg[i]))
        py, px = width * math.sin(a), width * math.cos(a)
        hyp = math.hypot(py, px)
        for j, weight in enumerate(kernel):
            dy, dx = -math.ceil(j * py / hyp - 0.5), -math.ceil(j * px / hyp - 0.5)
            if abs(dy) >= image.shape[-2] or abs(dx) >= image.shape[-1]:
                break
            out[i] += weight * shift(image, dy, dx)
    return out


def rgb_to_hsv(x: Tensor) -> Tensor:
    """RGB ``(..., 3, H, W)`` in [0, 1] to HSV with hue in [0, 1) (scikit-image's ``rgb2hsv``)."""
    r, g, b = x.unbind(-3)
    v = x.amax(-3)
    c = v - x.amin(-3)
    s = torch.where(v > 0, c / v.clamp_min(1e-12), torch.zeros_like(v))
    cc = c.clamp_min(1e-12)
    h = torch.where(v == r, ((g - b) / cc) % 6, torch.where(v == g, (b - r) / cc + 2, (r - g) / cc + 4))
    h = torch.where(c > 0, h / 6, torch.zeros_like(h))
    return torch.stack([h, s, v], -3)


def hsv_to_rgb(x: Tensor) -> Tensor:
    """Inverse of :func:`rgb_to_hsv`."""
    h, s, v = x.unbind(-3)
    i = torch.floor(h * 6)
    f = h * 6 - i
    p, q, t = v * (1 - s), v * (1 - s * f), v * (1 - s * (1 - f))
    sector = i.long() % 6
    choices = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = [torch.zeros_like(v) for _ in range(3)]
    for k, rgb in enumerate(choices):
        mask = sector == k
        for ch in range(3):
            out[ch] = torch.where(mask, rgb[ch], out[ch])
    return torch.stack(out, -3)


def plasma_fractal(size: int, decay: float, generator: torch.Generator) -> Tensor:
    """ImageNet-C's diamond-square plasma fractal ``(size, size)`` in [0, 1] (float64, on CPU).

    ``size`` is a power of two. Each midpoint is the mean of its four neighbours plus ``wibble * U(-wibble,
    wibble)``; ``wibble`` starts at 100 and is divided by ``decay`` per octave.
    """
    if size < 2 or size & (size - 1):
        raise ValueError(f"`size` must be a power of two >= 2, got {size}.")
    grid = torch.zeros(size, size, dtype=torch.float64)
    step, wibble = size, 100.0

    def wibbled_mean(total: Tensor) -> Tensor:
        noise = (torch.rand(total.shape, generator=generator, dtype=torch.float64) * 2 - 1) * wibble
        return total / 4 + wibble * noise

    while step >= 2:
        half = step // 2
        corners = grid[0:size:step, 0:size:step]
        total = corners + corners.roll(-1, 0)
        grid[half:size:step, half:size:step] = wibbled_mean(total + total.roll(-1, 1))
        centres = grid[half:size:step, half:size:step]
        corners = grid[0:size:step, 0:size:step]
        top = centres + centres.roll(1, 0) + corners + corners.roll(-1, 1)
        grid[0:size:step, half:size:step] = wibbled_mean(top)
        left = centres + centres.roll(1, 1) + corners + corners.roll(-1, 0)
        grid[half:size:step, 0:size:step] = wibbled_mean(left)
        step, wibble = half, wibble / decay
    grid -= grid.min()
    return grid / grid.max()
