"""``LatentIntervention``: edit chosen SAE latents inside a forward hook, keeping the SAE error term."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

import torch
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_bool
from hf_ext.seglens import core
from hf_ext.seglens.activations import from_rows, resolve_site, site_output, to_rows
from hf_ext.seglens.sae import SparseAutoencoder


class LatentIntervention:
    """Context manager that edits SAE latents at ``site`` on every forward of ``model`` [reconstructed].

    At the hooked module's output ``a`` (rows ``(M, d)``): ``z = sae.encode(a)``, ``z' = edit(z)`` and the
    output becomes ``a + W_dec (z' - z)`` (in the activation's units) -- the edited reconstruction plus the
    SAE error term ``a - a_hat(z)``. Without edits the output is unchanged bit for bit. The hook is removed
    on exit, also when the block raises.

    Args:
        model: the segmentation model.
        site: dotted module name the SAE was trained on.
        sae: a fitted :class:`SparseAutoencoder` with ``d_in`` equal to the site's channels.
        edits: ``{latent: ("scale", g) | ("add", a) | ("clamp", v) | "ablate"}``; ``("scale", 0)`` ablates,
            ``("add", a)`` steers, ``("clamp", v)`` sets the code everywhere.
        where: optional bool mask ``(B, H, W)`` at the site's grid; only those positions are edited.
        gate: optional latents; only the positions where at least one of them fires are edited (with
            ``where``: both must hold). The diff report's population-specific latents
            (:meth:`DiffReport.gate_latents`) make it a detector of the shifted cohort [reconstructed].
        keep_error: keep the SAE error term (default). ``False`` replaces the activation by the edited
            reconstruction ``a_hat(z')`` alone (with no edits: the "spliced" model that measures how much
            of the model's behaviour the SAE captures).

    Example:
        >>> from hf_ext.seglens import TinyUNet
        >>> from hf_ext.seglens.activations import capture_site, to_rows
        >>> net = TinyUNet().eval(); x = torch.randn(2, 1, 16, 16)
        >>> sae = SparseAutoencoder(d_in=32, k=4, steps=5, batch_size=32, site="mid")
        >>> with torch.no_grad():
        ...     with capture_site(net, "mid") as seen:
        ...         _ = net(x)
        ...     sae = sae.fit(to_rows(seen[0]))
        ...     with LatentIntervention(net, "mid", sae, edits={}):
        ...         same = net(x)
        >>> bool((same == net(x)).all())
        True
    """

    _paper = paper("seglens")

    def __init__(
        self,
        model: nn.Module,
        site: str,
        sae: SparseAutoencoder,
        edits: Mapping[int, Any],
        *,
        where: torch.Tensor | None = None,
        gate: Sequence[int] | None = None,
        keep_error: bool = True,
    ) -> None:
        self.module = resolve_site(model, site)
        sae._require_fitted()
        self.site, self.sae = site, sae
        self.edits = core.check_edits(edits, sae.n_latents)
        self.where = where
        self.gate = [int(j) for j in gate or ()]
        if any(not 0 <= j < sae.n_latents for j in self.gate):
            raise ValueError(f"`gate` latents must lie in [0, {sae.n_latents}), got {list(gate or ())}")
        self.keep_error = check_bool("keep_error", keep_error)
        self._handle: Any = None

    def _hook(self, _module: nn.Module, _inputs: Any, output: Any) -> Any:
        a = site_output(output, self.site)
        rows = to_rows(a)
        if rows.shape[1] != self.sae.d_in:
            raise ValueError(
                f"`sae` has d_in = {self.sae.d_in} but site {self.site!r} outputs {rows.shape[1]} channels"
            )
        where = None
        if self.where is not None:
            where = self.where.reshape(-1).to(torch.bool)
            if where.shape[0] != rows.shape[0]:
                raise ValueError(
                    f"`where` must hold one flag per site position ({rows.shape[0]}), got {where.shape[0]}"
                )
        if self.keep_error and not self.edits:
            return output
        if self.gate:
            g = self._codes(rows, self.gate) > 0
            fires = g.any(1)
            where = fires if where is None else where & fires
        if self.keep_error and self.sae.default_mode() != "topk":
            # Per-latent codes: only the edited latents' columns change the activation.
            latents = list(self.edits)
            z = self._codes(rows, latents)
            local = {i: self.edits[j] for i, j in enumerate(latents)}
            z_new = core.apply_edits(z, local, where)
            return self._replace(
                output, a + from_rows(self.sae.decode_delta(z, z_new, latents).to(a.dtype), a)
            )
        z = self.sae.encode(rows)
        z_new = core.apply_edits(z, self.edits, where)
        if self.keep_error:
            edited = a + from_rows(self.sae.decode_delta(z, z_new).to(a.dtype), a)
        else:
            edited = from_rows(self.sae.decode(z_new).to(a.dtype), a)
        return self._replace(output, edited)

    def _codes(self, rows: torch.Tensor, latents: list[int]) -> torch.Tensor:
        if self.sae.default_mode() == "topk":
            return self.sae.encode(rows)[:, latents]
        return self.sae.encode_latents(rows, latents)

    @staticmethod
    def _replace(output: Any, edited: torch.Tensor) -> Any:
        return (edited, *output[1:]) if isinstance(output, tuple) else edited

    def __enter__(self) -> LatentIntervention:
        self._handle = self.module.register_forward_hook(self._hook)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
