"""Tiny seeded models for every host (configs from the platform reference, section 5)."""

from __future__ import annotations

from typing import Any

import torch

_LM_BASE: dict[str, Any] = dict(
    vocab_size=64,
    hidden_size=16,
    intermediate_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
)


def _seeded(seed: int, build: Any) -> Any:
    torch.manual_seed(seed)
    return build().eval()


def tiny_causal_lm(arch: str = "llama", seed: int = 0, **overrides: Any) -> Any:
    """A tiny causal LM (about 7k parameters) of architecture ``arch``.

    Args:
        arch: ``"llama"``, ``"qwen2"``, ``"qwen3"`` or ``"gemma3"`` (text-only ``Gemma3ForCausalLM``).
        seed: Torch seed used right before construction.
        **overrides: Config fields that replace the defaults (e.g. ``vocab_size=len(tok)``).

    Examples:
        >>> lm = tiny_causal_lm("qwen2", vocab_size=32)
        >>> lm(torch.tensor([[1, 5, 7]])).logits.shape
        torch.Size([1, 3, 32])
    """
    import transformers as tf

    kw = {**_LM_BASE, **overrides}
    config: Any
    cls: Any
    if arch == "llama":
        config, cls = tf.LlamaConfig(**kw), tf.LlamaForCausalLM
    elif arch == "qwen2":
        config, cls = tf.Qwen2Config(**kw), tf.Qwen2ForCausalLM
    elif arch == "qwen3":
        config, cls = tf.Qwen3Config(**{"head_dim": 8, **kw}), tf.Qwen3ForCausalLM
    elif arch == "gemma3":
        config, cls = tf.Gemma3TextConfig(**{"head_dim": 8, "sliding_window": 16, **kw}), tf.Gemma3ForCausalLM
    else:
        raise ValueError(f"`arch` must be one of 'llama', 'qwen2', 'qwen3', 'gemma3', got {arch!r}.")
    return _seeded(seed, lambda: cls(config))


def tiny_llama(seed: int = 0, **overrides: Any) -> Any:
    """``tiny_causal_lm("llama", ...)``."""
    return tiny_causal_lm("llama", seed, **overrides)


def tiny_qwen2(seed: int = 0, **overrides: Any) -> Any:
    """``tiny_causal_lm("qwen2", ...)``."""
    return tiny_causal_lm("qwen2", seed, **overrides)


def tiny_gemma3(seed: int = 0, **overrides: Any) -> Any:
    """``tiny_causal_lm("gemma3", ...)``: head_dim 8, sliding window 16."""
    return tiny_causal_lm("gemma3", seed, **overrides)


def tiny_llava(seed: int = 0) -> Any:
    """A tiny LLaVA: CLIP vision tower (32 px, patch 8 -> 16 image tokens) + tiny Llama; image token id 63."""
    import transformers as tf

    vision = tf.CLIPVisionConfig(
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
    )
    config = tf.LlavaConfig(
        vision_config=vision,
        text_config=tf.LlamaConfig(**_LM_BASE),
        image_token_index=63,
        vision_feature_layer=-1,
    )
    return _seeded(seed, lambda: tf.LlavaForConditionalGeneration(config))


def tiny_segformer(seed: int = 0, num_labels: int = 3) -> Any:
    """A tiny SegFormer (2 encoder blocks); logits come out at 1/4 of the input resolution."""
    import transformers as tf

    config = tf.SegformerConfig(  # type: ignore[call-arg]  # num_labels goes through PretrainedConfig kwargs
        num_encoder_blocks=2,
        depths=[1, 1],
        sr_ratios=[2, 1],
        hidden_sizes=[8, 16],
        patch_sizes=[7, 3],
        strides=[4, 2],
        num_attention_heads=[1, 2],
        mlp_ratios=[2, 2],
        decoder_hidden_size=16,
        num_labels=num_labels,
    )
    return _seeded(seed, lambda: tf.SegformerForSemanticSegmentation(config))


