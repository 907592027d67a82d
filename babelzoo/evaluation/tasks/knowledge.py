"""Knowledge tasks for sentence encoders: cross-lingual entity linking on the embedded CLDR
knowledge base, and zero-shot link prediction on CoDEx-S.

``cldr_linking`` — a mention (a name of an entity in language X: its CLDR label or an ISO alias)
is linked to the entity it names among *all* entities of that type (territories, languages,
currencies, scripts). Each entity is represented by an English description built from the
knowledge base — its label, its type and a few facts, e.g. "Japan, a territory; currency: Japanese
Yen; official language: Japanese; located in: Eastern Asia" — so the encoder must map a
foreign name onto a described concept, as a bi-encoder entity linker does (Wu et al., 2020,
"Scalable Zero-shot Entity Linking with Dense Entity Retrieval"; Botha et al., 2020, "Entity
Linking in 100 Languages"). accuracy@1 by cosine nearest description. Unlike ``bli_cldr``
(English name → X name, word translation between names of all categories), queries here are in
X, keys are English descriptions with facts, candidates are restricted to the mention's type,
aliases count as mentions, and a mention equal to one of the entity's English names is left
out, so every query needs a cross-lingual match. Mentions are names of the held-out entities
(the fixed 25% split of :func:`babelzoo.knowledge.facts.is_heldout_entity`), whose facts no
model trained by ``babelzoo demo`` has seen; candidates are all entities of the type.

``codex_link_prediction`` — SimKGC-style zero-shot link prediction (Wang et al., ACL 2022,
"SimKGC: Simple Contrastive Knowledge Graph Completion with Pre-Trained Language Models",
without its training): a tail query (h, r, ?) is the text "label(h) label(r)", a head query
(?, r, t) the text "label(t) inverse label(r)"; every entity is its label; candidates are ranked
by cosine similarity. Filtered MRR and Hits@1/3/10 (Bordes et al., 2013; ties count half), head
and tail averaged, on the CoDEx-S test split — the protocol of
:func:`babelzoo.knowledge.link_prediction.evaluate` used for the KG embedding models.

``wn18rr_link_prediction`` — the WN18RR test split (Dettmers et al., 2018; entity texts as
KG-BERT, StAR and SimKGC publish them), ranked by :func:`babelzoo.knowledge.link_prediction.evaluate`,
the evaluator of ``babelzoo kb eval`` and ``benchmarks/kg_completion.py``: filtered over all
40,943 entities, head and tail averaged, ties at the mean rank. A row of kind ``kge`` naming a
link-prediction model folder (``babelzoo pretrain --config kgc_e5_small``: its ``model/``) or a
``train-kge`` folder ranks with its scorer, through its entity memory where it has one
(:class:`~babelzoo.knowledge.text_kge.GraphRanker`); a text encoder ranks zero-shot by text
(:class:`~babelzoo.knowledge.text_link.TextLinkPredictor`: a babelzoo model with e5's
``query: ``/``passage: `` prefixes, exactly as ``kb eval --model NAME`` does; any other encoder
with its own). Task option ``kg: DIR`` ranks another graph in the same layout.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Iterable, Optional, Sequence

import numpy as np
import torch

from ...errors import InputError
from . import TASKS, Result, TaskContext, TaskSkipped
from .lexicon import CLDR_LOCALES

LINKING_TYPES = ("territory", "language", "currency", "script")
LINKING_LANGS = ("de", "fr", "es", "ru", "ar", "zh-hans", "ja", "hi", "sw")
# facts first in a description: the most identifying relations of the CLDR knowledge base
FACT_ORDER = ("uses_currency", "official_language", "uses_script", "likely_territory", "dialect_of", "located_in",
              "regional_official_language", "spoken_language")


def _norm(name: str) -> str:
    from ...knowledge.linker import normalize_alias

    return normalize_alias(name)


def entity_description(kb, entity: str, facts: int = 3, lang: str = "en",
                       fact_order: Sequence[str] = FACT_ORDER) -> str:
    """"LABEL, a TYPE; RELATION: OBJECT; ..." in ``lang`` with up to ``facts`` facts: outgoing
    facts in ``fact_order`` (then any other relation), then incoming ones ("currency of: Japan"),
    each relation's objects by their number of facts (best known first)."""
    label = kb.label(entity, lang)
    kind = kb.entity_type(entity)
    text = f"{label}, a {kind}" if kind else label
    rank = {r: i for i, r in enumerate(fact_order)}
    outgoing = sorted(kb.triples(head=entity), key=lambda t: (rank.get(t.relation, len(rank)), t.relation,
                                                              -kb.degree(t.tail), t.tail))
    incoming = sorted(kb.triples(tail=entity), key=lambda t: (rank.get(t.relation, len(rank)), t.relation,
                                                              -kb.degree(t.head), t.head))
    parts = [f"{kb.relation_label(t.relation, lang)}: {kb.label(t.tail, lang)}" for t in outgoing]
    parts += [f"{kb.relation_label(t.relation, lang)} of: {kb.label(t.head, lang)}" for t in incoming]
    return "; ".join([text, *parts[:facts]])


