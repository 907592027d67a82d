"""The README and the docs site say what the code does: the README's quickstart is what CI runs,
and every code block in ``README.md`` and ``docs/`` runs in these tests.

- ``python`` blocks run as pasted, in an empty folder (with ``hubconf.py``, as at the root of a
  checkout); what they write, a checkout ignores. A block that downloads starts with
  :data:`NEEDS_NETWORK` and is skipped with that reason.
- ``text`` blocks' ``>>>`` lines followed by an error raise that error with that message.
- ``yaml`` blocks are recipes: they load with :func:`babelzoo.train.config.load_recipe`.
- ``bash`` blocks run, one line at a time, in an empty folder holding :data:`FIXTURES`; a block that
  needs what a test run has not (the standard data sets, the network, a GPU, minutes of training,
  installing packages) starts with ``# not run by the tests: REASON`` (REASON among
  :data:`REASONS`, joined by "and"), and its ``babelzoo`` commands are still parsed by the
  command's own argument parser. The README's Quickstart is checked on its own.
"""

import ast
import importlib
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
README_LINES = 150

NEEDS_NETWORK = "# needs internet access"
NOT_RUN = "# not run by the tests: "
REASONS = ("installs packages", "needs the standard data sets", "needs internet access", "needs a CUDA GPU",
           "trains for minutes", "runs for minutes")
# what a reader is told to have beside the commands (docs/guides/deployment.md: "a file sentences.txt of your own")
FIXTURES = {"sentences.txt": "Wo ist der Bahnhof?\nWhere is the station?\n"}


def page_name(page: Path) -> str:
    return str(page.relative_to(REPO))


def fenced(language: str, page: Path) -> list[str]:
    """The ``language`` code blocks of ``page``, in order (the README's Quickstart left out)."""
    text = page.read_text(encoding="utf-8")
    if page.name == "README.md" and page.parent == REPO:
        text = re.sub(r"## Quickstart\n.*?(?=\n## )", "", text, flags=re.S)
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def blocks(language: str) -> list[tuple[str, str]]:
    """``(where, block)`` of every ``language`` block in the README and the docs."""
    return [(f"{page_name(page)} block {i}", block) for page in PAGES for i, block in enumerate(fenced(language, page))]


# --- the README --------------------------------------------------------------------------------------


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


def test_the_readme_is_short_and_links_into_the_docs():
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES
    linked = re.findall(r"\]\((docs/[^)#]+)(?:#([^)]+))?\)", text)
    assert len(set(linked)) >= 5 and [path for path, _ in linked if not (REPO / path).is_file()] == []
    # an anchor is a heading of the page it points into (GitHub's and the site's slugs alike)
    slugs = {path: {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                    for h in re.findall(r"^#+ (.*)$", (REPO / path).read_text(encoding="utf-8"), flags=re.M)}
             for path, _ in linked}
    assert [(path, anchor) for path, anchor in linked if anchor and anchor not in slugs[path]] == []
    assert any(anchor for _, anchor in linked)
    # the three short examples
    assert len(fenced("python", REPO / "README.md")) + len(fenced("bash", REPO / "README.md")) >= 3


# --- python blocks -----------------------------------------------------------------------------------


def test_the_pages_have_python_blocks_and_error_examples():
    assert len(blocks("python")) >= 12 and len(error_examples()) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("where, block", blocks("python"), ids=[where for where, _ in blocks("python")])
def test_python_block_runs_as_pasted(where, block, tmp_path, monkeypatch):
    if block.strip().startswith(NEEDS_NETWORK):
        pytest.skip("this block downloads from the Hugging Face Hub (tests/zoo/test_hub_ids.py loads ids offline)")
    (tmp_path / "hubconf.py").symlink_to(REPO / "hubconf.py")  # "the root of a babelzoo checkout"
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__docs_block__"}
    try:
        exec(compile(block, where, "exec"), namespace)
    finally:
        unregister("__docs_block__")
    # every name the block assigns at its top level is bound to a value, as a reader pasting it would have it
    assigned = {target.id for node in ast.parse(block).body if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)}
    assert assigned and all(namespace.get(name) is not None for name in assigned), sorted(assigned)
    # pasted at the root of a checkout, what it wrote is ignored there: `git status` stays clean
    written = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() and p.name != "hubconf.py"]
    assert not_ignored(written) == []


