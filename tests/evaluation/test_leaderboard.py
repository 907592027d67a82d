"""The leaderboard harness: a real peer on real data, a broken model, a skipped task."""

import json
from pathlib import Path

import pytest

from babelzoo.evaluation.leaderboard import ModelSpec, leaderboard_table, run_matrix, write_outputs
from babelzoo.evaluation.tasks import Result, TaskContext

REPO = Path(__file__).resolve().parents[2]


def test_matrix_reports_failures_and_skips_and_keeps_going(shared_data, tmp_path):
    specs = [ModelSpec("broken", kind="checkpoint", source=str(tmp_path / "missing")),
             ModelSpec("muse", kind="peer", source="muse_v3")]
    lines = []
    context = TaskContext(data_dir=shared_data, languages=["deu"], limit=60, log=lines.append)
    results, cells = run_matrix(specs, ["tatoeba", "multi30k"], context, log=lines.append)
    status = {(c.model, c.task): c.status for c in cells}
    assert status == {("broken", "tatoeba"): "failed", ("broken", "multi30k"): "failed",
                      ("muse", "tatoeba"): "ok", ("muse", "multi30k"): "ok"}
    tatoeba = {r.metric: r for r in results if r.task == "tatoeba"}
    assert set(tatoeba) == {"acc@1 eng->deu", "acc@1 deu->eng"}
    assert tatoeba["acc@1 eng->deu"].value > 0.9  # mUSE is strong on German
    assert tatoeba["acc@1 eng->deu"].protocol["n"] == 60
    multi = [r for r in results if r.task == "multi30k"]
    assert len(multi) == 6 and {r.protocol["split"] for r in multi} == {"test_2016_flickr"}
    paths = write_outputs(results, cells, tmp_path / "out", {"seed": 0})
    saved = json.loads(paths["results"].read_text())
    assert len(saved["results"]) == len(results) and saved["meta"]["torch"]
    assert paths["plot_tatoeba"].stat().st_size > 1000


def test_task_without_data_is_skipped(tmp_path):
    results, cells = run_matrix([ModelSpec("muse", kind="peer", source="muse_v3")], ["tatoeba"],
                                TaskContext(data_dir=None), log=lambda s: None)
    assert results == [] and cells[0].status == "skipped" and "--data-dir" in cells[0].detail


def test_unknown_task_fails_before_any_model_loads():
    with pytest.raises(KeyError, match="unknown task 'tatoba'; did you mean 'tatoeba'"):
        run_matrix([ModelSpec("x", kind="peer", source="nope")], ["tatoba"], TaskContext())


def test_table_averages_families_and_lists_missing_cells():
    from babelzoo.evaluation.leaderboard import Cell

    rows = [Result("t", "m", "acc@1 en->de", 0.5, family="acc@1 en→X"),
            Result("t", "m", "acc@1 en->fr", 0.7, family="acc@1 en→X")]
    cells = [Cell("m", "t", "ok"), Cell("z", "t", "failed", "boom")]
    table = leaderboard_table(rows, cells, "T")
    assert "| m | 0.600 |" in table and "| z | failed |" in table and "- z × t: failed (boom)" in table


def test_model_spec_rejects_unknown_keys():
    with pytest.raises(ValueError, match=r"^model.layers: unknown model spec key 'layers'; did you mean 'layer'\? "
                                         r"Valid keys: name, kind, source, tokenizer, layer, prefix, max_length, "
                                         r"overrides, recipe, tasks$"):
        ModelSpec.from_dict({"name": "x", "layers": 3})


def test_per_language_table_lists_every_number_of_every_model():
    from babelzoo.evaluation.leaderboard import per_language_tables

    rows = [Result("sib200", "a", "acc deu_Latn", 0.5), Result("sib200", "a", "acc fra_Latn", 0.25),
            Result("sib200", "b", "acc deu_Latn", 0.75)]
    text = per_language_tables(rows, "t")
    assert "## sib200\n\n| metric | a | b |\n|---|---:|---:|\n| acc deu_Latn | 0.500 | 0.750 |\n" \
           "| acc fra_Latn | 0.250 | – |" in text