def linking_set(kb, lang: str, kind: str, source_lang: str = "en", heldout_only: bool = True
                ) -> tuple[list[str], list[str], list[list[int]]]:
    """(candidates, mentions, gold) for one language and entity type. Candidates: every entity of
    ``kind`` with a name in ``source_lang``, in id order. Mentions: the distinct names of those
    entities in ``lang`` (labels and aliases) — with ``heldout_only``, of the held-out entities
    only (:func:`babelzoo.knowledge.facts.is_heldout_entity`, never in the demo's training facts)
    — minus names equal (after normalisation) to an English name of an entity they denote;
    gold[i]: indices of every candidate the mention names."""
    from ...knowledge.facts import is_heldout_entity

    candidates = sorted(e for e in kb.entities() if kb.entity_type(e) == kind and kb.labels(e, source_lang))
    index = {e: i for i, e in enumerate(candidates)}
    english = {e: {_norm(n) for n in kb.labels(e, source_lang)} for e in candidates}
    gold_of: dict[str, list[int]] = {}
    for entity in candidates:
        if heldout_only and not is_heldout_entity(entity):
            continue
        for name in kb.labels(entity, lang):
            if _norm(name) in english[entity]:
                continue
            gold_of.setdefault(name, [])
            if index[entity] not in gold_of[name]:
                gold_of[name].append(index[entity])
    mentions = sorted(gold_of)
    return candidates, mentions, [sorted(gold_of[m]) for m in mentions]


def linking_accuracy(mention_vectors, candidate_vectors, gold: Sequence[Sequence[int]]) -> float:
    """accuracy@1: the candidate most similar (cosine) to mention i is one of ``gold[i]``."""
    from ..metrics import cosine_matrix

    best = cosine_matrix(mention_vectors, candidate_vectors).argmax(axis=1)
    return float(np.mean([int(best[i]) in set(g) for i, g in enumerate(gold)])) if len(gold) else float("nan")


def evaluate_linking(encoder, kb, langs: Iterable[tuple[str, str]], kinds: Sequence[str] = LINKING_TYPES,
                     facts: int = 3, limit: Optional[int] = None, seed: int = 0, task: str = "cldr_linking",
                     log=None, heldout_only: bool = True) -> list[Result]:
    """One :class:`Result` per language: accuracy@1 over the mentions of every type in ``kinds``
    (each against the candidates of its own type); per-type accuracies and counts go into the
    protocol. ``langs``: (encoder language code, knowledge-base language code) pairs.
    ``limit``: at most that many mentions per language and type (a seeded sample)."""
    descriptions = {}
    for kind in kinds:
        candidates = sorted(e for e in kb.entities() if kb.entity_type(e) == kind and kb.labels(e, "en"))
        if candidates:
            texts = [entity_description(kb, e, facts) for e in candidates]
            descriptions[kind] = (candidates, encoder.encode(texts, lang="en"), texts[:2])
    results = []
    for code, kb_lang in langs:
        correct, total, per_type, sizes = 0.0, 0, {}, {}
        for kind, (candidates, vectors, _) in descriptions.items():
            found, mentions, gold = linking_set(kb, kb_lang, kind, heldout_only=heldout_only)
            if found != candidates:
                raise RuntimeError(f"candidate lists of {kind} differ between descriptions and mentions")
            if limit and len(mentions) > limit:
                keep = sorted(random.Random(f"{seed}-{kb_lang}-{kind}").sample(range(len(mentions)), limit))
                mentions, gold = [mentions[i] for i in keep], [gold[i] for i in keep]
            if not mentions:
                continue
            accuracy = linking_accuracy(encoder.encode(mentions, lang=code), vectors, gold)
            per_type[kind], sizes[kind] = round(accuracy, 4), {"mentions": len(mentions), "candidates": len(candidates)}
            correct, total = correct + accuracy * len(mentions), total + len(mentions)
        if not total:
            continue
        protocol = {**encoder.protocol, "source": "CLDR (babel) + ISO 3166/4217 (pycountry) names", "direction":
                    f"{code} mention -> en description", "kb_language": kb_lang, "types": list(descriptions),
                    "facts_per_description": facts, "per_type": per_type, "sizes": sizes, "n": total,
                    "candidates": "all entities of the mention's type",
                    "excluded": "mentions equal to an English name of their entity",
                    "mentions": "names of held-out entities (sha1 split, 25%)" if heldout_only else "all names",
                    "description_example": descriptions[next(iter(descriptions))][2][0]}
        results.append(Result(task, encoder.name, f"acc@1 {code}", correct / total, protocol,
                              family="acc@1 X→entity"))
        if log is not None:
            by_type = ", ".join(f"{kind} {acc:.3f} of {sizes[kind]['mentions']}" for kind, acc in per_type.items())
            log(f"  {task} {code}: acc@1 {correct / total:.3f} over {total} mention{'s' * (total != 1)} ({by_type})")
    return results


