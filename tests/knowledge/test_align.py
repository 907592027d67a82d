"""Entity alignment: ranks with ties at the mean, mutual best matches as a brute-force scan finds
them, structure carried by seeds recovering an isomorphic graph whose names say nothing, and
``babelzoo kb align`` reading both layouts, writing the pairs and scoring them against gold."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from babelzoo.cli import main
from babelzoo.knowledge import KBError, load_kb
from babelzoo.knowledge.align import EntityAligner, ranks_of, read_pairs, split_pairs
from babelzoo.knowledge.graph import GraphKB


def test_ranks_count_ties_at_the_mean():
    scores = np.array([[0.9, 0.5, 0.9, 0.1], [0.2, 0.2, 0.2, 0.2]])
    assert ranks_of(scores, np.array([0, 3])).tolist() == [1.5, 2.5]


def graphs(n=60, relations=3, degree=8, seed=0):
    """Graph A and its copy B under a random renaming of the entities (same relations)."""
    rng = random.Random(seed)
    a, b = GraphKB("a"), GraphKB("b")
    rename = list(range(n))
    rng.shuffle(rename)
    for i in range(n):
        a.add_label(f"a{i}", "und", f"a{i}")
        b.add_label(f"b{rename[i]}", "und", f"b{rename[i]}")
    for _ in range(n * degree // 2):
        h, t, r = rng.randrange(n), rng.randrange(n), f"r{rng.randrange(relations)}"
        if h != t:
            a.add_triple(f"a{h}", r, f"a{t}")
            b.add_triple(f"b{rename[h]}", r, f"b{rename[t]}")
    return a, b, [(f"a{i}", f"b{rename[i]}") for i in range(n)]


def test_mutual_best_matches_are_those_of_a_scan_of_the_whole_score_matrix():
    a, b, gold = graphs(n=40)
    rng = np.random.default_rng(0)
    va, vb = (rng.normal(size=(40, 8)).astype(np.float32) for _ in range(2))
    aligner = EntityAligner(a, b, va, vb, gold[:5], weight=0.0)
    found = aligner.mutual_best(gold[:5], margin=0.1, chunk=3)  # chunks of 3 rows: the column merge is exercised
    rows = [i for i, e in enumerate(aligner.ids_a) if e not in {x for x, _ in gold[:5]}]
    cols = [j for j, e in enumerate(aligner.ids_b) if e not in {y for _, y in gold[:5]}]
    full = (va @ vb.T)[np.ix_(rows, cols)]
    expected = []
    for i in range(len(rows)):
        j = int(full[i].argmax())
        row_top, col_top = np.sort(full[i])[-2:], np.sort(full[:, j])[-2:]
        if int(full[:, j].argmax()) == i and row_top[1] - row_top[0] >= 0.1 and col_top[1] - col_top[0] >= 0.1:
            expected.append((aligner.ids_a[rows[i]], aligner.ids_b[cols[j]]))
    assert found == expected and len(expected) >= 3


def test_seeds_carry_the_structure_across_when_names_say_nothing():
    a, b, gold = graphs()
    rng = np.random.default_rng(1)
    noise = [rng.normal(size=(60, 16)).astype(np.float32) for _ in range(2)]
    va, vb = (v / np.linalg.norm(v, axis=1, keepdims=True) for v in noise)
    train, test = split_pairs(gold, 0.3, seed=0)
    names_only = EntityAligner(a, b, va, vb, train, weight=0.0).evaluate(test)
    aligner = EntityAligner(a, b, va, vb, train).fit()
    metrics = aligner.evaluate(test)
    assert names_only["hits@1"] < 0.2  # random names: chance is 1 in 42
    assert aligner.choice["weight"] > 0 and metrics["hits@1"] >= 0.7 and metrics["assigned_hits@1"] >= 0.8
    pairs = aligner.align()
    assert len(pairs) == 42 and len({b for _, b, _ in pairs}) == 42  # one-to-one over the non-seed entities
    assert sum((x, y) in set(gold) for x, y, _ in pairs) >= 0.8 * 42


def test_pair_files_name_the_line_of_an_unknown_entity(tmp_path):
    a, b, _ = graphs(n=5)
    path = tmp_path / "seeds.tsv"
    path.write_text("a0\tb1\n3.0\tb2\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"seeds.tsv:2: '3.0' is no entity of graph A"):
        read_pairs(path, a, b)
    path.write_text("a0\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"seeds.tsv:1: expected 'entity in A<TAB>entity in B'"):
        read_pairs(path, a, b)


def write_dbp15k(root, n=30, seed=0):
    """Two graphs in the DBP15K layout: ids 0..n-1 in graph 1, n..2n-1 in graph 2."""
    a, b, gold = graphs(n=n, seed=seed)
    root.mkdir()
    index_a = {e: str(i) for i, e in enumerate(a.entities())}
    index_b = {e: str(n + i) for i, e in enumerate(b.entities())}
    relations = {f"r{i}": str(i) for i in range(3)}
    for side, kb, index, lang in (("1", a, index_a, "el"), ("2", b, index_b, "en")):
        (root / f"ent_ids_{side}").write_text("".join(f"{i}\thttp://{lang}.dbpedia.org/resource/{e}_x\n"
                                                      for e, i in index.items()), encoding="utf-8")
        (root / f"rel_ids_{side}").write_text("".join(f"{i}\thttp://dbpedia.org/property/{r}Of\n"
                                                      for r, i in relations.items()), encoding="utf-8")
        (root / f"triples_{side}").write_text("".join(f"{index[h]}\t{relations[r]}\t{index[t]}\n"
                                                      for h, r, t in kb.triples()), encoding="utf-8")
    pairs = [(index_a[x], index_b[y]) for x, y in gold]
    (root / "ref_ent_ids").write_text("".join(f"{x}\t{y}\n" for x, y in pairs), encoding="utf-8")
    return pairs


def test_a_graph_of_the_dbp15k_layout_reads_with_readable_names(tmp_path):
    write_dbp15k(tmp_path / "zh_en")
    kb = load_kb(tmp_path / "zh_en" / "2")
    assert kb.entity_text("30").endswith(" x") and kb.relation_label("1") == "r1 of"
    (tmp_path / "zh_en" / "triples_1").write_text("0\t1\t99\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"triples_1:1: tail '99' is not in ent_ids_1"):
        load_kb(tmp_path / "zh_en" / "1")


def test_kb_align_writes_pairs_and_scores_them_against_gold(tmp_path, capsys, monkeypatch):
    import string

    import torch

    import babelzoo
    from babelzoo.datasets.wordpiece import WordPieceTokenizer
    from babelzoo.knowledge import text_kge

    pairs = write_dbp15k(tmp_path / "zh_en", n=60)
    train, _ = split_pairs(pairs, 0.3, seed=0)
    (tmp_path / "seeds.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in train), encoding="utf-8")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase, *string.digits, " ",
             *("##" + c for c in string.ascii_lowercase + string.digits)]
    torch.manual_seed(0)
    model = babelzoo.create_model("mbert_tiny", vocab_size=len(vocab), pad_token_id=0, num_layers=1).eval()
    model.tokenizer = WordPieceTokenizer(vocab)
    model.save_pretrained(tmp_path / "tiny")
    root = tmp_path / "zh_en"
    argv = ["kb", "align", "--kb", str(root / "1"), "--kb", str(root / "2"), "--seeds", str(tmp_path / "seeds.tsv"),
            "--model", str(tmp_path / "tiny"), "--out", str(tmp_path / "pairs.tsv"), "--eval", str(root / "ref_ent_ids"),
            "--metrics", str(tmp_path / "metrics.json"), "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "60 and 60 entities, 18 seed pairs" in out and "wrote 42 pairs" in out, out
    metrics = json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))["metrics"]
    assert f"Hits@1 {metrics['hits@1']:.4f}" in out and metrics["pairs"] == 42
    rows = [line.split("\t") for line in (tmp_path / "pairs.tsv").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 42 and all(len(row) == 5 for row in rows)
    right = sum((x, y) in set(pairs) for x, y, *_ in rows)
    assert right >= 0.7 * 42  # structure through the seeds finds most of them
    # a rerun reads the name vectors it kept and replaces the files it wrote; a file of the user's
    # is never overwritten
    assert len(list((tmp_path / "cache").glob("names-*.npy"))) == 2

    def not_loaded(source):
        raise AssertionError(f"{source} loaded again")

    with monkeypatch.context() as patch:
        patch.setattr(text_kge, "text_model", not_loaded)  # the model is not loaded again
        assert main(argv) == 0
    assert json.loads((tmp_path / "metrics.json").read_text(encoding="utf-8"))["metrics"] == metrics
    with torch.no_grad():  # new weights under the same folder: the kept vectors no longer hold
        model.embeddings.word.weight.mul_(-1.0)
    model.save_pretrained(tmp_path / "tiny")
    assert main(argv) == 0
    assert len(list((tmp_path / "cache").glob("names-*.npy"))) == 4
    (tmp_path / "mine.tsv").write_text("keep\n", encoding="utf-8")
    assert main([*argv[:8], "--out", str(tmp_path / "mine.tsv")]) == 2
    assert (tmp_path / "mine.tsv").read_text(encoding="utf-8") == "keep\n"
    assert main(["kb", "align", "--kb", str(root / "1"), "--out", str(tmp_path / "x.tsv")]) == 2
    assert "give exactly two graphs" in capsys.readouterr().err
