"""A word-level tokenizer built in code (no hub, no vendored files)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hf_ext._tokenizers import word_level_tokenizer

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")

DEFAULT_WORDS: tuple[str, ...] = tuple(
    "the a is of to and in that it was for on are as with his they at be this from have or by one had not "
    "but what all were when we there can an your which their said if do will each about how up out them "
    "then she many some so these would other into has more her two like him see time could no make than "
    "first been its who now people my made over did down only way find use may water long little very "
    "after words called just where most know yes answer question true false unknown capital city river "
    "paris rome".split()
)


def word_tokenizer(words: Sequence[str] = DEFAULT_WORDS, specials: Sequence[str] = SPECIALS) -> Any:
    """A ``PreTrainedTokenizerFast`` over whitespace-separated ``words``.

    Ids 0-3 are ``<pad> <bos> <eos> <unk>``; ``words`` follow in order, so ``len(tok) == 4 + len(words)``.
    A trivial chat template joins message contents, for chat-format datasets.

    Examples:
        >>> tok = word_tokenizer(["hello", "world"])
        >>> tok("hello world")["input_ids"]
        [4, 5]
    """
    tok = word_level_tokenizer(
        [*specials, *words], unk_token="<unk>", pad_token="<pad>", bos_token="<bos>", eos_token="<eos>"
    )
    tok.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    return tok