@TASKS.register
def cldr_linking(encoder, context: TaskContext) -> list[Result]:
    """Cross-lingual entity linking on the embedded CLDR knowledge base: mentions in X (labels
    and aliases of territories, languages, currencies, scripts) against English entity
    descriptions (label, type, three facts), accuracy@1 among all entities of the mention's type."""
    from ...knowledge import load_kb

    langs = [lang for lang in (context.languages or LINKING_LANGS) if lang in CLDR_LOCALES]
    if not langs:
        raise TaskSkipped(f"no CLDR locale for {context.languages}; known: {', '.join(CLDR_LOCALES)}")
    kb = load_kb("cldr")
    return evaluate_linking(encoder, kb, [(lang, CLDR_LOCALES[lang]) for lang in langs], limit=context.limit,
                            seed=context.seed, log=context.log)


# --- CoDEx-S link prediction -------------------------------------------------------------------

CODEX_LANGS = ("en", "de", "es", "ru", "ar", "zh")


def text_link_prediction(encoder, kb, data, split: str = "test", lang: str = "en",
                         limit: Optional[int] = None) -> dict[str, float]:
    """Zero-shot filtered link prediction with a sentence encoder (module docstring): queries in
    ``lang`` (entity and relation labels of that language, English when missing), entities as
    English labels. ``data``: the :class:`~babelzoo.knowledge.kge.LinkPredictionData` of ``kb``."""
    from ...knowledge.link_prediction import KnownTriples, filtered_ranks, rank_metrics

    triples = data.split(split)
    if limit:
        triples = triples[:limit]
    entity_vectors = torch.from_numpy(encoder.encode([kb.label(e, "en") for e in data.entities], lang="en"))
    tail_queries = [f"{kb.label(data.entities[h], lang)} {kb.relation_label(data.relations[r], lang)}"
                    for h, r, _ in triples.tolist()]
    head_queries = [f"{kb.label(data.entities[t], lang)} inverse {kb.relation_label(data.relations[r], lang)}"
                    for _, r, t in triples.tolist()]
    known = KnownTriples(data)
    ranks = {}
    for side, queries, target, keys in (
            ("tail", tail_queries, triples[:, 2], list(zip(triples[:, 0].tolist(), triples[:, 1].tolist()))),
            ("head", head_queries, triples[:, 0], list(zip(triples[:, 1].tolist(), triples[:, 2].tolist())))):
        scores = torch.from_numpy(encoder.encode(queries, lang=lang)) @ entity_vectors.T
        ranks[side] = filtered_ranks(scores, target, known.mask(keys, side, len(data.entities)))
    return {**rank_metrics(torch.cat([ranks["tail"], ranks["head"]])), **rank_metrics(ranks["tail"], "tail_"),
            **rank_metrics(ranks["head"], "head_")}


