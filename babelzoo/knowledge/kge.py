"""Knowledge-graph embedding models: TransE, DistMult, ComplEx, RotatE.

Every model scores a triple (h, r, t) with a plausibility f(h, r, t) (higher = more plausible) and
can score all entities at once as tails (``score_tails``) or heads (``score_heads``), which
training with 1-vs-all and link-prediction evaluation need. Training and evaluation live in
:mod:`babelzoo.knowledge.link_prediction`.

- TransE (Bordes et al., 2013): f = γ − ‖h + r − t‖_p.
- DistMult (Yang et al., 2015): f = Σ_k h_k r_k t_k.
- ComplEx (Trouillon et al., 2016): f = Re(Σ_k h_k r_k conj(t_k)), h, r, t ∈ ℂ^d.
- RotatE (Sun et al., 2019): f = γ − Σ_k |h_k r_k − t_k|, |r_k| = 1 (a rotation by phase θ_k).

``reciprocal=True`` (Lacroix et al., 2018) gives every relation an inverse r⁻¹ and predicts heads
as tails of the inverse: score_heads(r, t) = score_tails(t, r⁻¹).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .._files import read_json_object, replace_owned_folder, write_json_atomic
from ..registry import Registry
from .base import KBError

KGE_MODELS: Registry[type["KGEModel"]] = Registry(
    "KG embedding model", builtin={"aligned_text_complex": "babelzoo.knowledge.multilingual"})


@dataclass
class LinkPredictionData:
    """Triples as index tensors [N, 3] of (head, relation, tail), with the id ↔ index tables."""

    entities: list[str]
    relations: list[str]
    train: torch.Tensor
    valid: torch.Tensor
    test: torch.Tensor

    @classmethod
    def from_kb(cls, kb, splits: Sequence[str] = ("train", "valid", "test")) -> "LinkPredictionData":
        """Index a knowledge base read with splits (``kb.splits``: CoDEx, OpenKE, split files);
        a KB without splits gives all its triples as ``train``."""
        entities, relations = list(kb.entities()), list(kb.relations())
        e_index = {e: i for i, e in enumerate(entities)}
        r_index = {r: i for i, r in enumerate(relations)}
        source = getattr(kb, "splits", None) or {"train": kb.triples()}

        def encode(name: str) -> torch.Tensor:
            rows = source.get(name, [])
            try:
                return torch.tensor([[e_index[h], r_index[r], e_index[t]] for h, r, t in rows],
                                    dtype=torch.long).reshape(-1, 3)
            except KeyError as err:
                raise KBError(f"{name} split names {err.args[0]!r}, which the knowledge base lacks") from None

        return cls(entities, relations, *(encode(name) for name in splits))

    @property
    def num_entities(self) -> int:
        return len(self.entities)

    @property
    def num_relations(self) -> int:
        return len(self.relations)

    def split(self, name: str) -> torch.Tensor:
        if name not in ("train", "valid", "test"):
            raise KBError(f"split {name!r} must be 'train', 'valid' or 'test'")
        return getattr(self, name)


class KGEModel(nn.Module, abc.ABC):
    """Base: entity and relation embedding tables plus the scoring interface."""

    complex_valued = False

    def __init__(self, num_entities: int, num_relations: int, dim: int, reciprocal: bool = False):
        super().__init__()
        for name, value in (("num_entities", num_entities), ("num_relations", num_relations), ("dim", dim)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise KBError(f"{type(self).__name__}: {name}={value!r} must be a positive integer")
        self.num_entities, self.num_base_relations, self.dim = num_entities, num_relations, dim
        self.reciprocal = reciprocal
        width = 2 * dim if self.complex_valued else dim
        self.entity = nn.Embedding(num_entities, width)
        self.relation = nn.Embedding(num_relations * (2 if reciprocal else 1), self.relation_width(width))
        self.reset_parameters()

    def relation_width(self, entity_width: int) -> int:
        return entity_width

    def hyperparameters(self) -> dict:
        """The constructor's keyword arguments beyond the sizes (what :func:`load_kge` needs)."""
        return {"reciprocal": self.reciprocal}

    def reset_parameters(self) -> None:
        nn.init.xavier_normal_(self.entity.weight)
        nn.init.xavier_normal_(self.relation.weight)

    def inverse(self, r: torch.Tensor) -> torch.Tensor:
        return r + self.num_base_relations

    @abc.abstractmethod
    def _score(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Elementwise: [..., W] embeddings → [...] scores (broadcasting)."""

    def _tails(self, h: torch.Tensor, r: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """[B, W] heads and relations against [N, W] candidate tails → [B, N]."""
        return self._score(h[:, None], r[:, None], candidates[None])

    def _heads(self, r: torch.Tensor, t: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        return self._score(candidates[None], r[:, None], t[:, None])

    def entity_vectors(self, index: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The vectors of the entities ``index`` (all entities when None) that the scores use:
        the rows of the entity table here; models that build entities from more (text) say how."""
        return self.entity.weight if index is None else self.entity(index)

    # public scoring API on indices
    def score(self, h: torch.Tensor, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._score(self.entity_vectors(h), self.relation(r), self.entity_vectors(t))

    def score_tails(self, h: torch.Tensor, r: torch.Tensor, candidates: Optional[torch.Tensor] = None) -> torch.Tensor:
        """f(h, r, e) for every entity e (or for ``candidates`` [B, K] per query) → [B, N or K]."""
        if candidates is not None:
            return self._score(self.entity_vectors(h)[:, None], self.relation(r)[:, None],
                               self.entity_vectors(candidates))
        return self._tails(self.entity_vectors(h), self.relation(r), self.entity_vectors())

    def score_heads(self, r: torch.Tensor, t: torch.Tensor, candidates: Optional[torch.Tensor] = None) -> torch.Tensor:
        """f(e, r, t) for every entity e (or ``candidates`` [B, K]) → [B, N or K]."""
        if self.reciprocal:
            return self.score_tails(t, self.inverse(r), candidates)
        if candidates is not None:
            return self._score(self.entity_vectors(candidates), self.relation(r)[:, None],
                               self.entity_vectors(t)[:, None])
        return self._heads(self.relation(r), self.entity_vectors(t), self.entity_vectors())

    def one_vs_all_loss(self, e: torch.Tensor, r: torch.Tensor, answers: torch.Tensor,
                        label_smoothing: float = 0.0) -> torch.Tensor:
        """Cross-entropy of each tail question (e, r, ?)'s answer against every entity."""
        return F.cross_entropy(self.score_tails(e, r), answers, label_smoothing=label_smoothing)

    def entity_embeddings(self) -> torch.Tensor:
        """[N, W] entity vectors (complex models: real parts then imaginary parts)."""
        with torch.no_grad():
            return self.entity_vectors().detach()

    def regularizer(self, triples: torch.Tensor, kind: str) -> torch.Tensor:
        """``l2``: mean squared norm of the batch's embeddings; ``n3`` (Lacroix et al., 2018):
        mean cubed modulus, Σ|h|³ + |r|³ + |t|³."""
        h, r, t = (self.entity_vectors(triples[:, 0]), self.relation(triples[:, 1]),
                   self.entity_vectors(triples[:, 2]))
        if kind == "l2":
            return (h.pow(2).sum(-1) + r.pow(2).sum(-1) + t.pow(2).sum(-1)).mean()
        if kind == "n3":
            return sum(_modulus(x, self.complex_valued).pow(3).sum(-1) for x in (h, r, t)).mean()
        raise KBError(f"regularizer {kind!r} must be 'l2' or 'n3'")


def _modulus(x: torch.Tensor, complex_valued: bool) -> torch.Tensor:
    if not complex_valued or x.shape[-1] % 2:
        return x.abs()
    re, im = x.chunk(2, dim=-1)
    return torch.sqrt(re * re + im * im + 1e-12)


@KGE_MODELS.register(name="transe")
class TransE(KGEModel):
    """f = γ − ‖h + r − t‖_p (Bordes et al., 2013)."""

    def __init__(self, num_entities: int, num_relations: int, dim: int, reciprocal: bool = False,
                 p: int = 2, gamma: float = 0.0):
        self.p, self.gamma = p, gamma
        super().__init__(num_entities, num_relations, dim, reciprocal)

    def hyperparameters(self) -> dict:
        return {**super().hyperparameters(), "p": self.p, "gamma": self.gamma}

    def _score(self, h, r, t):
        return self.gamma - torch.linalg.vector_norm(h + r - t, ord=self.p, dim=-1)

    def _tails(self, h, r, candidates):
        return self.gamma - torch.cdist(h + r, candidates, p=self.p)

    def _heads(self, r, t, candidates):
        return self.gamma - torch.cdist(t - r, candidates, p=self.p)  # ‖h + r − t‖ = ‖h − (t − r)‖


@KGE_MODELS.register(name="distmult")
class DistMult(KGEModel):
    """f = Σ h ∘ r ∘ t (Yang et al., 2015)."""

    def _score(self, h, r, t):
        return (h * r * t).sum(-1)

    def _tails(self, h, r, candidates):
        return (h * r) @ candidates.T

    def _heads(self, r, t, candidates):
        return (r * t) @ candidates.T


@KGE_MODELS.register(name="complex")
class ComplEx(KGEModel):
    """f = Re(⟨h, r, conj(t)⟩) with h, r, t ∈ ℂ^d (Trouillon et al., 2016); stored as
    [real | imaginary] halves."""

    complex_valued = True

    def _score(self, h, r, t):
        hr, hi = h.chunk(2, -1)
        rr, ri = r.chunk(2, -1)
        tr, ti = t.chunk(2, -1)
        return ((hr * rr - hi * ri) * tr + (hr * ri + hi * rr) * ti).sum(-1)

    def _tails(self, h, r, candidates):
        return _rotate(h, r) @ candidates.T

    def queries(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        """[B, 2d] vectors q with f(h, r, e) = q · e for every entity vector e: the tail
        question (h, r, ?) as one inner-product search (:class:`~babelzoo.knowledge.memory.RetrievalMemory`)."""
        return _rotate(self.entity_vectors(h), self.relation(r))

    def _heads(self, r, t, candidates):
        rr, ri = r.chunk(2, -1)
        tr, ti = t.chunk(2, -1)
        # Re(h · x) with x = r conj(t) = (rr tr + ri ti) + i (ri tr − rr ti)
        return torch.cat([rr * tr + ri * ti, rr * ti - ri * tr], -1) @ candidates.T


def _rotate(h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
    """The complex product h·r of [real | imaginary] halves."""
    hr, hi = h.chunk(2, -1)
    rr, ri = r.chunk(2, -1)
    return torch.cat([hr * rr - hi * ri, hr * ri + hi * rr], -1)


@KGE_MODELS.register(name="text_complex")
class TextComplEx(ComplEx):
    """ComplEx over entities made of their text and their place in the graph: e = P·x_e + s_e,
    with x_e a frozen sentence vector of the entity's text (``set_entity_text``, e.g.
    multilingual-e5-small's, :func:`babelzoo.knowledge.text_kge.encode_entities`), P a learnt
    projection (dropout on x_e while training), and s_e a learnt structure vector that starts
    near zero (``structure=False`` leaves it out: text alone). Every score is scaled by a learnt
    temperature. Entities the training triples never name still get the vector of their text, so
    the model ranks them from the first step; relations start as near-identity rotations."""

    def __init__(self, num_entities: int, num_relations: int, dim: int, reciprocal: bool = True,
                 text_dim: int = 384, dropout: float = 0.1, structure: bool = True):
        if not isinstance(text_dim, int) or text_dim < 1:
            raise KBError(f"TextComplEx: text_dim={text_dim!r} must be a positive integer")
        if not 0.0 <= dropout < 1.0:
            raise KBError(f"TextComplEx: dropout={dropout!r} must be in [0, 1)")
        self.text_dim, self.dropout_p, self.structure = text_dim, dropout, structure
        super().__init__(num_entities, num_relations, dim, reciprocal)
        self.projection = nn.Linear(text_dim, 2 * dim, bias=False)
        self.dropout = nn.Dropout(dropout)
        self.scale = nn.Parameter(torch.ones(()))
        self.register_buffer("entity_text", torch.zeros(num_entities, text_dim))

    def hyperparameters(self) -> dict:
        return {**super().hyperparameters(), "text_dim": self.text_dim, "dropout": self.dropout_p,
                "structure": self.structure}

    def reset_parameters(self) -> None:
        nn.init.normal_(self.entity.weight, std=1e-3)
        nn.init.normal_(self.relation.weight, std=0.1)
        with torch.no_grad():
            self.relation.weight[:, : self.dim] += 1.0  # real parts near 1: near-identity rotations

    def set_entity_text(self, vectors: torch.Tensor) -> None:
        """The [N, text_dim] sentence vectors of the entities' text, in entity-index order
        (L2-normalised here)."""
        vectors = torch.as_tensor(vectors, dtype=torch.float32)
        if tuple(vectors.shape) != (self.num_entities, self.text_dim):
            raise KBError(f"entity text vectors of shape {tuple(vectors.shape)} given for a model of "
                          f"{self.num_entities} entities × {self.text_dim}")
        if not torch.isfinite(vectors).all():
            raise KBError("entity text vectors hold NaN or infinite values")
        self.entity_text.copy_(torch.nn.functional.normalize(vectors, dim=-1))

    def entity_vectors(self, index: Optional[torch.Tensor] = None) -> torch.Tensor:
        text = self.entity_text if index is None else self.entity_text[index]
        vectors = self.projection(self.dropout(text))
        if self.structure:
            vectors = vectors + (self.entity.weight if index is None else self.entity(index))
        return vectors

    def _score(self, h, r, t):
        return self.scale * super()._score(h, r, t)

    def _tails(self, h, r, candidates):
        return self.scale * super()._tails(h, r, candidates)

    def _heads(self, r, t, candidates):
        return self.scale * super()._heads(r, t, candidates)

    def queries(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self.scale * super().queries(h, r)


@KGE_MODELS.register(name="rotate")
class RotatE(KGEModel):
    """f = γ − Σ_k |h_k e^{iθ_k} − t_k| (Sun et al., 2019). Initialised as in the paper:
    entities uniform in ±(γ + ε)/d, phases θ = r / ((γ + ε)/d) · π with ε = 2."""

    complex_valued = True

    def __init__(self, num_entities: int, num_relations: int, dim: int, reciprocal: bool = False,
                 gamma: float = 9.0, epsilon: float = 2.0, chunk: int = 64):
        self.gamma, self.epsilon, self.range, self.chunk = gamma, epsilon, (gamma + epsilon) / dim, chunk
        super().__init__(num_entities, num_relations, dim, reciprocal)

    def hyperparameters(self) -> dict:
        return {**super().hyperparameters(), "gamma": self.gamma, "epsilon": self.epsilon}

    def relation_width(self, entity_width: int) -> int:
        return entity_width // 2  # one phase per complex dimension

    def reset_parameters(self) -> None:
        nn.init.uniform_(self.entity.weight, -self.range, self.range)
        nn.init.uniform_(self.relation.weight, -self.range, self.range)

    def _rotation(self, r):
        phase = r / (self.range / math.pi)
        return torch.cos(phase), torch.sin(phase)

    def _distance(self, qr, qi, t):
        tr, ti = t.chunk(2, -1)
        return torch.sqrt((qr - tr) ** 2 + (qi - ti) ** 2 + 1e-12).sum(-1)

    def _score(self, h, r, t):
        hr, hi = h.chunk(2, -1)
        cr, ci = self._rotation(r)
        return self.gamma - self._distance(hr * cr - hi * ci, hr * ci + hi * cr, t)

    def _all(self, qr, qi, candidates):
        # [B, d] queries against [N, 2d] candidates, in chunks: the [B, N, d] difference is large
        out = [self.gamma - self._distance(qr[i:i + self.chunk, None], qi[i:i + self.chunk, None], candidates[None])
               for i in range(0, qr.shape[0], self.chunk)]
        return torch.cat(out, 0)

    def _tails(self, h, r, candidates):
        hr, hi = h.chunk(2, -1)
        cr, ci = self._rotation(r)
        return self._all(hr * cr - hi * ci, hr * ci + hi * cr, candidates)

    def _heads(self, r, t, candidates):
        tr, ti = t.chunk(2, -1)
        cr, ci = self._rotation(r)
        # |h r − t| = |h − t conj(r)| because |r| = 1
        return self._all(tr * cr + ti * ci, ti * cr - tr * ci, candidates)


def create_kge(name: str, num_entities: int, num_relations: int, dim: int, **kwargs) -> KGEModel:
    """Build a registered KG embedding model: ``create_kge("rotate", n_e, n_r, 500, gamma=9.0)``."""
    for key, value in kwargs.items():  # an infinite margin trains to NaN scores without an error
        if isinstance(value, float) and not math.isfinite(value):
            raise KBError(f"{name}: {key}={value!r} must be a finite number")
    return KGE_MODELS.get(name)(num_entities, num_relations, dim, **kwargs)


KGE_FILE, KGE_CONFIG = "kge.safetensors", "kge.json"


def save_kge(model: KGEModel, entities: Sequence[str], relations: Sequence[str], directory, **extra) -> Path:
    """Write ``kge.safetensors`` (the entity and relation tables) and ``kge.json`` (model name,
    sizes, hyper-parameters, the entity and relation ids in table order, and ``extra``, e.g.
    metrics) into ``directory``, replacing a KG embedding babelzoo wrote there; a folder holding
    anything else is refused untouched."""
    if len(entities) != model.num_entities or len(relations) != model.num_base_relations:
        raise KBError(f"{len(entities)} entities and {len(relations)} relations given for a model with "
                      f"{model.num_entities} and {model.num_base_relations}")
    return replace_owned_folder(directory, lambda folder: write_kge(model, entities, relations, folder, **extra),
                                what="KG embedding")


def write_kge(model: KGEModel, entities: Sequence[str], relations: Sequence[str], folder: Path, **extra) -> None:
    """Write ``kge.safetensors`` and ``kge.json`` into ``folder`` (a folder being filled, as
    :func:`save_kge` and a link-prediction model's folder do)."""
    from ..zoo.checkpoint_io import save_weights

    if len(entities) != model.num_entities or len(relations) != model.num_base_relations:
        raise KBError(f"{len(entities)} entities and {len(relations)} relations given for a model with "
                      f"{model.num_entities} and {model.num_base_relations}")
    name = next(n for n in KGE_MODELS.list() if KGE_MODELS.get(n) is type(model))
    config = {"model": name, "dim": model.dim, "hyperparameters": model.hyperparameters(),
              "entities": list(entities), "relations": list(relations), **extra}
    save_weights({k: v.detach().contiguous() for k, v in model.state_dict().items()}, Path(folder) / KGE_FILE)
    write_json_atomic(Path(folder) / KGE_CONFIG, config, indent=1)


def load_kge(directory) -> tuple[KGEModel, list[str], list[str]]:
    """Read what :func:`save_kge` wrote: (model, entity ids, relation ids). The model's rows
    follow the id lists, so ``attach_knowledge(model, kb, entity_embeddings=kge)`` needs a KB
    whose ``entities()`` come in the same order."""
    from ..zoo.checkpoint_io import load_state_strict, read_weights

    directory = Path(directory)
    path = directory / KGE_CONFIG
    try:
        config = read_json_object(path, KBError)
    except FileNotFoundError:
        raise KBError(f"{path}: missing (a KG embedding folder has {KGE_CONFIG} and {KGE_FILE})") from None
    for key in ("model", "dim", "hyperparameters", "entities", "relations"):
        if key not in config:
            raise KBError(f"{path}: missing field {key!r}")
    model = create_kge(config["model"], len(config["entities"]), len(config["relations"]), config["dim"],
                       **config["hyperparameters"])
    load_state_strict(model, read_weights(directory / KGE_FILE), str(directory / KGE_FILE))
    return model, list(config["entities"]), list(config["relations"])
