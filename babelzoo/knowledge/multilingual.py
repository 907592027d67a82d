"""Link prediction in one graph helped by graphs in other languages, through aligned entities:
KEnS's ensemble inference (Chen et al., 2020) over babelzoo's own per-graph rankers.

A question (h, r, ?) in graph L is also asked in every other graph L' that knows h's counterpart
h' (a seed alignment, or a pair ``babelzoo kb align`` found): L' ranks its own entities for
(h', r, ?), and each of L's entities with a counterpart in L' receives that counterpart's
standardised score. The answer is ``z_L + weight × Σ_L' z_L'`` (an entity without a counterpart
in L' gets 0 from it: the mean of a standardised score), the weight chosen on L's valid split.
The graphs share their relations (DBP-5L's one vocabulary); a relation that L' lacks asks
nothing of L'.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .base import KBError
from .kge import KGE_MODELS, LinkPredictionData, TextComplEx

logger = logging.getLogger(__name__)


def _standardised(scores: torch.Tensor) -> torch.Tensor:
    """Per-question z-scores over the entities: scales of different rankers made comparable."""
    finite = torch.where(torch.isfinite(scores), scores, torch.nan)
    mean = finite.nanmean(1, keepdim=True)
    std = ((finite - mean) ** 2).nanmean(1, keepdim=True).sqrt().clamp_min(1e-6)
    return torch.nan_to_num((scores - mean) / std, nan=0.0, neginf=-1e4, posinf=1e4)


class Counterpart:
    """Another graph's ranker, and how ``data``'s entities and relations map into its own:
    ``entity[i]`` the index of entity i's counterpart (-1: none), ``relation[j]`` likewise."""

    def __init__(self, ranker, data: LinkPredictionData, other: LinkPredictionData,
                 pairs: Sequence[tuple[str, str]], name: str = ""):
        self.ranker, self.name = ranker, name
        mine = {e: i for i, e in enumerate(data.entities)}
        theirs = {e: i for i, e in enumerate(other.entities)}
        self.entity = torch.full((data.num_entities,), -1, dtype=torch.long)
        for a, b in pairs:
            if a not in mine or b not in theirs:
                raise KBError(f"alignment pair ({a!r}, {b!r}) names an entity neither graph {name!r} nor this one has")
            self.entity[mine[a]] = theirs[b]
        other_relations = {r: i for i, r in enumerate(other.relations)}
        self.relation = torch.tensor([other_relations.get(r, -1) for r in data.relations], dtype=torch.long)

    def scores(self, entities: torch.Tensor, relations: torch.Tensor, heads: bool, size: int) -> torch.Tensor:
        """[B, size] standardised scores of this graph's answers moved onto the asking graph's
        entities; 0 where it cannot answer."""
        out = torch.zeros(len(entities), size)
        asked = self.entity[entities]
        rel = self.relation[relations]
        ok = (asked >= 0) & (rel >= 0)
        if not ok.any():
            return out
        if heads:
            theirs = self.ranker.score_heads(rel[ok], asked[ok])
        else:
            theirs = self.ranker.score_tails(asked[ok], rel[ok])
        z = _standardised(theirs.float())
        known = (self.entity >= 0).nonzero().squeeze(1)
        rows = ok.nonzero().squeeze(1)
        out[rows[:, None], known[None, :]] = z[:, self.entity[known]]
        return out


class AlignedEnsemble:
    """``z_main + weight × Σ z_counterpart`` (module docstring); ``weight=0`` is the main ranker."""

    def __init__(self, main, data: LinkPredictionData, counterparts: Sequence[Counterpart], weight: float = 0.5):
        self.main, self.data, self.counterparts, self.weight = main, data, list(counterparts), float(weight)

    def _combine(self, own: torch.Tensor, entities: torch.Tensor, relations: torch.Tensor, heads: bool) -> torch.Tensor:
        total = _standardised(own.float())
        if self.weight:
            for other in self.counterparts:
                total = total + self.weight * other.scores(entities, relations, heads, self.data.num_entities)
        return total

    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self._combine(self.main.score_tails(h, r), h, r, heads=False)

    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self._combine(self.main.score_heads(r, t), t, r, heads=True)


