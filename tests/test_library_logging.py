"""Library modules report through ``logging.getLogger(__name__)``; only the command-line layer
prints (a command's result, its one-line error, the training progress line), and only the
``babelzoo`` command shows log records, on stderr, for as long as it runs."""

import ast
import logging
import subprocess
import sys
from pathlib import Path

import pytest

import babelzoo
from babelzoo import cli
from babelzoo.evaluation.leaderboard import ModelSpec, run_matrix
from babelzoo.evaluation.tasks import TaskContext

PACKAGE = Path(babelzoo.__file__).resolve().parent

# The functions that may print, by module: each prints what its command was asked for (a table,
# JSON, a card, a result line) or a user error's one line, or the trainer's progress line and
# summary. Anything else a module has to say goes to its logger.
PRINTS = {
    "cli.py": {"_list", "_info", "_run", "main"},  # main: -q with -v, a usage error
    "demo.py": {"run"},  # the leaderboard table and where it was written
    "deploy/convert_cli.py": {"_import", "_export", "_export_onnx"},
    "errors.py": {"run_command"},  # a user error: one line on stderr
    "evaluation/cli.py": {"run_eval"},
    "finetune/cli.py": {"finetune_main"},
    "knowledge/cli.py": {"info", "link", "log", "train_kge_main", "align_main"},
    "knowledge/link_cli.py": {"eval_main", "predict_main"},
    "knowledge/pretrain_cli.py": {"pretrain_link_prediction"},
    "train/cli.py": {"pretrain_main", "attempt"},
    "train/logging.py": {"_show_window", "close"},  # the progress line and the run summary
}
CONFIGURES = {("errors.py", "cli_logging")}  # the one place that adds a handler or sets a level
LOGGING_SETUP = {"basicConfig", "dictConfig", "fileConfig", "addHandler", "setLevel", "disable", "captureWarnings"}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"), str(path))


def _uses(tree: ast.AST, wanted, scope: str = "<module>"):
    """(innermost enclosing function, node) for each node ``wanted(node)`` accepts."""
    for child in ast.iter_child_nodes(tree):
        if wanted(child):
            yield scope, child
        inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
        yield from _uses(child, wanted, inner)


def test_only_the_command_line_layer_prints():
    found, where = set(), []
    for module, tree in _modules():
        for scope, node in _uses(tree, lambda n: isinstance(n, ast.Name) and n.id == "print"):
            found.add((module, scope))  # a call, or print passed on as a default `log`
            where.append(f"{module}:{node.lineno} in {scope}")
    allowed = {(module, scope) for module, scopes in PRINTS.items() for scope in scopes}
    outside = [w for w in where if (w.split(":")[0], w.rsplit(" in ", 1)[1]) not in allowed]
    assert outside == [], "library code reports through logging.getLogger(__name__), not print"
    assert found == allowed  # an entry that no longer prints leaves the list


def test_loggers_are_named_for_their_module_and_only_the_command_configures_logging():
    named, configured = {}, set()
    for module, tree in _modules():
        for scope, node in _uses(tree, lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)):
            if node.func.attr == "getLogger":
                named[module] = ast.unparse(node)
            elif node.func.attr in LOGGING_SETUP:
                configured.add((module, scope))
    assert configured == CONFIGURES
    assert named.pop("errors.py") == "logging.getLogger('babelzoo')"
    assert set(named.values()) == {"logging.getLogger(__name__)"}
    assert {"demo.py", "encode.py", "evaluation/leaderboard.py", "finetune/run.py", "train/cli.py"} <= set(named)
    for module in named:  # one module-level `logger`, the name the modules share
        assert "\nlogger = logging.getLogger(__name__)\n" in (PACKAGE / module).read_text(encoding="utf-8"), module


def test_importing_every_module_adds_no_handler_and_sets_no_level():
    script = ("import importlib, logging, pkgutil, babelzoo\n"
              "for m in pkgutil.walk_packages(babelzoo.__path__, 'babelzoo.'):\n"
              "    if not m.name.endswith('__main__'):\n"
              "        importlib.import_module(m.name)\n"
              "root, package = logging.getLogger(), logging.getLogger('babelzoo')\n"
              "print(root.handlers, logging.getLevelName(root.level), package.handlers, package.level,\n"
              "      package.propagate)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "[] WARNING [] 0 True"


@pytest.fixture
def probe(monkeypatch):
    """A command ``probe`` that logs at three levels and prints its result."""
    def probe_main(argv) -> int:
        log = logging.getLogger("babelzoo.some.module")
        log.debug("detail")
        log.info("progress")
        log.warning("problem")
        print("result")
        return 0

    monkeypatch.setitem(cli.DELEGATED, "probe", ("unused", "unused", "logs and prints"))
    monkeypatch.setattr(cli, "_delegate", lambda name: probe_main)


@pytest.mark.parametrize("flags, err", [([], "progress\nproblem\n"), (["-q"], "problem\n"),
                                        (["--quiet"], "problem\n"), (["-v"], "detail\nprogress\nproblem\n")])
def test_the_command_shows_log_records_as_plain_lines_on_stderr(probe, capsys, flags, err):
    package = logging.getLogger("babelzoo")
    assert cli.main([*flags, "probe"]) == 0
    assert capsys.readouterr() == ("result\n", err)
    assert (package.handlers, package.level) == ([], logging.NOTSET)  # as it was before the command


def test_quiet_and_verbose_are_listed_in_the_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "-q, --quiet" in out and "-v, --verbose" in out


def test_a_quiet_command_still_warns(tmp_path, capsys):
    (tmp_path / "in.txt").write_text("Hello world.\nGo!\n", encoding="utf-8")
    code = cli.main(["-q", "encode", "--model", "mbert_tiny", "--input", str(tmp_path / "in.txt"),
                     "--output", str(tmp_path / "v.npy")])
    err = capsys.readouterr().err
    assert code == 0 and (tmp_path / "v.npy").is_file()
    assert ("babelzoo encode: mbert_tiny has no pretrained weights; encoding with fresh weights (seed 0) and the "
            "tokenizer its config implies (trained on the embedded catalogs once a machine, then cached)\n") in err
    assert "sentences/s; wrote" not in err  # the summary is information: -q leaves it out


def test_library_progress_goes_to_the_modules_logger_not_stdout(caplog, capsys):
    caplog.set_level(logging.INFO, logger="babelzoo")
    results, cells = run_matrix([ModelSpec("stand-in", kind="object", encoder=object())], [], TaskContext())
    TaskContext().log("  tatoeba deu: 0.500")
    assert (results, cells) == ([], [])
    assert [(r.name, r.levelname) for r in caplog.records] == [("babelzoo.evaluation.leaderboard", "INFO"),
                                                                ("babelzoo.evaluation.tasks", "INFO")]
    assert caplog.records[0].getMessage().startswith("[model stand-in] ready in ")
    assert caplog.records[1].getMessage() == "  tatoeba deu: 0.500"
    assert capsys.readouterr() == ("", "")
