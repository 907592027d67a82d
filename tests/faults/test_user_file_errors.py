"""A user's file or setting that babelzoo cannot use is one line naming it, exit 2, no traceback:
files that are not UTF-8 (config.json, tokenizer_config.json, memory.json, media manifests), a
truncated archive, a trainer.json without a step, a damaged retrieval memory, a model vocabulary
smaller than its tokenizer, a device that is not there, a leaderboard model without a name."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import shutil
import tarfile
from pathlib import Path

import pytest
import torch

from babelzoo.cli import main
from babelzoo.errors import BabelzooError

WORDS = ("alpha beta gamma delta eps zeta theta kappa lambda mu nu xi pi rho sigma tau phi chi psi "
         "omega").split()
RECIPE = """model: xlmr_tiny
model_overrides: {hidden_size: 32, num_layers: 1, num_heads: 2, intermediate_size: 64, max_positions: 64}
tokenizer: {vocab_size: 40, model_type: unigram}
objectives: {mlm: {max_length: 16}}
data:
  mlm:
    - {kind: text, path: corpus.txt, lang: en}
output_dir: run
max_steps: 1
batch_size: 4
checkpoint_every: 1
progress: false
tensorboard: false
measure_mfu: false
"""


def one_line(capsys, argv) -> tuple[int, str]:
    code = main([str(a) for a in argv])
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return code, err


def write_recipe(folder: Path, extra: str = "") -> Path:
    draw = random.Random(0)
    lines = [" ".join(draw.choice(WORDS) for _ in range(8)) for _ in range(300)]
    (folder / "corpus.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "r.yaml").write_text(RECIPE.replace("path: corpus.txt", f"path: {folder / 'corpus.txt'}")
                                   .replace("output_dir: run", f"output_dir: {folder / 'run'}") + extra,
                                   encoding="utf-8")
    return folder / "r.yaml"


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A real one-step pre-training checkpoint (tokenizer, config, weights, trainer state)."""
    folder = tmp_path_factory.mktemp("pretrained")
    assert main(["pretrain", "--config", str(write_recipe(folder))]) == 0
    found = sorted((folder / "run" / "checkpoints").glob("step-*"))
    assert [p.name for p in found] == ["step-00000001"]
    return folder


