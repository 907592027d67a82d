"""Link prediction from text and structure: every entity's text is read once by a frozen sentence
encoder (multilingual-e5-small), and a KG embedding model over those vectors
(:class:`~babelzoo.knowledge.kge.TextComplEx`: e = P·x_e + s_e) learns the graph on the shared
trainer, with 1-vs-all cross-entropy over every entity (each training question's negatives are
all other entities, the limit of in-batch negatives). The trained entity vectors go into an
exact inner-product :class:`~babelzoo.knowledge.memory.RetrievalMemory`, which answers a question
(h, r, ?) as one search for the vector q(h, r) (the ranks are a brute-force scan's).

A recipe (``babelzoo pretrain --config kgc_e5_small``) names the graph, the encoder, the scorer
and its training::

    kind: link_prediction
    kg: {path: "${BABELZOO_DATA_DIR}/wn18rr"}
    encoder: {model: multilingual_e5_small, prefix: "passage: ", max_length: 64}
    scorer: {model: text_complex, dim: 128, options: {dropout: 0.1}}
    train: {loss: 1vsall, lr: 0.003, batch_size: 512, epochs: 12, eval_every: 1}
    output_dir: runs/kgc_e5_small

The run leaves ``output_dir/model``: the encoder (:func:`babelzoo.from_pretrained`), the scorer
(``kge.safetensors`` + ``kge.json``), the entity memory (``entity_memory/``),
``link_prediction.json`` (the graph it learnt, its text format, the metrics) and a model card.
``babelzoo kb eval`` and ``babelzoo kb predict`` read it (:class:`GraphRanker`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, Optional, Sequence

import numpy as np
import torch

from .._files import check_replaceable, expand_path, read_json_object
from ..config_files import load_config, read_mapping
from ..errors import ConfigError
from ..options import read_options
from ..typed import Range, check_fields
from .base import KBError
from .kge import KGE_MODELS, KGEModel, LinkPredictionData, create_kge, load_kge, write_kge
from .link_prediction import KGETrainConfig, KnownTriples, evaluate, train_kge
from .memory import RetrievalMemory
from .text_link import graph_digest, graph_texts, top_answers

RECORD_FILE, MEMORY_DIR = "link_prediction.json", "entity_memory"
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class GraphSource:
    """``path``: a graph folder in the KG-BERT layout (``entity2text.txt``, ``relation2text.txt``,
    ``train.tsv``, ``dev.tsv``, ``test.tsv``) or a registered knowledge base with splits and
    entity text; ``lang``: the language of the text read.

    ``graphs``: several graphs of a DBP-5L folder at ``path`` trained as one model (their names
    are their languages, and each graph's text is read in its own), the folder's seed alignments
    tying their entities (:class:`~babelzoo.knowledge.multilingual.AlignedTextComplEx`);
    ``valid_limit``: then the first that many valid triples of each graph choose the model
    (None: all of them)."""

    path: str
    lang: str = "en"
    graphs: list[str] = field(default_factory=list)
    valid_limit: Optional[Annotated[int, Range(1)]] = None

    def __post_init__(self) -> None:
        check_fields(self, "kg")


@dataclass(frozen=True)
class EntityEncoder:
    """The frozen sentence encoder that reads every entity's text: a zoo name (loaded with its
    pretrained weights) or a model folder; each text is ``prefix + text`` cut at ``max_length``
    tokens."""

    model: str = "multilingual_e5_small"
    prefix: str = "passage: "
    max_length: Annotated[int, Range(1)] = 64
    batch_size: Annotated[int, Range(1)] = 128

    def __post_init__(self) -> None:
        check_fields(self, "encoder")


@dataclass(frozen=True)
class Scorer:
    """The KG embedding model over the entity vectors (``text_complex``) or, for a
    structure-only baseline, any registered one (its ``options`` read against its constructor)."""

    model: str = "text_complex"
    dim: Annotated[int, Range(1)] = 128
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_fields(self, "scorer")
        if self.model not in KGE_MODELS.list():
            raise ConfigError(f"scorer.model={self.model!r} must be one of {', '.join(KGE_MODELS.list())}")


@dataclass(frozen=True)
class LinkPredictionRecipe:
    """A link-prediction run: the graph, the entity encoder, the scorer, its training
    (:class:`~babelzoo.knowledge.link_prediction.KGETrainConfig`: model selection on the valid
    split's filtered MRR, a time budget), and where the run and its model go."""

    kind: Literal["link_prediction"]
    kg: GraphSource
    encoder: EntityEncoder = EntityEncoder()
    scorer: Scorer = Scorer()
    train: KGETrainConfig = field(default_factory=KGETrainConfig)
    output_dir: str = "runs/link_prediction"
    model_dir: str = "model"
    cache_dir: Optional[str] = None  # where the entity vectors are kept for reruns (default: output_dir/cache)

    def __post_init__(self) -> None:
        check_fields(self, "LinkPredictionRecipe")

    @property
    def uses_text(self) -> bool:
        return hasattr(KGE_MODELS.get(self.scorer.model), "set_entity_text")


def is_link_prediction_recipe(path: Path) -> bool:
    """Whether the recipe file ``path`` is a link-prediction recipe (``kind: link_prediction``)."""
    try:
        data, _ = read_mapping(path, "LinkPredictionRecipe", "recipe")
    except ConfigError:
        return False  # the pre-training recipe reader reports what is wrong with the file
    return data.get("kind") == "link_prediction"


def read_link_recipe(path: Path, overrides: Sequence[str] = ()) -> LinkPredictionRecipe:
    """The recipe file ``path`` with ``--set`` overrides, every key typed (errors name the file,
    the line and the key)."""
    recipe, where = load_config(LinkPredictionRecipe, path, overrides, kind="recipe")
    options = read_options(KGE_MODELS.get(recipe.scorer.model).__init__, recipe.scorer.options,
                           where.key("scorer").key("options"), recipe.scorer.model,
                           skip=("num_entities", "num_relations", "dim", "text_dim"))
    return dataclasses.replace(recipe, scorer=dataclasses.replace(recipe.scorer, options=options))


def text_model(source: str):
    """The text encoder ``source`` names, in eval mode: a model folder, or a zoo entry with its
    pretrained weights."""
    from ..zoo.factory import create_model
    from ..zoo.pretrained import from_pretrained

    if Path(source).is_dir():
        return from_pretrained(source).eval()
    return create_model(source, pretrained=True).eval()  # an unknown name says so, with close matches


def encode_entities(model, texts: Sequence[str], encoder: EntityEncoder) -> torch.Tensor:
    """[N, H] sentence vectors of ``encoder.prefix + text`` for every text, by ``model.encode``."""
    with torch.inference_mode():
        vectors = model.encode([encoder.prefix + text for text in texts], batch_size=encoder.batch_size,
                               max_length=encoder.max_length, normalize_embeddings=True)
    return torch.as_tensor(np.asarray(vectors), dtype=torch.float32)


def weights_digest(source: str) -> Optional[str]:
    """The sha256 of a model folder's weights (a folder trained again under the same path gives
    other vectors); None for a zoo name, whose weights are pinned by the package."""
    from ..datasets.download import sha256_of
    from ..zoo.checkpoint_io import WEIGHTS_NAME

    weights = Path(source) / WEIGHTS_NAME
    return sha256_of(weights) if weights.is_file() else None


def _cached_entity_vectors(model, texts: list[str], encoder: EntityEncoder, digest: str, cache: Path,
                           say: Callable[[str], None]) -> torch.Tensor:
    """The entity vectors, read from ``cache`` when it holds those of this encoder and graph
    (a rerun of the recipe does not read 40k texts again), else encoded and written there."""
    from safetensors.torch import load_file, save_file

    key = json.dumps({**asdict(encoder), "batch_size": None, "graph_sha256": digest,
                      "weights_sha256": weights_digest(encoder.model)}, sort_keys=True)
    meta_file, vectors_file = cache / "entity_vectors.json", cache / "entity_vectors.safetensors"
    if meta_file.is_file() and vectors_file.is_file():
        try:
            if read_json_object(meta_file, KBError).get("key") == key:
                vectors = load_file(str(vectors_file))["vectors"]
                if len(vectors) == len(texts):
                    say(f"entity vectors read from {vectors_file}")
                    return vectors
        except (KBError, OSError, KeyError, RuntimeError):
            pass  # a damaged cache is encoded again
    start = time.perf_counter()
    vectors = encode_entities(model, texts, encoder)
    say(f"encoded {len(texts):,} entity texts with {encoder.model} in {time.perf_counter() - start:.0f} s")
    cache.mkdir(parents=True, exist_ok=True)
    save_file({"vectors": vectors.contiguous()}, str(vectors_file))
    meta_file.write_text(json.dumps({"key": key}) + "\n", encoding="utf-8")
    return vectors


def entity_memory(model: KGEModel) -> RetrievalMemory:
    """An exact inner-product memory of the model's entity vectors (memory id = entity index)."""
    vectors = model.entity_embeddings().float().numpy()
    memory = RetrievalMemory(vectors.shape[1], "Flat", metric="ip")
    memory.add(vectors, ids=np.arange(len(vectors)))
    return memory


class GraphRanker:
    """Rank a graph's entities with a trained scorer: a model with ``queries(h, r)``
    (ComplEx-style, reciprocal) answers every question by one search of the entity memory;
    any other KG embedding model scores all entities directly. Gives ``score_tails`` /
    ``score_heads`` for :func:`~babelzoo.knowledge.link_prediction.evaluate` and ``predict``."""

    def __init__(self, model: KGEModel, data: LinkPredictionData, entity_texts: Sequence[str],
                 memory: Optional[RetrievalMemory] = None, record: Optional[dict] = None):
        self.model, self.data, self.entity_texts = model.eval(), data, list(entity_texts)
        self.record = record or {}
        self.searches = hasattr(model, "queries") and model.reciprocal
        if self.searches and memory is None:
            memory = entity_memory(model)
        if memory is not None and len(memory) != data.num_entities:
            raise KBError(f"the entity memory holds {len(memory)} vectors, the graph {data.num_entities} entities")
        self.memory = memory

    @classmethod
    def from_folder(cls, folder: str | Path, kb, data: LinkPredictionData, lang: str = "en") -> "GraphRanker":
        """The scorer saved in ``folder`` (by a link-prediction recipe or ``babelzoo kb train-kge
        --out``) over the graph ``kb``; a scorer trained on another graph is refused."""
        folder = Path(folder)
        model, entities, relations = load_kge(folder)
        record_file = folder / RECORD_FILE
        record = read_json_object(record_file, KBError) if record_file.is_file() else {}
        texts, words = graph_texts(kb, data, lang)
        digest = graph_digest(data.entities, texts, data.relations, words)
        if record.get("graphs"):  # one model over several graphs: this graph's part of it
            from .multilingual import GraphView

            return cls(GraphView.of_saved(folder, model, entities, relations, record, data, digest), data, texts,
                       None, record)
        if entities != data.entities or relations != data.relations or (
                record.get("graph_sha256") not in (None, digest)):
            raise KBError(f"{folder} was trained on the graph {record.get('kg', 'of its kge.json')!r} "
                          f"({len(entities)} entities, {len(relations)} relations), and this graph is another "
                          f"({data.num_entities} entities, {data.num_relations} relations, or other texts): "
                          f"rank a graph with a model trained on it")
        memory = RetrievalMemory.load(folder / MEMORY_DIR, metric="ip") if (folder / MEMORY_DIR).is_dir() else None
        return cls(model, data, texts, memory, record)

    @torch.no_grad()
    def _search(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        n = self.data.num_entities
        scores, ids = self.memory.search(self.model.queries(h, r).float().numpy(), k=n)
        out = torch.full((len(h), n), float("-inf"))
        out.scatter_(1, ids.clamp(min=0), scores)
        return out

    @torch.no_grad()
    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self._search(h, r) if self.searches else self.model.score_tails(h, r)

    @torch.no_grad()
    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._search(t, self.model.inverse(r)) if self.searches else self.model.score_heads(r, t)

    def predict(self, entity: str, relation: str, k: int = 10, inverse: bool = False) -> list[tuple[str, str, float]]:
        """The ``k`` best answers to (entity, relation, ?) (``inverse``: to (?, relation, entity)),
        as (entity id, its text, score)."""
        return top_answers(self, self.data, self.entity_texts, entity, relation, k, inverse)

    def settings(self) -> dict:
        """What ``babelzoo kb eval`` records beside the metrics."""
        scorer = getattr(self.model, "model", self.model)  # a graph's view of a model over several graphs
        name = next(n for n in KGE_MODELS.list() if KGE_MODELS.get(n) is type(scorer))
        return {"scorer": name, "ranked_by": "exact inner-product memory" if self.searches else "scan of all entities",
                "graph_sha256": self.record.get("graph_sha256"), "entities": self.data.num_entities,
                "relations": self.data.num_relations, "encoder": self.record.get("encoder")}


def model_card(recipe: LinkPredictionRecipe, record: dict) -> str:
    valid, test = record["valid"], record.get("test")
    lines = [f"# {Path(recipe.output_dir).name}", "",
             f"Link prediction on `{recipe.kg.path}` ({record['entities']:,} entities, {record['relations']} "
             f"relations): a `{recipe.scorer.model}` scorer (dim {recipe.scorer.dim}) over the text of every entity "
             f"read by the frozen `{recipe.encoder.model}` encoder (`{recipe.encoder.prefix}{{text}}`, "
             f"{recipe.encoder.max_length} tokens), trained by `babelzoo pretrain` for {record['train']['epochs_run']} "
             f"epochs (best: {record['train']['best_epoch']}) in {record['cpu_seconds']:.0f} CPU s.", "",
             "| split | MRR | Hits@1 | Hits@3 | Hits@10 |", "|---|---|---|---|---|"]
    for name, metrics in (("valid", valid), ("test", test)):
        if metrics:
            lines.append(f"| {name} | {metrics['mrr']:.4f} | {metrics['hits@1']:.4f} | {metrics['hits@3']:.4f} | "
                         f"{metrics['hits@10']:.4f} |")
    folder = Path(recipe.output_dir) / recipe.model_dir
    lines += ["", "Filtered ranking over every entity, head and tail prediction averaged, ties at the mean rank.",
              "", "```bash", f"babelzoo kb eval --model {folder} --kg {recipe.kg.path} --split test",
              f"babelzoo kb predict --model {folder} --kg {recipe.kg.path} ENTITY RELATION", "```", ""]
    return "\n".join(lines)


def train_link_prediction(recipe: LinkPredictionRecipe, say: Optional[Callable[[str], None]] = None) -> dict:
    """Run a link-prediction recipe: read the graph, encode its entities (cached in
    ``output_dir``), train the scorer on the shared trainer with model selection on valid MRR,
    rank valid and test through the entity memory, and write ``output_dir/model_dir``. Returns
    the record written to ``link_prediction.json``."""
    from ..zoo.checkpoint_io import save_pretrained
    from .base import load_kb

    if recipe.kg.graphs:
        from .multilingual import train_joint_link_prediction

        return train_joint_link_prediction(recipe, say)
    say = say or logger.info
    output = Path(recipe.output_dir)
    model_folder = output / recipe.model_dir
    check_replaceable(model_folder, "model")  # refused now, not after an hour of training
    start = time.process_time()
    kg_path = expand_path(recipe.kg.path, "kg.path") if "$" in recipe.kg.path else recipe.kg.path
    kb = load_kb(kg_path)
    data = LinkPredictionData.from_kb(kb)
    if not len(data.train) or not len(data.valid):
        raise KBError(f"kg.path={kg_path}: link prediction needs train and valid (dev) triples; "
                      f"found {len(data.train)} and {len(data.valid)}")
    texts, words = graph_texts(kb, data, recipe.kg.lang)
    digest = graph_digest(data.entities, texts, data.relations, words)
    say(f"{kg_path}: {data.num_entities:,} entities, {data.num_relations} relations, "
        f"{len(data.train):,}/{len(data.valid):,}/{len(data.test):,} train/valid/test triples")
    encoder = text_model(recipe.encoder.model) if recipe.uses_text else None
    options = dict(recipe.scorer.options)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.train.seed)
        if encoder is not None:
            cache = Path(recipe.cache_dir) if recipe.cache_dir else output / "cache"
            vectors = _cached_entity_vectors(encoder, texts, recipe.encoder, digest, cache, say)
            options["text_dim"] = vectors.shape[1]
        model = create_kge(recipe.scorer.model, data.num_entities, data.num_relations, recipe.scorer.dim, **options)
    if encoder is not None:
        model.set_entity_text(vectors)

    def log(row: dict) -> None:
        say(f"  epoch {row['epoch']:g}  loss {row['loss']:.4f}  valid MRR {row['mrr']:.4f}  Hits@1 "
            f"{row['hits@1']:.4f}  Hits@10 {row['hits@10']:.4f}  {row['seconds']:.0f} s ({recipe.train.clock})")

    summary = train_kge(model, data, recipe.train, log=log)
    ranker = GraphRanker(model, data, texts)
    filters = KnownTriples(data)
    valid = evaluate(ranker, data, "valid", filters=filters)
    test = evaluate(ranker, data, "test", filters=filters) if len(data.test) else None
    rounded = {"valid": {k: round(v, 6) for k, v in valid.items()},
               "test": {k: round(v, 6) for k, v in test.items()} if test else None}
    record = {"kg": recipe.kg.path, "graph_sha256": digest, "entities": data.num_entities,
              "relations": data.num_relations, "train_triples": len(data.train),
              "encoder": asdict(recipe.encoder) if encoder is not None else None,
              "encoder_sha256": weights_digest(recipe.encoder.model) if encoder is not None else None,
              "scorer": {"model": recipe.scorer.model, "dim": recipe.scorer.dim, "options": recipe.scorer.options},
              "train": {**asdict(recipe.train), "best_epoch": summary["best_epoch"], "epochs_run": summary["epochs"],
                        "seconds": summary["seconds"]},
              **rounded, "cpu_seconds": time.process_time() - start,
              "protocol": "filtered ranking over every entity, head and tail prediction averaged, ties at the mean rank"}

    def write_scorer(folder: Path) -> None:
        write_kge(model, data.entities, data.relations, folder)
        if ranker.memory is not None:
            ranker.memory.save(folder / MEMORY_DIR)

    extra = {RECORD_FILE: json.dumps(record, indent=1, ensure_ascii=False) + "\n",
             "README.md": model_card(recipe, record)}
    if encoder is not None:
        save_pretrained(encoder, model_folder, extra_files=extra, write_extra=write_scorer)
    else:
        from .._files import replace_owned_folder

        def write(folder: Path) -> None:
            for name, text in extra.items():
                (folder / name).write_text(text, encoding="utf-8")
            write_scorer(folder)

        replace_owned_folder(model_folder, write, "model")
    say(f"valid filtered MRR {valid['mrr']:.4f}, Hits@10 {valid['hits@10']:.4f}"
        + (f"; test filtered MRR {test['mrr']:.4f}, Hits@1 {test['hits@1']:.4f}, Hits@3 {test['hits@3']:.4f}, "
           f"Hits@10 {test['hits@10']:.4f}" if test else "") + f"; {record['cpu_seconds']:.0f} CPU s")
    say(f"trained model in {model_folder}")
    return record


def _standardised(scores: torch.Tensor) -> torch.Tensor:
    """Each question's scores over all entities shifted and scaled to mean 0 and deviation 1, so
    that rankers of different score scales (a ComplEx logit, a RotatE distance) can be added."""
    return (scores - scores.mean(1, keepdim=True)) / scores.std(1, keepdim=True).clamp(min=1e-12)


class EnsembleRanker:
    """A score ensemble: Σ_i w_i · z_i(q, e), with z_i ranker i's standardised scores for the
    question q (:func:`fit_ensemble` chooses the weights on the valid split)."""

    def __init__(self, rankers: Sequence, weights: Sequence[float]):
        if len(rankers) != len(weights) or not rankers:
            raise KBError(f"{len(rankers)} rankers and {len(weights)} weights: give one weight per ranker")
        self.rankers, self.weights = list(rankers), [float(w) for w in weights]

    def _combine(self, score: Callable) -> torch.Tensor:
        """Σ w · z over the rankers of non-zero weight (a ranker of weight 0 is not asked)."""
        total = None
        for ranker, weight in zip(self.rankers, self.weights):
            if weight:
                part = weight * _standardised(score(ranker).float())
                total = part if total is None else total + part
        if total is None:
            raise KBError("every ensemble weight is 0: give one ranker a weight")
        return total

    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self._combine(lambda ranker: ranker.score_tails(h, r))

    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._combine(lambda ranker: ranker.score_heads(r, t))


class NeighbourhoodRanker:
    """Graph-neighbourhood re-ranking (SimKGC, Wang et al. 2022, §3.4): the entities within
    ``hops`` edges of the question's entity in the training graph (either direction) get
    ``bonus`` added to the ranker's standardised score."""

    def __init__(self, ranker, data: LinkPredictionData, hops: int = 2, bonus: float = 0.5):
        if hops < 1:
            raise KBError(f"hops={hops} must be at least 1")
        self.ranker, self.hops, self.bonus = ranker, hops, float(bonus)
        n = data.num_entities
        h, t = data.train[:, 0], data.train[:, 2]
        index = torch.cat([torch.stack([h, t]), torch.stack([t, h])], 1)
        self.adjacency = torch.sparse_coo_tensor(index, torch.ones(index.shape[1]), (n, n), check_invariants=True).coalesce()
        self.num_entities = n

    def near(self, entities: torch.Tensor) -> torch.Tensor:
        """[B, N] bool: the entities within ``hops`` edges of each of ``entities`` (itself excluded)."""
        reached = torch.zeros(len(entities), self.num_entities)
        reached[torch.arange(len(entities)), entities] = 1.0
        frontier = reached
        for _ in range(self.hops):
            frontier = torch.sparse.mm(self.adjacency, frontier.T).T.clamp(max=1.0)
            reached = (reached + frontier).clamp(max=1.0)
        reached[torch.arange(len(entities)), entities] = 0.0
        return reached.bool()

    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return _standardised(self.ranker.score_tails(h, r).float()) + self.bonus * self.near(h)

    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return _standardised(self.ranker.score_heads(r, t).float()) + self.bonus * self.near(t)


class _Cached:
    """A ranker's valid-split scores computed once, for a grid search over combination weights."""

    def __init__(self, ranker, data: LinkPredictionData, split: str, batch_size: int = 256):
        self.tails, self.heads = {}, {}
        triples = data.split(split)
        for i in range(0, len(triples), batch_size):
            h, r, t = triples[i:i + batch_size].unbind(1)
            self.tails[(tuple(h.tolist()), tuple(r.tolist()))] = ranker.score_tails(h, r).float()
            self.heads[(tuple(r.tolist()), tuple(t.tolist()))] = ranker.score_heads(r, t).float()

    def score_tails(self, h, r):
        return self.tails[(tuple(h.tolist()), tuple(r.tolist()))]

    def score_heads(self, r, t):
        return self.heads[(tuple(r.tolist()), tuple(t.tolist()))]


def fit_ensemble(text, structure, data: LinkPredictionData,
                 weights: Sequence[float] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
                 ) -> tuple[EnsembleRanker, float, list[tuple[float, float]]]:
    """The weight w of ``text`` (``structure`` gets 1 − w) with the best valid MRR: (the
    ensemble, w, [(w, valid MRR), ...])."""
    filters = KnownTriples(data)
    cached = [_Cached(text, data, "valid"), _Cached(structure, data, "valid")]
    tried = [(w, evaluate(EnsembleRanker(cached, [w, 1 - w]), data, "valid", filters=filters)["mrr"]) for w in weights]
    best = max(tried, key=lambda pair: pair[1])[0]
    return EnsembleRanker([text, structure], [best, 1 - best]), best, tried


def fit_neighbourhood(ranker, data: LinkPredictionData, hops: int = 2,
                      bonuses: Sequence[float] = (0.0, 0.25, 0.5, 1.0, 2.0)
                      ) -> tuple[NeighbourhoodRanker, float, list[tuple[float, float]]]:
    """The re-ranking bonus with the best valid MRR: (the re-ranker, bonus, [(bonus, valid MRR), ...])."""
    filters = KnownTriples(data)
    cached = _Cached(ranker, data, "valid")
    tried = [(b, evaluate(NeighbourhoodRanker(cached, data, hops, b), data, "valid", filters=filters)["mrr"])
             for b in bonuses]
    best = max(tried, key=lambda pair: pair[1])[0]
    return NeighbourhoodRanker(ranker, data, hops, best), best, tried
