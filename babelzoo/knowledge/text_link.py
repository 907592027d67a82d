"""Link prediction by text: a bi-encoder ranks a graph's entities for a question (h, r, ?) or
(?, r, t) by the cosine of two sentence vectors, as SimKGC (Wang et al., ACL 2022) does.

- the question (h, r, ?) is the text ``"{text of h}, {words of r}"``; (?, r, t) is asked in the
  inverse direction, ``"{text of t}, inverse {words of r}"``;
- every entity is its own text (WN18RR: ``lemma, gloss``); the entity vectors live in a
  :class:`~babelzoo.knowledge.memory.RetrievalMemory` (an exact ``Flat`` index), which ranks them.

:class:`TextLinkPredictor` gives the ``score_tails`` / ``score_heads`` of a KG embedding model,
so the one filtered evaluator (:func:`babelzoo.knowledge.link_prediction.evaluate`) ranks text
models and structure models alike; every entity's score comes from one search of the memory over
all its entries, so the ranks are those of a brute-force scan.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from typing import Optional, Sequence

import numpy as np
import torch

from .base import KBError
from .kge import LinkPredictionData
from .memory import RetrievalMemory


@dataclass(frozen=True)
class TextFormat:
    """How questions and entities become text: e5-style prefixes (``"query: "``,
    ``"passage: "``), the word before an inverse relation, and the token budget of each text."""

    query_prefix: str = "query: "
    entity_prefix: str = "passage: "
    inverse: str = "inverse"
    max_length: int = 64

    def question(self, entity_text: str, relation_words: str, inverse: bool) -> str:
        words = f"{self.inverse} {relation_words}" if inverse else relation_words
        return f"{self.query_prefix}{entity_text}, {words}"

    def entity(self, entity_text: str) -> str:
        return f"{self.entity_prefix}{entity_text}"


def graph_texts(kb, data: LinkPredictionData, lang: str = "en") -> tuple[list[str], list[str]]:
    """The text of every entity and the words of every relation of ``data``, in index order."""
    entity_text = getattr(kb, "entity_text", None)
    entities = [entity_text(e, lang) if entity_text else kb.label(e, lang) for e in data.entities]
    relation_label = getattr(kb, "relation_label", None)
    relations = [relation_label(r, lang) if relation_label else r.replace("_", " ") for r in data.relations]
    return entities, relations


def graph_digest(entities: list[str], entity_texts: list[str], relations: list[str], relation_words: list[str]) -> str:
    """sha256 over the entity ids and texts and relation ids and words: which graph a model ranks."""
    digest = hashlib.sha256()
    for ident, text in (*zip(entities, entity_texts), *zip(relations, relation_words)):
        digest.update(ident.encode("utf-8") + b"\t" + text.encode("utf-8") + b"\n")
    return digest.hexdigest()


def question_indices(data: LinkPredictionData, entity: str, relation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The indices ([1], [1]) of a question's entity and relation ids, each checked against the graph."""
    try:
        e = data.entities.index(entity)
    except ValueError:
        raise KBError(f"unknown entity {entity!r}: not in the graph's {data.num_entities} entities") from None
    if relation not in data.relations:
        raise KBError(f"unknown relation {relation!r}; the graph's relations: {', '.join(data.relations)}")
    return torch.tensor([e]), torch.tensor([data.relations.index(relation)])



def top_answers(ranker, data: LinkPredictionData, entity_texts: Sequence[str], entity: str, relation: str, k: int,
                inverse: bool = False) -> list[tuple[str, str, float]]:
    """The ``k`` best answers of any ranker of ``data``'s entities (one with ``score_tails`` and
    ``score_heads``: a model, an ensemble, a re-ranker) to (entity, relation, ?), or
    (?, relation, entity) with ``inverse``, as (entity id, its text, score)."""
    e, r = question_indices(data, entity, relation)
    scores = ranker.score_heads(r, e) if inverse else ranker.score_tails(e, r)
    best, ids = scores[0].topk(min(k, data.num_entities))
    return [(data.entities[i], entity_texts[i], float(s)) for s, i in zip(best.tolist(), ids.tolist())]


class TextLinkPredictor:
    """Rank the entities of ``data`` by text with ``model`` (any babelzoo text model with a
    tokenizer, e.g. ``create_model("multilingual_e5_small", pretrained=True)``).

        predictor = TextLinkPredictor(model, kb, LinkPredictionData.from_kb(kb))
        evaluate(predictor, predictor.data, "test")        # filtered MRR, Hits@1/3/10
        predictor.predict("06845599", "_hypernym", k=5)     # [(entity, text, score), ...]
    """

    def __init__(self, model, kb, data: LinkPredictionData, text: TextFormat = TextFormat(), lang: str = "en",
                 batch_size: int = 128, memory: Optional[RetrievalMemory] = None):
        self.model, self.data, self.text, self.batch_size = model, data, text, batch_size
        self.entity_texts, self.relation_words = graph_texts(kb, data, lang)
        self.digest = graph_digest(data.entities, self.entity_texts, data.relations, self.relation_words)
        self.memory = memory
        if memory is not None and len(memory) != data.num_entities:
            raise KBError(f"the entity memory holds {len(memory)} vectors, the graph {data.num_entities} entities")

    def encode(self, texts: list[str]) -> np.ndarray:
        with torch.inference_mode():
            return self.model.encode(texts, batch_size=self.batch_size, max_length=self.text.max_length,
                                     normalize_embeddings=True)

    def index(self) -> RetrievalMemory:
        """Embed every entity's text into an exact cosine memory (entity index = memory id)."""
        vectors = self.encode([self.text.entity(t) for t in self.entity_texts])
        memory = RetrievalMemory(vectors.shape[1], "Flat", metric="cosine")
        memory.add(vectors, ids=np.arange(len(vectors)))
        self.memory = memory
        return memory

    def _questions(self, entities: torch.Tensor, relations: torch.Tensor, inverse: bool) -> np.ndarray:
        return self.encode([self.text.question(self.entity_texts[e], self.relation_words[r], inverse)
                            for e, r in zip(entities.tolist(), relations.tolist())])

    def _all_scores(self, questions: np.ndarray) -> torch.Tensor:
        """Every entity's score for each question [Q, N], from one search over the whole memory."""
        memory = self.memory if self.memory is not None else self.index()
        n = self.data.num_entities
        scores, ids = memory.search(questions, k=n)
        out = torch.full((len(questions), n), float("-inf"))
        out.scatter_(1, ids.clamp(min=0), scores)
        return out

    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self._all_scores(self._questions(h, r, inverse=False))

    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._all_scores(self._questions(t, r, inverse=True))

    def predict(self, entity: str, relation: str, k: int = 10, inverse: bool = False) -> list[tuple[str, str, float]]:
        """The ``k`` best answers to (entity, relation, ?) (``inverse``: to (?, relation, entity)),
        as (entity id, its text, cosine)."""
        e, r = question_indices(self.data, entity, relation)
        memory = self.memory if self.memory is not None else self.index()
        question = self._questions(e, r, inverse)
        scores, ids = memory.search(question, k=min(k, self.data.num_entities))
        return [(self.data.entities[i], self.entity_texts[i], float(s))
                for s, i in zip(scores[0].tolist(), ids[0].tolist()) if i >= 0]

    def settings(self) -> dict:
        """What a saved ranker records: its text format and the graph it indexed."""
        return {"text": asdict(self.text), "graph_sha256": self.digest, "entities": self.data.num_entities,
                "relations": self.data.num_relations}
