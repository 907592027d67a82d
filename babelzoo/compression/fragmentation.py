"""How finely a tokenizer cuts a language's words: pieces per word, the share of words cut into
three pieces or more, and the share of ``<unk>`` pieces.

A multilingual vocabulary serves its languages unequally. A language its pieces fit poorly is
written in more pieces per word than English, which spends the model's positions on fragments,
and a word cut into many short pieces is one the model has to assemble from parts that mean
little on their own (Rust et al. 2021, "How Good is Your Tokenizer?", call pieces per word
fertility). Comparing a language with English on the two sides of the same translations holds
the content fixed::

    en = fragmentation(tok, [e for e, _ in pairs])
    br = fragmentation(tok, [x for _, x in pairs])
    br.pieces_per_word / en.pieces_per_word          # the cost of writing it in Breton

Words are the whitespace-separated tokens of a text with punctuation stripped from both ends
(``"(dog),"`` → ``dog``; ``c'hoari`` keeps its apostrophe); a token of punctuation only is no
word. Each word is tokenised alone, without special tokens: a tokenizer that splits text at
whitespace (sentencepiece, WordPiece) cuts it exactly so inside a sentence too.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Iterable

from ..datasets.tokenizer import Tokenizer
from .vocabulary import text_list

LONG = 3  # a word of this many pieces or more counts as cut up


@dataclass(frozen=True)
class Fragmentation:
    """Counts over a set of texts; the shares are properties."""

    texts: int
    words: int
    pieces: int
    long_words: int  # words of LONG pieces or more
    unknown: int  # <unk> pieces

    @property
    def pieces_per_word(self) -> float:
        return self.pieces / self.words if self.words else float("nan")

    @property
    def long_word_share(self) -> float:
        return self.long_words / self.words if self.words else float("nan")

    @property
    def unknown_share(self) -> float:
        return self.unknown / self.pieces if self.pieces else float("nan")

    def as_dict(self) -> dict:
        return {**asdict(self), "pieces_per_word": self.pieces_per_word, "long_word_share": self.long_word_share,
                "unknown_share": self.unknown_share}


def _is_punctuation(char: str) -> bool:
    return unicodedata.category(char).startswith("P")


def words(text: str) -> list[str]:
    """The words of ``text``: whitespace-separated tokens, punctuation stripped from both ends."""
    out = []
    for token in text.split():
        start, end = 0, len(token)
        while start < end and _is_punctuation(token[start]):
            start += 1
        while end > start and _is_punctuation(token[end - 1]):
            end -= 1
        if start < end:
            out.append(token[start:end])
    return out


def fragmentation(tokenizer: Tokenizer, texts: Iterable[str], batch_size: int = 4096) -> Fragmentation:
    """Pieces per word, words of :data:`LONG` pieces or more and ``<unk>`` pieces of
    ``tokenizer`` over ``texts`` (an iterable of strings; blank ones are left out)."""
    texts = text_list(texts, "fragmentation")
    counts = Counter(word for text in texts for word in words(text))
    unique = list(counts)
    pieces = long_words = unknown = 0
    unk = tokenizer.specials.unk
    for start in range(0, len(unique), batch_size):
        chunk = unique[start:start + batch_size]
        rows = tokenizer.batch_encode(chunk, padding=False, truncation=False, return_tensors=None,
                                      add_special_tokens=False)["input_ids"]
        for word, ids in zip(chunk, rows):
            n = counts[word]
            pieces += n * len(ids)
            long_words += n * (len(ids) >= LONG)
            unknown += n * ids.count(unk)
    return Fragmentation(len(texts), sum(counts.values()), pieces, long_words, unknown)
