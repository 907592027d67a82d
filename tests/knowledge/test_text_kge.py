"""Link prediction from text and structure: the text-ComplEx scorer computes the paper's formula
over P·x + s, the entity memory ranks exactly as a scan of every entity does, the recipe trains
on any graph in the KG-BERT layout through ``babelzoo pretrain`` and leaves a model that
``babelzoo kb eval`` and an independent evaluation score alike, and the combinations (score
ensemble, neighbourhood re-ranking) do what they say."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
import torch

import babelzoo
from babelzoo.cli import main
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.errors import ConfigError
from babelzoo.knowledge import KBError, LinkPredictionData, evaluate
from babelzoo.knowledge.kge import create_kge, load_kge, save_kge
from babelzoo.knowledge.link_prediction import KnownTriples, filtered_ranks
from babelzoo.knowledge.text_kge import (EnsembleRanker, GraphRanker, NeighbourhoodRanker, fit_ensemble,
                                         read_link_recipe)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase, *string.digits, *".,!?' ",
         *("##" + c for c in string.ascii_lowercase)]


def text_complex(n=9, relations=2, dim=3, text_dim=5, **options):
    torch.manual_seed(0)
    model = create_kge("text_complex", n, relations, dim, text_dim=text_dim, dropout=0.0, **options)
    with torch.no_grad():
        model.entity.weight.normal_()
        model.relation.weight.normal_()
        model.scale.fill_(1.7)
    model.set_entity_text(torch.randn(n, text_dim))
    return model.eval()


def test_text_complex_scores_are_complex_trilinear_products_of_projected_text_plus_structure():
    model = text_complex()
    x = torch.nn.functional.normalize(model.entity_text, dim=-1)
    e = x @ model.projection.weight.T + model.entity.weight  # P·x + s, [real | imaginary]
    ents = torch.complex(e[:, :3], e[:, 3:]).to(torch.complex128)
    rels = torch.complex(model.relation.weight[:, :3], model.relation.weight[:, 3:]).to(torch.complex128)
    h, r = torch.tensor([0, 4, 8]), torch.tensor([1, 0, 3])  # relation 3: the inverse of relation 1
    expected = 1.7 * torch.einsum("bd,bd,nd->bn", ents[h], rels[r], ents.conj()).real
    with torch.no_grad():
        assert torch.allclose(model.score_tails(h, r).double(), expected, atol=1e-5)
        assert torch.allclose(model.queries(h, r) @ model.entity_vectors().T, model.score_tails(h, r), atol=1e-5)
        # reciprocal: the head question (?, r, t) is the tail question (t, r⁻¹, ?)
        assert torch.equal(model.score_heads(torch.tensor([1]), torch.tensor([4])),
                           model.score_tails(torch.tensor([4]), torch.tensor([3])))
        assert torch.allclose(model.score(h, r, torch.tensor([2, 2, 2])).double(), expected[:, 2], atol=1e-5)


def test_text_only_scorer_has_no_structure_and_entity_text_is_checked():
    model = text_complex(structure=False)
    with torch.no_grad():
        assert torch.allclose(model.entity_vectors(), model.entity_text @ model.projection.weight.T)
    with pytest.raises(KBError, match=r"shape \(9, 4\) given for a model of 9 entities × 5"):
        model.set_entity_text(torch.zeros(9, 4))
    with pytest.raises(KBError, match="NaN or infinite"):
        model.set_entity_text(torch.full((9, 5), float("nan")))


def test_text_complex_saves_and_loads_with_its_entity_text(tmp_path):
    model = text_complex()
    save_kge(model, [f"e{i}" for i in range(9)], ["a", "b"], tmp_path / "kge")
    loaded, entities, relations = load_kge(tmp_path / "kge")
    assert (entities[-1], relations) == ("e8", ["a", "b"])
    assert loaded.hyperparameters() == {"reciprocal": True, "text_dim": 5, "dropout": 0.0, "structure": True}
    assert torch.equal(loaded.entity_text, model.entity_text)
    h, r = torch.arange(9), torch.zeros(9, dtype=torch.long)
    with torch.no_grad():
        assert torch.equal(loaded.eval().score_tails(h, r), model.score_tails(h, r))


def random_data(n=40, relations=3, triples=160, seed=0) -> LinkPredictionData:
    g = torch.Generator().manual_seed(seed)
    rows = torch.stack([torch.randint(n, (triples,), generator=g), torch.randint(relations, (triples,), generator=g),
                        torch.randint(n, (triples,), generator=g)], 1)
    return LinkPredictionData([f"e{i}" for i in range(n)], [f"r{i}" for i in range(relations)],
                              rows[:100], rows[100:130], rows[130:])


def test_ranking_through_the_memory_gives_the_ranks_of_a_scan_of_every_entity():
    data = random_data()
    model = text_complex(n=40, relations=3, dim=8, text_dim=6)
    ranker = GraphRanker(model, data, [f"text {i}" for i in range(40)])
    assert ranker.searches and len(ranker.memory) == 40
    filters = KnownTriples(data)
    h, r, t = data.test.unbind(1)
    known = filters.mask(list(zip(h.tolist(), r.tolist())), "tail", 40)
    with torch.no_grad():
        by_memory = filtered_ranks(ranker.score_tails(h, r), t, known)
        by_scan = filtered_ranks(model.score_tails(h, r), t, known)
    assert torch.equal(by_memory, by_scan)
    assert evaluate(ranker, data, "test") == evaluate(model, data, "test")
    best = ranker.predict("e3", "r1", k=4)
    with torch.no_grad():
        expected = model.score_tails(torch.tensor([3]), torch.tensor([1]))[0].topk(4).indices.tolist()
    assert [e for e, _, _ in best] == [f"e{i}" for i in expected]
    assert best[0][1] == f"text {expected[0]}"


def test_an_ensemble_adds_standardised_scores_and_its_weight_is_chosen_on_valid():
    data = random_data()
    a, b = text_complex(n=40, relations=3, dim=8, text_dim=6), create_kge("complex", 40, 3, 8, reciprocal=True).eval()
    h, r = data.valid[:5, 0], data.valid[:5, 1]
    with torch.no_grad():
        za, zb = ((s - s.mean(1, keepdim=True)) / s.std(1, keepdim=True) for s in (a.score_tails(h, r), b.score_tails(h, r)))
        assert torch.allclose(EnsembleRanker([a, b], [0.3, 0.7]).score_tails(h, r), 0.3 * za + 0.7 * zb, atol=1e-5)
        assert torch.equal(EnsembleRanker([a, b], [1.0, 0.0]).score_tails(h, r).argsort(), za.argsort())
    ensemble, weight, tried = fit_ensemble(a, b, data, weights=(0.0, 0.5, 1.0))
    assert [w for w, _ in tried] == [0.0, 0.5, 1.0]
    assert tried[0][1] == pytest.approx(evaluate(b, data, "valid")["mrr"], abs=1e-6)  # w = 0: structure alone
    assert tried[2][1] == pytest.approx(evaluate(a, data, "valid")["mrr"], abs=1e-6)
    assert weight == max(tried, key=lambda pair: pair[1])[0] and ensemble.weights == [weight, 1 - weight]


def test_neighbourhood_re_ranking_lifts_exactly_the_entities_within_the_hops():
    # a path 0 - 1 - 2 - 3 - 4 and an island 5
    train = torch.tensor([[0, 0, 1], [2, 0, 1], [2, 0, 3], [4, 0, 3]])
    data = LinkPredictionData([f"e{i}" for i in range(6)], ["r"], train, train[:1], train[:1])
    model = create_kge("complex", 6, 1, 4, reciprocal=True).eval()
    near = NeighbourhoodRanker(model, data, hops=2, bonus=1.0).near(torch.tensor([0, 2, 5]))
    assert near.tolist() == [[False, True, True, False, False, False], [True, True, False, True, True, False],
                             [False] * 6]
    h, r = torch.tensor([0]), torch.tensor([0])
    with torch.no_grad():
        z = model.score_tails(h, r)
        z = (z - z.mean()) / z.std()
        assert torch.allclose(NeighbourhoodRanker(model, data, 2, 0.5).score_tails(h, r), z + 0.5 * near[:1], atol=1e-6)


# --- the recipe, end to end through the command line ------------------------------------------------------------

ENTITIES = {f"{i:02d}": text for i, text in enumerate(
    ["dog, a pet", "canine, a mammal", "cat, a pet", "feline, a mammal", "mammal, an animal", "bark, a dog sound",
     "meow, a cat sound", "oak, a tree", "tree, a plant", "plant, a living thing", "fir, a tree", "rose, a plant"])}
TRAIN = [("00", "_hypernym", "01"), ("02", "_hypernym", "03"), ("01", "_hypernym", "04"), ("03", "_hypernym", "04"),
         ("07", "_hypernym", "08"), ("05", "_related", "00"), ("10", "_hypernym", "08"), ("11", "_hypernym", "09")]
DEV = [("06", "_related", "02"), ("08", "_hypernym", "09")]
TEST = [("00", "_hypernym", "04"), ("02", "_hypernym", "04"), ("10", "_hypernym", "09")]


def write_graph(folder, entities=ENTITIES, train=TRAIN):
    folder.mkdir(parents=True)
    (folder / "entity2text.txt").write_text("".join(f"{k}\t{v}\n" for k, v in entities.items()), encoding="utf-8")
    (folder / "relation2text.txt").write_text("_hypernym\thypernym\n_related\trelated form\n", encoding="utf-8")
    for name, rows in (("train.tsv", train), ("dev.tsv", DEV), ("test.tsv", TEST)):
        (folder / name).write_text("".join("\t".join(t) + "\n" for t in rows), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    torch.manual_seed(0)
    model = babelzoo.create_model("mbert_tiny", vocab_size=len(VOCAB), pad_token_id=0, num_layers=1).eval()
    model.tokenizer = WordPieceTokenizer(VOCAB)
    folder = tmp_path_factory.mktemp("encoder") / "tiny"
    model.save_pretrained(folder)
    return folder


def recipe(tmp_path, encoder, body: str = "") -> str:
    path = tmp_path / "kgc.yaml"
    path.write_text("kind: link_prediction\n"
                    f"kg: {{path: {tmp_path / 'graph'}}}\n"
                    f"encoder: {{model: {encoder}, prefix: 'passage: ', max_length: 24}}\n"
                    "scorer: {model: text_complex, dim: 8, options: {dropout: 0.0}}\n"
                    "train: {loss: 1vsall, lr: 0.01, batch_size: 4, epochs: 3, eval_every: 1}\n"
                    f"output_dir: {tmp_path / 'run'}\n" + body, encoding="utf-8")
    return str(path)


def independent_ranks(folder, graph):
    """Filtered ranks by plain loops over the saved scorer's own scores (not the memory)."""
    model, entities, relations = load_kge(folder)
    e, r = {x: i for i, x in enumerate(entities)}, {x: i for i, x in enumerate(relations)}
    known = {(e[h], r[p], e[t]) for rows in (TRAIN, DEV, TEST) for h, p, t in rows}
    ranks = []
    with torch.no_grad():
        for inverse in (False, True):
            for h, p, t in TEST:
                asked, answer = (e[t], e[h]) if inverse else (e[h], e[t])
                scores = (model.score_heads(torch.tensor([r[p]]), torch.tensor([asked])) if inverse else
                          model.score_tails(torch.tensor([asked]), torch.tensor([r[p]])))[0].tolist()
                rivals = [c for c in range(len(entities)) if c != answer and
                          ((c, r[p], asked) if inverse else (asked, r[p], c)) not in known]
                ranks.append(1 + sum(scores[c] > scores[answer] for c in rivals)
                             + sum(scores[c] == scores[answer] for c in rivals) / 2)
    return ranks


