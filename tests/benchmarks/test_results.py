"""benchmarks/_results.py: a run's envelope (machine, command, commit, date), its page rendered
from the JSON alone, and the committed results: every page and the index are what ``python -m
benchmarks render --all`` makes from the committed JSON, so nothing hand-edited drifts."""

from __future__ import annotations

import datetime
import json
import subprocess

import pytest

from babelzoo import _provenance as P
from benchmarks import __main__ as cli
from benchmarks import _results as R
from benchmarks import generate_speed
from benchmarks._suites import SUITES

REPORT = {"command": "python benchmarks/generate_speed.py --size tiny", "runs": {
    "greedy": {"babelzoo_tokens_per_s": 120.04, "transformers_tokens_per_s": 100.0, "ratio": 1.2004},
    "beam4": {"babelzoo_tokens_per_s": 50.0, "transformers_tokens_per_s": 62.5, "ratio": 0.8}}}


def test_a_run_writes_its_envelope_and_the_page_render_makes_again(tmp_path, monkeypatch):
    monkeypatch.setattr(P, "current_machine", lambda gpu=None: {"tag": "epyc-avx2", "description": "AMD EPYC, 2 CPUs"})
    out = R.write_results(tmp_path / "x.json", REPORT, generate_speed.markdown, "generate_speed")
    run = json.loads(out.read_text(encoding="utf-8"))
    assert run["suite"] == "generate_speed" and run["results"] == REPORT
    assert run["machine"] == {"tag": "epyc-avx2", "description": "AMD EPYC, 2 CPUs"}
    assert run["commit"] and run["date"].endswith(" UTC") and run["command"].startswith("python ")
    page = out.with_suffix(".md").read_text(encoding="utf-8")
    assert "| greedy | 120.0 | 100.0 | 1.20 |" in page and "| beam4 | 50.0 | 62.5 | 0.80 |" in page
    assert "Machine: `epyc-avx2` (AMD EPYC, 2 CPUs)" in page and f"Commit: {run['commit']}; date: " in page
    out.with_suffix(".md").write_text("edited by hand\n", encoding="utf-8")
    assert R.render_file(out) == [out.with_suffix(".md")]
    assert out.with_suffix(".md").read_text(encoding="utf-8") == page


