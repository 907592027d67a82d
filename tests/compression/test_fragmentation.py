"""Fragmentation: words are whitespace tokens with punctuation stripped from their ends, each cut
by the tokenizer alone; pieces per word, words of 3 pieces or more and <unk> pieces are counted
over every occurrence, checked against segmentations worked out by hand."""

from __future__ import annotations

import math

import pytest

from babelzoo.compression import fragmentation
from babelzoo.compression.fragmentation import words
from babelzoo.errors import InputError


def test_words_strip_punctuation_from_both_ends_only():
    assert words("(dog), c'hoari — «ya»!\tdi-vrezhoneg ...") == ["dog", "c'hoari", "ya", "di-vrezhoneg"]
    assert words("  \n ") == []


def test_pieces_per_word_long_words_and_unknown_pieces_by_hand(tiny_unigram):
    tok = tiny_unigram
    # kebab → ▁k e b ab (-19.5 beats ▁k e b a b, -24): 4 pieces; a → ▁a: 1; b → ▁ b (no ▁b): 2;
    # xyz → ▁ <unk> y <unk> (x and z are no pieces): 4, 2 of them unknown
    assert tok.tokenize("kebab a b xyz") == ["▁k", "e", "b", "ab", "▁a", "▁", "b", "▁", "<unk>", "y", "<unk>"]
    found = fragmentation(tok, ["kebab, a b!", "«xyz»", "   "])
    assert (found.texts, found.words, found.pieces, found.long_words, found.unknown) == (2, 4, 11, 2, 2)
    assert found.pieces_per_word == 11 / 4 and found.long_word_share == 2 / 4 and found.unknown_share == 2 / 11
    assert found.as_dict()["pieces_per_word"] == 2.75
    # every occurrence counts, though each distinct word is tokenised once
    assert fragmentation(tok, ["kebab kebab", "kebab"]).pieces == 12


def test_no_words_give_no_rate_and_one_string_is_refused(tiny_unigram):
    empty = fragmentation(tiny_unigram, ["...", "—"])
    assert empty.words == 0 and math.isnan(empty.pieces_per_word) and math.isnan(empty.unknown_share)
    with pytest.raises(InputError, match=r"fragmentation: texts is one string \('kebab'\)"):
        fragmentation(tiny_unigram, "kebab")
    with pytest.raises(InputError, match="fragmentation: texts maps 1 language"):
        fragmentation(tiny_unigram, {"x": ["kebab"]})
