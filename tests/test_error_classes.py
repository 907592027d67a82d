"""Every user-facing error is a :class:`~babelzoo.errors.BabelzooError` (and keeps its builtin
base), so a command reports it as one line and exit 2: no bare ``raise ValueError``,
``RuntimeError``, ``KeyError`` or ``TypeError`` is left in the package, except at the few sites
listed below where no file, option or argument a user gives can lead."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from babelzoo.errors import USER_ERROR, BabelzooError, InputError, run_command

PACKAGE = Path(__file__).resolve().parents[1] / "babelzoo"
BUILTINS = ("ValueError", "RuntimeError", "KeyError", "TypeError")

# (path relative to babelzoo/, enclosing function, exception) -> why a builtin exception is right
# there. Only a contract between two pieces of babelzoo's (or a plug-in's) own code belongs here:
# a check that no file, config value, command-line option or public-API argument can trip.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("evaluation/tasks/knowledge.py", "evaluate_linking", "RuntimeError"):
        "both candidate lists are built by the task from one KB; differing lists are a bug in the task",
    ("train/checkpoint.py", "walk", "TypeError"):
        "the trainer stores its own and its parts' state_dicts; a part returning an object that is not a tensor, "
        "number or container is a bug in that part's code",
    ("train/optim.py", "step", "RuntimeError"):
        "sparse gradients come only from a module built in code with sparse=True; torch's own optimizers raise "
        "the same RuntimeError",
    ("train/selection.py", "update", "KeyError"):
        "an Evaluator names its own metric and returns it; omitting it is a bug in the evaluator's code",
    ("zoo/layers/entities.py", "read", "RuntimeError"):
        "the fusion layers run in the order the model itself drives; reading ahead is a bug in the model",
}


def _builtin_raised(exc: ast.expr | None) -> str | None:
    """The builtin exception (of :data:`BUILTINS`) a ``raise`` raises, in any spelling: ``X``,
    ``X(...)``, ``builtins.X(...)``; None for any other exception."""
    target = exc.func if isinstance(exc, ast.Call) else exc
    if isinstance(target, ast.Name):
        name = target.id
    elif isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "builtins":
        name = target.attr
    else:
        return None
    return name if name in BUILTINS else None


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


def _builtin_sites(raises) -> dict[tuple[str, str, str], list[int]]:
    """``(file, function, builtin) -> [line, ...]`` of every bare builtin raise."""
    sites: dict[tuple[str, str, str], list[int]] = {}
    for rel, where, node in raises:
        name = _builtin_raised(node.exc)
        if name is not None:
            sites.setdefault((rel, where, name), []).append(node.lineno)
    return sites


def _unlisted(sites, allowed) -> list[str]:
    return [f"babelzoo/{rel}:{line} (in {where}): raise {name}" for (rel, where, name), lines in sorted(sites.items())
            if (rel, where, name) not in allowed for line in lines]


def _stale(sites, allowed) -> list[tuple[str, str, str]]:
    return sorted(set(allowed) - set(sites))


def test_the_walker_finds_builtin_raises_in_every_spelling():
    source = ("import builtins\n"
              "def f():\n    raise ValueError('a')\n"
              "def g():\n    raise RuntimeError\n"
              "def h():\n    raise builtins.KeyError('c')\n"
              "def k():\n    raise TypeError(f'{1}')\n"
              "class C:\n    def m(self):\n        raise KBError('d')\n"
              "def n():\n    raise errors.ValueError('e')\n"
              "def o():\n    raise NotImplementedError\n")
    hits = [(where, _builtin_raised(node.exc)) for where, node in _raises(ast.parse(source))]
    assert hits == [("f", "ValueError"), ("g", "RuntimeError"), ("h", "KeyError"), ("k", "TypeError"),
                    ("m", None), ("n", None), ("o", None)]


def test_no_bare_builtin_error_is_raised_outside_the_allow_list():
    raises = _package_raises()
    assert len(raises) >= 500, f"the walk saw only {len(raises)} raise statements: is it reading babelzoo/?"
    sites = _builtin_sites(raises)
    assert set(ALLOWED) <= set(sites), "the allow-list names sites the walk does not find"
    bare = _unlisted(sites, ALLOWED)
    assert not bare, ("raise a BabelzooError subclass (ConfigError, InputError, InputTypeError, ...; keep the builtin "
                      "base with a class of your own) instead of a bare builtin, so the CLI prints one line: "
                      + ", ".join(bare))


def test_the_allow_list_names_only_sites_that_still_raise_their_builtin():
    sites = _builtin_sites(_package_raises())
    assert len(ALLOWED) == 5 and all(len(why) > 40 for why in ALLOWED.values())
    assert not _stale(sites, ALLOWED), _stale(sites, ALLOWED)


def test_both_checks_report_what_they_are_given():
    sites = {("a.py", "f", "KeyError"): [3, 9], ("b.py", "g", "TypeError"): [5]}
    allowed = {("b.py", "g", "TypeError"): "why", ("c.py", "h", "ValueError"): "gone"}
    assert _unlisted(sites, allowed) == ["babelzoo/a.py:3 (in f): raise KeyError",
                                         "babelzoo/a.py:9 (in f): raise KeyError"]
    assert _stale(sites, allowed) == [("c.py", "h", "ValueError")]
    # the same site raising another builtin is not covered by the entry
    assert _unlisted({("b.py", "g", "RuntimeError"): [5]}, allowed) == ["babelzoo/b.py:5 (in g): raise RuntimeError"]


def test_a_model_given_inputs_it_has_no_part_for_raises_input_error():
    from babelzoo.zoo.factory import create_model

    model = create_model("xlmr_tiny")
    with pytest.raises(InputError) as err:
        model(torch.tensor([[0, 5, 6, 2]]), entities=torch.zeros(1, 4, dtype=torch.long))
    assert str(err.value) == "entities given, but model 'xlmr_tiny' has no knowledge part"
    assert isinstance(err.value, BabelzooError) and isinstance(err.value, ValueError)


def test_an_argument_of_the_wrong_type_is_an_input_type_error():
    from babelzoo.errors import InputTypeError
    from babelzoo.zoo.factory import create_model

    with pytest.raises(InputTypeError) as err:
        create_model("vl_dual_tiny", text_tower=3)
    assert str(err.value) == "text_tower must be a zoo name or a BabelModel, not int"
    assert isinstance(err.value, TypeError) and isinstance(err.value, BabelzooError)


def test_run_command_reports_a_library_input_error_as_one_line_and_exit_2(capsys):
    from babelzoo.zoo.factory import create_model

    def main(argv):
        create_model(argv[0])(torch.tensor([[0, 5, 2]]), entities=torch.zeros(1, 3, dtype=torch.long))

    assert run_command("demo", main, ["mbert_tiny"]) == USER_ERROR == 2
    captured = capsys.readouterr()
    assert captured.err == "babelzoo demo: entities given, but model 'mbert_tiny' has no knowledge part\n"
    assert captured.out == ""