def test_a_run_records_this_machine_the_suites_command_the_commit_and_the_date(tmp_path, monkeypatch):
    monkeypatch.delenv("BABELZOO_DATA_DIR", raising=False)
    data = R.REPO.parent / "shared" / "data" / "tatoeba"
    monkeypatch.setattr("sys.argv", [str(R.REPO / "benchmarks" / "__main__.py"), "run", "generate_speed_tiny",
                                     "--repeats", "3", "--data-dir", str(data), "--out", str(tmp_path / "x.json")])
    run = json.loads(R.write_results(tmp_path / "x.json", REPORT, generate_speed.markdown, "generate_speed")
                     .read_text(encoding="utf-8"))
    assert run["command"] == "python -m benchmarks run generate_speed_tiny --repeats 3 --data-dir ../shared/data/tatoeba"
    assert run["machine"] == P.current_machine() and run["machine"]["tag"] == P.cpu_tag(P.cpu_name(), P.cpu_flags())
    head = subprocess.run(["git", "-C", str(R.REPO), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert run["commit"].removesuffix("+uncommitted changes") == head
    date = datetime.datetime.strptime(run["date"], "%Y-%m-%d %H:%M UTC").replace(tzinfo=datetime.timezone.utc)
    assert abs((datetime.datetime.now(datetime.timezone.utc) - date).total_seconds()) < 120
    page = (tmp_path / "x.md").read_text(encoding="utf-8")
    assert page.endswith("\n".join(["", f"Machine: `{run['machine']['tag']}` ({run['machine']['description']})  ",
                                     f"Command: `{run['command']}`  ", f"Commit: {run['commit']}; date: {run['date']}",
                                     ""]))


@pytest.mark.parametrize("argv, command", [
    # the script run directly: the suite's own options, leading its argv, are the suite's name
    (["benchmarks/generate_speed.py", "--size", "tiny", "--threads", "1", "--repeats", "3", "--out", "/tmp/g.json"],
     "python -m benchmarks run generate_speed_tiny --repeats 3"),
    # without the suite's own options it is no run of the suite, nor are results no suite's: as typed
    (["benchmarks/generate_speed.py", "--repeats", "3"], "python benchmarks/generate_speed.py --repeats 3"),
    (["benchmarks/xlingual_transfer.py", "--setting", "e5"], "python benchmarks/xlingual_transfer.py --setting e5"),
])
def test_a_script_run_directly_is_written_as_its_suites_command(argv, command):
    suite = "xlingual_transfer" if "xlingual" in argv[0] else "generate_speed_tiny"
    assert R.command_line(suite, argv) == command


def test_a_leaderboard_records_the_suites_command(monkeypatch):
    import benchmarks.leaderboard as board

    seen = []
    monkeypatch.setattr(board, "run_eval", lambda parsed: seen.append(parsed.command) or 0)
    monkeypatch.chdir(R.REPO)
    assert cli.main(["run", "leaderboard_transfer", "--limit", "5"]) == 0
    assert seen == ["python -m benchmarks run leaderboard_transfer --limit 5"]
    assert board.main(["--config", "mine.yaml", "--limit", "5"]) == 0  # no suite's config: as typed
    assert seen[1] == "python -m benchmarks.leaderboard --config mine.yaml --limit 5"


def test_the_suite_is_the_folder_under_results_else_the_script(tmp_path):
    assert R.suite_of(R.RESULTS / "generate_speed_tiny" / "h200.json", "generate_speed") == "generate_speed_tiny"
    assert R.suite_of(tmp_path / "generate_speed_tiny" / "h200.json", "generate_speed") == "generate_speed"


def test_a_page_without_a_command_says_so():
    run = {"suite": "generate_speed", "machine": {"tag": "unrecorded", "description": "x86_64"}, "command": None,
           "commit": "abc1234", "date": "2026-12-02 11:19 UTC", "results": REPORT}
    page = R.document(run, generate_speed.markdown)
    assert page.startswith(R.GENERATED + "\n\n| decoding |")
    assert page.endswith("Machine: `unrecorded` (x86_64)  \nCommand: not recorded  \n"
                         "Commit: abc1234; date: 2026-12-02 11:19 UTC\n")


def test_a_file_that_is_not_a_run_is_refused_by_name(tmp_path):
    path = tmp_path / "old.json"
    path.write_text(json.dumps({"runs": {}}), encoding="utf-8")
    with pytest.raises(R.InputError, match="old.json: not a benchmark results file: no suite, machine, results"):
        R.render_file(path)


COMMITTED = sorted(path for path in R.RESULTS.rglob("*.json") if "archive" not in path.relative_to(R.RESULTS).parts)
RUNS = [path for path in COMMITTED if path.name != "results.json"]  # a leaderboard's is its own format
ARCHIVED = sorted((R.RESULTS / "archive").rglob("*.json"))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: p.relative_to(R.RESULTS).as_posix())
def test_every_results_file_says_its_machine_command_commit_and_date(path):
    """The guard: a file that cannot say how it was made belongs in archive/, with the reason."""
    run = json.loads(path.read_text(encoding="utf-8"))
    made = run["meta"] if path.name == "results.json" else run
    assert isinstance(made.get("machine"), dict) and made["machine"]["tag"] not in ("", "unrecorded"), path
    assert made["machine"]["description"] and "recorded no machine" not in made["machine"]["description"], path
    assert made.get("command") and made.get("commit") and made.get("date"), path
    assert datetime.datetime.strptime(made["date"].removesuffix(" UTC")[:16], "%Y-%m-%d %H:%M"), path


def test_every_archived_file_says_why_and_the_archive_pages_list_them():
    assert len(ARCHIVED) >= 23
    for path in ARCHIVED:
        reason = json.loads(path.read_text(encoding="utf-8"))["archived"]
        assert "not reproducible from the page" in reason and "recorded no" in reason, path
    assert (R.RESULTS / "archive" / "README.md").read_text(encoding="utf-8") == R.archive_index(), \
        "python -m benchmarks render --all"
    listed = R.archive_index()
    assert all(f"]({path.relative_to(R.RESULTS / 'archive').parent.as_posix()}/" in listed for path in ARCHIVED)


def test_every_results_folder_is_a_registered_suite_with_one_file_per_machine():
    folders = sorted({path.name for path in R.RESULTS.iterdir() if path.is_dir()} - {"archive"})
    assert folders and set(folders) <= set(SUITES.list())
    assert len(RUNS) >= 15
    for path in RUNS:
        run = R.read_run(path)
        assert run["suite"] == path.parent.name and run["machine"]["tag"] == path.stem, path
    # a page is the page of a JSON beside it (the archive's excepted)
    pages = {p.with_suffix(".json") for p in R.RESULTS.glob("*/*.md")
             if p.parent.name != "archive" and p.name not in ("leaderboard.md", "per_language.md")}
    assert pages == set(RUNS)


@pytest.mark.parametrize("path", RUNS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_each_committed_page_is_what_render_makes_from_its_json(path):
    run = R.read_run(path)
    committed = path.with_suffix(".md").read_text(encoding="utf-8")
    assert committed == R.document(run, R.suite_module(run["suite"]).markdown), \
        f"{path.with_suffix('.md')} differs from its JSON's page: python -m benchmarks render {run['suite']}"


def test_the_committed_index_is_what_render_makes():
    text = R.index([SUITES.get(name) for name in SUITES.list()])
    assert R.INDEX.read_text(encoding="utf-8") == text, "python -m benchmarks render --all"
    assert "| gpu_check | 10 pass, 1 skipped, 371 s | `h200` | 2026-12-04 18:32:31 UTC | [gpu_check/h200.md]" in text
    assert "| speed_inference | fp32 5.57× transformers (2.62× sorted) | `epyc-avx512` |" in text
    assert "| streaming | streamed 0.93× the fastest cached run's tokens/s | `xeon` |" in text
    assert "| speed_gpu | training base: bf16 1.29×, fp16 1.32× transformers' tokens/s | `h200` |" in text
    assert "| leaderboard_transfer | [archive/leaderboard_transfer/leaderboard.md](archive/leaderboard_transfer/" \
           "leaderboard.md) | recorded no machine (only \"x86_64\"), no command, no commit and no date;" in text
    # the runs and the archived pages (one without JSON, from before JSON was kept), each table's header
    assert text.count("\n| ") == len(RUNS) + 1 + len(ARCHIVED) + 1 + 1


def test_render_all_writes_the_pages_and_the_index(tmp_path, monkeypatch):
    folder = tmp_path / "results"
    (folder / "cpu_contention").mkdir(parents=True)
    source = R.RESULTS / "cpu_contention" / "xeon.json"
    (folder / "cpu_contention" / "xeon.json").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setattr(R, "RESULTS", folder)
    monkeypatch.setattr(cli, "INDEX", folder / "README.md")
    assert cli.main(["render", "--all", "--no-plots"]) == 0
    page = (folder / "cpu_contention" / "xeon.md").read_text(encoding="utf-8")
    assert page == source.with_suffix(".md").read_text(encoding="utf-8")
    index = (folder / "README.md").read_text(encoding="utf-8")
    assert "| cpu_contention | demo beside a competitor: 1.40× its quiet time | `xeon` |" in index
    assert index.count("\n| ") == 3  # the run, the header, the empty archive's header


def test_an_interrupted_comparison_keeps_the_arms_written_under_the_same_settings(tmp_path, capsys):
    report = {"settings": {"steps": 100, "out": "a.json"}, "protocol": "p", "arms": [{"arm": "mlm", "x": 1.5}]}
    out = R.write_results(tmp_path / "zoo.json", report, lambda r: "table", "objectives_zoo")
    again = {"settings": {"steps": 100, "out": "b.json"}, "protocol": "p"}
    assert R.finished_arms(out, again, ignored=("out",)) == {"mlm": {"arm": "mlm", "x": 1.5}}
    assert R.finished_arms(out, {**again, "settings": {"steps": 200, "out": "a.json"}}, ignored=("out",)) == {}
    assert "written under other settings; every arm runs again" in capsys.readouterr().out
    assert R.finished_arms(tmp_path / "none.json", again, ignored=()) == {}


def test_a_results_file_is_named_from_benchmarks_results_wherever_the_checkout_lies(tmp_path, monkeypatch):
    from benchmarks._results import shown_path

    worktree_file = tmp_path / "wt" / "benchmarks" / "results" / "kg_completion" / "epyc-avx512.json"
    assert shown_path(worktree_file) == "benchmarks/results/kg_completion/epyc-avx512.json"
    monkeypatch.setenv("BABELZOO_DATA_DIR", str(tmp_path / "data"))
    assert shown_path(tmp_path / "data" / "old.json") == "$BABELZOO_DATA_DIR/old.json"
    assert shown_path(tmp_path / "elsewhere.json") == str((tmp_path / "elsewhere.json").resolve())
