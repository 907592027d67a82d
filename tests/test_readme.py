"""The README's quickstart is what CI runs: keep them in step."""

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def quickstart_commands() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    quick = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    return [block.split("\n", 1)[1].strip() for block in quick.split("```bash")[1:]
            for block in [block.split("```", 1)[0]]]


def test_quickstart_has_two_commands_and_ci_runs_the_test_one():
    commands = quickstart_commands()
    assert len(commands) == 2
    demo, tests = commands
    assert demo.endswith("babelzoo demo") and "pytest" in tests
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert tests in ci.splitlines()


NEEDS_NETWORK = "# needs internet access"


def python_blocks() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [block.split("```", 1)[0] for block in text.split("```python")[1:]]


def error_examples() -> list[tuple[str, str, str]]:
    """``(expression, error class, message start)`` of every ``>>>`` line followed by its error."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    lines = [line for block in text.split("```text")[1:] for line in block.split("```", 1)[0].splitlines()]
    out = []
    for line, result in zip(lines, lines[1:]):
        if line.startswith(">>> ") and ": " in result and not result.startswith(">>>"):
            name, message = result.split(": ", 1)
            out.append((line[4:], name, message.removesuffix(" ...").split("...")[0]))
    return out


def test_readme_has_python_blocks_and_error_examples():
    assert len(python_blocks()) >= 6 and len(error_examples()) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs_as_pasted(index, tmp_path, monkeypatch):
    block = python_blocks()[index]
    if block.strip().startswith(NEEDS_NETWORK):
        pytest.skip("this block downloads from the Hugging Face Hub (tests/zoo/test_hub_ids.py loads ids offline)")
    (tmp_path / "hubconf.py").symlink_to(REPO / "hubconf.py")  # "the root of a babelzoo checkout"
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    exec(compile(block, f"README.md python block {index}", "exec"), namespace)
    # every name the block assigns is bound to a value, as a reader pasting it would have it
    assigned = {target.id for node in ast.walk(ast.parse(block)) if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)}
    assert assigned and all(namespace.get(name) is not None for name in assigned), sorted(assigned)


@pytest.mark.parametrize("expression, error, message", error_examples())
def test_readme_error_examples_raise_what_they_show(expression, error, message):
    import babelzoo

    with pytest.raises(Exception) as caught:
        eval(expression, {"babelzoo": babelzoo})
    assert type(caught.value).__name__ == error and str(caught.value).startswith(message)