def test_the_recipe_trains_on_a_graph_in_the_layout_and_kb_eval_scores_it_as_an_independent_evaluation(
        tmp_path, encoder, capsys):
    write_graph(tmp_path / "graph")
    assert main(["pretrain", "--config", recipe(tmp_path, encoder)]) == 0
    out = capsys.readouterr().out
    assert "12 entities, 2 relations, 8/2/3 train/valid/test triples" in out and "epoch 3" in out
    folder = tmp_path / "run" / "model"
    record = json.loads((folder / "link_prediction.json").read_text(encoding="utf-8"))
    assert record["entities"] == 12 and record["train"]["epochs_run"] == 3
    assert "| test |" in (folder / "README.md").read_text(encoding="utf-8")
    assert babelzoo.from_pretrained(folder).encode(["dog"]).shape[0] == 1  # the encoder, beside its scorer
    assert main(["kb", "eval", "--model", str(folder), "--kg", str(tmp_path / "graph"), "--split", "test",
                 "--out", str(tmp_path / "eval.json")]) == 0
    metrics = json.loads((tmp_path / "eval.json").read_text(encoding="utf-8"))["metrics"]
    ranks = independent_ranks(folder, tmp_path / "graph")
    assert metrics["mrr"] == pytest.approx(sum(1 / x for x in ranks) / len(ranks), abs=1e-6)
    assert metrics["hits@3"] == pytest.approx(sum(x <= 3 for x in ranks) / len(ranks), abs=1e-6)
    assert metrics["mrr"] == pytest.approx(record["test"]["mrr"], abs=1e-6)
    capsys.readouterr()
    assert main(["kb", "predict", "--model", str(folder), "--kg", str(tmp_path / "graph"), "oak, a tree", "hypernym",
                 "--k", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "(07, _hypernym, ?)  oak, a tree" and len(lines) == 4
    # a rerun reads the entity vectors it encoded, and replaces the model it wrote
    assert main(["pretrain", "--config", recipe(tmp_path, encoder)]) == 0
    assert "entity vectors read from" in capsys.readouterr().out


def test_the_leaderboard_task_ranks_as_kb_eval_does_for_a_trained_model_and_a_text_encoder(tmp_path, encoder, capsys):
    from babelzoo.evaluation.leaderboard import ModelSpec, run_matrix
    from babelzoo.evaluation.tasks import TaskContext

    graph = write_graph(tmp_path / "graph")
    assert main(["pretrain", "--config", recipe(tmp_path, encoder, "train: {epochs: 2}\n")]) == 0
    folder = tmp_path / "run" / "model"
    specs = [ModelSpec("kgc", "kge", str(folder)), ModelSpec("tiny_text", "checkpoint", str(encoder))]
    context = TaskContext(log=lambda s: None, options={"wn18rr_link_prediction": {"kg": str(graph)}})
    results, cells = run_matrix(specs, ["wn18rr_link_prediction"], context, log=lambda s: None)
    assert [c.status for c in cells] == ["ok", "ok"], [c.detail for c in cells]
    for name, model in (("kgc", folder), ("tiny_text", encoder)):
        assert main(["kb", "eval", "--model", str(model), "--kg", str(graph), "--out", str(tmp_path / f"{name}.json")]) == 0
        metrics = json.loads((tmp_path / f"{name}.json").read_text(encoding="utf-8"))["metrics"]
        row = {r.metric: r.value for r in results if r.model == name}
        assert row == pytest.approx({"MRR": metrics["mrr"], "Hits@1": metrics["hits@1"], "Hits@3": metrics["hits@3"],
                                     "Hits@10": metrics["hits@10"]}, abs=1e-6)  # kb eval writes 6 decimals
    ranks = independent_ranks(folder, graph)
    assert next(r.value for r in results if r.model == "kgc" and r.metric == "MRR") == pytest.approx(
        sum(1 / x for x in ranks) / len(ranks), abs=1e-6)
    protocol = next(r.protocol for r in results if r.model == "kgc")
    assert protocol["ranker"] == "scorer" and protocol["ranked_by"] == "exact inner-product memory"
    # a model trained on one graph refuses another; a missing graph skips the task
    other = write_graph(tmp_path / "other", {**ENTITIES, "11": "rose, a flower"})
    context = TaskContext(log=lambda s: None, options={"wn18rr_link_prediction": {"kg": str(other)}})
    _, cells = run_matrix(specs[:1], ["wn18rr_link_prediction"], context, log=lambda s: None)
    assert cells[0].status == "failed" and "was trained on the graph" in cells[0].detail
    _, cells = run_matrix(specs[:1], ["wn18rr_link_prediction"], TaskContext(data_dir=tmp_path), log=lambda s: None)
    assert cells[0].status == "skipped" and "wn18rr/ folder" in cells[0].detail


class LetterCounts:
    """A sentence encoder from outside babelzoo (a peer): L2-normalised letter counts."""

    name, protocol = "letters", {}

    def encode(self, sentences, lang=None):
        import numpy as np

        vectors = np.array([[text.count(c) for c in string.ascii_lowercase] for text in sentences], dtype=np.float32)
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


def test_any_sentence_encoder_ranks_the_graph_by_the_cosine_of_question_and_entity_texts(tmp_path):
    from babelzoo.evaluation.leaderboard import ModelSpec, run_matrix
    from babelzoo.evaluation.tasks import TaskContext

    graph = write_graph(tmp_path / "graph")
    spec = ModelSpec("letters", "object", encoder=LetterCounts())
    results, cells = run_matrix([spec], ["wn18rr_link_prediction"],
                                TaskContext(log=lambda s: None, options={"wn18rr_link_prediction": {"kg": str(graph)}}),
                                log=lambda s: None)
    assert cells[0].status == "ok", cells[0].detail
    words = {"_hypernym": "hypernym", "_related": "related form"}
    ids = list(ENTITIES)
    entity_vectors = LetterCounts().encode(list(ENTITIES.values()))
    known = set(TRAIN + DEV + TEST)
    ranks = []
    for h, r, t in TEST:
        for asked, answer, question in ((h, t, f"{ENTITIES[h]}, {words[r]}"), (t, h, f"{ENTITIES[t]}, inverse {words[r]}")):
            scores = (entity_vectors @ LetterCounts().encode([question])[0]).tolist()
            gold = scores[ids.index(answer)]
            rivals = [scores[i] for i, c in enumerate(ids) if c != answer
                      and ((asked, r, c) if answer == t else (c, r, asked)) not in known]
            ranks.append(1 + sum(x > gold for x in rivals) + sum(x == gold for x in rivals) / 2)
    row = {r.metric: r.value for r in results}
    assert row["MRR"] == pytest.approx(sum(1 / x for x in ranks) / len(ranks), abs=1e-6)
    assert row["Hits@1"] == pytest.approx(sum(x <= 1 for x in ranks) / len(ranks), abs=1e-6)


def test_a_model_trained_on_one_graph_refuses_another_and_bad_questions_are_named(tmp_path, encoder, capsys):
    write_graph(tmp_path / "graph")
    assert main(["pretrain", "--config", recipe(tmp_path, encoder, "train: {epochs: 1, batch_size: 8}\n")]) == 0
    other = write_graph(tmp_path / "other", {**ENTITIES, "11": "rose, a flower"})
    capsys.readouterr()
    folder = str(tmp_path / "run" / "model")
    assert main(["kb", "eval", "--model", folder, "--kg", str(other)]) == 2
    assert "was trained on the graph" in capsys.readouterr().err
    assert main(["kb", "predict", "--model", folder, "--kg", str(tmp_path / "graph"), "unicorn", "hypernym"]) == 2
    assert "unknown entity 'unicorn'" in capsys.readouterr().err
    assert main(["kb", "predict", "--model", folder, "--kg", str(tmp_path / "graph"), "00", "eats"]) == 2
    assert "unknown relation 'eats'" in capsys.readouterr().err
    assert main(["kb", "predict", "--model", folder, "--kg", str(tmp_path / "graph"), "00", "hypernim"]) == 2
    assert "unknown relation 'hypernim': no id or text of the graph matches it; did you mean 'hypernym', '_hypernym'? " \
           "(its relations: _hypernym, _related, hypernym, related form)" in capsys.readouterr().err
    assert main(["kb", "predict", "--model", folder, "--kg", str(tmp_path / "graph"), "oak, a tre", "hypernym"]) == 2
    assert "did you mean 'oak, a tree', 'fir, a tree', 'dog, a pet'?" in capsys.readouterr().err
    # a relation id copied from a file with CRLF line ends
    assert main(["kb", "predict", "--model", folder, "--kg", str(tmp_path / "graph"), "00", "_hypernym\r"]) == 0


def test_kb_eval_fits_the_ensemble_and_the_name_re_ranking_on_valid_as_the_api_does(tmp_path, encoder, capsys):
    from babelzoo.knowledge import load_kb
    from babelzoo.knowledge.name_match import TextFeatures, fit_name_matches

    graph, text, structure = write_graph(tmp_path / "graph"), tmp_path / "run" / "model", tmp_path / "complex"
    assert main(["pretrain", "--config", recipe(tmp_path, encoder)]) == 0
    assert main(["kb", "train-kge", "--data", str(graph), "--model", "complex", "--dim", "8", "--epochs", "20",
                 "--eval-every", "10", "--lr", "0.05", "--out", str(structure)]) == 0
    capsys.readouterr()
    command = ["kb", "eval", "--model", str(text), "--ensemble", str(structure), "--names", "--kg", str(graph)]
    assert main([*command, "--out", str(tmp_path / "both.json")]) == 0
    assert "re-ranked by names on" in capsys.readouterr().out
    record = json.loads((tmp_path / "both.json").read_text(encoding="utf-8"))
    kb = load_kb(str(graph))
    data = LinkPredictionData.from_kb(kb)
    ensemble, weight, _ = fit_ensemble(GraphRanker.from_folder(text, kb, data),
                                       GraphRanker.from_folder(structure, kb, data), data)
    reranker, weights, valid = fit_name_matches(ensemble, data, TextFeatures.from_kb(kb, data))
    assert record["combined"]["ensemble"]["model_weight"] == weight
    assert record["combined"]["names"]["valid_mrr"] == pytest.approx(valid, abs=1e-6)
    assert len(record["combined"]["names"]["weights"]) == len(weights)
    assert record["metrics"] == pytest.approx(evaluate(reranker, data, "test"), abs=1e-6)
    assert main([*command, "--split", "valid"]) == 2  # chosen on valid: judged there, they would flatter
    assert "--ensemble and --names choose their weights on the valid split" in capsys.readouterr().err
    # kb predict answers with the same combination: the top tails of its scores
    assert main(["kb", "predict", *command[2:], "07", "_hypernym", "--k", "4"]) == 0
    printed = [line.split() for line in capsys.readouterr().out.splitlines()[-4:]]
    e, r = torch.tensor([data.entities.index("07")]), torch.tensor([data.relations.index("_hypernym")])
    best, ids = (x.tolist() for x in reranker.score_tails(e, r)[0].topk(4))
    expected = [(i + 1, pytest.approx(s, abs=1e-4), data.entities[j]) for i, (s, j) in enumerate(zip(best, ids))]
    assert [(int(rank), float(score), ident) for rank, score, ident, *_ in printed] == expected


def test_recipe_mistakes_name_the_file_line_and_key_and_a_foreign_folder_is_refused_before_training(
        tmp_path, encoder, capsys):
    write_graph(tmp_path / "graph")
    path = recipe(tmp_path, encoder)
    bad = tmp_path / "bad.yaml"
    bad.write_text(Path(path).read_text(encoding="utf-8").replace("dropout: 0.0", "dropot: 0.0"), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad.yaml:4 .*options.*'dropot'"):
        read_link_recipe(bad)
    assert main(["pretrain", "--config", path, "--set", "train.lr=-1"]) == 2
    assert "train.lr=-1" in capsys.readouterr().err
    (tmp_path / "run" / "model").mkdir(parents=True)
    (tmp_path / "run" / "model" / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(["pretrain", "--config", path]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (tmp_path / "run" / "model" / "notes.txt").read_text(encoding="utf-8") == "mine"
    assert not (tmp_path / "run" / "cache").exists()  # refused before reading the graph


def test_the_shipped_recipe_reads_and_another_graph_is_one_override_away():
    from babelzoo.train.config import recipe_path

    shipped = read_link_recipe(recipe_path("kgc_e5_small"), ["kg.path=/data/fb15k", "output_dir=runs/fb"])
    assert (shipped.kg.path, shipped.encoder.model, shipped.scorer.model) == ("/data/fb15k", "multilingual_e5_small",
                                                                               "text_complex")
    assert shipped.train.loss == "1vsall" and shipped.output_dir == "runs/fb"
    structure = read_link_recipe(recipe_path("kgc_complex"), ["kg.path=/data/fb15k"])  # kb eval --ensemble's
    assert (structure.kg.path, structure.uses_text, structure.scorer.model) == ("/data/fb15k", False, "complex")


def write_two_graph_dbp5l(root: Path) -> Path:
    """A DBP-5L folder with a Greek and an English graph of four entities each; el 0 ↔ en 1, el 2 ↔ en 3."""
    el = [f"http://el.dbpedia.org/resource/{n}" for n in ("Alfa", "Beta", "Gamma", "Delta")]
    en = [f"http://dbpedia.org/resource/{n}" for n in ("Kilo", "Alpha", "Lima", "Gamma_ray")]
    files = {"entity/el.tsv": el, "entity/en.tsv": en,
             "relations.txt": ["http://dbpedia.org/ontology/country", "http://dbpedia.org/ontology/birthPlace"],
             "kg/el-train.tsv": ["0\t0\t1", "1\t1\t2", "2\t0\t3"], "kg/el-val.tsv": ["0\t1\t2"],
             "kg/el-test.tsv": ["3\t0\t0"], "kg/en-train.tsv": ["1\t0\t0", "0\t1\t3", "3\t0\t2"],
             "kg/en-val.tsv": ["2\t1\t1"], "kg/en-test.tsv": ["1\t1\t2"],
             "seed_alignlinks/el-en.tsv": ["0.0\t1.0", "2.0\t3.0"]}
    for name, lines in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return root


def test_one_model_over_several_graphs_trains_from_a_recipe_and_kb_eval_ranks_each_graph(tmp_path, encoder, capsys):
    root = write_two_graph_dbp5l(tmp_path / "dbp5l")
    path = tmp_path / "joint.yaml"
    path.write_text("kind: link_prediction\n"
                    f"kg: {{path: {root}, graphs: [el, en], valid_limit: 1}}\n"
                    f"encoder: {{model: {encoder}, prefix: 'passage: ', max_length: 24}}\n"
                    "scorer: {model: aligned_text_complex, dim: 8, options: {dropout: 0.0}}\n"
                    "train: {loss: 1vsall, lr: 0.01, batch_size: 4, epochs: 3, eval_every: 1}\n"
                    f"output_dir: {tmp_path / 'run'}\n", encoding="utf-8")
    assert main(["pretrain", "--config", str(path)]) == 0
    out = capsys.readouterr().out
    assert "graphs el, en as one: 8 entities in 6 clusters of aligned entities (2 seed pairs)" in out
    folder = tmp_path / "run" / "model"
    record = json.loads((folder / "link_prediction.json").read_text(encoding="utf-8"))
    assert list(record["graphs"]) == ["el", "en"] and record["clusters"] == 6 and record["train"]["epochs_run"] == 3
    model, entities, _ = load_kge(folder)
    assert entities[:2] == ["el:0", "el:1"] and entities[4:6] == ["en:0", "en:1"]
    assert model.cluster[0] == model.cluster[5] and model.cluster[2] == model.cluster[7]  # the seeds: one vector
    for lang in ("el", "en"):
        assert main(["kb", "eval", "--model", str(folder), "--kg", str(root / lang), "--split", "test",
                     "--out", str(tmp_path / f"{lang}.json")]) == 0
        metrics = json.loads((tmp_path / f"{lang}.json").read_text(encoding="utf-8"))["metrics"]
        assert metrics["mrr"] == pytest.approx(record["graphs"][lang]["test"]["mrr"], abs=1e-6)
    # the English test triple (1, birthPlace, 2), ranked by hand among the four English entities
    kb = babelzoo.knowledge.load_kb(root / "en")
    ranker = GraphRanker.from_folder(folder, kb, LinkPredictionData.from_kb(kb))
    with torch.no_grad():
        h, t = entities.index("en:1"), entities.index("en:2")
        relation = torch.tensor([1])
        tails = [float(model.score(torch.tensor([h]), relation, torch.tensor([4 + c]))) for c in range(4)]
        assert ranker.score_tails(torch.tensor([1]), relation)[0].tolist() == pytest.approx(tails, abs=1e-5)
        heads = [float(model.score(torch.tensor([t]), model.inverse(relation), torch.tensor([4 + c]))) for c in range(4)]
        assert ranker.score_heads(relation, torch.tensor([2]))[0].tolist() == pytest.approx(heads, abs=1e-5)
    capsys.readouterr()
    write_graph(tmp_path / "graph")  # a graph the model was not trained on
    assert main(["kb", "eval", "--model", str(folder), "--kg", str(tmp_path / "graph"), "--split", "test"]) == 2
    assert "trained on the graphs el, en" in capsys.readouterr().err


def test_several_graphs_need_a_dbp5l_folder_and_the_aligned_scorer(tmp_path, encoder):
    import dataclasses

    from babelzoo.knowledge.text_kge import train_link_prediction
    from babelzoo.train.config import recipe_path

    write_graph(tmp_path / "graph")
    shipped = read_link_recipe(recipe_path("kgc_dbp5l_joint"), [f"kg.path={tmp_path / 'graph'}",
                                                                f"output_dir={tmp_path / 'run'}"])
    assert shipped.kg.graphs == ["el", "en", "es", "fr", "ja"] and shipped.scorer.model == "aligned_text_complex"
    with pytest.raises(KBError, match="kg.graphs reads the graphs and seed alignments of a DBP-5L folder"):
        train_link_prediction(shipped)
    with pytest.raises(ConfigError, match="scorer.model must be aligned_text_complex"):
        train_link_prediction(dataclasses.replace(shipped, scorer=dataclasses.replace(shipped.scorer,
                                                                                      model="text_complex")))


def test_a_run_stopped_by_a_signal_writes_no_model(tmp_path, encoder, capsys, monkeypatch):
    """SIGTERM in the middle of training stops the run with an error and leaves no model folder
    (a link-prediction run cannot resume, and a half-trained scorer is not a trained one)."""
    import os
    import signal

    from babelzoo.knowledge import link_prediction

    evaluate_valid = link_prediction.ValidationRanking.__call__

    def then_stop(self, model):
        metrics = evaluate_valid(self, model)
        os.kill(os.getpid(), signal.SIGTERM)  # the trainer's handler stops the run after this step
        return metrics

    monkeypatch.setattr(link_prediction.ValidationRanking, "__call__", then_stop)
    write_graph(tmp_path / "graph")
    assert main(["pretrain", "--config", recipe(tmp_path, encoder)]) == 2
    assert "training stopped by SIGTERM at step 2 of 6: nothing is written" in capsys.readouterr().err
    assert not (tmp_path / "run" / "model").exists()


def test_an_encoder_folder_trained_again_under_the_same_path_is_encoded_again(tmp_path, encoder, capsys):
    import shutil

    write_graph(tmp_path / "graph")
    folder = tmp_path / "encoder"
    shutil.copytree(encoder, folder)
    assert main(["pretrain", "--config", recipe(tmp_path, folder)]) == 0
    first = json.loads((tmp_path / "run" / "model" / "link_prediction.json").read_text(encoding="utf-8"))
    capsys.readouterr()
    model = babelzoo.from_pretrained(folder)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(1.5)
    model.save_pretrained(folder)  # new weights, same path: the cached vectors no longer hold
    assert main(["pretrain", "--config", recipe(tmp_path, folder)]) == 0
    out = capsys.readouterr().out
    assert "entity vectors read from" not in out and "encoded 12 entity texts" in out
    second = json.loads((tmp_path / "run" / "model" / "link_prediction.json").read_text(encoding="utf-8"))
    assert second["valid"] != first["valid"] or second["test"] != first["test"]
    assert main(["pretrain", "--config", recipe(tmp_path, folder)]) == 0  # unchanged weights: read back
    assert "entity vectors read from" in capsys.readouterr().out
