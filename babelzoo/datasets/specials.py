"""Special tokens and language tags, defined in one place.

Tokenizers trained by babelzoo put the five special tokens first, in this order, then one tag
per language (``<2en>``-style tags are avoided: a tag is ``[xx]`` for language code ``xx``),
then, when asked for, T5's sentinels ``<extra_id_0>``, ``<extra_id_1>``, ... (span corruption
replaces the k-th dropped span of a sequence by ``<extra_id_k>``).
Imported vocabularies (WordPiece, XLM-R) keep their own ids; every consumer reads ids from a
:class:`SpecialIds`, never from these constants directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

PAD, BOS, EOS, UNK, MASK = "<pad>", "<s>", "</s>", "<unk>", "<mask>"
SPECIAL_TOKENS = (PAD, BOS, EOS, UNK, MASK)


def language_tag(lang: str) -> str:
    return f"[{lang}]"


def sentinel_token(k: int) -> str:
    """T5's k-th sentinel, ``<extra_id_k>``."""
    return f"<extra_id_{k}>"


def reserved_ids(special_tokens: Mapping[str, int], languages: Iterable[str]) -> dict:
    """``language_tags`` (the id of each language's tag that the vocabulary holds) and
    ``sentinels`` (the ids of ``<extra_id_0>``, ``<extra_id_1>``, ... up to the first one it
    lacks), from a tokenizer's special tokens: the :class:`SpecialIds` fields that seq2seq
    objectives read."""
    tags = {lang: special_tokens[language_tag(lang)] for lang in languages if language_tag(lang) in special_tokens}
    sentinels = []
    while sentinel_token(len(sentinels)) in special_tokens:
        sentinels.append(special_tokens[sentinel_token(len(sentinels))])
    return {"language_tags": tags, "sentinels": tuple(sentinels)}


@dataclass(frozen=True)
class SpecialIds:
    """Ids an objective needs: ``cls``/``sep`` frame sequences ([CLS] X [SEP] Y [SEP] or
    <s> X </s></s> Y </s>), ``mask`` replaces masked tokens, ``languages`` maps language codes to
    language-embedding indices (XLM), ``special`` lists every id never to be masked.
    ``language_tags`` maps language codes to the token ids of their tags ``[xx]`` (mBART's
    language ids; empty when the vocabulary has none) and ``sentinels`` lists the ids of
    ``<extra_id_0>``, ``<extra_id_1>``, ... (T5's span corruption; empty when none is reserved).
    Both are special ids too."""

    pad: int
    cls: int
    sep: int
    unk: int
    mask: int
    vocab_size: int
    languages: dict[str, int] = field(default_factory=dict)
    special: frozenset[int] = frozenset()
    language_tags: dict[str, int] = field(default_factory=dict)
    sentinels: tuple[int, ...] = ()

    def all_special(self) -> frozenset[int]:
        return (frozenset(self.special) | set(self.language_tags.values()) | set(self.sentinels)
                | {self.pad, self.cls, self.sep, self.unk, self.mask})
