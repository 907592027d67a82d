"""Sentence encoders the benchmark tasks compare: any babelzoo model (mean-pooled layer, as in
XTREME), and peers run by the same harness (multilingual USE, all-MiniLM-L6-v2).

An encoder maps a list of sentences to an L2-normalised [N, D] float32 array and describes its
protocol (layer, pooling, prefix) so that every number can be stored with it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Protocol, Sequence

import numpy as np
import torch

from .._files import read_json_object
from ..knowledge.base import KBError
from ..knowledge.kge import KGE_CONFIG, load_kge
from ..registry import Registry
from ..zoo.sentences import embed_rows, encode_sentences, language_index
from .tasks import TaskSkipped


class SentenceEncoder(Protocol):
    name: str

    @property
    def protocol(self) -> dict[str, Any]: ...

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray: ...


@dataclass
class BabelEncoder:
    """Pool the non-padding tokens of one layer of a babelzoo model: by ``pooling`` (None: the
    mean, or the pooling the model's architecture fixes, InferSent's max; see
    :meth:`~babelzoo.zoo.model.BabelModel.sentence_embedding`).

    ``layer`` indexes ``hidden_states`` (0 = embeddings, -1 = last layer, 8 = XTREME's choice
    for 12-layer models). Sentences are tokenized first, then sorted by token count and batched
    (see :meth:`encode_ids`), so padding work is small; the output keeps the input order.
    ``unpad=True`` (the default) runs the model on the real tokens only (``model(...,
    unpad=True)``): embeddings, projections and feed-forward layers on the packed tokens,
    attention one run of equal-length sentences at a time, so no work is spent on padding at all
    (a family that cannot pack, e.g. Transformer-XL, runs padded); ``unpad=False`` runs the
    padded batches."""

    name: str
    model: torch.nn.Module
    tokenizer: Any
    layer: int = -1
    prefix: str = ""
    batch_size: int = 64
    max_length: int = 128
    use_language_ids: bool = True
    unpad: bool = True
    pooling: Optional[str] = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Never longer than the model's positions: a long sentence is truncated, not an error
        # that fails a whole task (the protocol records the length actually used).
        text = getattr(getattr(self.model, "config", None), "text", None)
        if text is not None:
            self.max_length = min(self.max_length, text.max_positions)

    @property
    def protocol(self) -> dict[str, Any]:
        return {"pooling": self.model.sentence_pooling(self.pooling, default="mean"), "layer": self.layer, "prefix": self.prefix, "max_length": self.max_length,
                "similarity": "cosine", **self.extra}

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray:
        """[N, D] L2-normalised float32 vectors, one per sentence, in input order
        (:func:`~babelzoo.zoo.sentences.encode_sentences`, which ``model.encode`` runs too)."""
        return encode_sentences(self.model, self.tokenizer, list(sentences), prefix=self.prefix,
                                max_length=self.max_length, **self._options(lang))

    def encode_ids(self, rows: Sequence[Sequence[int]], lang: Optional[str] = None) -> np.ndarray:
        """Like :meth:`encode`, from token ids (special tokens included, already truncated),
        batched by :func:`~babelzoo.zoo.sentences.sorted_batches`: sorted by token count, each
        batch padded only to its own longest row. Pooling reads real tokens only, so the result
        does not depend on how sentences are grouped."""
        return embed_rows(self.model, rows, self.tokenizer.specials.pad, **self._options(lang))

    def _options(self, lang: Optional[str]) -> dict[str, Any]:
        language = language_index(self.model, self.tokenizer, lang) if self.use_language_ids else None
        return dict(batch_size=self.batch_size, layer=self.layer, pooling=self.pooling, language=language,
                    unpad=self.unpad, normalize=True)


class CachedEncoder:
    """Any encoder, remembering every sentence it has embedded (per language): tasks that share
    sentences (the SIB-200 probe and Flores retrieval, every language pair's English side) pay
    for each once. Everything else is the wrapped encoder's (``.model``, ``.tokenizer``)."""

    def __init__(self, encoder: Any):
        self.encoder = encoder
        self._vectors: dict[Optional[str], dict[str, np.ndarray]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.encoder, name)

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray:
        known = self._vectors.setdefault(lang, {})
        missing = list(dict.fromkeys(s for s in sentences if s not in known))
        if missing:
            known.update(zip(missing, self.encoder.encode(missing, lang=lang)))
        if not sentences:
            return self.encoder.encode([], lang=lang)
        return np.stack([known[s] for s in sentences])


@dataclass
class KGEModelEncoder:
    """A trained KG embedding model on the leaderboard (``babelzoo kb train-kge --out DIR``, or
    ``benchmarks/codex_link_prediction.py --save DIR``): it ranks the entities of its own table
    for (h, r, ?) and (?, r, t), so it takes part in link prediction and in nothing that reads text."""

    name: str
    model: Any
    entities: list[str]
    relations: list[str]
    info: dict[str, Any] = field(default_factory=dict)
    directory: Optional[Path] = None  # the folder it was loaded from (a link-prediction model's, with its memory)

    @classmethod
    def load(cls, name: str, directory) -> "KGEModelEncoder":
        model, entities, relations = load_kge(directory)
        info = read_json_object(Path(directory) / KGE_CONFIG, KBError)
        return cls(name, model, entities, relations, {k: info[k] for k in ("model", "dim", "data") if k in info},
                   Path(directory))

    @property
    def protocol(self) -> dict[str, Any]:
        return {"kge": self.info.get("model"), "dim": self.info.get("dim"), "trained_on": self.info.get("data")}

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray:
        raise TaskSkipped("a KG embedding model scores entities of its graph; it does not encode text")


PEER_ENTRY_POINT_GROUP = "babelzoo.peers"
# peers that installed packages ship (the offline sources' and plug-ins') register through the
# entry-point group
PEERS: Registry[Callable[[], Any]] = Registry("peer", group=PEER_ENTRY_POINT_GROUP)


def register_peer(name: str):
    """Decorator: register a function (or class) that builds a peer encoder under ``name``."""
    return PEERS.register(name=name)


def build_peer(name: str):
    """A new instance of the peer ``name`` (built-in, registered, or an installed plug-in)."""
    return PEERS.get(name)()
