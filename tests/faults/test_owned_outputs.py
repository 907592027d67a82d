"""Nothing a user owns is deleted: babelzoo replaces a folder only when it wrote everything in it
(a saved model, a Hugging Face export, a demo run), a conversion never writes over the checkpoint
it reads, and result files are written atomically, so a failed run leaves the earlier results
whole and a re-run leaves no plot of the earlier one beside its own."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import babelzoo
from babelzoo._files import FolderNotOwned
from babelzoo.cli import main
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.demo import claim_run_folder
from babelzoo.errors import UsageError
from babelzoo.evaluation.leaderboard import Cell, write_outputs
from babelzoo.evaluation.tasks import Result
from babelzoo.train.checkpoint import CheckpointManager, rng_state
from babelzoo.zoo.convert import export_hf
from babelzoo.errors import CheckpointError
from babelzoo.zoo.checkpoint_io import model_state

REPO = Path(__file__).resolve().parents[2]


def tiny():
    torch.manual_seed(0)
    return babelzoo.create_model("mbert_tiny", vocab_size=64, num_layers=1, pad_token_id=0)


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under ``folder`` with its bytes (None for a folder)."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(folder.rglob("*"))}


@pytest.fixture
def project(tmp_path) -> Path:
    """A user's project folder that happens to hold a config.json."""
    folder = tmp_path / "project"
    (folder / "src").mkdir(parents=True)
    (folder / "config.json").write_text('{"learning_rate": 0.1}\n')
    (folder / "README.md").write_text("# my project\n")
    (folder / "src" / "train.py").write_text("print('hello')\n")
    return folder


def test_a_project_folder_with_a_config_json_is_refused_untouched(project):
    before = snapshot(project)
    with pytest.raises(CheckpointError, match=r"project: not a folder babelzoo wrote as a model \(it holds "
                                              r"README.md, config.json, src, src/train.py\); nothing was deleted"):
        tiny().save_pretrained(project)
    with pytest.raises(CheckpointError, match="not a folder babelzoo wrote as a Hugging Face model"):
        export_hf(tiny(), project)
    assert snapshot(project) == before
    assert [p.name for p in project.parent.iterdir()] == ["project"]  # no staging folder left beside it


def test_a_training_checkpoint_folder_keeps_its_optimizer_and_trainer_state(tmp_path):
    model = tiny()
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.tensor([[2, 5, 7, 3]])).last_hidden.sum().backward()
    optimizer.step()
    manager = CheckpointManager(tmp_path / "run" / "checkpoints", keep=2)
    folder = manager.save(4, lambda: {"trainer": {"step": 4}, "optimizer": optimizer.state_dict()},
                          {"rng": rng_state()}, lambda: (model_state(model), model.config.to_json()))
    before = snapshot(folder)
    assert {"config.json", "manifest.json", "model.safetensors"} <= set(before)
    assert any(name.startswith("optimizer") for name in before) and any(n.startswith("trainer") for n in before)
    with pytest.raises(CheckpointError, match=r"step-00000004: not a folder babelzoo wrote as a model"):
        model.save_pretrained(folder)
    assert snapshot(folder) == before
    assert babelzoo.from_pretrained(folder).num_parameters() == model.num_parameters()


def test_a_saved_model_with_a_file_added_by_hand_is_refused_naming_it(tmp_path):
    words = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(35)])
    folder = tiny().save_pretrained(tmp_path / "m", words)
    (folder / "NOTES.md").write_text("results of my run\n")
    before = snapshot(folder)
    with pytest.raises(CheckpointError, match=r"m: holds files babelzoo did not write there \(NOTES.md\); "
                                              r"nothing was deleted"):
        tiny().save_pretrained(folder)
    assert snapshot(folder) == before
    (folder / "NOTES.md").unlink()
    tiny().save_pretrained(folder)  # what babelzoo wrote there, and only that, is replaced
    assert sorted(p.name for p in folder.iterdir()) == [".babelzoo-files.json", "config.json", "model.safetensors"]


