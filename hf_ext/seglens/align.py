"""``align_saes``: match latents between two SAEs by decoder cosine (one model) or by the correlation of
their latent maps over shared images (two models, runs or architectures)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_choice, check_float
from hf_ext.seglens import core
from hf_ext.seglens.activations import _forward, capture_site, to_rows
from hf_ext.seglens.sae import SparseAutoencoder

METHODS = ("decoder_cosine", "activation_correlation")
DEFAULT_THRESHOLD = {"decoder_cosine": 0.7, "activation_correlation": 0.5}


@dataclass
class LatentAlignment:
    """Hungarian matching of latents of SAE ``a`` to SAE ``b``.

    Attributes:
        method: ``"decoder_cosine"`` or ``"activation_correlation"``.
        threshold: a matched pair is *shared* when its score is at least this.
        score: ``(n_a, n_b)`` cosine or Pearson matrix.
        pairs: ``(P, 2)`` matched ``(latent_a, latent_b)`` indices, and ``pair_scores`` ``(P,)``.
    """

    method: str
    threshold: float
    score: torch.Tensor
    pairs: torch.Tensor
    pair_scores: torch.Tensor

    _paper = paper("seglens")

    @property
    def shared_pairs(self) -> torch.Tensor:
        """Matched pairs whose score reaches the threshold, ``(S, 2)``."""
        return self.pairs[self.pair_scores >= self.threshold]

    @property
    def shared_a(self) -> list[int]:
        return sorted(self.shared_pairs[:, 0].tolist())

    @property
    def shared_b(self) -> list[int]:
        return sorted(self.shared_pairs[:, 1].tolist())

    @property
    def specific_a(self) -> list[int]:
        """Latents of ``a`` without a shared partner in ``b``."""
        return sorted(set(range(self.score.shape[0])) - set(self.shared_a))

    @property
    def specific_b(self) -> list[int]:
        return sorted(set(range(self.score.shape[1])) - set(self.shared_b))

    @property
    def shared_fraction(self) -> float:
        """Shared pairs over the smaller latent count."""
        return len(self.shared_pairs) / min(self.score.shape)


def align_saes(
    sae_a: SparseAutoencoder,
    sae_b: SparseAutoencoder,
    method: str = "activation_correlation",
    *,
    models: tuple[nn.Module, nn.Module] | None = None,
    images: torch.Tensor | None = None,
    threshold: float | None = None,
) -> LatentAlignment:
    """Match the latents of two SAEs [paper: cross-model and cross-dataset alignment; rule reconstructed].

    ``decoder_cosine`` compares decoder columns; it is valid only when both SAEs read the same model's
    activation space (same ``d_in`` and ``model_id``). ``activation_correlation`` runs ``models[0]`` and
    ``models[1]`` on the same ``images`` ``(B, C, H, W)``, resizes both latent maps to the coarser grid
    (bilinear) and correlates every latent pair over all positions (Pearson).

    Args:
        sae_a: a fitted SAE (its ``site`` names the hooked module).
        sae_b: the other fitted SAE.
        method: ``"decoder_cosine"`` or ``"activation_correlation"``.
        models: the models ``sae_a`` and ``sae_b`` read (``activation_correlation`` only).
        images: shared images (``activation_correlation`` only).
        threshold: shared-pair threshold; 0.7 (cosine) or 0.5 (correlation) by default.
    """
    method = check_choice("method", method, METHODS)
    tau = check_float(
        "threshold", DEFAULT_THRESHOLD[method] if threshold is None else threshold, low=-1, high=1
    )
    sae_a._require_fitted()
    sae_b._require_fitted()
    if method == "decoder_cosine":
        if sae_a.d_in != sae_b.d_in or sae_a.model_id != sae_b.model_id:
            raise ValueError(
                "`method='decoder_cosine'` needs SAEs of one model's activation space, got d_in "
                f"{sae_a.d_in} vs {sae_b.d_in} and model_id {sae_a.model_id!r} vs {sae_b.model_id!r}; "
                "use method='activation_correlation' with shared images"
            )
        score = (sae_a.W_dec.T @ sae_b.W_dec).detach()
    else:
        if images is None or len(images) == 0:
            raise ValueError("`images` must hold shared images for method='activation_correlation', got none")
        if models is None or len(models) != 2:
            raise ValueError(
                "`models` must be the pair (model_a, model_b) for method='activation_correlation'"
            )
        maps_a = latent_maps(models[0], sae_a, images)
        maps_b = latent_maps(models[1], sae_b, images)
        grid = min(
            (int(maps_a.shape[-2]), int(maps_a.shape[-1])),
            (int(maps_b.shape[-2]), int(maps_b.shape[-1])),
            key=lambda s: s[0] * s[1],
        )
        rows_a = to_rows(_resize(maps_a, grid))
        rows_b = to_rows(_resize(maps_b, grid))
        score = core.pearson_matrix(rows_a.double(), rows_b.double()).float()
    rows, cols = core.match_latents(score.numpy())
    pairs = torch.as_tensor(np.stack([rows, cols], 1), dtype=torch.long)
    return LatentAlignment(method, tau, score, pairs, score[pairs[:, 0], pairs[:, 1]])


@torch.no_grad()
def latent_maps(model: nn.Module, sae: SparseAutoencoder, images: torch.Tensor) -> torch.Tensor:
    """SAE codes of ``model`` at ``sae.site`` as maps ``(B, n_latents, h, w)`` (rank-4 sites)."""
    was_training = model.training
    model.eval()
    try:
        with capture_site(model, sae.site) as seen:
            _forward(model, images)
    finally:
        model.train(was_training)
    a = seen[-1]
    if a.dim() != 4:
        raise ValueError(f"`sae.site` {sae.site!r} must output (B, C, H, W) maps, got {tuple(a.shape)}")
    z = sae.encode(to_rows(a))
    b, _, h, w = a.shape
    return z.reshape(b, h, w, -1).permute(0, 3, 1, 2)


def _resize(maps: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
    if tuple(maps.shape[-2:]) == tuple(grid):
        return maps
    return F.interpolate(maps, size=grid, mode="bilinear", align_corners=False, antialias=True)


def backbone(alignments: list[LatentAlignment]) -> list[int]:
    """Latents of the common first SAE that are shared in every alignment of the list."""
    sets = [set(al.shared_a) for al in alignments]
    return sorted(set.intersection(*sets)) if sets else []