def test_a_trainer_json_without_a_step_is_refused_naming_it(checkpoint, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(checkpoint / "run", run)
    step = run / "checkpoints" / "step-00000001"
    state = json.loads((step / "trainer.json").read_text(encoding="utf-8"))
    del state["step"]
    (step / "trainer.json").write_text(json.dumps(state), encoding="utf-8")
    manifest = json.loads((step / "manifest.json").read_text(encoding="utf-8"))  # consistent, so it is read
    data = (step / "trainer.json").read_bytes()
    manifest["files"]["trainer.json"] = {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    (step / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    recipe = write_recipe(tmp_path)
    code, err = one_line(capsys, ["pretrain", "--config", recipe, "--set", "max_steps=2"])
    assert (code, err) == (2, f"babelzoo pretrain: {step}/trainer.json: no step; this is not a checkpoint babelzoo "
                              f"can resume (choose a new output_dir, or remove this checkpoint)\n")


def test_a_model_vocabulary_smaller_than_its_tokenizer_is_refused_before_training(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    code, err = one_line(capsys, ["pretrain", "--config", recipe, "--set", "model_overrides.vocab_size=30"])
    assert (code, err) == (2, f"babelzoo pretrain: {recipe} model_overrides.vocab_size=30: the model would embed 30 "
                              f"pieces, but the tokenizer has 40; drop the override (the model takes the tokenizer's "
                              f"size) or make it at least 40\n")
    assert not (tmp_path / "run" / "checkpoints").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_device_cuda_without_a_gpu_is_one_line(tmp_path, capsys):
    recipe = write_recipe(tmp_path)
    code, err = one_line(capsys, ["pretrain", "--config", recipe, "--set", "device=cuda"])
    assert (code, err) == (2, "babelzoo pretrain: device='cuda' requested, but torch sees no CUDA device; use "
                              "device=cpu, or device=auto (a GPU when there is one)\n")


@pytest.mark.parametrize("model, message", [
    ("{kind: peer, source: muse_v3}", "LeaderboardConfig.models[0]: model spec needs name"),
    ("{name: 123, kind: peer, source: muse_v3}", "LeaderboardConfig.models[0].name=123 must be a string, got int"),
    ("{name: ' ', kind: peer, source: muse_v3}", "ModelSpec.name=' ': a model needs a name (the leaderboard's row)"),
    ("{name: a, kind: peer, encoder: x}", "LeaderboardConfig.models[0].encoder: unknown model spec key 'encoder'"),
    ("muse_v3", "LeaderboardConfig.models[0]='muse_v3' must be a mapping, got str"),
])
def test_a_leaderboard_model_without_a_usable_name_is_one_line(tmp_path, capsys, model, message):
    (tmp_path / "board.yaml").write_text(f"tasks: [tatoeba]\nmodels:\n  - {model}\n", encoding="utf-8")
    code, err = one_line(capsys, ["eval", "--config", tmp_path / "board.yaml", "--out", tmp_path / "out"])
    assert code == 2 and err.startswith(f"babelzoo eval: {tmp_path}/board.yaml:3") and message in err, err


def test_a_latin1_config_json_names_the_file_and_line(checkpoint, tmp_path, capsys):
    from babelzoo.errors import CheckpointError
    from babelzoo.zoo.pretrained import from_pretrained

    model = tmp_path / "model"
    shutil.copytree(checkpoint / "run" / "checkpoints" / "step-00000001", model)
    config = (model / "config.json").read_text(encoding="utf-8")
    (model / "config.json").write_bytes(config.replace('"architecture"', '"archit\u00e9cture"', 1).encode("latin-1"))
    (model / "manifest.json").unlink()  # a hand-edited folder, not a checkpoint babelzoo verifies
    with pytest.raises(CheckpointError) as err:
        from_pretrained(model)
    assert str(err.value) == f"{model}/config.json:2: not UTF-8 text (byte 0xe9); save it as UTF-8"
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_bytes('{"model_type": "bert", "name": "caf\u00e9"}'.encode("latin-1"))
    code, err = one_line(capsys, ["convert", "--from-hf", hf, "--to", tmp_path / "out"])
    assert (code, err) == (2, f"babelzoo convert: {hf}/config.json:1: not UTF-8 text (byte 0xe9); save it as UTF-8\n")
    assert not (tmp_path / "out").exists()


def test_a_latin1_media_manifest_names_its_line(tmp_path):
    from babelzoo.datasets.multimodal_manifest import MediaError, read_manifest

    path = tmp_path / "manifest.jsonl"
    path.write_bytes(b'{"image": "a.png", "text": "a", "lang": "fr"}\n'
                     + '{"image": "b.png", "text": "caf\u00e9", "lang": "fr"}\n'.encode("latin-1"))
    with pytest.raises(MediaError) as err:
        read_manifest(path)
    assert str(err.value) == f"{path}:2: not UTF-8 text (byte 0xe9); save it as UTF-8"


def test_a_utf16_media_manifest_is_named_as_such(tmp_path):
    from babelzoo.datasets.multimodal_manifest import MediaError, read_manifest

    path = tmp_path / "manifest.jsonl"
    path.write_bytes('{"image": "a.png", "text": "a", "lang": "fr"}\n'.encode("utf-16-le"))
    with pytest.raises(MediaError) as err:
        read_manifest(path)
    assert str(err.value) == f"{path}: UTF-16 text (little-endian, no byte-order mark); save it as UTF-8"


def test_a_truncated_archive_is_a_download_error(tmp_path, monkeypatch):
    from babelzoo.datasets.download import DownloadError, extract
    from babelzoo.zoo.pretrained import from_pretrained

    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        payload = bytes(range(256)) * 4000
        info = tarfile.TarInfo("model/weights.bin")
        info.size = len(payload)
        tar.addfile(info, io.BytesIO(payload))
    whole = buffer.getvalue()
    archive = tmp_path / "model.tar.gz"
    archive.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DownloadError) as err:
        extract(archive, tmp_path / "unpacked")
    assert str(err.value) == (f"{archive}: damaged or truncated archive (EOFError: Compressed file ended before the "
                              f"end-of-stream marker was reached); download it again")
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    with pytest.raises(DownloadError, match="damaged or truncated archive"):
        from_pretrained(archive.as_uri())
    assert not list((tmp_path / "cache").glob("unpacked/*/model"))  # nothing half-unpacked is kept
    (tmp_path / "folder.tar.gz").mkdir()
    with pytest.raises(DownloadError, match=r"folder.tar.gz: a folder; an archive is a .tar, .tar.gz or .zip file"):
        extract(tmp_path / "folder.tar.gz", tmp_path / "unpacked")
    archive.write_bytes(gzip.compress(b"not a tar file at all"))
    with pytest.raises(DownloadError, match=r"model.tar.gz: not a .zip or .tar archive"):
        extract(archive, tmp_path / "unpacked")


def saved_memory(tmp_path: Path) -> Path:
    from babelzoo.knowledge.memory import RetrievalMemory

    memory = RetrievalMemory(4, metric="l2")
    memory.add(torch.arange(20, dtype=torch.float32).reshape(5, 4), values=torch.ones(5, 3))
    return memory.save(tmp_path / "memory")


@pytest.mark.parametrize("damage, message", [
    (lambda d: (d / "values.safetensors").write_bytes((d / "values.safetensors").read_bytes()[:40]),
     "{d}/values.safetensors: not a readable safetensors file (Error while deserializing header: "),
    (lambda d: (d / "values.safetensors").unlink(),
     "{d}/values.safetensors: missing or not a file (memory.json says the memory holds values)"),
    (lambda d: (d / "index.faiss").write_bytes(b"\x00" * 16), "{d}/index.faiss: not a readable FAISS index ("),
    (lambda d: patch_meta(d, hidden=5), "{d}/memory.json hidden=5 must be a list of integers, got int"),
    (lambda d: patch_meta(d, dim="4"), "{d}/memory.json dim='4' must be an integer, got str"),
    (lambda d: patch_meta(d, search_params={"nprobe": "x"}), "{d}/memory.json: search_params: nprobe='x' must be a "
                                                              "number"),
    (lambda d: (d / "memory.json").write_bytes(b'{"format": 1, "index": "caf\xe9"}'),
     "{d}/memory.json:1: not UTF-8 text (byte 0xe9); save it as UTF-8"),
])
def test_a_damaged_memory_is_a_memory_format_error_naming_the_file(tmp_path, damage, message):
    from babelzoo.knowledge.memory import MemoryFormatError, RetrievalMemory

    folder = saved_memory(tmp_path)
    assert len(RetrievalMemory.load(folder)) == 5
    damage(folder)
    with pytest.raises(MemoryFormatError) as err:
        RetrievalMemory.load(folder)
    assert str(err.value).startswith(message.format(d=folder)), str(err.value)


def patch_meta(folder: Path, **changes) -> None:
    meta = json.loads((folder / "memory.json").read_text(encoding="utf-8"))
    (folder / "memory.json").write_text(json.dumps({**meta, **changes}), encoding="utf-8")


def test_builtin_errors_for_user_mistakes_are_babelzoo_errors_with_their_old_base(tmp_path):
    from babelzoo.datasets.loader import TokenCacheError, TokenizedCorpus
    from babelzoo.datasets.standard import ensure_standard_set
    from babelzoo.errors import InputTypeError
    from babelzoo.registry import RegistryError
    from babelzoo.offline.emoji import MissingFont
    from babelzoo.train.distributed import DeviceUnavailable

    with pytest.raises(RegistryError) as err:
        ensure_standard_set("xnli", tmp_path)
    assert isinstance(err.value, KeyError) and str(err.value).startswith("unknown standard set 'xnli'; known: ")
    (tmp_path / "cache").mkdir()
    with pytest.raises(TokenCacheError) as err:
        TokenizedCorpus(tmp_path / "cache")
    assert isinstance(err.value, RuntimeError)
    assert str(err.value) == f"{tmp_path}/cache is not a token cache (no meta.json)"
    with pytest.raises(InputTypeError) as err:
        TokenizedCorpus.from_corpus(["a sentence"], tokenizer=None)
    assert isinstance(err.value, TypeError)
    assert str(err.value) == "expected a MonolingualCorpus or ParallelCorpus, got list"
    for cls, base in ((TokenCacheError, RuntimeError), (DeviceUnavailable, RuntimeError), (MissingFont, RuntimeError),
                      (InputTypeError, TypeError)):
        assert issubclass(cls, BabelzooError) and issubclass(cls, base), cls


@pytest.fixture
def file_size_limit():
    """Writes past ``limit`` bytes fail as on a full disk (EFBIG instead of ENOSPC), in this process."""
    import resource
    import signal

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

    def limit(size: int) -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))

    yield limit
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
    signal.signal(signal.SIGXFSZ, handler)


def test_a_full_disk_while_writing_outputs_names_the_file(tmp_path, capsys, file_size_limit):
    from babelzoo.train.checkpoint import write_model, write_part
    from babelzoo.zoo.checkpoint_io import save_weights

    recipe = write_recipe(tmp_path)
    file_size_limit(100_000)  # the tokenizer's sentencepiece.model is the first file past it
    try:
        code = main(["pretrain", "--config", str(recipe)])
        big = {"w": torch.ones(50_000)}
        for write, name in ((lambda: write_model(tmp_path, big, None), "model.safetensors"),
                            (lambda: write_part(tmp_path, "optimizer", big), "optimizer.safetensors"),
                            (lambda: save_weights(big, tmp_path / "w.safetensors"), "w.safetensors")):
            with pytest.raises(OSError) as err:
                write()
            assert err.value.filename == str(tmp_path / name) and err.value.errno == 27, err.value
    finally:
        file_size_limit(2 ** 62)
    err = capsys.readouterr().err
    assert (code, err) == (2, f"babelzoo pretrain: [Errno 27] File too large: '{tmp_path}/run/tokenizer/"
                              f"sentencepiece.model'\n")


def test_a_full_disk_that_names_no_file_is_still_one_line(capsys):
    import errno

    from babelzoo.errors import run_command

    def main(argv):
        raise OSError(errno.ENOSPC, "No space left on device")

    assert run_command("pretrain", main, []) == 2
    assert capsys.readouterr().err == ("babelzoo pretrain: No space left on device while writing; free space (or "
                                       "raise the file size limit) and run again\n")
    with pytest.raises(OSError):  # any other OSError that names no file is a bug, with its traceback
        run_command("pretrain", lambda argv: (_ for _ in ()).throw(OSError(errno.EBADF, "Bad file descriptor")), [])