def test_a_failed_save_leaves_the_earlier_model_whole(tmp_path):
    folder = tiny().save_pretrained(tmp_path / "m")
    before = snapshot(folder)

    class Broken:
        def save(self, directory):
            (Path(directory) / "vocab.txt").write_text("[PAD]\n")
            raise OSError(28, "No space left on device", str(Path(directory) / "vocab.txt"))

    with pytest.raises(OSError, match="No space left"):
        tiny().save_pretrained(folder, Broken())
    assert snapshot(folder) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m"]


@pytest.mark.parametrize("argv", [
    ["convert", "--to-hf", "{m}", "--from", "{m}"],
    ["convert", "--to-hf", "{parent}", "--from", "{m}"],
    ["convert", "--from-hf", "{hf}", "--to", "{hf}"],
])
def test_a_conversion_never_writes_over_the_checkpoint_it_reads(tmp_path, capsys, argv):
    model_dir = tiny().save_pretrained(tmp_path / "models" / "m")
    hf_dir = export_hf(tiny(), tmp_path / "hf")
    before = snapshot(tmp_path)
    argv = [a.format(m=model_dir, parent=model_dir.parent, hf=hf_dir) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("babelzoo convert: --to") and "are the same folder or one holds the other: writing the " \
        "conversion would replace the checkpoint it reads" in err and err.count("\n") == 1
    assert snapshot(tmp_path) == before


def test_export_next_to_the_source_works(tmp_path, capsys):
    model_dir = tiny().save_pretrained(tmp_path / "m")
    assert main(["convert", "--to-hf", str(tmp_path / "hf"), "--from", str(model_dir)]) == 0
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["model_type"] == "bert"
    assert (model_dir / "model.safetensors").is_file()


def test_the_demo_takes_only_a_folder_it_made_and_fresh_removes_only_its_outputs(project, tmp_path):
    before = snapshot(project)
    with pytest.raises(UsageError, match=r"--out .*project: not a folder babelzoo demo made \(it holds README.md, "
                                         r"config.json, src\); nothing was changed"):
        claim_run_folder(project, fresh=True)
    assert snapshot(project) == before
    run = tmp_path / "demo"
    claim_run_folder(run, fresh=False)
    (run / "my-notes.txt").write_text("mine\n")
    for name in ("train", "model", "leaderboard"):
        (run / name).mkdir()
    claim_run_folder(run, fresh=True)  # empty outputs are the demo's
    assert sorted(p.name for p in run.iterdir()) == [".babelzoo-demo", "my-notes.txt"]
    for name in ("train", "model", "leaderboard"):  # outputs babelzoo did not write stay
        (run / name).mkdir()
        (run / name / "x.txt").write_text(name)
    before = snapshot(run)
    with pytest.raises(UsageError, match=r"demo/train is not a train folder babelzoo wrote \(it holds x.txt\); "
                                         r".*; nothing was deleted"):
        claim_run_folder(run, fresh=True)
    assert snapshot(run) == before


def results(tasks, value=0.5):
    return [Result(task, "m", f"acc@1 {task}", value) for task in tasks], [Cell("m", task, "ok") for task in tasks]


def test_a_rerun_leaves_no_plot_of_the_earlier_run_and_keeps_other_files(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "board"
    write_outputs(*results(["alpha", "beta"]), out, {"run": 1})
    assert (out / "alpha.png").is_file() and (out / "beta.png").is_file()
    (out / "my-figure.png").write_bytes(b"\x89PNG mine")
    paths = write_outputs(*results(["alpha"], 0.7), out, {"run": 2})
    assert sorted(p.name for p in out.iterdir()) == ["alpha.png", "leaderboard.md", "my-figure.png",
                                                     "per_language.md", "results.json"]
    saved = json.loads(paths["results"].read_text())
    assert saved["meta"]["run"] == 2 and saved["files"] == ["alpha.png", "leaderboard.md", "per_language.md",
                                                            "results.json"]
    assert "| m | 0.700 |" in (out / "leaderboard.md").read_text()


def test_a_full_disk_leaves_the_earlier_results_whole(small_disk):
    out = small_disk / "board"
    rows, cells = results(["alpha"])
    write_outputs(rows, cells, out, {"run": 1})
    before = snapshot(out)
    big = [Result("alpha", "m", f"acc@1 {'x' * 200} {i}", 0.25) for i in range(5000)]  # ~2 MB of JSON
    with pytest.raises(OSError) as err:
        write_outputs(big, cells, out, {"run": 2})
    assert err.value.filename and Path(err.value.filename).parent.parent == out
    assert snapshot(out) == before
    assert json.loads((out / "results.json").read_text())["meta"]["run"] == 1


def test_a_file_too_large_for_the_process_limit_leaves_the_earlier_finetune_results(tmp_path):
    """The same failure through the OS's own limit on file size, where no tmpfs can be mounted."""
    target = tmp_path / "results.json"
    target.write_text('{"test": {"deu": {"accuracy": 0.5}}}\n')
    script = ("import resource, signal, sys\n"
              "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
              "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
              "from babelzoo._files import write_json_atomic\n"
              "try:\n"
              f"    write_json_atomic({str(target)!r}, {{'test': {{'x' * 10000: 1}}}})\n"
              "except OSError as err:\n"
              "    print(err.errno, err.filename)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["27", str(target)]  # EFBIG, naming the file
    assert json.loads(target.read_text()) == {"test": {"deu": {"accuracy": 0.5}}}
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]


def test_train_kge_refuses_a_project_folder_before_training(project, tmp_path, capsys):
    graph = tmp_path / "graph"
    graph.mkdir()
    rows = {"train": ["a\tr\tb", "b\tr\tc", "c\tr\ta"], "valid": ["a\tr\tc"], "test": ["b\tr\ta"]}
    for split, lines in rows.items():
        (graph / f"{split}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    before = snapshot(project)
    assert main(["kb", "train-kge", "--data", str(graph), "--model", "transe", "--dim", "8", "--epochs", "1",
                 "--out", str(project)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"babelzoo kb: {project}: not a folder babelzoo wrote as a KG embedding")
    assert "epoch" not in captured.out  # refused before any training
    assert snapshot(project) == before


def test_a_memory_saves_over_its_own_folder_and_refuses_a_project(project, tmp_path):
    pytest.importorskip("faiss")
    from babelzoo.knowledge.memory import RetrievalMemory

    memory = RetrievalMemory(4, "Flat", metric="ip")
    memory.add(torch.eye(4), torch.arange(4))
    before = snapshot(project)
    with pytest.raises(FolderNotOwned, match="not a folder babelzoo wrote as a retrieval memory"):
        memory.save(project)
    assert snapshot(project) == before
    memory.save(tmp_path / "mem")
    memory.remove(torch.tensor([0]))
    memory.save(tmp_path / "mem")  # its own folder: replaced
    assert len(RetrievalMemory.load(tmp_path / "mem")) == 3


@pytest.mark.parametrize("mask", [0o022, 0o027])
def test_what_babelzoo_writes_has_the_permissions_the_umask_gives(mask, tmp_path):
    """Temporary files and folders are private to their user; a model folder or results file
    written through them must not stay so (another account serving the model could not read it)."""
    from babelzoo._files import write_json_atomic

    old = os.umask(mask)
    try:
        model = babelzoo.create_model("xlmr_tiny", vocab_size=32, hidden_size=16, num_heads=2, num_layers=1,
                                      intermediate_size=16)
        folder = model.save_pretrained(tmp_path / "model")
        results = write_json_atomic(tmp_path / "results.json", {"accuracy": 0.5})
    finally:
        os.umask(old)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~mask
    assert stat.S_IMODE(results.stat().st_mode) == 0o666 & ~mask
    for path in folder.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, path.name
