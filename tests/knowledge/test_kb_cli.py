"""``babelzoo kb``: info, link and train-kge on knowledge bases written here."""

from __future__ import annotations

import json

import pytest
import torch

from babelzoo.cli import main
from babelzoo.knowledge import load_kb
from babelzoo.knowledge.kge import load_kge

TRIPLES = "Q17\tcurrency\tQ8146\nQ17\tofficial_language\tQ5287\nQ183\tcurrency\tQ4916\nQ142\tcurrency\tQ4916\n"
ENTITIES = """Q17\ten\tJapan\tNippon
Q17\tde\tJapan
Q17\tja\t日本
Q8146\ten\tJapanese yen\tyen
Q8146\tja\t円
Q5287\ten\tJapanese
Q183\ten\tGermany
Q183\tde\tDeutschland
Q4916\ten\teuro
Q4916\tde\tEuro
Q142\ten\tFrance
Q142\tde\tFrankreich
Q999\ten\tGeorgia
Q1428\ten\tGeorgia
"""


@pytest.fixture
def kb_dir(tmp_path):
    folder = tmp_path / "toy"
    folder.mkdir()
    (folder / "triples.tsv").write_text(TRIPLES, encoding="utf-8")
    (folder / "entities.tsv").write_text(ENTITIES, encoding="utf-8")
    return folder


def test_info_prints_counts_types_relations_and_languages(kb_dir, capsys):
    assert main(["kb", "info", str(kb_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "toy: 8 entities, 2 relations, 4 triples"
    assert lines[1] == "entity types: (untyped) 8"
    assert lines[2] == "triples per relation: currency 3, official_language 1"
    assert lines[3] == "languages: 3"
    rows = [line.split() for line in lines[5:]]
    assert rows == [["en", "8", "10"], ["de", "4", "4"], ["ja", "2", "2"]]  # by named entities, largest first
    main(["kb", "info", str(kb_dir), "--top", "1"])
    out = capsys.readouterr().out
    assert "languages: 3 (2 more: --top 0 lists all)" in out and "ja " not in out


def test_info_shows_splits(tmp_path, capsys):
    for split, text in (("train", "a\tr\tb\nb\tr\tc\n"), ("valid", "a\tr\tc\n"), ("test", "c\tr\ta\n")):
        (tmp_path / f"{split}.tsv").write_text(text, encoding="utf-8")
    main(["kb", "info", str(tmp_path)])
    out = capsys.readouterr().out
    assert "splits: train 2, valid 1, test 1" in out and "languages: 0" in out


def test_link_prints_spans_entities_and_labels(kb_dir, capsys):
    assert main(["kb", "link", "--kb", str(kb_dir), "--lang", "de", "Deutschland zahlt mit Euro, Japan mit yen."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Deutschland zahlt mit Euro, Japan mit yen."
    assert lines[1:] == ["  0-11\tDeutschland\tQ183\tDeutschland / Germany", "  22-26\tEuro\tQ4916\tEuro / euro",
                         "  28-33\tJapan\tQ17\tJapan"]  # English "yen" is not a German name
    main(["kb", "link", "--kb", str(kb_dir), "--lang", "en", "Georgia", "nothing"])
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["Georgia", "  0-7\tGeorgia\tQ999\tGeorgia  (+1: Q1428)", "nothing", "  (no mention)"]
    main(["kb", "link", "--kb", str(kb_dir), "--lang", "ja", "--tokens", "--json", "日本", "の", "円"])
    record = json.loads(capsys.readouterr().out)
    assert record == {"text": "日本 の 円", "mentions": [
        {"start": 0, "end": 1, "text": "日本", "entity": "Q17", "label": "日本", "candidates": ["Q17"]},
        {"start": 2, "end": 3, "text": "円", "entity": "Q8146", "label": "円", "candidates": ["Q8146"]}]}


def test_unknown_kb_is_a_clear_error(tmp_path, capsys):
    assert main(["kb", "info", "no-such-kb"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("babelzoo kb: unknown knowledge base 'no-such-kb'") and "is no file or folder" in err


def _split_kb(folder):
    """A graph with learnable structure: two cliques of 6 nodes joined by `same`, and `next`
    chains inside each clique."""
    folder.mkdir()
    triples = []
    for group in ("a", "b"):
        nodes = [f"{group}{i}" for i in range(6)]
        triples += [(x, "same", y) for x in nodes for y in nodes if x != y]
        triples += [(nodes[i], "next", nodes[(i + 1) % 6]) for i in range(6)]
    held = [("a0", "same", "a3"), ("b1", "same", "b4"), ("a2", "same", "a5"), ("b0", "same", "b2")]
    train = [t for t in triples if t not in held]
    for split, rows in (("train", train), ("valid", held[:2]), ("test", held[2:])):
        (folder / f"{split}.txt").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows), encoding="utf-8")
    return folder


def test_train_kge_saves_a_model_that_loads_back(tmp_path, capsys):
    data = _split_kb(tmp_path / "graph")
    out = tmp_path / "kge"
    assert main(["kb", "train-kge", "--data", str(data), "--model", "distmult", "--dim", "16", "--epochs", "40",
                 "--eval-every", "10", "--lr", "0.05", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "12 entities, 2 relations, 68/2/2 train/valid/test triples" in printed
    assert "epoch   10" in printed and f"saved to {out}" in printed
    saved = json.loads((out / "kge.json").read_text(encoding="utf-8"))
    assert saved["model"] == "distmult" and saved["dim"] == 16 and saved["hyperparameters"] == {"reciprocal": True}
    assert saved["test"]["mrr"] >= 0.75  # held-out clique edges are easy once trained (1 epoch: 0.27)
    model, entities, relations = load_kge(out)
    kb = load_kb(data)
    assert entities == kb.entities() and relations == ["same", "next"]
    h, r = torch.tensor([0, 3]), torch.tensor([0, 1])
    scores = model.score_tails(h, r)
    assert scores.shape == (2, 12)
    # the loaded model is the trained one: its test MRR is the saved one
    from babelzoo.knowledge import LinkPredictionData, evaluate

    assert round(evaluate(model, LinkPredictionData.from_kb(kb), "test")["mrr"], 4) == saved["test"]["mrr"]


def test_train_kge_needs_splits(kb_dir, capsys):
    assert main(["kb", "train-kge", "--data", str(kb_dir), "--model", "transe"]) == 2
    assert "babelzoo kb: train-kge: " in capsys.readouterr().err


def test_load_kge_errors(tmp_path):
    from babelzoo.knowledge import KBError

    with pytest.raises(KBError, match="kge.json: missing"):
        load_kge(tmp_path)
    (tmp_path / "kge.json").write_text('{"model": "transe"}', encoding="utf-8")
    with pytest.raises(KBError, match="missing field 'dim'"):
        load_kge(tmp_path)
