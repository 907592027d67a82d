"""``python -m benchmarks``: the suite registry, ``list`` and ``run``."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from babelzoo._provenance import cpu_tag, gpu_tag
from babelzoo.errors import UsageError
from babelzoo.registry import RegistryError
from benchmarks import __main__ as cli
from benchmarks._results import RESULTS
from benchmarks._suites import SUITES

REPO = Path(__file__).resolve().parents[2]


def test_list_names_every_suite_with_its_description(capsys):
    assert cli.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == SUITES.list() and len(lines) == len(SUITES) >= 30
    assert "compression_students" in SUITES and "gpu_check" in SUITES
    assert lines[SUITES.list().index("gpu_check")].split(None, 1)[1] == SUITES.get("gpu_check").description


def test_list_runs_as_a_module_without_torch():
    code = "import runpy, sys; sys.argv = ['x', 'list']; runpy.run_module('benchmarks', run_name='__main__')"
    shown = subprocess.run([sys.executable, "-c", code + "; assert 'torch' not in sys.modules"], cwd=REPO,
                           capture_output=True, text=True, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[0].split()[0] == "adaptation"


@pytest.mark.parametrize("name", SUITES.list())
def test_every_suite_names_a_script_with_main_and_markdown(name):
    module = importlib.import_module(SUITES.get(name).module)
    assert callable(module.main) and (not SUITES.get(name).writes_out or callable(module.markdown))
    assert SUITES.get(name).description and not SUITES.get(name).description.endswith(".")


def test_run_passes_the_configuration_then_the_options_and_writes_under_the_suite(monkeypatch):
    seen = []
    module = importlib.import_module("benchmarks.long_documents")
    monkeypatch.setattr(module, "main", lambda argv: seen.append(argv) or 0)
    monkeypatch.setattr(cli, "current_machine", lambda gpu=None: {"tag": "epyc-avx2", "description": "x"})
    assert cli.main(["run", "long_documents_clm_multi30k", "--threads", "1"]) == 0
    assert seen == [["--objectives", "segment_clm", "--extra-train", "multi30k", "--steps", "600", "--threads", "1",
                     "--out", str(RESULTS / "long_documents_clm_multi30k" / "epyc-avx2.json")]]
    assert cli.main(["run", "long_documents", "--out", "/tmp/x.json", "--help"]) == 0
    assert seen[1] == ["--out", "/tmp/x.json", "--help"]


def test_run_exits_as_the_script_would(monkeypatch):
    gpu_check = importlib.import_module("benchmarks.gpu_check")
    checks = {"sdpa": {"status": "pass"}, "faiss": {"status": "skip"}}
    monkeypatch.setattr(gpu_check, "main", lambda argv: {"checks": checks})
    assert cli.main(["run", "gpu_check", "--out", "/tmp/g.json"]) == 0
    checks["fsdp"] = {"status": "fail"}
    assert cli.main(["run", "gpu_check", "--out", "/tmp/g.json"]) == 1


def test_a_leaderboard_suite_writes_into_its_results_folder(monkeypatch):
    seen = []
    monkeypatch.setattr(importlib.import_module("benchmarks.leaderboard"), "main", lambda argv: seen.append(argv))
    monkeypatch.chdir(REPO)
    assert cli.main(["run", "leaderboard_transfer", "--limit", "5"]) == 0
    assert seen == [["--config", "benchmarks/configs/transfer.yaml", "--limit", "5",
                     "--out", str(RESULTS / "leaderboard_transfer")]]
    assert cli.main(["run", "leaderboard_transfer", "--out", "mine"]) == 0  # the user's own, from the current directory
    assert seen[1] == ["--config", "benchmarks/configs/transfer.yaml", "--out", "mine"]


def benchmarks_from(cwd, root, *argv):
    """``python -m benchmarks ARGV`` run in ``cwd`` with the package of the checkout ``root``."""
    import os

    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, "-m", "benchmarks", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_the_command_works_from_any_directory(tmp_path):
    """Outside the repository, the suites' own files (a leaderboard's config) and their results
    are the repository's; nothing is written to the current directory."""
    import shutil

    listed = benchmarks_from(tmp_path, REPO, "list")
    assert listed.returncode == 0 and listed.stdout.split()[0] == "adaptation", listed.stderr
    # the config opens from here: the error is about the model asked for, not a missing file
    run = benchmarks_from(tmp_path, REPO, "run", "leaderboard_transfer", "--models", "nosuch")
    assert run.returncode == 2
    assert run.stderr == (f"python -m benchmarks.leaderboard: --models: ['nosuch'] not in "
                          f"{REPO / 'benchmarks/configs/transfer.yaml'}; known: multilingual_e5_small, muse_v3, "
                          "random_e5_architecture\n")
    copy = tmp_path / "copy"
    for package in ("babelzoo", "benchmarks"):
        shutil.copytree(REPO / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "benchmarks/results/cpu_contention/xeon.md").unlink()
    (tmp_path / "elsewhere").mkdir()
    shown = benchmarks_from(tmp_path / "elsewhere", copy, "render", "cpu_contention", "--no-plots")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines() == [str(copy / "benchmarks/results/cpu_contention/xeon.md"),
                                         str(copy / "benchmarks/results/README.md"),
                                         str(copy / "benchmarks/results/archive/README.md")]
    assert (copy / "benchmarks/results/cpu_contention/xeon.md").read_text() == \
        (RESULTS / "cpu_contention/xeon.md").read_text()
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_an_unknown_suite_or_command_is_one_line_with_the_close_names(capsys):
    assert cli.main(["run", "compresion"]) == 2
    assert "unknown benchmark suite 'compresion'; did you mean 'compression'" in capsys.readouterr().err
    with pytest.raises(RegistryError, match="did you mean 'speed_gpu'"):
        cli.run_argv("speed_gpus", [])
    assert cli.main(["list", "--fast"]) == 2
    assert capsys.readouterr().err == ("python -m benchmarks: unrecognized arguments: --fast "
                                       "(see python -m benchmarks --help)\n")
    assert cli.main(["render"]) == 2 and "name the suites to render, or --all" in capsys.readouterr().err
    with pytest.raises(UsageError, match="the following arguments are required: NAME"):
        cli.command(["run"])


@pytest.mark.parametrize("model, flags, tag", [
    ("Intel(R) Xeon(R) Processor", ["fpu", "avx2", "avx512f", "amx_tile"], "xeon-amx"),
    ("AMD EPYC 9B14", ["avx2", "avx512f", "avx512_vnni"], "epyc-avx512"),
    ("AMD EPYC 7B13", ["sse4_2", "avx2"], "epyc-avx2"),
    ("AMD EPYC", [], "epyc"),
    ("Intel(R) Core(TM) i7-8650U", ["avx2"], "core-avx2"),
])
def test_machine_tags_name_the_cpu_family_and_its_widest_instructions(model, flags, tag):
    assert cpu_tag(model, flags) == tag


def test_gpu_tags():
    assert gpu_tag("NVIDIA H200") == "h200" and gpu_tag("NVIDIA A100-SXM4-80GB") == "a100-sxm4-80gb"
