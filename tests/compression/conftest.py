"""A unigram tokenizer small enough to segment by hand, shared by the vocabulary tests."""

from __future__ import annotations

import pytest

from babelzoo.datasets.unigram import UnigramTokenizer

CHARS = "abcdeiklmnorstuy"  # no x, z: they are unknown
# scores chosen so that every word the tests use has one best path (no ties)
PIECES = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "\u2581", *CHARS, "\u2581a", "\u2581k", "ab", "ra"]
SCORES = [0.0] * 5 + [-3.0] + [-5.0] * len(CHARS) + [-4.0, -4.0, -5.5, -6.5]


@pytest.fixture
def tiny_unigram() -> UnigramTokenizer:
    # the normalisation map folds fullwidth ａ (U+FF41) to a
    return UnigramTokenizer(PIECES, SCORES, {0xFF41: (0x61,)}, bos=0, eos=2, pad=1, unk=3)
