"""``SparseAutoencoder``: BatchTopK / TopK / L1 SAE on activation rows, with dead-latent resampling,
reconstruction and sparsity metrics, and ``save_pretrained`` / ``from_pretrained`` (safetensors + JSON)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from hf_ext._registry import paper
from hf_ext.seglens import core
from hf_ext.seglens.config import SAEConfig

CONFIG_NAME = "sae_config.json"
WEIGHTS_NAME = "sae.safetensors"


class SparseAutoencoder(nn.Module):
    """A sparse autoencoder of activation rows ``(M, d_in)`` into ``n_latents`` codes [reconstructed].

    Inputs are normalised with statistics fitted on the training rows (per-channel mean, one global scale
    so that ``E|a|^2 = d_in``); :meth:`encode` takes and :meth:`decode` returns original units.
    ``variant="batchtopk"`` keeps the top ``k * B`` codes of a training batch and, at inference, the codes
    above a threshold: the running mean of the smallest kept code during training, re-estimated with the
    final weights at the end of :meth:`fit` (``mode="threshold"``; ``mode="topk"`` keeps exactly ``k``).

    Args:
        config: an :class:`SAEConfig`; or give its fields as keyword arguments.
        site: name of the hooked module, stored with the weights.
        model_id: identifier of the model the activations came from, stored with the weights.

    Example:
        >>> sae = SparseAutoencoder(d_in=4, expansion=2, k=2, steps=20, batch_size=16)
        >>> sae = sae.fit(torch.randn(64, 4))
        >>> sae.encode(torch.randn(3, 4)).shape
        torch.Size([3, 8])
    """

    _paper = paper("seglens")
    mean: torch.Tensor
    scale: torch.Tensor
    threshold: torch.Tensor
    since_fired: torch.Tensor
    fitted: torch.Tensor

    def __init__(
        self, config: SAEConfig | None = None, *, site: str = "", model_id: str = "", **kwargs: Any
    ) -> None:
        super().__init__()
        if config is None:
            config = SAEConfig(**kwargs)
        elif kwargs:
            raise TypeError(f"give either `config` or keyword fields, not both (got {sorted(kwargs)})")
        self.config, self.site, self.model_id = config, site, model_id
        d, n = config.d_in, config.n_latents
        gen = torch.Generator().manual_seed(config.seed)
        W_dec = core.unit_columns(torch.randn(d, n, generator=gen))
        self.W_dec = nn.Parameter(W_dec)
        self.W_enc = nn.Parameter(W_dec.T.clone())
        self.b_enc = nn.Parameter(torch.zeros(n))
        self.b_dec = nn.Parameter(torch.zeros(d))
        self.register_buffer("mean", torch.zeros(d))
        self.register_buffer("scale", torch.ones(()))
        self.register_buffer("threshold", torch.zeros(()))
        self.register_buffer("since_fired", torch.zeros(n, dtype=torch.long))
        self.register_buffer("fitted", torch.zeros((), dtype=torch.bool))

    @property
    def d_in(self) -> int:
        return self.config.d_in

    @property
    def n_latents(self) -> int:
        return self.config.n_latents

    # ---------------------------------------------------------------- encode / decode
    def _check(self, a: torch.Tensor, name: str = "a") -> torch.Tensor:
        if a.dim() != 2 or a.shape[1] != self.d_in:
            raise ValueError(
                f"`{name}` must be (M, d_in) rows with d_in = sae.d_in = {self.d_in}, "
                f"got shape {tuple(a.shape)}"
            )
        bad = int((~torch.isfinite(a)).sum())
        if bad:
            raise ValueError(f"`{name}` holds {bad} NaN/inf activation values")
        return a.to(self.W_dec.dtype)

    def _require_fitted(self) -> None:
        if not bool(self.fitted):
            raise RuntimeError("fit the SAE first (SparseAutoencoder.fit), or load a fitted one")

    def _normalise(self, a: torch.Tensor) -> torch.Tensor:
        return (a - self.mean) / self.scale

    def _codes(self, h: torch.Tensor, mode: str) -> torch.Tensor:
        if mode == "batchtopk":
            return core.batch_topk(h, self.config.k)
        if mode == "topk":
            return core.topk(h, self.config.k)
        if mode == "threshold":
            return core.threshold_codes(h, self.threshold)
        return h

    def default_mode(self) -> str:
        """Inference mode of the variant: ``threshold`` (batchtopk), ``topk`` or ``relu`` (l1)."""
        return {"batchtopk": "threshold", "topk": "topk", "l1": "relu"}[self.config.variant]

    def encode(self, a: torch.Tensor, mode: str | None = None) -> torch.Tensor:
        """Sparse codes ``(M, n_latents)`` of activation rows ``a`` ``(M, d_in)`` (original units).

        Args:
            a: activation rows.
            mode: ``"threshold"``, ``"topk"``, ``"batchtopk"`` or ``"relu"``; the variant's default if None.
        """
        self._require_fitted()
        if mode not in (None, "threshold", "topk", "batchtopk", "relu"):
            raise ValueError(f"`mode` must be threshold, topk, batchtopk or relu, got {mode!r}")
        a = self._check(a)
        h = core.pre_codes(self._normalise(a), self.W_enc, self.b_enc, self.b_dec)
        return self._codes(h, mode or self.default_mode())

    def encode_latents(self, a: torch.Tensor, latents: list[int]) -> torch.Tensor:
        """Codes ``(M, len(latents))`` of the chosen latents only, for the per-latent inference modes
        (``threshold``, ``relu``): each code depends on its own latent alone, so the others are skipped.

        Raises:
            ValueError: the SAE encodes with ``topk`` (its codes compete within a row).
        """
        self._require_fitted()
        mode = self.default_mode()
        if mode not in ("threshold", "relu"):
            raise ValueError(f"`encode_latents` needs a per-latent mode (threshold or relu), got {mode!r}")
        idx = torch.as_tensor(latents, dtype=torch.long)
        h = core.pre_codes(self._normalise(self._check(a)), self.W_enc[idx], self.b_enc[idx], self.b_dec)
        return self._codes(h, mode)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        """Reconstruction ``(M, d_in)`` in original units from codes ``z`` ``(M, n_latents)``."""
        self._require_fitted()
        return (z @ self.W_dec.T + self.b_dec) * self.scale + self.mean

    def decode_delta(
        self, z: torch.Tensor, z_new: torch.Tensor, latents: list[int] | None = None
    ) -> torch.Tensor:
        """Activation change of the error-preserving edit ``z -> z_new`` (see ``core.edit_delta``); with
        ``latents``, ``z`` and ``z_new`` hold those latents' columns only."""
        W = self.W_dec if latents is None else self.W_dec[:, torch.as_tensor(latents, dtype=torch.long)]
        return core.edit_delta(z, z_new, W, self.scale)

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(a_hat, z)`` for rows ``a``."""
        z = self.encode(a)
        return self.decode(z), z

    # ---------------------------------------------------------------- metrics
    @torch.no_grad()
    def metrics(self, a: torch.Tensor) -> dict[str, float]:
        """``fvu`` (fraction of variance unexplained), ``l0`` (mean active codes per row) and
        ``dead_fraction`` (latents that never fire on ``a``)."""
        a_hat, z = self(a)
        return {
            "fvu": core.fvu(self._check(a), a_hat),
            "l0": core.mean_l0(z),
            "dead_fraction": float(((z != 0).sum(0) == 0).float().mean()),
        }

    # ---------------------------------------------------------------- training
    def dead_latents(self) -> torch.Tensor:
        """``(n_latents,)`` bool: latents that did not fire in the last ``dead_window`` training rows."""
        return self.since_fired >= self.config.dead_window

    def fit(self, x: torch.Tensor, *, steps: int | None = None) -> SparseAutoencoder:
        """Train on activation rows ``x`` ``(N, d_in)``; the first call also fits the normalisation.

        Adam with decoder columns kept unit-norm (the gradient along each column is removed before the step
        and the columns renormalised after). Loss: mean squared error of the normalised reconstruction,
        plus ``alpha_aux`` times the dead-latent auxiliary loss, plus ``l1_coeff * L1`` for ``l1``.
        """
        cfg = self.config
        assert cfg.lr is not None and cfg.k_aux is not None  # filled in by SAEConfig.__post_init__
        x = self._check(x, "x")
        steps = cfg.steps if steps is None else steps
        if not bool(self.fitted):
            mean, scale = core.normalisation_stats(x)
            self.mean.copy_(mean)
            self.scale.copy_(scale)
        xn = self._normalise(x)
        gen = torch.Generator().manual_seed(cfg.seed + 1)
        opt = torch.optim.Adam(self.parameters(), lr=cfg.lr)
        train_mode = "batchtopk" if cfg.variant == "batchtopk" else self.default_mode()
        seen_threshold = bool(self.fitted)
        for step in range(1, steps + 1):
            batch = xn[torch.randint(0, xn.shape[0], (min(cfg.batch_size, xn.shape[0]),), generator=gen)]
            h = core.pre_codes(batch, self.W_enc, self.b_enc, self.b_dec)
            z = self._codes(h, train_mode)
            recon = z @ self.W_dec.T + self.b_dec
            residual = batch - recon
            loss = residual.pow(2).mean()
            dead = self.dead_latents()
            if cfg.alpha_aux > 0 and cfg.variant != "l1":
                loss = loss + cfg.alpha_aux * core.aux_loss(residual.detach(), h, self.W_dec, dead, cfg.k_aux)
            if cfg.variant == "l1":
                loss = loss + cfg.l1_coeff * core.l1_penalty(z)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            with torch.no_grad():
                assert self.W_dec.grad is not None
                self.W_dec.grad.copy_(core.remove_parallel_grad(self.W_dec, self.W_dec.grad))
                opt.step()
                self.W_dec.copy_(core.unit_columns(self.W_dec))
                fired = (z != 0).any(0)
                self.since_fired.add_(batch.shape[0]).masked_fill_(fired, 0)
                if cfg.variant == "batchtopk" and bool((z > 0).any()):
                    smallest = z[z > 0].min()
                    beta = cfg.threshold_beta if seen_threshold else 0.0
                    self.threshold.copy_(beta * self.threshold + (1 - beta) * smallest)
                    seen_threshold = True
            if cfg.resample_every and step % cfg.resample_every == 0:
                self.resample_dead(x)
                opt = torch.optim.Adam(self.parameters(), lr=cfg.lr)
        if cfg.variant == "batchtopk":
            self.calibrate_threshold(x, generator=gen)
        self.fitted.fill_(True)
        return self

    @torch.no_grad()
    def calibrate_threshold(
        self, x: torch.Tensor, n_batches: int = 8, generator: torch.Generator | None = None
    ) -> float:
        """Set the inference threshold to the mean smallest kept code of ``n_batches`` BatchTopK batches of
        ``x`` under the final weights (the training EMA lags behind the last steps); returns it."""
        xn = self._normalise(self._check(x, "x"))
        size = min(self.config.batch_size, xn.shape[0])
        mins = []
        for _ in range(n_batches):
            batch = xn[torch.randint(0, xn.shape[0], (size,), generator=generator)]
            z = core.batch_topk(core.pre_codes(batch, self.W_enc, self.b_enc, self.b_dec), self.config.k)
            if bool((z > 0).any()):
                mins.append(z[z > 0].min())
        if mins:
            self.threshold.copy_(torch.stack(mins).mean())
        return float(self.threshold)

    @torch.no_grad()
    def resample_dead(self, x: torch.Tensor, dead: torch.Tensor | None = None) -> int:
        """Re-initialise dead latents from badly reconstructed rows of ``x`` ``(N, d_in)``; returns how many.

        Each dead latent gets a row drawn with probability proportional to its squared reconstruction
        error: the decoder column becomes that row's normalised direction (minus ``b_dec``), the encoder
        row the same direction scaled to 0.2 times the mean live encoder norm, and the encoder bias 0.
        """
        dead = self.dead_latents() if dead is None else dead
        n_dead = int(dead.sum())
        if n_dead == 0:
            return 0
        xn = self._normalise(self._check(x, "x")) - self.b_dec
        h = core.pre_codes(xn + self.b_dec, self.W_enc, self.b_enc, self.b_dec)
        mode = "topk" if self.config.variant != "l1" else "relu"
        err = (xn - self._codes(h, mode) @ self.W_dec.T).pow(2).sum(-1)
        gen = torch.Generator().manual_seed(self.config.seed + int(self.since_fired.sum()) % 2**31)
        rows = torch.multinomial(err + 1e-12, n_dead, replacement=n_dead > x.shape[0], generator=gen)
        direction = core.unit_columns(xn[rows].T)
        alive = ~dead
        norm = self.W_enc[alive].norm(dim=1).mean() if bool(alive.any()) else torch.tensor(1.0)
        self.W_dec[:, dead] = direction
        self.W_enc[dead] = direction.T * 0.2 * norm
        self.b_enc[dead] = 0.0
        self.since_fired[dead] = 0
        return n_dead

    # ---------------------------------------------------------------- persistence
    def save_pretrained(self, directory: str | Path) -> None:
        """Write ``sae_config.json`` (config, site, model id) and ``sae.safetensors`` (weights, statistics,
        threshold) to ``directory``."""
        from safetensors.torch import save_file

        self._require_fitted()
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        meta = {"config": asdict(self.config), "site": self.site, "model_id": self.model_id}
        (path / CONFIG_NAME).write_text(json.dumps(meta, indent=2))
        save_file(
            {k: v.detach().contiguous().cpu() for k, v in self.state_dict().items()}, path / WEIGHTS_NAME
        )

    @classmethod
    def from_pretrained(cls, directory: str | Path) -> SparseAutoencoder:
        """Load an SAE written by :meth:`save_pretrained`."""
        from safetensors.torch import load_file

        path = Path(directory)
        if not (path / CONFIG_NAME).is_file():
            raise FileNotFoundError(f"`directory` has no {CONFIG_NAME}: {str(path)!r}")
        meta = json.loads((path / CONFIG_NAME).read_text())
        sae = cls(SAEConfig(**meta["config"]), site=meta["site"], model_id=meta["model_id"])
        sae.load_state_dict(load_file(path / WEIGHTS_NAME))
        return sae
