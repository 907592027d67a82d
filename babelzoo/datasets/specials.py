"""Special tokens and language tags, defined in one place.

Tokenizers trained by babelzoo put the five special tokens first, in this order, then one tag
per language (``<2en>``-style tags are avoided: a tag is ``[xx]`` for language code ``xx``).
Imported vocabularies (WordPiece, XLM-R) keep their own ids; every consumer reads ids from a
:class:`SpecialIds`, never from these constants directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PAD, BOS, EOS, UNK, MASK = "<pad>", "<s>", "</s>", "<unk>", "<mask>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK, MASK)


def language_tag(lang: str) -> str:
    return f"[{lang}]"


@dataclass(frozen=True)
class SpecialIds:
    """Ids an objective needs: ``cls``/``sep`` frame sequences ([CLS] X [SEP] Y [SEP] or
    <s> X </s></s> Y </s>), ``mask`` replaces masked tokens, ``languages`` maps language codes to
    language-embedding indices (XLM), ``special`` lists every id never to be masked."""

    pad: int
    cls: int
    sep: int
    unk: int
    mask: int
    vocab_size: int
    languages: dict[str, int] = field(default_factory=dict)
    special: frozenset[int] = frozenset()

    def all_special(self) -> frozenset[int]:
        return frozenset(self.special) | {self.pad, self.cls, self.sep, self.unk, self.mask}