def test_a_model_takes_part_only_in_its_own_tasks():
    spec = ModelSpec.from_dict({"name": "muse", "kind": "peer", "source": "muse_v3", "tasks": ["multi30k"]})
    results, cells = run_matrix([spec], ["tatoeba", "multi30k"], TaskContext(data_dir=None), log=lambda s: None)
    detail = {c.task: (c.status, c.detail) for c in cells}
    assert detail["tatoeba"] == ("skipped", "not among muse's tasks (multi30k)")
    assert detail["multi30k"][0] == "skipped" and "--data-dir" in detail["multi30k"][1]  # it did run


def test_model_tasks_must_be_tasks_of_the_run():
    from babelzoo.zoo.config import ConfigError

    with pytest.raises(ConfigError, match=r"model 'muse': tasks \['udpos'\] are not among this run's tasks \(tatoeba\)"):
        run_matrix([ModelSpec("muse", kind="peer", source="muse_v3", tasks=["udpos"])], ["tatoeba"], TaskContext())
    with pytest.raises(ConfigError, match=r"^model.tasks='tatoeba' must be a list of strings or null, got str$"):
        ModelSpec.from_dict({"name": "muse", "kind": "peer", "source": "muse_v3", "tasks": "tatoeba"})
    with pytest.raises(ConfigError, match="tasks must be a non-empty list of task names, got \\[\\]"):
        ModelSpec.from_dict({"name": "muse", "kind": "peer", "source": "muse_v3", "tasks": []})


def test_the_benchmark_script_names_its_own_invocation(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    script = [sys.executable, "-m", "benchmarks.leaderboard"]
    shown = subprocess.run([*script, "--help"], cwd=repo, capture_output=True, text=True)
    assert shown.returncode == 0 and shown.stdout.startswith("usage: python -m benchmarks.leaderboard [-h] --config")
    config = tmp_path / "board.yaml"
    config.write_text("tasks: [bli_cldr]\nmodels: []\n", encoding="utf-8")
    refused = subprocess.run([*script, "--config", str(config)], cwd=repo, capture_output=True, text=True)
    assert refused.returncode == 2
    assert refused.stderr == (f"python -m benchmarks.leaderboard: {config}:2: LeaderboardConfig.models=[] "
                              "must list at least one entry\n")


@pytest.mark.parametrize("config", sorted((REPO / "benchmarks" / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_leaderboard_config_reads_and_names_registered_tasks(config):
    from babelzoo.evaluation.cli import load_config
    from babelzoo.evaluation.tasks import load_tasks

    loaded = load_config(config)
    assert loaded.models and [task for task in loaded.tasks if task not in load_tasks().list()] == []


def test_outputs_say_how_the_numbers_were_made(tmp_path):
    import re
    import subprocess

    from babelzoo._provenance import current_machine
    from babelzoo.evaluation.leaderboard import Cell

    paths = write_outputs([Result("t", "m", "acc@1", 0.5)], [Cell("m", "t", "ok")], tmp_path / "out",
                          {"command": "babelzoo eval --config c.yaml"}, title="T")
    meta = json.loads(paths["results"].read_text())["meta"]
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert meta["commit"].removesuffix("+uncommitted changes") == head
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", meta["date"]) and meta["threads"] >= 1
    assert meta["machine"] == current_machine() and meta["command"] == "babelzoo eval --config c.yaml"
    assert paths["leaderboard"].read_text().splitlines()[2:5] == [
        f"Machine: `{meta['machine']['tag']}` ({meta['machine']['description']})  ",
        "Command: `babelzoo eval --config c.yaml`  ", f"Commit: {meta['commit']}; date: {meta['date']}"]