def tiny_wan_transformer(seed: int = 0, **overrides: Any) -> Any:
    """A tiny ``WanTransformer3DModel``: 2 layers, 2 heads of dim 32, 4 attention processors.

    Inputs: latents ``(B, 4, F, H, W)`` with ``H, W`` even, timestep ``(B,)``, text ``(B, L, 32)``.

    Examples:
        >>> dit = tiny_wan_transformer()
        >>> out = dit(torch.randn(1, 4, 5, 16, 16), torch.tensor([500]), torch.randn(1, 8, 32)).sample
        >>> tuple(out.shape)
        (1, 4, 5, 16, 16)
    """
    from diffusers import WanTransformer3DModel

    kw = dict(
        patch_size=(1, 2, 2),
        num_attention_heads=2,
        attention_head_dim=32,
        in_channels=4,
        out_channels=4,
        text_dim=32,
        freq_dim=32,
        ffn_dim=64,
        num_layers=2,
        cross_attn_norm=True,
        rope_max_seq_len=64,
    )
    kw.update(overrides)
    return _seeded(seed, lambda: WanTransformer3DModel(**kw))


def tiny_cogvideox_transformer(seed: int = 0, **overrides: Any) -> Any:
    """A tiny ``CogVideoXTransformer3DModel``: 2 layers, 2 heads of dim 32, joint text-video attention.

    Inputs: latents ``(B, F, 4, H, W)`` with ``H, W`` even (``[B, F, C, H, W]``, CogVideoX's order), text
    ``(B, 8, 32)``, timestep ``(B,)``; sincos positional embeddings (recomputed for other sizes than
    ``3 x 16 x 16``).

    Examples:
        >>> dit = tiny_cogvideox_transformer()
        >>> out = dit(torch.randn(1, 3, 4, 16, 16), torch.randn(1, 8, 32), torch.tensor([500])).sample
        >>> tuple(out.shape)
        (1, 3, 4, 16, 16)
    """
    from diffusers import CogVideoXTransformer3DModel

    kw = dict(
        num_attention_heads=2,
        attention_head_dim=32,
        in_channels=4,
        out_channels=4,
        text_embed_dim=32,
        num_layers=2,
        sample_width=16,
        sample_height=16,
        sample_frames=9,
        patch_size=2,
        time_embed_dim=32,
        max_text_seq_length=8,
    )
    kw.update(overrides)
    return _seeded(seed, lambda: CogVideoXTransformer3DModel(**kw))


def tiny_wan_pipeline(seed: int = 0) -> Any:
    """A tiny ``WanPipeline`` (DiT + VAE + UMT5 + tokenizer); run it at ``height=width=16, num_frames=9``."""
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline
    from transformers import UMT5Config, UMT5EncoderModel

    from hf_ext.testing.tokenizers import word_tokenizer

    transformer = tiny_wan_transformer(
        seed, attention_head_dim=12, text_dim=16, freq_dim=16, ffn_dim=32, rope_max_seq_len=32
    )
    vae = _seeded(
        seed,
        lambda: AutoencoderKLWan(
            base_dim=3,
            z_dim=4,
            dim_mult=[1, 1, 1, 1],
            num_res_blocks=1,
            latents_mean=[0.0] * 4,
            latents_std=[1.0] * 4,
        ),
    )
    text_encoder = _seeded(
        seed,
        lambda: UMT5EncoderModel(
            UMT5Config(vocab_size=32, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2)
        ),
    )
    words = "a cat dog runs on the grass in snow red car city".split()
    return WanPipeline(
        tokenizer=word_tokenizer(words),
        text_encoder=text_encoder,
        transformer=transformer,
        vae=vae,
        scheduler=FlowMatchEulerDiscreteScheduler(shift=7.0),
    )


def tiny_unet(seed: int = 0) -> Any:
    """A tiny ``UNet2DConditionModel`` (8 attention processors, cross-attention dim 16, sample size 8)."""
    from diffusers import UNet2DConditionModel

    return _seeded(
        seed,
        lambda: UNet2DConditionModel(
            block_out_channels=(8, 16),
            layers_per_block=1,
            sample_size=8,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=16,
            attention_head_dim=2,
            norm_num_groups=4,
        ),
    )


def tiny_timm_model(name: str = "test_vit", seed: int = 0, num_classes: int = 10, **kwargs: Any) -> Any:
    """A tiny timm model: ``test_vit`` (0.31 M), ``test_resnet``, ``test_efficientnet``, ``test_convnext``.

    All default to 160 px inputs; ``test_vit`` also takes ``img_size=32``.

    Examples:
        >>> net = tiny_timm_model("test_resnet", num_classes=3)
        >>> net(torch.randn(2, 3, 64, 64)).shape
        torch.Size([2, 3])
    """
    import timm

    return _seeded(seed, lambda: timm.create_model(name, pretrained=False, num_classes=num_classes, **kwargs))