def fit_aligned_ensemble(main, data: LinkPredictionData, counterparts: Sequence[Counterpart],
                         weights: Sequence[float] = (0.0, 0.1, 0.25, 0.5, 1.0)) -> tuple[AlignedEnsemble, float, list]:
    """The :class:`AlignedEnsemble` whose weight gives the best filtered MRR on ``data``'s valid
    split, with ``[(weight, valid MRR), ...]``."""
    from .link_prediction import KnownTriples, evaluate

    filters = KnownTriples(data)
    tried = []
    for weight in weights:
        ensemble = AlignedEnsemble(main, data, counterparts, weight)
        tried.append((weight, evaluate(ensemble, data, "valid", filters=filters)["mrr"]))
    best = max(tried, key=lambda x: (x[1], -x[0]))[0]
    return AlignedEnsemble(main, data, counterparts, best), best, tried


# One model over several graphs ---------------------------------------------------------------


class AlignedTextComplEx(TextComplEx):
    """:class:`~babelzoo.knowledge.kge.TextComplEx` over several graphs at once (one model for
    DBP-5L's five languages): the graphs' entities sit in one table, graph after graph
    (``graph_sizes``), and every question is answered among the entities of its own graph. An
    entity is e = P·x_e + s_c(e): x_e the frozen sentence vector of its name in its graph's
    language, s a structure vector shared by every entity of its alignment cluster c(e)
    (:meth:`set_alignment`: entities the seeds align across graphs are one cluster), so a fact
    one graph knows moves the vector another graph's counterpart answers with. Relations are
    shared by the graphs."""

    def __init__(self, num_entities: int, num_relations: int, dim: int, reciprocal: bool = True,
                 text_dim: int = 384, dropout: float = 0.1, structure: bool = True,
                 graph_sizes: Sequence[int] = (), num_clusters: int = 0):
        sizes = [int(n) for n in graph_sizes] or [num_entities]
        if any(n < 1 for n in sizes) or sum(sizes) != num_entities:
            raise KBError(f"AlignedTextComplEx: graph_sizes={list(graph_sizes)} must be positive and add up to "
                          f"num_entities={num_entities}")
        clusters = num_clusters or num_entities
        if not 1 <= clusters <= num_entities:
            raise KBError(f"AlignedTextComplEx: num_clusters={num_clusters} must be in 1..{num_entities}")
        super().__init__(num_entities, num_relations, dim, reciprocal, text_dim, dropout, structure)
        self.graph_sizes, self.num_clusters = sizes, clusters
        self.entity = nn.Embedding(clusters, 2 * dim)
        nn.init.normal_(self.entity.weight, std=1e-3)
        offsets = torch.tensor([0, *sizes]).cumsum(0)
        self.register_buffer("offsets", offsets)
        self.register_buffer("graph", torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes)))
        self.register_buffer("cluster", torch.arange(num_entities) % clusters)

    def hyperparameters(self) -> dict:
        return {**super().hyperparameters(), "graph_sizes": list(self.graph_sizes), "num_clusters": self.num_clusters}

    def set_alignment(self, cluster: torch.Tensor) -> None:
        """Entity i's structure vector is row ``cluster[i]`` ([N] integers in 0..num_clusters-1)."""
        cluster = torch.as_tensor(cluster, dtype=torch.long)
        if tuple(cluster.shape) != (self.num_entities,) or (cluster < 0).any() or (cluster >= self.num_clusters).any():
            raise KBError(f"alignment clusters of shape {tuple(cluster.shape)} (values "
                          f"{int(cluster.min()) if len(cluster) else 0}..{int(cluster.max()) if len(cluster) else 0}) "
                          f"given for {self.num_entities} entities in {self.num_clusters} clusters")
        self.cluster.copy_(cluster)

    def entity_vectors(self, index: Optional[torch.Tensor] = None) -> torch.Tensor:
        text = self.entity_text if index is None else self.entity_text[index]
        vectors = self.projection(self.dropout(text))
        if self.structure:
            vectors = vectors + self.entity(self.cluster if index is None else self.cluster[index])
        return vectors

    def span(self, graph: int) -> torch.Tensor:
        """The indices of graph ``graph``'s entities."""
        return torch.arange(int(self.offsets[graph]), int(self.offsets[graph + 1]), device=self.offsets.device)

    def _by_graph(self, e: torch.Tensor):
        """(graph, rows of ``e`` whose entity is in it, its entity indices) for each graph asked."""
        graphs = self.graph[e]
        for g in graphs.unique().tolist():
            yield g, (graphs == g).nonzero().squeeze(1), self.span(g)

    def score_tails(self, h: torch.Tensor, r: torch.Tensor, candidates: Optional[torch.Tensor] = None) -> torch.Tensor:
        """[B, N]: every entity of h's own graph scored, the other graphs' entities −inf."""
        if candidates is not None:
            return super().score_tails(h, r, candidates)
        out = torch.full((len(h), self.num_entities), float("-inf"), device=h.device)
        for _, rows, span in self._by_graph(h):
            out[rows[:, None], span[None, :]] = self.queries(h[rows], r[rows]) @ self.entity_vectors(span).T
        return out

    def score_heads(self, r: torch.Tensor, t: torch.Tensor, candidates: Optional[torch.Tensor] = None) -> torch.Tensor:
        """[B, N]: every entity of t's own graph scored as the head, the other graphs' entities −inf."""
        if candidates is not None or self.reciprocal:
            return super().score_heads(r, t, candidates)
        out = torch.full((len(t), self.num_entities), float("-inf"), device=t.device)
        for _, rows, span in self._by_graph(t):
            out[rows[:, None], span[None, :]] = self._heads(self.relation(r[rows]), self.entity_vectors(t[rows]),
                                                            self.entity_vectors(span))
        return out

    def one_vs_all_loss(self, e: torch.Tensor, r: torch.Tensor, answers: torch.Tensor,
                        label_smoothing: float = 0.0) -> torch.Tensor:
        """Cross-entropy of each answer against the entities of its question's graph only (the
        other graphs' entities are not candidates, and are not scored)."""
        total = 0.0
        for _, rows, span in self._by_graph(e):
            logits = self.queries(e[rows], r[rows]) @ self.entity_vectors(span).T
            total = total + F.cross_entropy(logits, answers[rows] - span[0], label_smoothing=label_smoothing,
                                            reduction="sum")
        return total / len(e)


