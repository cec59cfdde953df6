# mypy: disable-error-code="attr-defined"
# (diffusers exposes registered modules and config fields as dynamic attributes)
"""``LFQAutoencoder``: a small MAGVIT-v2-style image tokenizer with a lookup-free quantiser (diffusers model).

[paper: the visual tokens come from an LFQ tokenizer; architecture reconstructed] A patch-local encoder (a
stride-``f`` patch embedding, ``f = downsample``, then per-position layers) maps each ``f x f`` patch to
``codebook_bits`` latent channels, each position is sign-quantised
(:func:`~hf_ext.viewmask.core.lfq_quantize`) to one of ``2^codebook_bits`` codes, and a
convolutional decoder (3x3 convs at token resolution, then a stride-``f`` transposed conv) maps codes back
to pixels. The patch-local encoder keeps one code per patch content, so identical patches share a
token; MAGVIT-v2's encoder is a deeper convolutional stack. Images are ``[B, 3, H, W]`` in ``[-1, 1]``
(diffusers' convention). MAGVIT-v2's GAN and perceptual losses are left out of this CPU-sized tokenizer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from diffusers.utils import BaseOutput
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int, check_power_of_two
from hf_ext.viewmask.core import (
    lfq_aux_loss,
    lfq_indices_to_codes,
    lfq_quantize,
    lfq_straight_through,
)


@dataclass
class LFQAutoencoderOutput(BaseOutput):
    """Output of :meth:`LFQAutoencoder.forward`.

    Args:
        sample (`torch.Tensor`): reconstruction ``[B, 3, H, W]``.
        indices (`torch.Tensor`): code indices ``[B, H/f, W/f]`` (``f`` = ``downsample``).
        aux_loss (`torch.Tensor`): the LFQ auxiliary loss (scalar).
    """

    sample: torch.Tensor
    indices: torch.Tensor
    aux_loss: torch.Tensor


class LFQAutoencoder(ModelMixin, ConfigMixin):  # type: ignore[misc]  # diffusers' own pattern
    """Image tokenizer: conv encoder, lookup-free quantiser, conv decoder.

    Args:
        in_channels (`int`, *optional*, defaults to 3): image channels.
        codebook_bits (`int`, *optional*, defaults to 8): latent channels ``d``; codebook size ``2^d``.
        downsample (`int`, *optional*, defaults to 4): spatial downsampling factor (a power of two).
        hidden_channels (`int`, *optional*, defaults to 64): conv width (a multiple of 8).
        entropy_loss_weight (`float`, *optional*, defaults to 0.1): weight of the LFQ entropy loss.
        commitment_loss_weight (`float`, *optional*, defaults to 0.25): weight of the commitment loss.
        diversity_gamma (`float`, *optional*, defaults to 1.0): weight of the codebook-entropy term.
        inv_temperature (`float`, *optional*, defaults to 100.0): inverse temperature of ``p(c|z)``.

    Example:
        >>> vq = LFQAutoencoder(codebook_bits=4, downsample=4, hidden_channels=16)
        >>> vq.tokenize(torch.zeros(1, 3, 8, 8)).shape
        torch.Size([1, 2, 2])
    """

    _paper = paper("viewmask")

    @register_to_config
    def __init__(
        self,
        in_channels: int = 3,
        codebook_bits: int = 8,
        downsample: int = 4,
        hidden_channels: int = 64,
        entropy_loss_weight: float = 0.1,
        commitment_loss_weight: float = 0.25,
        diversity_gamma: float = 1.0,
        inv_temperature: float = 100.0,
    ) -> None:
        super().__init__()
        check_int("in_channels", in_channels, low=1)
        check_int("codebook_bits", codebook_bits, low=1, high=16)
        check_power_of_two("downsample", downsample)
        check_int("hidden_channels", hidden_channels, low=8)
        if hidden_channels % 8:
            raise ValueError(f"`hidden_channels` must be a multiple of 8, got {hidden_channels}.")
        for name, value in (
            ("entropy_loss_weight", entropy_loss_weight),
            ("commitment_loss_weight", commitment_loss_weight),
            ("diversity_gamma", diversity_gamma),
        ):
            check_float(name, value, low=0)
        check_float("inv_temperature", inv_temperature, low=0, low_open=True)
        h, f = hidden_channels, downsample
        self.encoder = nn.Sequential(
            nn.Conv2d(in_channels, h, f, stride=f),
            nn.SiLU(),
            nn.Conv2d(h, h, 1),
            nn.SiLU(),
            nn.Conv2d(h, codebook_bits, 1),
        )
        self.decoder = nn.Sequential(
            nn.Conv2d(codebook_bits, h, 3, padding=1),
            nn.SiLU(),
            nn.Conv2d(h, h, 3, padding=1),
            nn.SiLU(),
            nn.ConvTranspose2d(h, in_channels, f, stride=f),
        )

    @property
    def codebook_size(self) -> int:
        """``2^codebook_bits``."""
        return int(2**self.config.codebook_bits)

    def check_images(self, images: torch.Tensor, name: str = "image") -> None:
        """Raise ``ValueError`` naming ``name`` unless ``images`` is ``[B, C, H, W]`` with ``C`` =
        ``in_channels`` and ``H``, ``W`` divisible by ``downsample``."""
        f, c = self.config.downsample, self.config.in_channels
        if images.ndim != 4 or images.shape[1] != c:
            raise ValueError(
                f"`{name}` must be [B, {c}, H, W] ({c}-channel), got shape {tuple(images.shape)}."
            )
        if images.shape[-1] % f or images.shape[-2] % f:
            raise ValueError(
                f"`{name}` height and width must be divisible by the tokenizer's downsample={f}, got "
                f"{tuple(images.shape[-2:])}."
            )

    def encode(self, images: torch.Tensor) -> torch.Tensor:
        """Continuous latents ``z`` ``[B, H/f, W/f, d]`` of images ``[B, 3, H, W]``."""
        self.check_images(images)
        return self.encoder(images).permute(0, 2, 3, 1)

    def tokenize(self, images: torch.Tensor) -> torch.Tensor:
        """Code indices ``[B, H/f, W/f]`` (long, in ``[0, 2^d)``) of images ``[B, 3, H, W]``."""
        return lfq_quantize(self.encode(images))[1]

    def decode_codes(self, codes: torch.Tensor) -> torch.Tensor:
        """Images ``[B, 3, H, W]`` from codes ``[B, h, w, d]`` (``+-1`` or straight-through latents)."""
        return self.decoder(codes.permute(0, 3, 1, 2))

    def decode_indices(self, indices: torch.Tensor) -> torch.Tensor:
        """Images ``[B, 3, h*f, w*f]`` from code indices ``[B, h, w]``."""
        if int(indices.min()) < 0 or int(indices.max()) >= self.codebook_size:
            raise ValueError(
                f"`indices` must lie in [0, {self.codebook_size}), got values in "
                f"[{int(indices.min())}, {int(indices.max())}]."
            )
        codes = lfq_indices_to_codes(indices, self.config.codebook_bits)
        return self.decode_codes(codes.to(self.dtype))

    def forward(self, images: torch.Tensor, return_dict: bool = True) -> LFQAutoencoderOutput | tuple:
        """Encode, quantise (straight-through) and decode ``images`` ``[B, 3, H, W]``."""
        z = self.encode(images)
        q, indices = lfq_quantize(z)
        cfg = self.config
        aux, _ = lfq_aux_loss(
            z,
            q,
            entropy_weight=cfg.entropy_loss_weight,
            commitment_weight=cfg.commitment_loss_weight,
            diversity_gamma=cfg.diversity_gamma,
            inv_temperature=cfg.inv_temperature,
        )
        sample = self.decode_codes(lfq_straight_through(z, q))
        out = LFQAutoencoderOutput(sample=sample, indices=indices, aux_loss=aux)
        return out if return_dict else out.to_tuple()
