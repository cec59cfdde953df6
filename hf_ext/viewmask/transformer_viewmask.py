# mypy: disable-error-code="attr-defined"
# (diffusers exposes registered modules and config fields as dynamic attributes)
"""``ViewMaskTransformer``: a bidirectional masked-token transformer over several views (diffusers model).

[paper: one token space shared by text and vision, full self-attention over all views; layout reconstructed]
The sequence is ``[text tokens][view v_0][view v_1]...``: every image position carries a code in ``[0, K)``
or the mask id ``K``. One embedding table of size ``T_text + K + 1`` holds text words at ``[0, T_text)``,
code ``c`` at ``T_text + c`` and ``[MASK]`` at ``T_text + K``. Embedding = token + view id + in-view 2-D
position (row + column) + segment (text or image). Pre-LayerNorm encoder blocks, full self-attention, and an
output head of exactly ``K`` logits at image positions (a mask logit could otherwise be sampled by the
scheduler and survive to the output).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from diffusers.configuration_utils import ConfigMixin, register_to_config
from diffusers.models.modeling_utils import ModelMixin
from diffusers.utils import BaseOutput
from torch import nn

from hf_ext._registry import paper
from hf_ext._validation import check_float, check_int, check_power_of_two


@dataclass
class ViewMaskTransformerOutput(BaseOutput):
    """Output of :meth:`ViewMaskTransformer.forward`.

    Args:
        logits (`torch.Tensor`): ``[B, n*P, K]`` code logits at the image positions.
    """

    logits: torch.Tensor


class ViewMaskTransformer(ModelMixin, ConfigMixin):  # type: ignore[misc]  # diffusers' own pattern
    """Multi-view masked-token transformer (shared token space, view and position embeddings).

    Args:
        num_views (`int`, *optional*, defaults to 4): views ``V`` in a fixed azimuth order (view 0 = input).
        tokens_per_view (`int`, *optional*, defaults to 64): ``P``, a perfect square (the token grid side).
        codebook_size (`int`, *optional*, defaults to 256): ``K``, a power of two; the mask id is ``K``.
        text_vocab_size (`int`, *optional*, defaults to 0): ``T_text`` words; 0 disables text conditioning.
        max_text_length (`int`, *optional*, defaults to 16): longest prompt in tokens.
        hidden_size (`int`, *optional*, defaults to 128): model width.
        num_layers (`int`, *optional*, defaults to 4): encoder blocks.
        num_heads (`int`, *optional*, defaults to 4): attention heads (divide ``hidden_size``).
        mlp_size (`int`, *optional*, defaults to 512): MLP width.
        dropout (`float`, *optional*, defaults to 0.0): dropout in the blocks.

    Example:
        >>> model = ViewMaskTransformer(num_views=2, tokens_per_view=4, codebook_size=8, hidden_size=16,
        ...                             num_layers=1, num_heads=2, mlp_size=32)
        >>> model(torch.full((3, 8), 8)).logits.shape
        torch.Size([3, 8, 8])
    """

    _paper = paper("viewmask")

    @register_to_config
    def __init__(
        self,
        num_views: int = 4,
        tokens_per_view: int = 64,
        codebook_size: int = 256,
        text_vocab_size: int = 0,
        max_text_length: int = 16,
        hidden_size: int = 128,
        num_layers: int = 4,
        num_heads: int = 4,
        mlp_size: int = 512,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        check_int("num_views", num_views, low=2)
        check_int("tokens_per_view", tokens_per_view, low=1)
        side = math.isqrt(tokens_per_view)
        if side * side != tokens_per_view:
            raise ValueError(
                f"`tokens_per_view` must be a perfect square (a side x side grid), got {tokens_per_view}."
            )
        check_power_of_two("codebook_size", codebook_size, low=2)
        check_int("text_vocab_size", text_vocab_size, low=0)
        check_int("max_text_length", max_text_length, low=1)
        check_int("hidden_size", hidden_size, low=1)
        check_int("num_layers", num_layers, low=1)
        check_int("num_heads", num_heads, low=1)
        if hidden_size % num_heads:
            raise ValueError(f"`num_heads` must divide hidden_size={hidden_size}, got {num_heads}.")
        check_int("mlp_size", mlp_size, low=1)
        check_float("dropout", dropout, low=0, high=1, high_open=True)
        self.side = side
        self.token_embed = nn.Embedding(text_vocab_size + codebook_size + 1, hidden_size)
        self.view_embed = nn.Embedding(num_views, hidden_size)
        self.row_embed = nn.Embedding(side, hidden_size)
        self.col_embed = nn.Embedding(side, hidden_size)
        self.segment_embed = nn.Embedding(2, hidden_size)
        self.text_pos_embed = nn.Embedding(max_text_length, hidden_size)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(
                hidden_size,
                num_heads,
                mlp_size,
                dropout=dropout,
                activation="gelu",
                batch_first=True,
                norm_first=True,
            )
            for _ in range(num_layers)
        )
        self.norm_out = nn.LayerNorm(hidden_size)
        self.head = nn.Linear(hidden_size, codebook_size)
        nn.init.normal_(self.token_embed.weight, std=0.02)
        for table in (
            self.view_embed,
            self.row_embed,
            self.col_embed,
            self.segment_embed,
            self.text_pos_embed,
        ):
            nn.init.normal_(table.weight, std=0.02)

    @property
    def mask_token_id(self) -> int:
        """The mask id ``K`` (one past the last code)."""
        return int(self.config.codebook_size)

    def forward(
        self,
        image_tokens: torch.Tensor,
        view_ids: torch.Tensor | None = None,
        text_ids: torch.Tensor | None = None,
        text_attention_mask: torch.Tensor | None = None,
        return_dict: bool = True,
    ) -> ViewMaskTransformerOutput | tuple:
        """Code logits at every image position.

        Args:
            image_tokens: ``[B, n*P]`` long, codes in ``[0, K)`` or the mask id ``K``.
            view_ids: the view id of each of the ``n`` views present, ``[n]`` or ``[B, n]``; defaults to
                ``0..n-1``.
            text_ids: ``[B, L]`` word ids in ``[0, T_text)``, ``L <= max_text_length``.
            text_attention_mask: ``[B, L]`` (1 = word, 0 = padding).
            return_dict: return a :class:`ViewMaskTransformerOutput` rather than a tuple.
        """
        cfg = self.config
        batch, length = image_tokens.shape
        per_view, k = cfg.tokens_per_view, cfg.codebook_size
        if length % per_view:
            raise ValueError(
                f"`image_tokens` length must be a multiple of tokens_per_view={per_view}, got {length}."
            )
        n = length // per_view
        if image_tokens.numel() and (int(image_tokens.min()) < 0 or int(image_tokens.max()) > k):
            raise ValueError(
                f"`image_tokens` must hold codes in [0, {k}) or the mask id {k}, got values in "
                f"[{int(image_tokens.min())}, {int(image_tokens.max())}]."
            )
        dev = image_tokens.device
        if view_ids is None:
            view_ids = torch.arange(n, device=dev)
        view_ids = view_ids.to(dev).long().expand(batch, n) if view_ids.ndim == 1 else view_ids.to(dev)
        if view_ids.shape != (batch, n) or int(view_ids.min()) < 0 or int(view_ids.max()) >= cfg.num_views:
            raise ValueError(
                f"`view_ids` must be [{n}] or [{batch}, {n}] with ids in [0, {cfg.num_views}), got "
                f"{view_ids.tolist()}."
            )
        pos = torch.arange(per_view, device=dev)
        x = self.token_embed(image_tokens + cfg.text_vocab_size)
        x = x + self.view_embed(view_ids).repeat_interleave(per_view, dim=1)
        x = x + (self.row_embed(pos // self.side) + self.col_embed(pos % self.side)).repeat(n, 1)
        x = x + self.segment_embed.weight[1]
        padding = None
        if text_ids is not None:
            text = self._embed_text(text_ids)
            x = torch.cat([text, x], dim=1)
            if text_attention_mask is not None:
                keep = torch.ones(batch, length, dtype=torch.bool, device=dev)
                padding = ~torch.cat([text_attention_mask.to(dev).bool(), keep], dim=1)
        for block in self.blocks:
            x = block(x, src_key_padding_mask=padding)
        logits = self.head(self.norm_out(x[:, -length:]))
        return ViewMaskTransformerOutput(logits=logits) if return_dict else (logits,)

    def _embed_text(self, text_ids: torch.Tensor) -> torch.Tensor:
        cfg = self.config
        if cfg.text_vocab_size == 0:
            raise ValueError("`text_ids` given, but the transformer has text_vocab_size=0 (no text tokens).")
        if text_ids.shape[1] > cfg.max_text_length:
            raise ValueError(
                f"`text_ids` must have at most max_text_length={cfg.max_text_length} tokens, got "
                f"{text_ids.shape[1]}."
            )
        if int(text_ids.min()) < 0 or int(text_ids.max()) >= cfg.text_vocab_size:
            raise ValueError(
                f"`text_ids` must lie in [0, {cfg.text_vocab_size}), got values in "
                f"[{int(text_ids.min())}, {int(text_ids.max())}]."
            )
        pos = torch.arange(text_ids.shape[1], device=text_ids.device)
        return self.token_embed(text_ids) + self.text_pos_embed(pos) + self.segment_embed.weight[0]
