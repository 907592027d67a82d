"""Knowledge-base facts as training text in many languages.

Each triple (h, r, t) whose head and tail both have a label in language X becomes one short
linearised text ``label_X(h) · r · label_X(t)`` with the character spans of the two entity
mentions known exactly (no linker, so no linking errors). Linearising triples as
``head [SEP] relation [SEP] tail`` is KG-BERT's input (Yao et al. 2019, "KG-BERT: BERT for
Knowledge Graph Completion"); training an encoder on verbalised triples is the KELM recipe
(Agarwal et al. 2021, "Knowledge Graph Based Synthetic Corpus Generation for Knowledge-Enhanced
Language Model Pre-training"). Relations are written as their ids with ``_`` → space
(``uses currency``): the same marker in every language.

``exclude`` keeps entities out of training (e.g. those an evaluation holds out): a fact that
names one is dropped, and the number dropped is reported.

    facts, report = kb_facts(load_kb("cldr"), {"en": "en", "ja": "ja"}, exclude=is_heldout_entity)
    data = FactDataset(facts, tokenizer)          # examples for the ``entity_mlm`` objective
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

from torch.utils.data import Dataset

from ..errors import InputError

SEPARATOR = " · "
HELDOUT_ENTITY_PERCENT = 25


def is_heldout_entity(entity: str, percent: int = HELDOUT_ENTITY_PERCENT) -> bool:
    """A fixed split of entity ids (``territory:JP``): held out when the first byte of
    sha1(id) falls in the lowest ``percent`` of 0..255; it depends on the id alone."""
    return hashlib.sha1(entity.encode("utf-8")).digest()[0] < 256 * percent // 100


@dataclass(frozen=True)
class Fact:
    """One triple verbalised in one language."""

    head: str
    relation: str
    tail: str
    lang: str
    head_label: str
    tail_label: str

    @property
    def relation_text(self) -> str:
        return self.relation.replace("_", " ")

    @property
    def text(self) -> str:
        return SEPARATOR.join((self.head_label, self.relation_text, self.tail_label))

    @property
    def spans(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """Character spans of the head and the tail mention in :attr:`text`."""
        tail_start = len(self.head_label) + 2 * len(SEPARATOR) + len(self.relation_text)
        return (0, len(self.head_label)), (tail_start, tail_start + len(self.tail_label))


@dataclass(frozen=True)
class FactReport:
    """What :func:`kb_facts` made: facts per language, triples dropped by ``exclude``, and
    (triple, language) combinations without both labels."""

    per_language: dict[str, int]
    excluded_triples: int
    unlabelled: int

    def __str__(self) -> str:
        langs = ", ".join(f"{k} {v}" for k, v in self.per_language.items())
        return (f"{sum(self.per_language.values())} facts ({langs}); {self.excluded_triples} triples excluded, "
                f"{self.unlabelled} (triple, language) pairs without both labels")


def kb_facts(kb, languages: Mapping[str, str] | Sequence[str], exclude: Optional[Callable[[str], bool]] = None,
             relations: Optional[Sequence[str]] = None) -> tuple[list[Fact], FactReport]:
    """Facts of ``kb`` in each language. ``languages`` maps the code facts are tagged with to
    the knowledge base's label language (``{"zh-CN": "zh"}``), or lists codes used for both."""
    langs = dict(languages) if isinstance(languages, Mapping) else {lang: lang for lang in languages}
    if not langs:
        raise InputError("kb_facts: no languages given")
    facts: list[Fact] = []
    counts = {lang: 0 for lang in langs}
    excluded = unlabelled = 0
    first_label: dict[tuple[str, str], str] = {}

    def label(entity: str, kb_lang: str) -> str:
        key = (entity, kb_lang)
        if key not in first_label:
            names = kb.labels(entity, kb_lang)
            first_label[key] = names[0] if names else ""
        return first_label[key]

    for triple in kb.triples():
        if relations is not None and triple.relation not in relations:
            continue
        if exclude is not None and (exclude(triple.head) or exclude(triple.tail)):
            excluded += 1
            continue
        for lang, kb_lang in langs.items():
            head, tail = label(triple.head, kb_lang), label(triple.tail, kb_lang)
            if not head or not tail:
                unlabelled += 1
                continue
            facts.append(Fact(triple.head, triple.relation, triple.tail, lang, head, tail))
            counts[lang] += 1
    return facts, FactReport(counts, excluded, unlabelled)


def kb_name_pairs(kb, languages: Mapping[str, str], source: str = "en",
                  exclude: Optional[Callable[[str], bool]] = None,
                  types: Optional[Sequence[str]] = None) -> dict[str, list[tuple[str, str]]]:
    """Per target language, (name in ``source``, name in X) of every entity named in both: a
    bilingual dictionary from the knowledge base (translation pairs for XLCo/TLM).
    ``languages`` maps codes to the KB's label languages as in :func:`kb_facts`; ``exclude``
    drops entities (e.g. held out); ``types`` keeps only those entity types. Identical names are
    kept (``Japan``/``Japan`` teaches that a name may not change)."""
    src = languages.get(source, source)
    out: dict[str, list[tuple[str, str]]] = {lang: [] for lang in languages if lang != source}
    for entity in kb.entities():
        if exclude is not None and exclude(entity):
            continue
        if types is not None and kb.entity_type(entity) not in types:
            continue
        names = kb.labels(entity, src)
        if not names:
            continue
        for lang in out:
            other = kb.labels(entity, languages[lang])
            if other:
                out[lang].append((names[0], other[0]))
    return out


class EntityExample(NamedTuple):
    """Token ids (no special tokens), the [start, end) token spans of its entity mentions, and
    its language: an example of the ``entity_mlm`` objective."""

    ids: list[int]
    spans: list[tuple[int, int]]
    lang: Optional[str] = None


class FactDataset(Dataset):
    """Facts tokenised piece by piece, so mention spans fall on token boundaries exactly: the
    head label, the relation and the tail label are encoded separately and concatenated."""

    def __init__(self, facts: Sequence[Fact], tokenizer, encode_lang: bool = True):
        if not facts:
            raise InputError("FactDataset: no facts (check the languages and the exclude rule)")
        texts = sorted({f.head_label for f in facts} | {f.tail_label for f in facts}
                       | {SEPARATOR.strip() + " " + f.relation_text + " " + SEPARATOR.strip() for f in facts})
        encoded = dict(zip(texts, self._encode(tokenizer, texts)))
        self.examples: list[EntityExample] = []
        for f in facts:
            head, middle = encoded[f.head_label], encoded[SEPARATOR.strip() + " " + f.relation_text + " " +
                                                          SEPARATOR.strip()]
            tail = encoded[f.tail_label]
            spans = [(0, len(head)), (len(head) + len(middle), len(head) + len(middle) + len(tail))]
            self.examples.append(EntityExample([*head, *middle, *tail], spans, f.lang if encode_lang else None))

    @staticmethod
    def _encode(tokenizer, texts: list[str]) -> list[list[int]]:
        rows = tokenizer.batch_encode(texts, padding=False, truncation=False, add_special_tokens=False,
                                      return_tensors=None)["input_ids"]
        empty = [t for t, r in zip(texts, rows) if not r]
        if empty:
            raise InputError(f"FactDataset: the tokenizer gives no tokens for {len(empty)} label(s), e.g. "
                             f"{empty[:3]}")
        return rows

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int) -> EntityExample:
        return self.examples[index]