def kge_link_prediction(encoder, data, context: TaskContext) -> list[Result]:
    """Filtered link prediction on the test split with a trained KG embedding model, whose entity
    and relation tables must follow ``data``'s ids (trained on the same graph)."""
    from ...knowledge.link_prediction import evaluate

    for what, mine, theirs in (("entities", encoder.entities, data.entities),
                               ("relations", encoder.relations, data.relations)):
        if list(mine) != list(theirs):
            unknown = sorted(set(mine) ^ set(theirs))[:3]
            raise InputError(f"model {encoder.name!r} was trained on other {what} than this CoDEx-S folder "
                             f"({len(mine)} vs {len(theirs)}{', e.g. ' + ', '.join(unknown) if unknown else ', in another order'})")
    metrics = evaluate(encoder.model, data, "test")
    protocol = {**encoder.protocol, "split": "test", "n": len(data.test), "filtered": True, "ties": "half",
                "query": "(h, r, ?) and (?, r, t) over the model's entity table", "candidates": data.num_entities,
                "head_mrr": round(metrics["head_mrr"], 4), "tail_mrr": round(metrics["tail_mrr"], 4)}
    context.log(f"  codex_link_prediction (KG embeddings): MRR {metrics['mrr']:.3f}, Hits@10 {metrics['hits@10']:.3f}")
    return [Result("codex_link_prediction", encoder.name, family, metrics[metric], protocol, family=family)
            for metric, family in (("mrr", "MRR"), ("hits@1", "Hits@1"), ("hits@10", "Hits@10"))]


def _labelled_share(kb, entities: Sequence[str], lang: str) -> float:
    return sum(1 for e in entities if kb.labels(e, lang)) / max(len(entities), 1)


@TASKS.register
def codex_link_prediction(encoder, context: TaskContext) -> list[Result]:
    """CoDEx-S (Safavi & Koutra, 2020) test split, zero-shot SimKGC-style link prediction with
    the encoder: filtered MRR and Hits@1/3/10, head and tail averaged. Needs the CoDEx-S folder
    with entity labels (``entities/en.json``, from the CoDEx repository's ``data/entities``)."""
    from ...knowledge.codex import read_codex
    from ...knowledge.kge import LinkPredictionData
    from ..encoders import KGEModelEncoder

    folder = context.data_dir / "codex-s" if context.data_dir is not None else None
    if folder is None or not folder.is_dir():
        raise TaskSkipped("CoDEx-S needs --data-dir with a codex-s/ folder")
    kb = read_codex(folder, name="codex-s", size="s")
    data = LinkPredictionData.from_kb(kb)
    if isinstance(encoder, KGEModelEncoder):
        return kge_link_prediction(encoder, data, context)
    share = _labelled_share(kb, data.entities, "en")
    if share < 0.9:
        raise TaskSkipped(f"{folder} has English labels for {share:.0%} of its entities; the text protocol "
                          f"ranks entities by their names, so it needs entities/en.json (CoDEx repository, "
                          f"data/entities/en/entities.json). KG embedding models (leaderboard rows of kind kge) need "
                          f"no names")
    langs = ["en"] + [lang for lang in (context.languages or ()) if lang in CODEX_LANGS and lang != "en"
                      and _labelled_share(kb, data.entities, lang) >= 0.9]
    results = []
    for lang in langs:
        metrics = text_link_prediction(encoder, kb, data, "test", lang, context.limit)
        n = min(len(data.test), context.limit or len(data.test))
        protocol = {**encoder.protocol, "split": "test", "n": n, "filtered": True, "ties": "half",
                    "query": f"label(h) label(r) / label(t) inverse label(r), in {lang}",
                    "entity_text": "English label", "candidates": data.num_entities, "direction": f"{lang}->en",
                    "head_mrr": round(metrics["head_mrr"], 4), "tail_mrr": round(metrics["tail_mrr"], 4)}
        suffix = "" if lang == "en" else f" {lang}"
        for metric, family in (("mrr", "MRR"), ("hits@1", "Hits@1"), ("hits@10", "Hits@10")):
            results.append(Result("codex_link_prediction", encoder.name, f"{family}{suffix}", metrics[metric],
                                  protocol, family=family))
        context.log(f"  codex_link_prediction {lang}: MRR {metrics['mrr']:.3f}, Hits@10 {metrics['hits@10']:.3f}")
    return results


