"""A word-level ``PreTrainedTokenizerFast`` built in code: no hub download, no vendored files."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SPLITS = ("whitespace", "whitespace_split")


def word_level_tokenizer(
    tokens: Sequence[str], *, unk_token: str, split: str = "whitespace", **special_tokens: Any
) -> Any:
    """A tokenizer whose ids are the positions of ``tokens`` (duplicates dropped, first kept).

    Args:
        tokens: The whole vocabulary, special tokens included, in id order.
        unk_token: The token that unknown words map to (must be in ``tokens``).
        split: ``"whitespace"`` splits on whitespace and punctuation (``tokenizers``' ``Whitespace``);
            ``"whitespace_split"`` on whitespace only, so ``<image>`` stays one token.
        special_tokens: Passed to ``PreTrainedTokenizerFast`` (``pad_token``, ``bos_token``,
            ``model_max_length``, ``extra_special_tokens`` ...).

    Example:
        >>> tok = word_level_tokenizer(["<unk>", "hello", "world"], unk_token="<unk>")
        >>> tok("hello there world")["input_ids"]
        [1, 0, 2]
    """
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    if split not in SPLITS:
        raise ValueError(f"`split` must be one of {SPLITS}, got {split!r}.")
    vocab = {t: i for i, t in enumerate(dict.fromkeys(tokens))}
    if unk_token not in vocab:
        raise ValueError(f"`unk_token` must be one of `tokens`, got {unk_token!r}.")
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk_token))
    core.pre_tokenizer = (
        pre_tokenizers.Whitespace() if split == "whitespace" else pre_tokenizers.WhitespaceSplit()
    )
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token=unk_token, **special_tokens)
