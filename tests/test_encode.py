"""``babelzoo encode``: a file of sentences in, the vectors ``model.encode`` gives out (.npy or
.jsonl, in input order); every bad line is named by file:line; an output file the command did
not write is left alone unless --overwrite."""

from __future__ import annotations

import json
import string

import numpy as np
import pytest
import torch

import babelzoo
from babelzoo._files import file_record
from babelzoo.cli import main
from babelzoo.datasets.wordpiece import WordPieceTokenizer

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *string.ascii_lowercase, *string.digits, *".,!?'",
         *("##" + c for c in string.ascii_lowercase)]
SENTENCES = ["Where is the station?", "Go!", "Mary and Tom want to sing with us again next week.", "We won."]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A tiny model with a character tokenizer, saved; and the model itself."""
    torch.manual_seed(0)
    model = babelzoo.create_model("mbert_tiny", vocab_size=len(VOCAB), pad_token_id=0, num_layers=2).eval()
    model.tokenizer = WordPieceTokenizer(VOCAB)
    folder = tmp_path_factory.mktemp("model") / "tiny"
    model.save_pretrained(folder)
    return folder, model


def encode(argv, capsys) -> tuple[int, str]:
    code = main(["encode", *map(str, argv)])
    return code, capsys.readouterr().err


def text_file(path, lines):
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_text_file_gives_the_models_vectors_in_order_as_npy(saved, tmp_path, capsys):
    folder, model = saved
    source = text_file(tmp_path / "in.txt", SENTENCES)
    code, err = encode(["--model", folder, "--input", source, "--output", tmp_path / "v.npy", "--batch-size", 3],
                       capsys)
    got = np.load(tmp_path / "v.npy")
    assert code == 0 and got.dtype == np.float32 and got.shape == (4, 128)
    np.testing.assert_allclose(got, model.encode(SENTENCES, normalize_embeddings=True), atol=1e-6)
    np.testing.assert_allclose(got[1], model.encode("Go!", normalize_embeddings=True), atol=1e-6)  # input order
    summary = err.strip().splitlines()[-1]
    assert summary.startswith("babelzoo encode: 4 sentences, 128 dims, ") and "sentences/s" in summary
    assert summary.endswith(f"wrote {tmp_path / 'v.npy'}")


def test_options_reach_the_vectors(saved, tmp_path, capsys):
    folder, model = saved
    source = text_file(tmp_path / "in.txt", SENTENCES)
    options = ["--prefix", "so ", "--layer", "1", "--pooling", "cls", "--max-length", "6", "--no-normalize"]
    code, _ = encode(["--model", folder, "--input", source, "--output", tmp_path / "v.npy", *options], capsys)
    expected = model.encode(SENTENCES, prompt="so ", layer=1, pooling="cls", max_length=6,
                            normalize_embeddings=False)
    assert code == 0
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), expected, atol=1e-6)


def test_json_lines_in_and_out_keep_index_and_id(saved, tmp_path, capsys):
    folder, model = saved
    rows = [{"id": "a7", "sentence": SENTENCES[0]}, {"sentence": SENTENCES[1], "lang": "en"}, {"id": 3, "sentence": "Ok."}]
    source = text_file(tmp_path / "in.txt", [json.dumps(row) for row in rows])
    code, _ = encode(["--model", folder, "--input", source, "--field", "sentence", "--output", tmp_path / "v.jsonl"],
                     capsys)
    records = [json.loads(line) for line in (tmp_path / "v.jsonl").read_text(encoding="utf-8").splitlines()]
    assert code == 0 and [(r["index"], r.get("id")) for r in records] == [(0, "a7"), (1, None), (2, 3)]
    assert [sorted(r) for r in records] == [["id", "index", "vector"], ["index", "vector"], ["id", "index", "vector"]]
    vectors = np.array([r["vector"] for r in records], dtype=np.float32)
    np.testing.assert_array_equal(vectors, model.encode([SENTENCES[0], SENTENCES[1], "Ok."], normalize_embeddings=True))


def test_a_registered_name_without_weights_is_encoded_with_seed_0(tmp_path, capsys):
    source = text_file(tmp_path / "in.jsonl", [json.dumps({"text": s}) for s in SENTENCES])
    code, err = encode(["--model", "mbert_tiny", "--input", source, "--output", tmp_path / "v.npy"], capsys)
    torch.manual_seed(0)
    model = babelzoo.create_model("mbert_tiny")
    model.use_default_tokenizer()
    expected = model.encode(SENTENCES, normalize_embeddings=True)
    assert code == 0 and "mbert_tiny has no pretrained weights; encoding with fresh weights (seed 0)" in err
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), expected, atol=1e-6)


BAD_INPUTS = [
    ("in.txt", b"Go!\nsch\xf6n\n", "in.txt:2: not UTF-8 text (byte 0xf6); save it as UTF-8"),
    ("in.txt", b"", "in.txt: the file is empty: no sentences to encode"),
    ("in.txt", b"Go!\n\nWe won.\n", "in.txt:2: empty line; each line is one sentence"),
    ("in.txt", b"Go!\n   \r\n", "in.txt:2: empty line"),
    ("in.jsonl", b'{"text": "Go!"}\n{"text": "Go!"\n', "in.jsonl:2: not JSON (Expecting ',' delimiter at column 15)"),
    ("in.jsonl", b'{"text": "a"}\n{"text": "b"}\n{"title": "c", "id": 1}\n',
     "in.jsonl:3: no field 'text' (its fields: 'title', 'id'); name the field that holds the sentence with --field"),
    ("in.jsonl", b'{"text": ["Go!"]}\n', "in.jsonl:1: field 'text' holds an array, not a string"),
    ("in.jsonl", b'{"text": null}\n', "in.jsonl:1: field 'text' holds null, not a string"),
    ("in.jsonl", b'"Go!"\n', "in.jsonl:1: expected a JSON object with a string field 'text', found a string"),
    ("in.jsonl", b'{"text": "Go!"}\n\n', "in.jsonl:2: empty line"),
]


@pytest.mark.parametrize("name, content, message", BAD_INPUTS, ids=[m.split(":", 2)[-1][:30] for *_, m in BAD_INPUTS])
def test_a_bad_input_line_is_named_and_nothing_is_written(saved, tmp_path, capsys, name, content, message):
    (tmp_path / name).write_bytes(content)
    code, err = encode(["--model", saved[0], "--input", tmp_path / name, "--output", tmp_path / "v.npy"], capsys)
    assert code == 2 and err.startswith(f"babelzoo encode: {tmp_path / message}") and err.count("\n") == 1, err
    assert not (tmp_path / "v.npy").exists()


def test_an_output_file_it_did_not_write_is_kept_unless_overwrite(saved, tmp_path, capsys):
    source = text_file(tmp_path / "in.txt", SENTENCES)
    code, err = encode(["--model", saved[0], "--input", source, "--output", tmp_path / "v.csv"], capsys)
    assert code == 2 and "--output " in err and "name a .npy file (a float32 array) or a .jsonl file" in err
    mine = tmp_path / "v.npy"
    mine.write_bytes(b"my own results")
    code, err = encode(["--model", saved[0], "--input", source, "--output", mine], capsys)
    assert (code, err) == (2, (f"babelzoo encode: --output {mine}: exists and babelzoo encode did not write it; "
                               "nothing was changed: pass --overwrite to replace it, or name another file\n"))
    assert mine.read_bytes() == b"my own results"
    assert encode(["--model", saved[0], "--input", source, "--output", mine, "--overwrite"], capsys)[0] == 0
    assert np.load(mine).shape == (4, 128) and file_record(mine).is_file()
    assert encode(["--model", saved[0], "--input", source, "--output", mine], capsys)[0] == 0  # its own: replaced
    np.save(mine, np.zeros((1, 2), dtype=np.float32))  # changed since: no longer the command's file
    assert encode(["--model", saved[0], "--input", source, "--output", mine], capsys)[0] == 2
    assert np.load(mine).shape == (1, 2)


def test_models_and_backends_that_cannot_be_used_are_named(saved, tmp_path, capsys):
    source = text_file(tmp_path / "in.txt", SENTENCES)
    out = ["--input", source, "--output", tmp_path / "v.npy"]
    code, err = encode(["--model", "xlmr_tny", *out], capsys)
    assert code == 2 and "babelzoo encode: unknown model 'xlmr_tny'; did you mean 'xlmr_tiny'" in err
    code, err = encode(["--model", saved[0], "--backend", "onnx", *out], capsys)
    assert (code, err) == (2, (f"babelzoo encode: --backend onnx: {saved[0]} is not a folder holding an ONNX "
                               "export (model.onnx and babelzoo_onnx.json); make one with babelzoo convert --to-onnx\n"))
    code, err = encode(["--model", saved[0], "--pooling", "median", *out], capsys)
    assert (code, err) == (2, "babelzoo encode: --pooling median: choose one of cls, mean, max, final\n")
    code, err = encode(["--model", "t5_tiny", *out], capsys)
    assert code == 2 and "babelzoo encode: model 't5_tiny' has no tokenizer to read sentences with" in err


def test_an_onnx_export_gives_the_models_vectors(saved, tmp_path, capsys):
    onnx = pytest.importorskip("babelzoo.deploy.onnx", reason="ONNX export (babelzoo.deploy) is not there yet")
    pytest.importorskip("onnxruntime")
    folder, model = saved
    onnx.export_onnx(model, tmp_path / "onnx")
    source = text_file(tmp_path / "in.txt", SENTENCES)
    code, err = encode(["--model", tmp_path / "onnx", "--input", source, "--output", tmp_path / "v.npy"], capsys)
    assert code == 0, err
    np.testing.assert_allclose(np.load(tmp_path / "v.npy"), model.encode(SENTENCES, normalize_embeddings=True), atol=1e-5)
