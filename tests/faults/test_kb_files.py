"""Knowledge-base files, KG embeddings and saved FAISS memories: malformed input is an error
naming file:line or the field, never a silently different knowledge base."""

import json
import time

import numpy as np
import pytest

from babelzoo.knowledge.base import KBError
from babelzoo.knowledge.graph import GraphKB
from babelzoo.knowledge.graph_files import read_names, read_triples
from babelzoo.knowledge.kb_layouts import read_kb
from babelzoo.knowledge.kge import create_kge
from babelzoo.knowledge.memory import MemoryFormatError, RetrievalMemory


def test_a_byte_order_mark_is_not_part_of_the_first_id(tmp_path):
    path = tmp_path / "triples.tsv"
    path.write_bytes("\ufeffQ17\tcurrency\tQ8146\nQ17\tborders\tQ148\n".encode("utf-8"))
    triples = read_triples(path)
    assert [t.head for t in triples] == ["Q17", "Q17"]
    names = tmp_path / "entities.tsv"
    names.write_bytes("\ufeffQ17\ten\tJapan\n".encode("utf-8"))
    kb = GraphKB("t")
    assert read_names(names, kb) == {"Q17"} and kb.label("Q17") == "Japan"


def test_an_id_that_starts_with_a_hash_is_never_dropped_as_a_comment(tmp_path):
    """A comment is a line whose first character is '#'. One whose '#' is glued to the first of
    the fields of a data line could hide an id such as '#tag': refused by file:line, not dropped."""
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "triples.tsv").write_text("# head\trelation\ttail\n## notes\n#plain note\nQ1\tP1\t#tag\n"
                                        "#tag\tP1\tQ2\n", encoding="utf-8")
    message = (rf"{folder / 'triples.tsv'}:5: a line starting with '#' is a comment, but this one has the 3 fields "
               r"of a triple \(head, relation, tail\), so '#tag' may be an id: write '# ' \(hash, space\) to "
               r"comment a line out; an id that starts with '#' goes in a JSONL file")
    with pytest.raises(KBError, match=message):
        read_kb(folder)
    (folder / "triples.tsv").write_text("# head\trelation\ttail\nQ1\tP1\t#tag\n# #tag\tP1\tQ2\n", encoding="utf-8")
    assert [tuple(t) for t in read_kb(folder).triples()] == [("Q1", "P1", "#tag")]  # '# ' comments the line out
    (folder / "triples.tsv").unlink()
    (folder / "triples.jsonl").write_text('# comment\n{"head": "#tag", "relation": "P1", "tail": "Q2"}\n',
                                          encoding="utf-8")
    (folder / "entities.tsv").write_text("#tag\ten\tHashtag\nQ2\ten\tQ two\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"entities\.tsv:1: .* fields of an entity name line \(id, lang, label\), so "
                                      r"'#tag' may be an id"):
        read_kb(folder)
    (folder / "entities.tsv").unlink()
    (folder / "entities.jsonl").write_text('{"id": "#tag", "labels": {"en": "Hashtag"}}\n{"id": "Q2"}\n',
                                           encoding="utf-8")
    kb = read_kb(folder)
    assert [tuple(t) for t in kb.triples()] == [("#tag", "P1", "Q2")] and kb.label("#tag") == "Hashtag"
    openke = tmp_path / "openke"
    openke.mkdir()
    (openke / "entity2id.txt").write_text("2\n#tag 0\nQ2 1\n", encoding="utf-8")
    (openke / "relation2id.txt").write_text("1\nP1 0\n", encoding="utf-8")
    (openke / "train2id.txt").write_text("1\n0 1 0\n", encoding="utf-8")
    with pytest.raises(KBError, match=r"entity2id\.txt:2: .* the 2 fields of a line of entity2id\.txt, so '#tag' may "
                                      r"be an id: write '# ' \(hash, space\) to comment a line out$"):
        read_kb(openke)


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "triples.tsv"
    path.write_bytes(b"Q17\tcurrency\tQ8146\nQ142\tname\tFran\xe7e\n")
    with pytest.raises(KBError, match=rf"{path}:2: not UTF-8 text \(byte 15 of the line"):
        read_triples(path)


def test_a_utf16_kb_file_is_named_as_such(tmp_path):
    path = tmp_path / "triples.tsv"
    path.write_bytes("Q17\tcurrency\tQ8146\nQ142\tname\tFrançe\n".encode("utf-16"))
    with pytest.raises(KBError) as err:
        read_triples(path)
    assert str(err.value) == f"{path}: UTF-16 text (byte-order mark 0xff 0xfe); save it as UTF-8"