# --- WN18RR (or any graph in its layout) link prediction ---------------------------------------------


class _SentenceModel:
    """A leaderboard encoder seen as the text model a
    :class:`~babelzoo.knowledge.text_link.TextLinkPredictor` calls."""

    def __init__(self, encoder):
        self.encoder = encoder

    def encode(self, texts, batch_size=None, max_length=None, normalize_embeddings: bool = False) -> np.ndarray:
        vectors = np.asarray(self.encoder.encode(texts, lang="en"), dtype=np.float32)
        if normalize_embeddings:
            vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        return vectors


def graph_ranker(encoder, kb, data):
    """The ranker of ``data``'s entities a leaderboard row gives (module docstring), and what the
    protocol records of it."""
    from ...knowledge.text_kge import GraphRanker
    from ...knowledge.text_link import TextFormat, TextLinkPredictor
    from ..encoders import BabelEncoder, CachedEncoder, KGEModelEncoder

    if isinstance(encoder, CachedEncoder):  # the graph's texts are shared with no other task
        encoder = encoder.encoder
    if isinstance(encoder, KGEModelEncoder):
        if encoder.directory is None:
            raise TaskSkipped(f"model {encoder.name!r} was built in code, not loaded from a folder: a scorer is "
                              f"ranked from its folder, which names the graph it was trained on")
        ranker = GraphRanker.from_folder(encoder.directory, kb, data)
        return ranker, {"ranker": "scorer", **ranker.settings()}
    if isinstance(encoder, BabelEncoder):
        ranker = TextLinkPredictor(encoder.model, kb, data)
    else:
        ranker = TextLinkPredictor(_SentenceModel(encoder), kb, data, TextFormat(query_prefix="", entity_prefix=""))
    return ranker, {"ranker": "text, zero-shot", **ranker.settings()}


@TASKS.register
def wn18rr_link_prediction(encoder, context: TaskContext) -> list[Result]:
    """WN18RR test split (Dettmers et al., 2018), filtered link prediction over every entity:
    MRR, Hits@1, Hits@3 and Hits@10, head and tail averaged; the evaluator of ``babelzoo kb eval``
    (module docstring). Needs ``wn18rr/`` in the data dir, or task option ``kg: DIR``."""
    from pathlib import Path

    from ...knowledge.base import KBError, load_kb
    from ...knowledge.kge import LinkPredictionData
    from ...knowledge.link_prediction import KnownTriples, evaluate

    options = dict(context.options.get("wn18rr_link_prediction") or {})
    if set(options) - {"kg"}:
        raise InputError(f"task_options.wn18rr_link_prediction: unknown key(s) {sorted(set(options) - {'kg'})}; "
                         f"valid keys: kg")
    folder = Path(options["kg"]) if "kg" in options else (context.data_dir / "wn18rr" if context.data_dir else None)
    if folder is None or not folder.is_dir():
        raise TaskSkipped("WN18RR needs --data-dir with a wn18rr/ folder (or task_options.wn18rr_link_prediction.kg)")
    try:
        kb = load_kb(folder)
        data = LinkPredictionData.from_kb(kb)
        ranker, settings = graph_ranker(encoder, kb, data)
    except KBError as err:
        raise InputError(f"wn18rr_link_prediction, model {encoder.name!r}: {err}") from None
    filters = KnownTriples(data)  # every split's triples, also those a --limit leaves out
    if context.limit:
        data = dataclasses.replace(data, test=data.test[:context.limit])
    metrics = evaluate(ranker, data, "test", filters=filters)
    protocol = {**encoder.protocol, **settings, "kg": str(folder), "split": "test", "n": len(data.test),
                "filtered": True, "ties": "mean rank", "candidates": data.num_entities,
                "head_mrr": round(metrics["head_mrr"], 4), "tail_mrr": round(metrics["tail_mrr"], 4)}
    context.log(f"  wn18rr_link_prediction: MRR {metrics['mrr']:.3f}, Hits@10 {metrics['hits@10']:.3f}")
    return [Result("wn18rr_link_prediction", encoder.name, family, metrics[metric], protocol, family=family)
            for metric, family in (("mrr", "MRR"), ("hits@1", "Hits@1"), ("hits@3", "Hits@3"), ("hits@10", "Hits@10"))]