def unregister(module: str) -> None:
    """Take out of every registry what a block defined and registered (an example objective, data
    source or task), so that the tests parametrised over the registries see only babelzoo's own."""
    from babelzoo.registry import Registry

    registries = {id(value): value for name, mod in list(sys.modules.items()) if name.startswith("babelzoo")
                  for value in list(vars(mod).values()) if isinstance(value, Registry)}
    for registry in registries.values():
        for name in [name for name, entry in registry._entries.items() if getattr(entry, "__module__", "") == module]:
            del registry._entries[name]


def not_ignored(paths: list[str]) -> list[str]:
    """Those of ``paths`` (relative to the repository root) that the checkout would show as new."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    return [p for p in paths if subprocess.run(["git", "check-ignore", "-q", p], cwd=REPO, check=False).returncode != 0]


# --- error examples and recipes ----------------------------------------------------------------------


def error_examples() -> list[tuple[str, str, str]]:
    """``(expression, error class, message start)`` of every ``>>>`` line followed by its error."""
    lines = [line for _, block in blocks("text") for line in block.splitlines()]
    out = []
    for line, result in zip(lines, lines[1:]):
        if line.startswith(">>> ") and ": " in result and not result.startswith(">>>"):
            name, message = result.split(": ", 1)
            out.append((line[4:], name, message.removesuffix(" ...").split("...")[0]))
    return out


@pytest.mark.parametrize("expression, error, message", error_examples())
def test_error_examples_raise_what_they_show(expression, error, message):
    import babelzoo

    from babelzoo.errors import BabelzooError

    def subclasses(cls):
        return [cls] + [s for sub in cls.__subclasses__() for s in subclasses(sub)]

    named = {cls.__name__: cls for cls in subclasses(BabelzooError)}
    assert error in named, f"the README shows {error}, which is no babelzoo error class"
    with pytest.raises(named[error], match="^" + re.escape(message)) as caught:
        eval(expression, {"babelzoo": babelzoo})
    assert type(caught.value) is named[error]


@pytest.mark.parametrize("where, block", blocks("yaml"), ids=[where for where, _ in blocks("yaml")])
def test_yaml_blocks_are_recipes_that_load(where, block, tmp_path):
    from babelzoo.train.config import load_recipe

    path = tmp_path / "recipe.yaml"
    path.write_text(block, encoding="utf-8")
    config = load_recipe(path)
    assert config.objectives and set(config.data) == set(config.objectives), where


# --- shell blocks ------------------------------------------------------------------------------------


def reason(block: str) -> str | None:
    """The block's ``# not run by the tests:`` reason, or None for a block the tests run."""
    first = block.splitlines()[0]
    return first.removeprefix(NOT_RUN) if first.startswith(NOT_RUN) else None


def commands(block: str) -> list[list[str]]:
    """Each command of a block's lines (split at ``&&``) as argv, environment assignments first."""
    out = []
    for line in block.splitlines():
        words = shlex.split(line, comments=True)
        while words:
            cut = words.index("&&") if "&&" in words else len(words)
            out.append(words[:cut])
            words = words[cut + 1:]
    return out


def babelzoo_argv(argv: list[str]) -> list[str] | None:
    """The arguments after ``babelzoo`` (run as a command, ``-m babelzoo`` or a venv's
    ``.venv/bin/babelzoo``), or None for another program."""
    words = [w for w in argv if not re.fullmatch(r"[A-Z_]+=\S*", w)]
    for i, word in enumerate(words):
        if word.endswith("babelzoo") and (i == 0 or words[i - 1] == "-m"):
            return words[i + 1:]
    return None


def parse(argv: list[str]) -> None:
    """Parse ``babelzoo ARGV`` as the command would, without running it."""
    from babelzoo import cli

    if argv[0] in cli.DELEGATED:
        importlib.import_module(cli.DELEGATED[argv[0]][0]).build_parser().parse_args(argv[1:])
    else:
        cli.build_parser().parse_args(argv)


SHELL = blocks("bash")


def test_every_shell_block_runs_or_says_why_not():
    reasons = [reason(block) for _, block in SHELL]
    assert [r for r in reasons if r is not None and not set(r.split(" and ")) <= set(REASONS)] == []
    assert reasons.count(None) >= 4 and len(reasons) - reasons.count(None) >= 8


@pytest.mark.parametrize("where, block", SHELL, ids=[where for where, _ in SHELL])
def test_shell_block_commands_parse(where, block):
    parsed = [argv for argv in map(babelzoo_argv, commands(block)) if argv is not None]
    for argv in parsed:
        parse(argv)
    if reason(block) is None:
        assert parsed, f"{where}: a block the tests run holds babelzoo commands"


@pytest.mark.slow
@pytest.mark.parametrize("where, block", [(w, b) for w, b in SHELL if reason(b) is None],
                         ids=[w for w, b in SHELL if reason(b) is None])
