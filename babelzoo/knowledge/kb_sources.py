"""Data sources over knowledge bases, for recipes (:mod:`babelzoo.datasets.sources`).

``kb``: a registered knowledge base (``cldr``, ``codex-s``, a plug-in) or a KB file or folder.
``langs``: the codes the examples are tagged with, or a mapping from them to the knowledge
base's label languages (``{zh-CN: zh}``). ``exclude_heldout`` leaves out the entities the
leaderboard's knowledge tasks hold out (:func:`~babelzoo.knowledge.facts.is_heldout_entity`).
``split``: the facts of a knowledge base with held-out splits (WN18RR, CoDEx, DBP-5L) come from
its ``train`` split unless asked otherwise (``all``: every triple), so that pre-training on a
graph's facts never reads the valid or test triples its link prediction is judged on.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Optional, Union

from torch.utils.data import Dataset

from ..datasets.loader import CorpusMixture
from ..datasets.sources import (BuildContext, CorpusSource, DataSource, check_consumes, parse_source, register_source,
                                tokenized)
from ..datasets.text import MonolingualCorpus, ParallelCorpus, ReadReport
from .._files import expand_path
from ..errors import ConfigError
from ..typed import Where
from .base import load_kb
from .facts import FactDataset, is_heldout_entity, kb_facts, kb_name_pairs
from .kbert import KBertInjector

Langs = Union[list[str], dict[str, str]]


def shared_kb(name: str, split: str = "all"):
    """The knowledge base ``name``, loaded once for a recipe's data sources and its ``knowledge:``
    section; with ``split``, only the triples of that split of a knowledge base that has splits
    (every entity and name kept), see :func:`split_kb`. A folder may name ``${VARIABLES}``
    (``${BABELZOO_DATA_DIR}/wn18rr``); the loaded ones are kept by the expanded name."""
    return _shared_kb(expand_path(name, "kb") if "$" in name else name, split)


@lru_cache(maxsize=8)
def _shared_kb(name: str, split: str):
    return split_kb(load_kb(name), split, name)



def split_kb(kb, split: str, name: str = ""):
    """``kb`` with only the triples of its ``split`` (``train``, ``valid``, ``test``), or ``kb``
    itself for ``all`` or a knowledge base without splits."""
    splits = getattr(kb, "splits", None)
    if split == "all" or not splits:
        return kb
    if split not in splits:
        raise ConfigError(f"knowledge base {name or kb.name!r} has the splits {', '.join(splits)}, not {split!r} "
                          f"(or give split: all)")
    view = copy.copy(kb)
    view.graph = kb.graph.copy()
    keep = {tuple(t) for t in splits[split]}
    view.graph.remove_edges_from([(h, t, r) for h, t, r in kb.graph.edges(keys=True) if (h, r, t) not in keep])
    return view


def _langs(langs: Langs) -> dict[str, str]:
    return dict(langs) if isinstance(langs, dict) else {lang: lang for lang in langs}


class _Examples(Dataset):
    """An in-memory list of examples with an identity for resume checks."""

    def __init__(self, examples: list, fingerprint: str):
        self.examples, self.fingerprint = examples, fingerprint

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int):
        return self.examples[index]


def _identity(*parts: Any) -> str:
    return hashlib.sha256(repr(parts).encode("utf-8")).hexdigest()[:32]


@dataclass
class _FactSource(DataSource):
    kb: str = "cldr"
    langs: Langs = field(default_factory=lambda: ["en"])
    exclude_heldout: bool = True
    relations: Optional[list[str]] = None
    split: str = "train"

    def facts(self) -> list:
        if getattr(self, "_facts", None) is None:
            facts, self.report = kb_facts(shared_kb(self.kb, self.split), _langs(self.langs),
                                          exclude=is_heldout_entity if self.exclude_heldout else None,
                                          relations=self.relations)
            if not facts:
                raise ConfigError(f"{self.where}: knowledge base {self.kb!r} gives no facts in {self.langs} "
                                  f"({self.report})")
            self._facts = facts
        return self._facts

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        by_lang: dict[str, list[str]] = {}
        for fact in self.facts():
            by_lang.setdefault(fact.lang, []).append(fact.text)
        return by_lang

    def describe(self) -> str:
        return f"{self.kb} facts"


@register_source
@dataclass
class KBFacts(_FactSource):
    """``{kind: kb_facts, kb: cldr, langs: [en, de]}``: the knowledge base's triples verbalised
    in each language ("Japon · uses currency · yen japonais"), with the token spans of the head
    and the tail: the examples of ``entity_mlm``."""

    kind: ClassVar[str] = "kb_facts"
    provides: ClassVar[str] = "entity_mentions"

    def dataset(self, context: BuildContext) -> Dataset:
        data = FactDataset(self.facts(), context.tokenizer)
        return _Examples(data.examples, _identity("kb_facts", self.kb, self.langs, self.exclude_heldout,
                                                  self.relations, context.fingerprint, self.split))


@register_source
@dataclass
class KBAlignedFacts(_FactSource):
    """``{kind: kb_aligned_facts, kb: cldr, langs: [en]}``: verbalised facts whose head and tail
    mentions carry their entity on their first token (ERNIE's alignment), as entity indices of
    the model's attached knowledge base: the examples of ``dea``. The recipe attaches the same
    knowledge base (``knowledge: {kb: cldr}``)."""

    kind: ClassVar[str] = "kb_aligned_facts"
    provides: ClassVar[str] = "entity_alignment"

    def check_model(self, model: Any) -> None:
        fusion = getattr(model, "knowledge", None)
        if fusion is None or not getattr(fusion, "entity_index", None):
            raise ConfigError(f"{self.where}: kind {self.kind!r} aligns tokens to the model's knowledge-base "
                              f"entities, and the model has none attached; add knowledge: {{kb: {self.kb}}} "
                              f"to the recipe")

    def dataset(self, context: BuildContext) -> Dataset:
        index = context.model.knowledge.entity_index
        data = FactDataset(self.facts(), context.tokenizer)
        examples = []
        for fact, example in zip(self.facts(), data.examples):
            entities = [0] * len(example.ids)
            for entity, (start, _) in zip((fact.head, fact.tail), example.spans):
                if entity not in index:
                    raise ConfigError(f"{self.where}: entity {entity!r} of {self.kb!r} is not in the model's "
                                      f"attached knowledge base")
                entities[start] = index[entity]
            examples.append({"input_ids": example.ids, "entities": entities})
        return _Examples(examples, _identity("kb_aligned_facts", self.kb, self.langs, self.exclude_heldout,
                                             self.relations, context.fingerprint, len(index), self.split))


@register_source
@dataclass
class KBNames(DataSource):
    """``{kind: kb_names, kb: cldr, langs: [en, de, fr], pivot: en, types: [territory]}``: a
    bilingual dictionary from the knowledge base, (name in the pivot language, name in X) of
    every entity named in both: translation pairs (for XLCo, TLM)."""

    kind: ClassVar[str] = "kb_names"
    provides: ClassVar[str] = "pair"
    kb: str = "cldr"
    langs: Langs = field(default_factory=lambda: ["en"])
    pivot: str = "en"
    types: Optional[list[str]] = None
    exclude_heldout: bool = True

    def corpora(self) -> list:
        if getattr(self, "_corpora", None) is None:
            names = kb_name_pairs(shared_kb(self.kb), _langs(self.langs), source=self.pivot,
                                  exclude=is_heldout_entity if self.exclude_heldout else None, types=self.types)
            source = (f"{self.kb} names",)
            self._corpora = [ParallelCorpus(self.pivot, lang, got, ReadReport(source, len(got), len(got)))
                             for lang, got in names.items() if got]
            if not self._corpora:
                raise ConfigError(f"{self.where}: knowledge base {self.kb!r} names no entity in both "
                                  f"{self.pivot} and {sorted(names)}")
        return self._corpora

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        by_lang: dict[str, list[str]] = {}
        for corpus in self.corpora():
            by_lang.setdefault(corpus.src_lang, []).extend(corpus.sources)
            by_lang.setdefault(corpus.tgt_lang, []).extend(corpus.targets)
        return by_lang

    def dataset(self, context: BuildContext) -> Dataset:
        parts = [tokenized(c, context) for c in self.corpora()]
        return parts[0] if len(parts) == 1 else CorpusMixture(dict(enumerate(parts)))


@register_source
@dataclass
class KGLinkPairs(DataSource):
    """``{kind: kg_link_pairs, kb: ${BABELZOO_DATA_DIR}/wn18rr}``: link prediction by text as pairs
    (question, answer) for a dual-encoder objective: each training triple (h, r, t) asks
    ``"{text of h}, {words of r}"`` → the text of t and, in the inverse direction,
    ``"{text of t}, inverse {words of r}"`` → the text of h (:class:`~babelzoo.knowledge.text_link.TextFormat`,
    with e5's ``query:`` / ``passage:`` prefixes). The trained model keeps, in
    ``link_prediction.json``, the text format and the graph it learnt (``babelzoo kb eval`` checks
    it is ranked on that graph)."""

    kind: ClassVar[str] = "kg_link_pairs"
    provides: ClassVar[str] = "pair"
    record_file: ClassVar[str] = "link_prediction.json"
    kb: str = ""
    lang: str = "en"
    query_prefix: str = "query: "
    entity_prefix: str = "passage: "
    inverse: bool = True

    def __post_init__(self) -> None:
        if not self.kb:
            raise ConfigError(f"{self.where}.kb: name the knowledge graph (a registered name or a folder with "
                              "entity2text.txt, relation2text.txt and train.tsv)")

    def text_format(self):
        from .text_link import TextFormat

        return TextFormat(self.query_prefix, self.entity_prefix)

    def corpora(self) -> list:
        if getattr(self, "_corpora", None) is None:
            from .kge import LinkPredictionData
            from .text_link import graph_digest, graph_texts

            kb = shared_kb(expand_path(self.kb, f"{self.where}.kb") if "$" in self.kb else self.kb)
            data = LinkPredictionData.from_kb(kb)
            if not len(data.train):
                raise ConfigError(f"{self.where}: knowledge graph {self.kb!r} has no training triples")
            entities, relations = graph_texts(kb, data, self.lang)
            text = self.text_format()
            pairs = [(text.question(entities[h], relations[r], False), text.entity(entities[t]))
                     for h, r, t in data.train.tolist()]
            if self.inverse:
                pairs += [(text.question(entities[t], relations[r], True), text.entity(entities[h]))
                          for h, r, t in data.train.tolist()]
            self._corpora = [ParallelCorpus(self.lang, self.lang, pairs,
                                            ReadReport((f"{self.kb} train triples",), len(pairs), len(pairs)))]
            self.record = {"kg": self.kb, "text": asdict(text),
                           "graph_sha256": graph_digest(data.entities, entities, data.relations, relations),
                           "entities": data.num_entities, "relations": data.num_relations,
                           "train_triples": len(data.train), "pairs": len(pairs), "inverse": self.inverse}
        return self._corpora

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        (corpus,) = self.corpora()
        return {self.lang: [*corpus.sources, *corpus.targets]}

    def dataset(self, context: BuildContext) -> Dataset:
        (corpus,) = self.corpora()
        return tokenized(corpus, context)


@register_source
@dataclass
class KBTexts(CorpusSource):
    """``{kind: kb_texts, kb: ${BABELZOO_DATA_DIR}/wn18rr}``: every entity's text, one sentence
    each, in the knowledge base's entity order (:meth:`~babelzoo.knowledge.graph.GraphKB.entity_text`:
    WN18RR's "lemma, gloss", else the entity's label in ``lang``): a graph's own descriptions as
    sentences, for example the trunks of K-BERT trees (``kb_trees``). An entity without a text or
    label in ``lang`` is an error, not a sentence made of its id."""

    kind: ClassVar[str] = "kb_texts"
    provides: ClassVar[str] = "sentence"
    kb: str = ""
    lang: str = "en"

    def __post_init__(self) -> None:
        if not self.kb:
            raise ConfigError(f"{self.where}.kb: name the knowledge base (a registered name or a folder)")

    def read(self) -> list:
        kb = shared_kb(expand_path(self.kb, f"{self.where}.kb") if "$" in self.kb else self.kb)
        entities = kb.entities()
        texts = [kb.entity_text(e, self.lang) if hasattr(kb, "entity_text") else kb.label(e, self.lang)
                 for e in entities]
        unnamed = [e for e, text in zip(entities, texts) if text == e and not kb.labels(e, self.lang)]
        if unnamed:
            raise ConfigError(f"{self.where}: {len(unnamed)} entities of {self.kb!r} have no text in "
                              f"{self.lang!r} (first: {unnamed[0]!r})")
        report = ReadReport((f"{self.kb} entity texts",), len(texts), len(texts))
        return [MonolingualCorpus(self.lang, texts, report)]


def words(sentence: str) -> list[str]:
    """The words of a sentence for a K-BERT tree: split at white space, with punctuation at a
    word's start or end a word of its own (a run of it one word), so that "bowels;" links "bowels"."""
    out = []
    for chunk in sentence.split():
        out += [part for part in _WORD.fullmatch(chunk).groups() if part]  # the pattern matches every chunk
    return out


_WORD = re.compile(r"([^\w]*)(.*?)([^\w]*)")


@register_source
@dataclass
class KBTrees(DataSource):
    """``{kind: kb_trees, kb: cldr, sentences: {kind: catalog_text, langs: [en]}}``: K-BERT
    sentence trees: each sentence of the nested ``sentences`` source (any source of sentences),
    split into words, with up to ``max_branches`` facts of the knowledge base hung after each
    linked mention (:class:`~babelzoo.knowledge.kbert.KBertInjector`): the examples of
    ``kbert_mlm``. ``linked_only`` keeps only sentences with a mention; ``limit`` the first N
    sentences of each language."""

    kind: ClassVar[str] = "kb_trees"
    provides: ClassVar[str] = "sentence_tree"
    sentences: dict
    kb: str = "cldr"
    kb_langs: dict[str, str] = field(default_factory=dict)
    max_branches: int = 2
    max_length: int = 128
    linked_only: bool = False
    limit: Optional[int] = None
    split: str = "train"

    def inner(self) -> DataSource:
        if getattr(self, "_inner", None) is None:
            where = Where(f"{self.where}.sentences")
            self._inner = parse_source(self.sentences, where)
            check_consumes(f"{self.kind} (its sentences)", "sentence", self._inner)
        return self._inner

    def texts(self, context: BuildContext) -> dict[str, list[str]]:
        texts = self.inner().texts(context)
        return {lang: items[:self.limit] for lang, items in texts.items()}

    def dataset(self, context: BuildContext) -> Dataset:
        tokenizer, specials = context.tokenizer, context.tokenizer.specials
        examples = []
        for lang, sentences in self.texts(context).items():
            injector = KBertInjector(shared_kb(self.kb, self.split), lambda text: tokenizer.encode(text, add_special_tokens=False),
                                     lang=self.kb_langs.get(lang, lang), max_branches=self.max_branches,
                                     max_length=self.max_length, cls_id=specials.cls, sep_id=specials.sep,
                                     pad_id=specials.pad)
            for sentence in sentences:
                tree = injector.tree(words(sentence))
                if self.linked_only and not any(tree.is_branch):
                    continue
                examples.append((tree, lang))
        if not examples:
            raise ConfigError(f"{self.where}: no sentence tree (no sentence{' with a linked mention' * self.linked_only})")
        return _Examples(examples, _identity("kb_trees", self.kb, self.sentences, self.kb_langs, self.max_branches,
                                             self.max_length, self.linked_only, self.limit, context.fingerprint,
                                             self.split))