@pytest.mark.parametrize("line, message", [
    ({"id": "Q17", "lables": {"en": "Japan"}}, r"unknown key\(s\) \['lables'\]; an entity line takes id, type"),
    ({"id": "Q17", "labels": ["Japan"]}, "'labels' must map language codes to names, got list"),
    ({"id": "Q17", "aliases": "Nippon"}, "'aliases' must map language codes to names, got str"),
    ({"id": "Q17", "type": ["country"]}, r"'type' must be a non-empty string, got \['country'\]"),
])
def test_a_malformed_jsonl_entity_names_the_line(tmp_path, line, message):
    path = tmp_path / "entities.jsonl"
    path.write_text(json.dumps({"id": "Q8146", "labels": {"en": "yen"}}) + "\n" + json.dumps(line) + "\n",
                    encoding="utf-8")
    with pytest.raises(KBError, match=rf"{path}:2: {message}"):
        read_names(path, GraphKB("t"))


def test_many_aliases_of_one_entity_are_added_in_linear_time():
    kb = GraphKB("t")
    start = time.perf_counter()
    for i in range(200_000):
        kb.add_label("Q1", "en", f"alias {i}")
    kb.add_label("Q1", "en", "the label", preferred=True)
    kb.add_label("Q1", "en", "alias 7")  # a repeat keeps one copy in its place
    assert time.perf_counter() - start < 20  # a list-scanning insert takes minutes here
    names = kb.labels("Q1", "en")
    assert len(names) == 200_001 and names[0] == "the label" and names[1:3] == ["alias 0", "alias 1"]
    assert kb.label("Q1", "en") == "the label"


@pytest.mark.parametrize("dim", [0, -3])
def test_kge_dimension_must_be_positive(dim):
    with pytest.raises(KBError, match=rf"TransE: dim={dim} must be a positive integer"):
        create_kge("transe", 10, 3, dim)


def test_a_memory_whose_metric_disagrees_with_its_index_is_refused(tmp_path):
    pytest.importorskip("faiss")
    memory = RetrievalMemory(8, "Flat", metric="l2", device="cpu")
    memory.add(np.random.default_rng(0).standard_normal((20, 8)).astype(np.float32))
    folder = memory.save(tmp_path / "mem")
    meta = json.loads((folder / "memory.json").read_text())
    meta["metric"] = "cosine"
    (folder / "memory.json").write_text(json.dumps(meta))
    with pytest.raises(MemoryFormatError, match="memory.json says metric 'cosine', but index.faiss ranks by l2"):
        RetrievalMemory.load(folder)
    (folder / "index.faiss").write_bytes((folder / "index.faiss").read_bytes()[:40])
    meta["metric"] = "l2"
    (folder / "memory.json").write_text(json.dumps(meta))
    with pytest.raises(MemoryFormatError, match="index.faiss: not a readable FAISS index"):
        RetrievalMemory.load(folder)


@pytest.mark.parametrize("saved, claimed", [("cosine", "ip"), ("ip", "cosine")])
def test_a_memory_json_that_swaps_cosine_and_inner_product_is_refused(tmp_path, saved, claimed):
    """FAISS stores both as inner-product indexes: the seal memory.json records (and, for memories
    saved before it, the norms of a cosine memory's keys) tells them apart."""
    pytest.importorskip("faiss")
    keys = 3 * np.random.default_rng(0).standard_normal((40, 8)).astype(np.float32)
    memory = RetrievalMemory(8, "Flat", metric=saved, device="cpu")
    memory.add(keys)
    folder = memory.save(tmp_path / "mem")
    meta = json.loads((folder / "memory.json").read_text())
    (folder / "memory.json").write_text(json.dumps({**meta, "metric": claimed}))
    article = "a" if saved == "cosine" else "an"
    with pytest.raises(MemoryFormatError, match=rf"{folder / 'memory.json'}: says metric '{claimed}', but index.faiss "
                                                rf"was saved by {article} '{saved}' memory: its scores would be "
                                                rf"mislabelled; restore \"metric\": \"{saved}\" or rebuild the memory"):
        RetrievalMemory.load(folder)
    other = RetrievalMemory(8, "Flat", metric=saved, device="cpu")
    other.add(keys[:10])
    (folder / "index.faiss").write_bytes(other.save(tmp_path / "other").joinpath("index.faiss").read_bytes())
    (folder / "memory.json").write_text(json.dumps(meta))
    with pytest.raises(MemoryFormatError, match="index.faiss is not the index saved with this memory.json"):
        RetrievalMemory.load(folder)
    # a memory saved before the seal: an inner-product index read as cosine shows keys that are not unit
    memory.save(folder)
    unsealed = {k: v for k, v in meta.items() if k != "metric_seal"}
    (folder / "memory.json").write_text(json.dumps({**unsealed, "metric": "cosine"}))
    if saved == "ip":
        with pytest.raises(MemoryFormatError, match=r"says metric 'cosine', but index.faiss holds keys of norm "
                                                    r"[0-9.]+ to [0-9.]+, not unit vectors"):
            RetrievalMemory.load(folder)
    else:
        assert RetrievalMemory.load(folder).metric == "cosine"
    (folder / "memory.json").write_text(json.dumps(meta))
    assert RetrievalMemory.load(folder).metric == saved and len(RetrievalMemory.load(folder)) == 40
