"""Sentence encoders the benchmark tasks compare: any babelzoo model (mean-pooled layer, as in
XTREME), and peers run by the same harness (multilingual USE, all-MiniLM-L6-v2).

An encoder maps a list of sentences to an L2-normalised [N, D] float32 array and describes its
protocol (layer, pooling, prefix) so that every number can be stored with it."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

import numpy as np
import torch

from ..registry import Registry
from .metrics import l2_normalise


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

    def _language_ids(self, lang: Optional[str], shape) -> Optional[torch.Tensor]:
        text = self.model.config.text
        if not (self.use_language_ids and text.num_languages and lang):
            return None
        index = self.tokenizer.specials.languages.get(lang)
        return None if index is None or index >= text.num_languages else torch.full(shape, index, dtype=torch.long)

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray:
        """[N, D] L2-normalised float32 vectors, one per sentence, in input order."""
        texts = [self.prefix + s for s in sentences]
        rows = self.tokenizer.batch_encode(texts, max_length=self.max_length, padding=False, truncation=True,
                                           return_tensors=None)["input_ids"]
        return self.encode_ids(rows, lang)

    @torch.no_grad()
    def encode_ids(self, rows: Sequence[Sequence[int]], lang: Optional[str] = None) -> np.ndarray:
        """Like :meth:`encode`, from token ids (special tokens included, already truncated).

        Rows are sorted by token count and cut into batches of ``batch_size``, so each batch is
        padded only to its own longest row: on real sentences of mixed length this removes most
        of the padding (and its attention and feed-forward work) that batching in input order
        pays for. A batch whose rows all have one length carries no mask at all, so SDPA takes
        its fastest kernel. Pooling reads real tokens only, so the result does not depend on how
        sentences are grouped."""
        was_training = self.model.training
        self.model.eval()
        pad = self.tokenizer.specials.pad
        order = sorted(range(len(rows)), key=lambda i: len(rows[i]))
        out = np.zeros((len(rows), self.model.config.text.hidden_size), dtype=np.float32)
        device = next(self.model.parameters()).device
        for start in range(0, len(order), self.batch_size):
            index = order[start:start + self.batch_size]
            width = max(len(rows[i]) for i in index)
            ids = torch.full((len(index), width), pad, dtype=torch.long)
            mask = torch.zeros((len(index), width), dtype=torch.long)
            for r, i in enumerate(index):
                ids[r, :len(rows[i])] = torch.as_tensor(rows[i], dtype=torch.long)
                mask[r, :len(rows[i])] = 1
            ids, mask = ids.to(device), mask.to(device)
            lang_ids = self._language_ids(lang, ids.shape)
            states = self.model(ids, attention_mask=mask, language_ids=None if lang_ids is None else lang_ids.to(device),
                                output_hidden_states=self.layer != -1, unpad=self.unpad)
            hidden = states.last_hidden if self.layer == -1 else states.hidden_states[self.layer]
            pooled = self.model.sentence_embedding(hidden, mask, self.pooling, default="mean")
            out[index] = pooled.float().cpu().numpy()
        self.model.train(was_training)
        return l2_normalise(out)


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

    @classmethod
    def load(cls, name: str, directory) -> "KGEModelEncoder":
        from pathlib import Path

        from .._files import read_json_object
        from ..knowledge.base import KBError
        from ..knowledge.kge import KGE_CONFIG, load_kge

        model, entities, relations = load_kge(directory)
        info = read_json_object(Path(directory) / KGE_CONFIG, KBError)
        return cls(name, model, entities, relations, {k: info[k] for k in ("model", "dim", "data") if k in info})

    @property
    def protocol(self) -> dict[str, Any]:
        return {"kge": self.info.get("model"), "dim": self.info.get("dim"), "trained_on": self.info.get("data")}

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None) -> np.ndarray:
        from .tasks import TaskSkipped

        raise TaskSkipped("a KG embedding model scores entities of its graph; it does not encode text")


PEERS: Registry[Callable[[], Any]] = Registry("peer")
# peers that installed packages ship, registered by the offline sources (found by name)
BUILTIN_PEERS = {"muse_v3": "babelzoo.sources.peers", "all_minilm_l6_v2": "babelzoo.sources.peers"}
PEER_ENTRY_POINT_GROUP = "babelzoo.peers"


def register_peer(name: str):
    """Decorator: register a function (or class) that builds a peer encoder under ``name``."""
    return PEERS.register(name=name)


def build_peer(name: str):
    """A new instance of the peer ``name`` (built-in, registered, or an installed plug-in)."""
    from importlib.metadata import entry_points

    if name not in PEERS and name in BUILTIN_PEERS:
        importlib.import_module(BUILTIN_PEERS[name])
    if name not in PEERS:
        for point in entry_points(group=PEER_ENTRY_POINT_GROUP):
            point.load()
        for module in dict.fromkeys(BUILTIN_PEERS.values()):
            importlib.import_module(module)
    return PEERS.get(name)()
