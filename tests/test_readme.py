"""The README's quickstart is what CI runs: keep them in step. Its code blocks run as pasted and
write only where a checkout ignores (a run leaves `git status` clean); its Layout names what is
there."""

import ast
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

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
    # pasted at the root of a checkout, what it wrote is ignored there: `git status` stays clean
    written = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() and p.name != "hubconf.py"]
    assert not_ignored(written) == []


def not_ignored(paths: list[str]) -> list[str]:
    """Those of ``paths`` (relative to the repository root) that the checkout would show as new."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    return [p for p in paths if subprocess.run(["git", "check-ignore", "-q", p], cwd=REPO, check=False).returncode != 0]


def bash_lines() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return [line.strip() for block in text.split("```bash")[1:] for line in block.split("```", 1)[0].splitlines()
            if line.strip()]


WRITES = re.compile(r"(?:--out|--to-hf|--to|--save)\s+(\S+)")
PUBLISHING = ("python benchmarks/", "python -m benchmarks.", "babelzoo eval")  # default: benchmarks/results


def test_readme_commands_write_only_where_a_checkout_ignores():
    lines = bash_lines()
    written = [path for line in lines for path in WRITES.findall(line)]
    assert len(written) >= 8 and not_ignored(written) == []
    # the benchmark scripts and the leaderboard write the published results unless told otherwise
    assert [line for line in lines if line.startswith(PUBLISHING) and "--out" not in line] == []
    # a recipe run by name writes into its output_dir
    recipes = {name for line in lines for name in re.findall(r"babelzoo (?:pretrain|finetune) --config (\w+)", line)}
    assert len(recipes) >= 5
    folders = [yaml.safe_load((REPO / "babelzoo" / "recipes" / f"{name}.yaml").read_text(encoding="utf-8"))["output_dir"]
               for name in sorted(recipes)]
    assert not_ignored([f"{folder}/summary.json" for folder in folders]) == []


def layout() -> tuple[str, str]:
    """The Layout section's tree and its layering sentence."""
    section = (REPO / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1].split("\n## ", 1)[0]
    tree, after = section.split("```", 2)[1:]
    return tree, " ".join(after.split())


def test_layout_names_every_package_and_family():
    from babelzoo.zoo.family import BUILTIN_FAMILIES

    tree, _ = layout()
    folders = sorted(p.name for p in (REPO / "babelzoo").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert [name for name in folders if f"\n  {name}/" not in tree] == []
    listed = re.search(r"one pair of files per family\s+\(([^)]*)\)", tree).group(1)
    assert [name.strip() for name in listed.split(",")] == list(BUILTIN_FAMILIES)


def test_layering_sentence_is_the_order_the_layering_test_checks():
    source = (REPO / "tests" / "test_layering.py").read_text(encoding="utf-8")
    layers = next(ast.literal_eval(node.value) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LAYERS")
    _, sentence = layout()
    chain = sentence.split("Layers import only downwards:", 1)[1].split("→ the commands", 1)[0]
    shown = [re.findall(r"`(\w+)`", step) for step in chain.split("→")]
    assert shown == [[name for name in group if not name.startswith("_")] for group in layers[:-1]]


@pytest.mark.parametrize("expression, error, message", error_examples())
def test_readme_error_examples_raise_what_they_show(expression, error, message):
    import babelzoo

    with pytest.raises(Exception) as caught:
        eval(expression, {"babelzoo": babelzoo})
    assert type(caught.value).__name__ == error and str(caught.value).startswith(message)
