"""Natural-corruption suite in the style of ImageNet-C, in batched torch.

Every corruption maps a float image batch ``(B, 3, H, W)`` in ``[0, 1]`` to a corrupted batch of the same
shape, on the input's device, with randomness drawn only from an explicit ``torch.Generator``. Severities are
1-5.

[reconstructed] The paper's corruption code is not public. Formulas and severity constants follow the public
ImageNet-C definitions (Hendrycks & Dietterich, 2019) for 224-pixel images. Spatial constants (blur radii and
sigmas, pixel displacements, zoom crops) are scaled by ``min(H, W) / 224`` so a severity means the same
relative blur at any resolution; this scaling is an hf-ext decision. Functions tagged ``exact`` port the
formula and constants; ``approx`` ones are approximations (vectorised glass shuffle, motion blur as a
one-sided line kernel, procedural elastic/snow/frost without ImageNet-C's textures). Numbers from this suite
are **not comparable** to published ImageNet-C results.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from hf_ext._registry import paper

Tensor = torch.Tensor
REFERENCE_SIZE = 224

IMAGENET_C = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
HELD_OUT = ("speckle_noise", "gaussian_blur", "saturate")
FAMILIES = {
    "noise": ("gaussian_noise", "shot_noise", "impulse_noise", "speckle_noise"),
    "blur": ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur", "gaussian_blur"),
    "weather": ("snow", "frost", "fog", "brightness"),
    "digital": ("contrast", "elastic_transform", "pixelate", "jpeg_compression", "saturate"),
}


@dataclass(frozen=True)
class Corruption:
    """One registered corruption: ``fn(x, severity, generator) -> x``, tagged ``exact`` or not."""

    name: str
    fn: Callable[[Tensor, int, torch.Generator], Tensor]
    exact: bool
    family: str


CORRUPTIONS: dict[str, Corruption] = {}


def _register(exact: bool) -> Callable[[Callable[..., Tensor]], Callable[..., Tensor]]:
    def wrap(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
        family = next(f for f, names in FAMILIES.items() if fn.__name__ in names)
        CORRUPTIONS[fn.__name__] = Corruption(fn.__name__, fn, exact, family)
        return fn

    return wrap


def corrupt(x: Tensor, name: str, severity: int, generator: torch.Generator | None = None) -> Tensor:
    """Apply corruption ``name`` at ``severity`` (1-5) to ``x`` of shape ``(B, 3, H, W)`` in ``[0, 1]``.

    Raises:
        KeyError: unknown ``name`` (the message lists the valid names).
        ValueError: ``severity`` outside 1-5, or ``x`` of the wrong shape or range.
    """
    if name not in CORRUPTIONS:
        raise KeyError(f"unknown corruption {name!r}; valid names: {', '.join(CORRUPTIONS)}")
    if not isinstance(severity, int) or not 1 <= severity <= 5:
        raise ValueError(f"`severity` must be an int in 1..5, got {severity!r}.")
    if x.ndim != 4 or x.shape[1] != 3 or not x.is_floating_point():
        raise ValueError(f"`x` must be a float tensor of shape (B, 3, H, W), got {tuple(x.shape)} {x.dtype}.")
    lo, hi = float(x.min()), float(x.max())
    if lo < -1e-3 or hi > 1 + 1e-3:
        raise ValueError(f"`x` must be in [0, 1] (pixel space), found values in [{lo:.3g}, {hi:.3g}].")
    if generator is None:
        generator = torch.Generator(device=x.device).manual_seed(0)
    return CORRUPTIONS[name].fn(x.clamp(0, 1), severity, generator).clamp(0, 1)


def corruption_names(corruptions: str | Sequence[str]) -> list[str]:
    """``"imagenet_c"`` (the 15 canonical corruptions), one name or a list of names, as a checked list.

    Raises:
        KeyError: an unknown name (the message lists the valid names).
    """
    if corruptions == "imagenet_c":
        names = list(IMAGENET_C)
    else:
        names = [corruptions] if isinstance(corruptions, str) else list(corruptions)
    unknown = [n for n in names if n not in CORRUPTIONS]
    if unknown:
        raise KeyError(f"unknown corruptions {unknown}; valid names: {', '.join(CORRUPTIONS)}")
    return names


# ---- helpers -------------------------------------------------------------------------------------------


def _scale(x: Tensor) -> float:
    return min(x.shape[-2:]) / REFERENCE_SIZE


def _randn(x: Tensor, g: torch.Generator, shape: Sequence[int] | None = None) -> Tensor:
    return torch.randn(tuple(shape or x.shape), generator=g, device=x.device, dtype=x.dtype)


def _rand(x: Tensor, g: torch.Generator, shape: Sequence[int] | None = None) -> Tensor:
    return torch.rand(tuple(shape or x.shape), generator=g, device=x.device, dtype=x.dtype)


def _conv_per_channel(x: Tensor, kernel: Tensor) -> Tensor:
    """Convolve each channel with a 2-D ``kernel`` (odd size), reflect padding (replicate when too large)."""
    kh, kw = kernel.shape
    pad = (kw // 2, kw // 2, kh // 2, kh // 2)
    mode = "reflect" if max(kh, kw) // 2 < min(x.shape[-2:]) else "replicate"
    c = x.shape[1]
    weight = kernel.to(x).expand(c, 1, kh, kw)
    return F.conv2d(F.pad(x, pad, mode=mode), weight, groups=c)


def gaussian_kernel1d(sigma: float, truncate: float = 4.0) -> Tensor:
    """Normalised 1-D Gaussian of standard deviation ``sigma`` pixels, radius ``ceil(truncate * sigma)``."""
    radius = max(1, math.ceil(truncate * sigma))
    t = torch.arange(-radius, radius + 1, dtype=torch.float64)
    k = torch.exp(-(t**2) / (2 * max(sigma, 1e-6) ** 2))
    return (k / k.sum()).float()


def _gaussian_filter(x: Tensor, sigma: float) -> Tensor:
    if sigma <= 0:
        return x
    k = gaussian_kernel1d(sigma)
    return _conv_per_channel(_conv_per_channel(x, k[None, :]), k[:, None])


def _zoom_center(x: Tensor, factor: float) -> Tensor:
    """Zoom into the centre by ``factor`` (>= 1) and resample to the original size (bilinear)."""
    b = x.shape[0]
    theta = torch.tensor([[1 / factor, 0, 0], [0, 1 / factor, 0]], dtype=x.dtype, device=x.device)
    grid = F.affine_grid(theta.expand(b, 2, 3), list(x.shape), align_corners=False)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)


def _shift(x: Tensor, dy: int, dx: int) -> Tensor:
    """Translate by whole pixels, repeating the edge (as in the numpy motion blur)."""
    h, w = x.shape[-2:]
    rows = (torch.arange(h, device=x.device) - dy).clamp(0, h - 1)
    cols = (torch.arange(w, device=x.device) - dx).clamp(0, w - 1)
    return x[..., rows, :][..., cols]


def _motion_blur(x: Tensor, radius: float, sigma: float, angle_deg: Tensor) -> Tensor:
    """One-sided line blur: a half-Gaussian (``sigma``) over ``2 * radius + 1`` taps along ``angle_deg``."""
    width = 2 * max(1, round(radius)) + 1
    t = torch.arange(width, dtype=torch.float64)
    taps = torch.exp(-(t**2) / (2 * max(sigma, 1e-6) ** 2))
    kernel = (taps / taps.sum()).tolist()
    out = torch.zeros_like(x)
    for i, image in enumerate(x):
        a = math.radians(float(angle_deg[i]))
        py, px = width * math.sin(a), width * math.cos(a)
        hyp = math.hypot(py, px)
        acc = torch.zeros_like(image)
        for j, weight in enumerate(kernel):
            dy, dx = -math.ceil(j * py / hyp - 0.5), -math.ceil(j * px / hyp - 0.5)
            if abs(dy) >= image.shape[-2] or abs(dx) >= image.shape[-1]:
                break
            acc += weight * _shift(image, dy, dx)
        out[i] = acc
    return out


def rgb_to_hsv(x: Tensor) -> Tensor:
    """RGB ``(..., 3, H, W)`` in [0, 1] to HSV with hue in [0, 1)."""
    r, g, b = x.unbind(-3)
    v, _ = x.max(-3)
    c = v - x.min(-3).values
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
    i = i.long() % 6
    choices = [(v, t, p), (q, v, p), (p, v, t), (p, q, v), (t, p, v), (v, p, q)]
    out = [torch.zeros_like(v) for _ in range(3)]
    for k, rgb in enumerate(choices):
        mask = i == k
        for ch in range(3):
            out[ch] = torch.where(mask, rgb[ch], out[ch])
    return torch.stack(out, -3)


def plasma_fractal(
    size: int, decay: float, generator: torch.Generator, device: torch.device | str = "cpu"
) -> Tensor:
    """Diamond-square plasma fractal ``(size, size)`` in [0, 1]; ``size`` a power of two (ImageNet-C fog)."""
    if size & (size - 1):
        raise ValueError(f"`size` must be a power of two, got {size}.")
    maparray = torch.zeros(size, size, dtype=torch.float64)
    step, wibble = size, 100.0
    while step >= 2:
        half = step // 2
        # squares: centre of each square gets the corner mean plus noise
        corners = maparray[0:size:step, 0:size:step]
        mean = (corners + corners.roll(-1, 0) + corners.roll(-1, 1) + corners.roll(-1, 0).roll(-1, 1)) / 4
        noise = (torch.rand(mean.shape, generator=generator, dtype=torch.float64) - 0.5) * 2 * wibble
        maparray[half:size:step, half:size:step] = mean + noise
        # diamonds: edge midpoints get the mean of their four neighbours plus noise
        centres = maparray[half:size:step, half:size:step]
        corners = maparray[0:size:step, 0:size:step]
        ltsum = centres + centres.roll(1, 1) + corners + corners.roll(-1, 0)
        ttsum = centres + centres.roll(1, 0) + corners + corners.roll(-1, 1)
        n1 = (torch.rand(ltsum.shape, generator=generator, dtype=torch.float64) - 0.5) * 2 * wibble
        n2 = (torch.rand(ttsum.shape, generator=generator, dtype=torch.float64) - 0.5) * 2 * wibble
        maparray[half:size:step, 0:size:step] = ltsum / 4 + n1
        maparray[0:size:step, half:size:step] = ttsum / 4 + n2
        step, wibble = half, wibble / decay
    maparray -= maparray.min()
    return (maparray / maparray.max().clamp_min(1e-12)).float().to(device)


def _plasma_batch(x: Tensor, decay: float, g: torch.Generator) -> Tensor:
    h, w = x.shape[-2:]
    size = 1 << max(h, w, 2).bit_length() if max(h, w) & (max(h, w) - 1) else max(h, w)
    maps = [plasma_fractal(size, decay, _cpu_child(g), x.device)[:h, :w] for _ in range(x.shape[0])]
    return torch.stack(maps)[:, None].to(x.dtype)


def _cpu_child(g: torch.Generator) -> torch.Generator:
    """A CPU generator seeded from ``g`` (the plasma fractal runs in float64 on CPU)."""
    seed = int(torch.randint(0, 2**62, (1,), generator=g, device=g.device))
    return torch.Generator().manual_seed(seed)


# ---- noise ---------------------------------------------------------------------------------------------


@_register(exact=True)
def gaussian_noise(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: ``x + N(0, sigma)``, sigma = .08/.12/.18/.26/.38."""
    return x + _randn(x, g) * (0.08, 0.12, 0.18, 0.26, 0.38)[severity - 1]


