"""Every user-facing error is a :class:`~babelzoo.errors.BabelzooError` (and keeps its builtin
base), so a command reports it as one line and exit 2: no bare ``raise ValueError`` is left in
the package."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from babelzoo.errors import USER_ERROR, BabelzooError, InputError, run_command

PACKAGE = Path(__file__).resolve().parents[1] / "babelzoo"

# (path relative to babelzoo/, enclosing function) -> why a builtin ValueError is right there.
# Only a programming-contract check that no user input can reach belongs here.
ALLOWED: dict[tuple[str, str], str] = {}


def _is_value_error(exc: ast.expr | None) -> bool:
    """``raise ValueError``, ``raise ValueError(...)`` or the same through ``builtins.``."""
    target = exc.func if isinstance(exc, ast.Call) else exc
    if isinstance(target, ast.Name):
        return target.id == "ValueError"
    return isinstance(target, ast.Attribute) and target.attr == "ValueError"


def _raises(tree: ast.AST) -> list[tuple[str, ast.Raise]]:
    """Every ``raise`` with an exception, with the name of the function it sits in."""
    found = []

    def visit(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else where
            if isinstance(child, ast.Raise) and child.exc is not None:
                found.append((where, child))
            visit(child, inner)

    visit(tree, "<module>")
    return found


def _package_raises() -> list[tuple[str, str, ast.Raise]]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for where, node in _raises(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            out.append((rel, where, node))
    return out


def test_the_walker_finds_value_errors_in_every_spelling():
    source = ("def f():\n    raise ValueError('a')\n"
              "def g():\n    raise ValueError\n"
              "def h():\n    raise builtins.ValueError('c')\n"
              "def k():\n    raise KeyError('d')\n")
    hits = [(where, _is_value_error(node.exc)) for where, node in _raises(ast.parse(source))]
    assert hits == [("f", True), ("g", True), ("h", True), ("k", False)]


def test_no_bare_value_error_is_raised_outside_the_allow_list():
    raises = _package_raises()
    others = [r for r in raises if not _is_value_error(r[2].exc)]
    assert len(others) >= 100, f"the walk saw only {len(others)} raise statements: is it reading babelzoo/?"
    bare = [f"babelzoo/{rel}:{node.lineno} (in {where})" for rel, where, node in raises
            if _is_value_error(node.exc) and (rel, where) not in ALLOWED]
    assert not bare, ("raise a BabelzooError subclass (ConfigError, InputError, ExampleError, ...) instead of "
                      "a bare ValueError, so the CLI prints one line: " + ", ".join(bare))


def test_the_allow_list_names_only_sites_that_still_raise_value_error():
    present = {(rel, where) for rel, where, node in _package_raises() if _is_value_error(node.exc)}
    assert not set(ALLOWED) - present, sorted(set(ALLOWED) - present)


def test_input_error_is_a_user_error_and_a_value_error():
    assert issubclass(InputError, BabelzooError) and issubclass(InputError, ValueError)
    with pytest.raises(ValueError, match="no vision part"):
        raise InputError("pixel_values given, but model 'xlmr_tiny' has no vision part")


def test_run_command_reports_an_input_error_as_one_line_and_exit_2(capsys):
    def main(argv):
        raise InputError("pixel_values given, but model 'xlmr_tiny' has no vision part")

    assert run_command("demo", main, []) == USER_ERROR == 2
    captured = capsys.readouterr()
    assert captured.err == "babelzoo demo: pixel_values given, but model 'xlmr_tiny' has no vision part\n"
    assert captured.out == ""