def test_shell_block_runs(where, block, tmp_path):
    for name, text in FIXTURES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    for line in block.splitlines():
        run = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
        assert run.returncode == 0, f"{where}: {line}\n{run.stderr[-2000:]}"
    written = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file() and p.name not in FIXTURES]
    assert not_ignored(written) == []


WRITES = re.compile(r"(?:--out|--to-hf|--to-onnx|--to|--save|--output)\s+(\S+)")
PUBLISHING = ("python benchmarks/", "python -m benchmarks.", "python -m benchmarks run", "babelzoo eval")  # default: benchmarks/results


def test_commands_write_only_where_a_checkout_ignores():
    lines = [line.strip() for _, block in SHELL for line in block.splitlines() if line.strip()]
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


# --- the architecture page ---------------------------------------------------------------------------


def layout() -> tuple[str, str]:
    """The architecture page's layout tree and its layering sentence."""
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    tree = text.split("## Layout", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    layers = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    return tree, " ".join(layers.split())


def test_layout_names_every_package_and_family():
    from babelzoo.zoo.family import BUILTIN_FAMILIES

    tree, _ = layout()
    folders = sorted(p.name for p in (REPO / "babelzoo").iterdir() if p.is_dir() and p.name != "__pycache__")
    assert [name for name in folders if f"\n  {name}/" not in tree] == []
    listed = re.search(r"families/<name>/ \(config\.py \+ model\.py for each of\s+([^)]*)\)", tree).group(1)
    assert [name.strip() for name in listed.split(",")] == list(BUILTIN_FAMILIES)
    # each family's two files sit together in its package, which is its entry point
    families = REPO / "babelzoo" / "zoo" / "families"
    assert sorted(p.name for p in families.iterdir() if p.is_dir() and p.name != "__pycache__") == \
        sorted(BUILTIN_FAMILIES)
    for name, module in BUILTIN_FAMILIES.items():
        assert module == f"babelzoo.zoo.families.{name}.config"
        assert (families / name / "config.py").is_file() and (families / name / "model.py").is_file()


def test_layering_sentence_is_the_order_the_layering_test_checks():
    source = (REPO / "tests" / "test_layering.py").read_text(encoding="utf-8")
    layers = next(ast.literal_eval(node.value) for node in ast.walk(ast.parse(source))
                  if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "LAYERS")
    _, sentence = layout()
    chain = sentence.split("Layers import only downwards:", 1)[1].split("→ the commands", 1)[0]
    shown = [re.findall(r"`(\w+)`", step) for step in chain.split("→")]
    assert shown == [[name for name in group if not name.startswith("_")] for group in layers[:-1]]


# --- what the guides tell a user to install and where files land ------------------------------------


def test_the_cpu_only_install_stops_creating_nothing_while_its_index_is_unset(tmp_path):
    block = next(block for _, block in SHELL if "TORCH_CPU_INDEX" in block)
    env = {key: value for key, value in os.environ.items() if key != "TORCH_CPU_INDEX"}
    env["PIP_NO_INDEX"] = "1"  # whatever happens, nothing is downloaded
    runs = [subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, check=False)
            for line in block.splitlines()[1:]]  # each line as pasted, the next one run whatever the last gave
    assert "TORCH_CPU_INDEX: set it to the index URL of PyTorch CPU wheels" in runs[0].stderr
    assert [run.returncode != 0 for run in runs] == [True, True] and list(tmp_path.iterdir()) == []


def test_the_deployment_guide_names_the_onnx_extra_and_the_opsets_the_export_takes():
    from babelzoo.deploy.onnx import INSTALL_EXTRA, OPSETS

    guide = (REPO / "docs" / "guides" / "deployment.md").read_text(encoding="utf-8")
    assert f".venv/bin/{INSTALL_EXTRA}" in guide
    assert f"torch.onnx writes opsets {OPSETS[0]} to {OPSETS[-1]}" in guide


def test_the_adaptation_guide_names_the_files_the_recipe_writes():
    from babelzoo.offline.adaptation import AdaptationPairs

    recipe = yaml.safe_load((REPO / "babelzoo" / "recipes" / "adapt_e5_small.yaml").read_text(encoding="utf-8"))
    guide = (REPO / "docs" / "guides" / "adaptation.md").read_text(encoding="utf-8")
    folder = f"{recipe['output_dir']}/{recipe['model_dir']}/"
    assert f"It leaves `{folder}` (`babelzoo.from_pretrained`) with `{AdaptationPairs.record_file}`" in guide
