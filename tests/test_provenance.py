"""babelzoo/_provenance.py: the commit of the checkout the package runs from (HEAD of a repository
built here), the command written portably, and the lines a page shows."""

from __future__ import annotations

import subprocess
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest

from babelzoo import _provenance as P


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                          capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_the_commit_is_head_of_the_checkout_and_says_when_the_code_differs(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "babelzoo").mkdir(parents=True)
    (repo / "babelzoo" / "__init__.py").write_text("", encoding="utf-8")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    monkeypatch.setattr(P, "PACKAGE", repo / "babelzoo")
    head = git(repo, "rev-parse", "HEAD")
    assert P.source_commit() == head and len(head) == 40
    (repo / "babelzoo" / "__init__.py").write_text("x = 1\n", encoding="utf-8")
    assert P.source_commit() == f"{head}+uncommitted changes"


def test_outside_a_checkout_the_commit_is_the_installed_version(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "PACKAGE", tmp_path / "site-packages" / "babelzoo")
    try:
        expected = f"babelzoo {version('babelzoo')}"
    except PackageNotFoundError:
        expected = "babelzoo (version unknown)"
    assert P.source_commit() == expected


def test_the_date_is_now_in_utc():
    import datetime

    date = datetime.datetime.strptime(P.utc_date(), "%Y-%m-%d %H:%M UTC").replace(tzinfo=datetime.timezone.utc)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - date).total_seconds()) < 120


def test_the_machine_is_this_hosts_cpu_tag_and_name():
    machine = P.current_machine(gpu=False)
    assert machine["tag"] == P.cpu_tag(P.cpu_name(), P.cpu_flags()) != "unrecorded"
    assert machine["description"].startswith(P.cpu_name() + ", ") and "CPUs" in machine["description"]


@pytest.mark.parametrize("typed, shown", [
    ("/data/shared/data/wn18rr", "$BABELZOO_DATA_DIR/wn18rr"),
    ("--data-dir=/data/shared/data", "--data-dir=$BABELZOO_DATA_DIR"),
    ("/work/shared/data/dbp5l", "../shared/data/dbp5l"),   # the scripts' default data folder, beside the root
    ("/work/repo/runs/kg", "runs/kg"),
    ("/elsewhere/student", "/elsewhere/student"),
    ("fp32", "fp32"),
])
def test_paths_are_written_as_they_read_from_the_root_on_another_machine(typed, shown):
    assert P.portable(typed, Path("/work/repo"), {"BABELZOO_DATA_DIR": "/data/shared/data"}) == shown


def test_a_recorded_command_names_the_data_and_the_checkout_as_they_read_on_another_machine():
    typed = ("babelzoo pretrain --set 'kg.path=/data/shared/data/wn18rr' "
             "--set 'data.x=[{kind: kb_trees, kb: /data/shared/data/wn18rr, sentences: {kind: kb_texts, kb: /data/shared/data}}]' "
             "--set output_dir=/work/repo/runs/kg /work/repo /work/repository/x /data/shared/datax")
    assert P.portable_text(typed, Path("/work/repo"), {"BABELZOO_DATA_DIR": "/data/shared/data"}) == (
        "babelzoo pretrain --set 'kg.path=$BABELZOO_DATA_DIR/wn18rr' "
        "--set 'data.x=[{kind: kb_trees, kb: $BABELZOO_DATA_DIR/wn18rr, sentences: {kind: kb_texts, kb: $BABELZOO_DATA_DIR}}]' "
        "--set output_dir=runs/kg . /work/repository/x /data/shared/datax")
    assert P.portable_text("--kg /work/shared/data/dbp5l/el", Path("/work/repo"), {}) == "--kg ../shared/data/dbp5l/el"


def test_a_recipe_reads_the_data_variable_where_a_recorded_command_writes_it(tmp_path, monkeypatch):
    from babelzoo.knowledge.kb_sources import shared_kb
    from babelzoo.train.config import load_recipe, recipe_path

    folder = tmp_path / "data" / "kg"
    folder.mkdir(parents=True)
    (folder / "entity2text.txt").write_text("01\tdog, a canid\n02\tcanid, a mammal\n", encoding="utf-8")
    (folder / "relation2text.txt").write_text("_hypernym\thypernym\n", encoding="utf-8")
    (folder / "train.tsv").write_text("01\t_hypernym\t02\n", encoding="utf-8")
    monkeypatch.setenv("BABELZOO_DATA_DIR", str(tmp_path / "data"))
    spec = "[{kind: kb_trees, kb: $BABELZOO_DATA_DIR/kg, sentences: {kind: kb_texts, kb: $BABELZOO_DATA_DIR/kg}}]"
    cfg = load_recipe(recipe_path("kbert_mlm_tiny"), [f"data.kbert_mlm={spec}"])
    source = cfg.data["kbert_mlm"][0]
    assert source["kb"] == "$BABELZOO_DATA_DIR/kg" and source["sentences"]["kb"] == "$BABELZOO_DATA_DIR/kg"
    assert shared_kb(source["kb"]).entity_name("01") == "dog"


def test_the_command_is_the_suites_without_its_out():
    options = ["--variants", "e5-small fp32", "--out", "/tmp/x.json", f"--config={P.ROOT}/benchmarks/configs/default.yaml",
               "--out=/tmp/y.json", "--runs", str(P.ROOT / "runs" / "kg")]
    assert P.benchmark_command("kg_completion", options) == \
        "python -m benchmarks run kg_completion --variants 'e5-small fp32' --config=benchmarks/configs/default.yaml " \
        "--runs runs/kg"


def test_the_lines_say_what_was_not_recorded():
    run = {"machine": {"tag": "h200", "description": "Xeon, 16 CPUs, NVIDIA H200"},
           "command": "python -m benchmarks run gpu_check", "commit": "abc", "date": "2026-12-06 11:44 UTC"}
    assert P.provenance_lines(run) == ["Machine: `h200` (Xeon, 16 CPUs, NVIDIA H200)",
                                       "Command: `python -m benchmarks run gpu_check`",
                                       "Commit: abc; date: 2026-12-06 11:44 UTC"]
    assert P.provenance_lines({"machine": "x86_64"}) == ["Machine: not recorded", "Command: not recorded",
                                                         "Commit: not recorded; date: not recorded"]