@_register(exact=True)
def shot_noise(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: ``Poisson(x * c) / c``, c = 60/25/12/5/3."""
    c = (60, 25, 12, 5, 3)[severity - 1]
    return torch.poisson(x * c, generator=g) / c


@_register(exact=True)
def impulse_noise(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C salt and pepper: each element set to 0 or 1 (half each) w.p. .03/.06/.09/.17/.27."""
    amount = (0.03, 0.06, 0.09, 0.17, 0.27)[severity - 1]
    u, salt = _rand(x, g), _rand(x, g) < 0.5
    return torch.where(u < amount, salt.to(x.dtype), x)


@_register(exact=True)
def speckle_noise(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C held-out: ``x + x * N(0, c)``, c = .15/.2/.35/.45/.6."""
    return x + x * _randn(x, g) * (0.15, 0.2, 0.35, 0.45, 0.6)[severity - 1]


# ---- blur ----------------------------------------------------------------------------------------------


def disk_kernel(radius: float, alias_blur: float) -> Tensor:
    """ImageNet-C defocus kernel: a normalised disk of ``radius`` px smoothed by a small Gaussian."""
    support = max(8, math.ceil(radius)) if radius > 8 else 8
    t = torch.arange(-support, support + 1, dtype=torch.float64)
    yy, xx = torch.meshgrid(t, t, indexing="ij")
    disk = ((xx**2 + yy**2) <= radius**2).double()
    disk /= disk.sum()
    ksize = 3 if radius <= 8 else 5
    taps = torch.exp(-((torch.arange(ksize) - ksize // 2).double() ** 2) / (2 * max(alias_blur, 1e-6) ** 2))
    taps /= taps.sum()
    disk = F.conv2d(
        F.pad(disk[None, None], (ksize // 2,) * 4, mode="reflect"),
        (taps[:, None] * taps[None, :])[None, None],
    )
    return disk[0, 0].float()


@_register(exact=True)
def defocus_blur(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: disk radius 3/4/6/8/10 with alias blur .1/.5/.5/.5/.5 (radius scaled to the image size)."""
    radius, alias = ((3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5))[severity - 1]
    return _conv_per_channel(x, disk_kernel(max(radius * _scale(x), 1.0), alias))


@_register(exact=True)
def gaussian_blur(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C held-out: Gaussian sigma 1/2/3/4/6 px (scaled to the image size)."""
    return _gaussian_filter(x, (1, 2, 3, 4, 6)[severity - 1] * _scale(x))


@_register(exact=False)
def glass_blur(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C glass blur, approximated: Gaussian (sigma), then ``iterations`` rounds of random local pixel
    displacement up to ``max_delta`` px (a vectorised gather instead of sequential swaps), then Gaussian
    again. (sigma, max_delta, iterations) = (.7,1,2)/(.9,2,1)/(1,2,3)/(1.1,3,2)/(1.5,4,2)."""
    sigma, delta, iterations = ((0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2))[severity - 1]
    s = _scale(x)
    delta = max(1, round(delta * s))
    x = _gaussian_filter(x, sigma * s)
    b, _, h, w = x.shape
    for _ in range(iterations):
        dy = torch.randint(-delta, delta + 1, (b, h, w), generator=g, device=x.device)
        dx = torch.randint(-delta, delta + 1, (b, h, w), generator=g, device=x.device)
        rows = (torch.arange(h, device=x.device)[None, :, None] + dy).clamp(0, h - 1)
        cols = (torch.arange(w, device=x.device)[None, None, :] + dx).clamp(0, w - 1)
        flat = (rows * w + cols).view(b, 1, h * w).expand(-1, 3, -1)
        x = x.flatten(2).gather(2, flat).view_as(x)
    return _gaussian_filter(x, sigma * s)


@_register(exact=False)
def motion_blur(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C motion blur as a one-sided Gaussian line kernel (imagecorruptions' numpy form, not Wand's):
    (radius, sigma) = (10,3)/(15,5)/(15,8)/(15,12)/(20,15) px, scaled; angle uniform in [-45, 45] deg per
    image."""
    radius, sigma = ((10, 3), (15, 5), (15, 8), (15, 12), (20, 15))[severity - 1]
    angle = (torch.rand(x.shape[0], generator=g, device=g.device) * 90 - 45).cpu()
    s = _scale(x)
    return _motion_blur(x, radius * s, sigma * s, angle)


@_register(exact=True)
def zoom_blur(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: mean of the input and centre zooms 1..1.11 step .01 / ..1.16 .01 / ..1.21 .02 / ..1.26 .02
    / ..1.31 .03 (zoom factors are resolution free)."""
    stop, step = ((1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03))[severity - 1]
    factors = torch.arange(1.0, stop - 1e-9, step).tolist()
    out = x.clone()
    for z in factors:
        out += _zoom_center(x, z)
    return out / (len(factors) + 1)


# ---- weather -------------------------------------------------------------------------------------------


@_register(exact=False)
def snow(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C snow, approximated: a thresholded, zoomed Gaussian snow layer, motion-blurred along an angle
    in [-135, -45] deg, added with its 180-degree rotation to a brightened image. Constants as ImageNet-C."""
    loc, scale, zoom, thresh, radius, sigma, mix = (
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8),
        (0.2, 0.3, 2, 0.5, 12, 4, 0.7),
        (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
        (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    )[severity - 1]
    b, _, h, w = x.shape
    layer = loc + scale * _randn(x, g, (b, 1, h, w))
    layer = _zoom_center(layer, zoom)
    layer = torch.where(layer < thresh, torch.zeros_like(layer), layer)
    angle = (torch.rand(b, generator=g, device=g.device) * 90 - 135).cpu()
    s = _scale(x)
    layer = _motion_blur(layer, radius * s, sigma * s, angle)
    gray = (0.299 * x[:, 0:1] + 0.587 * x[:, 1:2] + 0.114 * x[:, 2:3]) * 1.5 + 0.5
    x = mix * x + (1 - mix) * torch.maximum(x, gray)
    return x + layer + layer.flip(-1, -2)


@_register(exact=False)
def frost(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C frost, approximated: ImageNet-C blends ``c0 * x + c1 * frost_photo`` with (c0, c1) =
    (1,.4)/(.8,.6)/(.7,.7)/(.65,.7)/(.6,.75); the frost photographs are not shipped, so the texture is a
    procedural ice pattern (a sharpened plasma fractal, bluish white) with the same blend."""
    c0, c1 = ((1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75))[severity - 1]
    base = _plasma_batch(x, 1.6, g)
    crystals = (base - _gaussian_filter(base, 2.0 * max(_scale(x), 0.25))).abs()
    texture = (0.35 * base + 4.0 * crystals).clamp(0, 1)
    tint = torch.tensor([0.85, 0.92, 1.0], dtype=x.dtype, device=x.device).view(1, 3, 1, 1)
    return c0 * x + c1 * texture * tint


@_register(exact=True)
def fog(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: ``(x + c0 * plasma(decay=c1)) * max(x) / (max(x) + c0)``, (c0, c1) =
    (1.5,2)/(2,2)/(2.5,1.7)/(2.5,1.5)/(3,1.4); ``max`` per image."""
    c0, c1 = ((1.5, 2), (2, 2), (2.5, 1.7), (2.5, 1.5), (3, 1.4))[severity - 1]
    peak = x.amax(dim=(1, 2, 3), keepdim=True)
    return (x + c0 * _plasma_batch(x, c1, g)) * peak / (peak + c0)


@_register(exact=True)
def brightness(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: HSV value + .1/.2/.3/.4/.5, clipped."""
    hsv = rgb_to_hsv(x)
    hsv[:, 2] = (hsv[:, 2] + (0.1, 0.2, 0.3, 0.4, 0.5)[severity - 1]).clamp(0, 1)
    return hsv_to_rgb(hsv)


@_register(exact=True)
def saturate(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C held-out: HSV saturation ``s * c0 + c1``, (.3,0)/(.1,0)/(2,0)/(5,.1)/(20,.2), clipped."""
    c0, c1 = ((0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2))[severity - 1]
    hsv = rgb_to_hsv(x)
    hsv[:, 1] = (hsv[:, 1] * c0 + c1).clamp(0, 1)
    return hsv_to_rgb(hsv)


# ---- digital -------------------------------------------------------------------------------------------


@_register(exact=True)
def contrast(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: ``(x - mean) * c + mean`` with the per-channel spatial mean, c = .4/.3/.2/.1/.05."""
    mean = x.mean(dim=(2, 3), keepdim=True)
    return (x - mean) * (0.4, 0.3, 0.2, 0.1, 0.05)[severity - 1] + mean


@_register(exact=False)
def elastic_transform(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C elastic transform, approximated: a smooth random displacement field (uniform noise on a
    coarse grid of spacing ``sigma``, bicubically upsampled) of amplitude ``alpha`` plus a random affine
    jitter of ``affine`` px; (alpha, sigma, affine) relative to the image size follow ImageNet-C's
    (2,.7,.1)/(2,.08,.2)/(.05,.01,.02)/(.07,.01,.02)/(.12,.01,.02)."""
    alpha, sigma, affine = (
        (2, 0.7, 0.1),
        (2, 0.08, 0.2),
        (0.05, 0.01, 0.02),
        (0.07, 0.01, 0.02),
        (0.12, 0.01, 0.02),
    )[severity - 1]
    b, _, h, w = x.shape
    size = min(h, w)
    cells = max(2, round(1 / sigma))
    coarse = _rand(x, g, (b, 2, cells, cells)) * 2 - 1
    field = F.interpolate(coarse, size=(h, w), mode="bicubic", align_corners=True)
    # a uniform field smoothed by a Gaussian of std sigma*size has amplitude ~ 1/(sigma*size);
    # ImageNet-C scales by alpha*size
    field = field * alpha / max(sigma * size, 1.0) * 2
    jitter = (_rand(x, g, (b, 2, 1, 1)) * 2 - 1) * affine * 2
    field = field + jitter
    ys, xs = torch.meshgrid(
        torch.linspace(-1, 1, h, device=x.device, dtype=x.dtype),
        torch.linspace(-1, 1, w, device=x.device, dtype=x.dtype),
        indexing="ij",
    )
    grid = torch.stack([xs, ys], -1)[None] + field.permute(0, 2, 3, 1)
    return F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=True)


@_register(exact=True)
def pixelate(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: box downscale by .6/.5/.4/.3/.25, then nearest-neighbour upscale."""
    c = (0.6, 0.5, 0.4, 0.3, 0.25)[severity - 1]
    h, w = x.shape[-2:]
    small = F.interpolate(x, size=(max(1, int(h * c)), max(1, int(w * c))), mode="area")
    return F.interpolate(small, size=(h, w), mode="nearest")


@_register(exact=True)
def jpeg_compression(x: Tensor, severity: int, g: torch.Generator) -> Tensor:
    """ImageNet-C: JPEG at quality 25/18/15/10/7 (torchvision ``jpeg`` on uint8; runs on CPU)."""
    from torchvision.transforms.v2.functional import jpeg

    quality = (25, 18, 15, 10, 7)[severity - 1]
    out = jpeg((x * 255).round().to(torch.uint8).cpu(), quality)
    return out.to(device=x.device, dtype=x.dtype) / 255


# ---- torchvision / dataset adapters --------------------------------------------------------------------


class CorruptionTransform(torch.nn.Module):
    """A transform applying one corruption to a ``(3, H, W)`` or ``(B, 3, H, W)`` float image in ``[0, 1]``.

    Works inside a torchvision v2 ``Compose`` (after ``ToDtype(torch.float32, scale=True)``). Each call draws
    from the transform's own generator, seeded once, so a pipeline is reproducible.

    Args:
        name: corruption name (see ``CORRUPTIONS``).
        severity: 1-5.
        seed: seed of the transform's generator.
    """

    _paper = paper("dem_hec")

    def __init__(self, name: str, severity: int, seed: int = 0) -> None:
        super().__init__()
        corrupt(torch.zeros(1, 3, 8, 8), name, severity)  # validates name and severity now
        self.name, self.severity = name, severity
        self.generator = torch.Generator().manual_seed(seed)

    def forward(self, img: Tensor) -> Tensor:
        batched = img.ndim == 4
        out = corrupt(img if batched else img[None], self.name, self.severity, self.generator)
        return out if batched else out[0]

    def extra_repr(self) -> str:
        return f"name={self.name!r}, severity={self.severity}"


class CorruptedDataset(torch.utils.data.Dataset):
    """A dataset of ``(image[3, H, W] in [0, 1], label)`` pairs with item ``i`` corrupted deterministically.

    The corruption of item ``i`` uses a generator seeded with ``seed + i``, so it does not depend on the order
    in which a ``DataLoader`` reads items.
    """

    _paper = paper("dem_hec")

    def __init__(self, dataset: torch.utils.data.Dataset, name: str, severity: int, seed: int = 0) -> None:
        corrupt(torch.zeros(1, 3, 8, 8), name, severity)
        self.dataset, self.name, self.severity, self.seed = dataset, name, severity, seed

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]

    def __getitem__(self, i: int) -> tuple[Tensor, object]:
        img, label = self.dataset[i]
        g = torch.Generator().manual_seed(self.seed + i)
        return corrupt(img[None], self.name, self.severity, g)[0], label