KGE_MODELS.register(AlignedTextComplEx, name="aligned_text_complex")


def alignment_clusters(num_entities: int, pairs: Iterable[tuple[int, int]]) -> tuple[torch.Tensor, int]:
    """Connected components of the alignment pairs (entity indices): ([N] cluster of each
    entity, numbered in order of first appearance, the number of clusters)."""
    parent = list(range(num_entities))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    numbers: dict[int, int] = {}
    cluster = [numbers.setdefault(root(i), len(numbers)) for i in range(num_entities)]
    return torch.tensor(cluster, dtype=torch.long), len(numbers)


@dataclass
class JointGraphs:
    """Several graphs as one: entity ids ``"NAME:id"`` graph after graph, the union of their
    relations, and each split the graphs' splits together; ``cluster`` ties aligned entities."""

    names: list[str]
    graphs: list[LinkPredictionData]
    data: LinkPredictionData
    cluster: torch.Tensor
    num_clusters: int
    relation_maps: list[torch.Tensor]  # graph's relation index -> joint relation index

    @classmethod
    def build(cls, graphs: Mapping[str, LinkPredictionData],
              alignments: Mapping[tuple[str, str], Sequence[tuple[str, str]]]) -> "JointGraphs":
        """``graphs`` by name; ``alignments[(a, b)]``: pairs (entity id in a, entity id in b)."""
        names = list(graphs)
        offsets = dict(zip(names, itertools.accumulate((graphs[n].num_entities for n in names), initial=0)))
        relations = list(dict.fromkeys(r for n in names for r in graphs[n].relations))
        joint_relation = {r: i for i, r in enumerate(relations)}
        maps = [torch.tensor([joint_relation[r] for r in graphs[n].relations], dtype=torch.long) for n in names]
        entities = [f"{n}:{e}" for n in names for e in graphs[n].entities]

        def split(name: str) -> torch.Tensor:
            parts = []
            for n, relation_map in zip(names, maps):
                triples = graphs[n].split(name).clone()
                triples[:, [0, 2]] += offsets[n]
                triples[:, 1] = relation_map[triples[:, 1]]
                parts.append(triples)
            return torch.cat(parts)

        pairs = []
        for (a, b), aligned in alignments.items():
            if a not in graphs or b not in graphs:
                raise KBError(f"an alignment between {a!r} and {b!r} given, but the graphs are {', '.join(names)}")
            index_a = {e: i for i, e in enumerate(graphs[a].entities)}
            index_b = {e: i for i, e in enumerate(graphs[b].entities)}
            for x, y in aligned:
                if x not in index_a or y not in index_b:
                    raise KBError(f"alignment pair ({x!r}, {y!r}) names an entity graph {a!r} or {b!r} lacks")
                pairs.append((offsets[a] + index_a[x], offsets[b] + index_b[y]))
        cluster, count = alignment_clusters(len(entities), pairs)
        data = LinkPredictionData(entities, relations, split("train"), split("valid"), split("test"))
        return cls(names, [graphs[n] for n in names], data, cluster, count, maps)

    @property
    def graph_sizes(self) -> list[int]:
        return [g.num_entities for g in self.graphs]

    def view(self, model: AlignedTextComplEx, name: str) -> "GraphView":
        """``model`` answering the questions of graph ``name`` in that graph's own indices."""
        if name not in self.names:
            raise KBError(f"no graph {name!r} here; the graphs are {', '.join(self.names)}")
        i = self.names.index(name)
        return GraphView(model, i, self.relation_maps[i])


