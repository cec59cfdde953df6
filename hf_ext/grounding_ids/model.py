"""``tiny_grounding_vlm``: a tiny LLaVA (``LlavaForConditionalGeneration``: CLIP vision tower + Llama) built
from config, with a word-level tokenizer (an ``<image>`` special token, whitespace-split words) and a
``LlavaProcessor``; nothing is downloaded.

:func:`hf_ext.testing.tiny_llava` is the library's fixed smallest LLaVA for tests (width 16, no processor);
this builder adds what the cue tools need: a ``LlavaProcessor`` whose tokenizer knows the prompt words, a
configurable width, depth and image size, and eager attention for the attention maps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from hf_ext._tokenizers import word_level_tokenizer
from hf_ext._validation import check_choice, check_float, check_int

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>", "<image>")


def tiny_grounding_vlm(
    words: Sequence[str],
    *,
    image_size: int = 32,
    patch_size: int = 8,
    hidden_size: int = 64,
    vision_layers: int = 2,
    text_layers: int = 2,
    heads: int = 4,
    strategy: Literal["full", "default"] = "full",
    attn_implementation: str = "eager",
    initializer_range: float = 0.02,
    seed: int = 0,
) -> tuple[Any, Any]:
    """Build ``(model, processor)``: a seeded tiny LLaVA and its ``LlavaProcessor``.

    Args:
        words: Vocabulary after the specials ``<pad> <bos> <eos> <unk> <image>`` (ids 0-4); split on spaces.
        image_size: Side of the square image the CLIP tower sees (px).
        patch_size: CLIP patch size (px); ``(image_size // patch_size) ** 2`` patch tokens.
        hidden_size: Width of both towers (the MLP is twice that).
        vision_layers: Depth of the CLIP tower.
        text_layers: Depth of the Llama.
        heads: Attention heads of both towers.
        strategy: ``"full"`` keeps the CLS token (``num_additional_image_tokens = 1``); ``"default"``
            drops it.
        attn_implementation: ``"eager"`` (attention maps available) or ``"sdpa"``.
        initializer_range: Standard deviation of the Llama's and the projector's initial weights (the
            transformers default 0.02; the CLIP tower keeps its own scaled init).
        seed: Torch seed set right before the weights are drawn.

    Examples:
        >>> import torch
        >>> model, proc = tiny_grounding_vlm(["what", "colour", "?"])
        >>> enc = proc(images=[torch.zeros(3, 32, 32)], text=["<image> what colour ?"], return_tensors="pt")
        >>> model(**enc).logits.shape
        torch.Size([1, 20, 8])
    """
    import torch
    import transformers as tf

    image_size = check_int("image_size", image_size, low=1)
    patch_size = check_int("patch_size", patch_size, low=1, high=image_size)
    strategy = check_choice("strategy", strategy, ("full", "default"))  # type: ignore[assignment]
    attn_implementation = check_choice("attn_implementation", attn_implementation, ("eager", "sdpa"))
    initializer_range = check_float("initializer_range", initializer_range, low=0, low_open=True)
    tok = word_level_tokenizer(
        [*SPECIALS, *words],
        unk_token="<unk>",
        split="whitespace_split",
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token="<eos>",
        extra_special_tokens={"image_token": "<image>"},
    )
    image_processor = tf.CLIPImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
    )
    processor = tf.LlavaProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        patch_size=patch_size,
        vision_feature_select_strategy=strategy,
        num_additional_image_tokens=1,
    )
    n_tokens = (image_size // patch_size) ** 2 + 1
    vision = tf.CLIPVisionConfig(
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=vision_layers,
        num_attention_heads=heads,
        image_size=image_size,
        patch_size=patch_size,
    )
    text = tf.LlamaConfig(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=text_layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=n_tokens + 128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        initializer_range=initializer_range,
    )
    config = tf.LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        vision_feature_layer=-1,
        vision_feature_select_strategy=strategy,
    )
    config._attn_implementation = attn_implementation
    for sub in (vision, text):
        sub._attn_implementation = attn_implementation
    torch.manual_seed(seed)
    return tf.LlavaForConditionalGeneration(config).eval(), processor
