"""``word_level_tokenizer``: ids follow the token order, the two splits, save/load, bad arguments."""

from __future__ import annotations

import pytest

from hf_ext.testing import requires

pytestmark = requires("transformers")


def test_ids_follow_the_token_order_and_duplicates_keep_the_first():
    from hf_ext._tokenizers import word_level_tokenizer

    tok = word_level_tokenizer(["<unk>", "<pad>", "a", "b", "a"], unk_token="<unk>", pad_token="<pad>")
    assert len(tok) == 4 and tok("b a c")["input_ids"] == [3, 2, 0] and tok.pad_token_id == 1


def test_whitespace_split_keeps_angle_bracket_tokens_whole(tmp_path):
    from transformers import AutoTokenizer

    from hf_ext._tokenizers import word_level_tokenizer

    words = ["<unk>", "<image>", "what", "?"]
    plain = word_level_tokenizer(words, unk_token="<unk>")
    split = word_level_tokenizer(words, unk_token="<unk>", split="whitespace_split")
    assert split("<image> what ?")["input_ids"] == [1, 2, 3]
    assert plain("<image> what ?")["input_ids"] != [1, 2, 3]  # punctuation splits '<image>'
    split.save_pretrained(tmp_path)
    assert AutoTokenizer.from_pretrained(tmp_path)("<image> what ?")["input_ids"] == [1, 2, 3]


def test_bad_arguments_name_themselves():
    from hf_ext._tokenizers import word_level_tokenizer

    with pytest.raises(ValueError, match="`split`.*'spaces'"):
        word_level_tokenizer(["<unk>"], unk_token="<unk>", split="spaces")
    with pytest.raises(ValueError, match="`unk_token`.*'<oov>'"):
        word_level_tokenizer(["a"], unk_token="<oov>")