class GraphView:
    """One graph of an :class:`AlignedTextComplEx`, in that graph's own entity and relation
    indices: ``score_tails`` / ``score_heads`` over its entities, for
    :func:`~babelzoo.knowledge.link_prediction.evaluate` and the rankers built on it."""

    def __init__(self, model: AlignedTextComplEx, graph: int, relation_map: torch.Tensor):
        self.model, self.graph, self.relation_map = model, graph, relation_map
        self.offset = int(model.offsets[graph])
        self.span = model.span(graph)

    @classmethod
    def of_saved(cls, folder: Path, model: AlignedTextComplEx, entities: Sequence[str], relations: Sequence[str],
                 record: Mapping, data: LinkPredictionData, digest: str) -> "GraphView":
        """The view of the graph ``data`` (text digest ``digest``) in a model saved in ``folder``
        over several graphs (``record``: its ``link_prediction.json``); a graph it was not
        trained on is refused."""
        graphs = list(record["graphs"])
        name = next((n for n in graphs if record["graphs"][n].get("graph_sha256") == digest), None)
        if name is None or not isinstance(model, AlignedTextComplEx):
            raise KBError(f"{folder} was trained on the graphs {', '.join(graphs)} of {record.get('kg')!r}, and this "
                          f"graph ({data.num_entities} entities) is none of them: rank a graph with a model trained on it")
        i = graphs.index(name)
        start, end = int(model.offsets[i]), int(model.offsets[i + 1])
        if list(entities[start:end]) != [f"{name}:{e}" for e in data.entities] or not set(data.relations) <= set(relations):
            raise KBError(f"{folder}: its graph {name!r} holds other entities or relations than this graph")
        joint = {r: j for j, r in enumerate(relations)}
        return cls(model, i, torch.tensor([joint[r] for r in data.relations], dtype=torch.long))

    def eval(self) -> "GraphView":
        self.model.eval()
        return self

    @torch.no_grad()
    def score_tails(self, h: torch.Tensor, r: torch.Tensor) -> torch.Tensor:
        return self.model.score_tails(h + self.offset, self.relation_map[r])[:, self.span]

    @torch.no_grad()
    def score_heads(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.model.score_heads(self.relation_map[r], t + self.offset)[:, self.span]


def train_joint_link_prediction(recipe, say: Optional[Callable[[str], None]] = None) -> dict:
    """Run a link-prediction recipe with ``kg.graphs``: one :class:`AlignedTextComplEx` over
    those graphs of a DBP-5L folder, their entities tied by every seed alignment between them;
    the model is chosen on the graphs' valid splits together, and each graph is ranked in its
    own indices. Writes ``output_dir/model_dir`` (the encoder, the scorer, ``link_prediction.json``
    with each graph's metrics, a model card); returns that record."""
    from .._files import check_replaceable, expand_path
    from ..errors import ConfigError
    from ..zoo.checkpoint_io import save_pretrained
    from .dbp5l import dbp5l_seeds, is_dbp5l, read_dbp5l
    from .kge import create_kge, write_kge
    from .link_prediction import KnownTriples, evaluate, train_kge
    from .text_kge import RECORD_FILE, _cached_entity_vectors, text_model
    from .text_link import graph_digest, graph_texts

    say = say or logger.info
    names = list(recipe.kg.graphs)
    if len(set(names)) != len(names):
        raise ConfigError(f"kg.graphs={names} names a graph twice")
    if recipe.scorer.model != "aligned_text_complex":
        raise ConfigError(f"kg.graphs trains one model over several graphs: scorer.model must be "
                          f"aligned_text_complex, not {recipe.scorer.model!r}")
    output = Path(recipe.output_dir)
    model_folder = output / recipe.model_dir
    check_replaceable(model_folder, "model")  # refused now, not after the training
    start = time.process_time()
    root = Path(expand_path(recipe.kg.path, "kg.path") if "$" in recipe.kg.path else recipe.kg.path)
    if not is_dbp5l(root):
        raise KBError(f"kg.path={recipe.kg.path}: kg.graphs reads the graphs and seed alignments of a DBP-5L folder "
                      f"(entity/, kg/, relations.txt, seed_alignlinks/), which {root} is not")
    graphs, texts, digests = {}, {}, {}
    for name in names:
        kb = read_dbp5l(root, name)
        graphs[name] = LinkPredictionData.from_kb(kb)
        texts[name], words = graph_texts(kb, graphs[name], name)
        digests[name] = graph_digest(graphs[name].entities, texts[name], graphs[name].relations, words)
    alignments = {(a, b): dbp5l_seeds(root, a, b) for a, b in itertools.combinations(names, 2)}
    joint = JointGraphs.build(graphs, alignments)
    data = joint.data
    say(f"{root}: graphs {', '.join(names)} as one: {data.num_entities:,} entities in {joint.num_clusters:,} "
        f"clusters of aligned entities ({sum(len(p) for p in alignments.values()):,} seed pairs), "
        f"{data.num_relations} relations, {len(data.train):,}/{len(data.valid):,}/{len(data.test):,} "
        "train/valid/test triples")
    encoder = text_model(recipe.encoder.model)
    cache = Path(recipe.cache_dir) if recipe.cache_dir else output / "cache"
    vectors = torch.cat([_cached_entity_vectors(encoder, texts[n], recipe.encoder, digests[n], cache / n, say)
                         for n in names])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(recipe.train.seed)
        model = create_kge(recipe.scorer.model, data.num_entities, data.num_relations, recipe.scorer.dim,
                           text_dim=vectors.shape[1], graph_sizes=joint.graph_sizes, num_clusters=joint.num_clusters,
                           **recipe.scorer.options)
    model.set_entity_text(vectors)
    model.set_alignment(joint.cluster)
    selection = data
    if recipe.kg.valid_limit:
        limit = recipe.kg.valid_limit
        selection = JointGraphs.build({n: dataclasses.replace(g, valid=g.valid[:limit]) for n, g in graphs.items()},
                                      alignments).data

    def log(row: dict) -> None:
        say(f"  epoch {row['epoch']:g}  loss {row['loss']:.4f}  valid MRR {row['mrr']:.4f}  Hits@1 "
            f"{row['hits@1']:.4f}  Hits@10 {row['hits@10']:.4f}  {row['seconds']:.0f} s ({recipe.train.clock})")

    summary = train_kge(model, selection, recipe.train, log=log)
    per_graph = {}
    for name, graph in zip(names, joint.graphs):
        view, filters = joint.view(model, name), KnownTriples(graph)
        metrics = {split: {k: round(v, 6) for k, v in evaluate(view, graph, split, filters=filters).items()}
                   for split in ("valid", "test") if len(graph.split(split))}
        per_graph[name] = {"graph_sha256": digests[name], "entities": graph.num_entities,
                           "train_triples": len(graph.train), **metrics}
        say(f"{name}: " + ", ".join(f"{split} filtered MRR {m['mrr']:.4f}, Hits@1 {m['hits@1']:.4f}, "
                                    f"Hits@10 {m['hits@10']:.4f}" for split, m in metrics.items()))
    record = {"kg": recipe.kg.path, "graphs": per_graph, "entities": data.num_entities, "clusters": joint.num_clusters,
              "seed_pairs": {f"{a}-{b}": len(p) for (a, b), p in alignments.items()},
              "relations": data.num_relations, "train_triples": len(data.train), "encoder": asdict(recipe.encoder),
              "scorer": {"model": recipe.scorer.model, "dim": recipe.scorer.dim, "options": recipe.scorer.options},
              "train": {**asdict(recipe.train), "best_epoch": summary["best_epoch"], "epochs_run": summary["epochs"],
                        "seconds": summary["seconds"], "valid_limit": recipe.kg.valid_limit},
              "valid": summary["valid"], "cpu_seconds": time.process_time() - start,
              "protocol": "each graph ranked among its own entities: filtered ranking, head and tail prediction "
                          "averaged, ties at the mean rank"}
    extra = {RECORD_FILE: json.dumps(record, indent=1, ensure_ascii=False) + "\n", "README.md": joint_model_card(recipe, record)}
    save_pretrained(encoder, model_folder, extra_files=extra,
                    write_extra=lambda folder: write_kge(model, data.entities, data.relations, folder))
    say(f"trained model in {model_folder}; {record['cpu_seconds']:.0f} CPU s")
    return record


def joint_model_card(recipe, record: dict) -> str:
    lines = [f"# {Path(recipe.output_dir).name}", "",
             f"One link-prediction model over the graphs {', '.join(record['graphs'])} of `{recipe.kg.path}` "
             f"({record['entities']:,} entities, {record['relations']} relations): an `aligned_text_complex` scorer "
             f"(dim {recipe.scorer.dim}) over every entity's name read by the frozen `{recipe.encoder.model}` encoder "
             f"in its graph's language, the entities of each seed-alignment cluster ({record['clusters']:,} "
             f"clusters) sharing one structure vector. Trained by `babelzoo pretrain` for "
             f"{record['train']['epochs_run']} epochs (best: {record['train']['best_epoch']}) in "
             f"{record['cpu_seconds']:.0f} CPU s.", "",
             "| graph | split | MRR | Hits@1 | Hits@3 | Hits@10 |", "|---|---|---|---|---|---|"]
    for name, graph in record["graphs"].items():
        for split in ("valid", "test"):
            if split in graph:
                m = graph[split]
                lines.append(f"| {name} | {split} | {m['mrr']:.4f} | {m['hits@1']:.4f} | {m['hits@3']:.4f} | "
                             f"{m['hits@10']:.4f} |")
    folder = Path(recipe.output_dir) / recipe.model_dir
    name = next(iter(record["graphs"]))
    lines += ["", "Each graph is ranked among its own entities: filtered ranking, head and tail prediction averaged, "
              "ties at the mean rank.", "", "```bash",
              f"babelzoo kb eval --model {folder} --kg {recipe.kg.path}/{name} --split test", "```", ""]
    return "\n".join(lines)
