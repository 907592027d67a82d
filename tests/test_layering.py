"""The package's layers import only downwards.

Order, lowest first (a module may import from its own layer and from those below it):

1. ``errors``, ``registry``, ``_lazy``, ``typed``, ``yaml_files``, ``config_files``, ``options``, ``_files``,
   ``_threads``, ``_provenance``: the base every part shares;
2. ``datasets``: text, tokenizers, media and corpora (reads model configs, never imports them);
3. ``zoo``: configs, layers, families, models, checkpoints, conversion;
   ``compression``: pruning, quantization, vocabulary trimming and extension;
   ``deploy``: serving a model outside training code: ONNX export, ONNX Runtime encoders, the
   ``convert`` command;
4. ``objectives``: the pre-training and fine-tuning losses;
5. ``train``: the shared trainer, recipes, distributed running;
6. ``knowledge``: knowledge bases, linking, KG embeddings (trained by the shared trainer),
   knowledge objectives;
7. ``finetune``: fine-tuning recipes and transfer;
8. ``evaluation``: tasks, encoders, leaderboards;
9. ``offline``: the offline sources (installed packages that ship weights, peers and data), which
   register into the registries of the layers below, so no model, objective, trainer or task
   code imports them;
10. the commands and entry points: ``cli``, ``demo``, ``encode``, ``hub``, ``__main__``, the package itself.

Every ``import`` is counted: at module level, inside functions and under ``if TYPE_CHECKING:``
(a lower layer describes what it reads of an upper one's objects with a Protocol of its own). So
is every string that names a module of an upper layer (``"babelzoo.knowledge.kb_sources"``, or a
relative ``".knowledge.kb_sources"`` given to ``importlib``): parts of the upper layers are found at
run time through the registries of the lower ones, which import them through entry points
(``babelzoo.registry``; babelzoo's own are declared in ``setup.py``), never by a name a lower
layer holds. Docstrings, which cross-reference the whole package, are not counted.

Within ``zoo`` the imports go one way too (no cycle, function-level imports counted): the
checkpoint files (``zoo.checkpoint_io``) lie below the model classes, which lie below the
factory that builds them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

PACKAGE = Path(__file__).resolve().parents[1] / "babelzoo"
LAYERS = [("errors", "registry", "_lazy", "typed", "yaml_files", "config_files", "options", "_files", "_threads",
           "_provenance"),
          ("datasets",), ("zoo",), ("compression",), ("deploy",), ("objectives",), ("train",), ("knowledge",),
          ("finetune",), ("evaluation",), ("offline",), ("cli", "demo", "encode", "hub", "__main__", "")]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def absolute(package: str, level: int, module: str | None) -> str:
    """The module a relative import of ``level`` dots names from ``package``."""
    base = package.split(".")[: len(package.split(".")) - level + 1]
    return ".".join(base + ([module] if module else []))


def imports(path: Path):
    """(line, imported module) for every import, ``if TYPE_CHECKING:`` blocks included; ``from
    . import x`` yields the package and ``package.x`` (``x`` may be a module)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = package_of(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = absolute(package, node.level, node.module) if node.level else node.module or ""
            yield node.lineno, target
            if not node.module:
                yield from ((node.lineno, f"{target}.{alias.name}") for alias in node.names)


MODULE_NAME = re.compile(r"(babelzoo(\.[A-Za-z_]\w*)+|\.+[A-Za-z_]\w*(\.[A-Za-z_]\w*)*)(:[A-Za-z_]\w*)?")


def named_modules(path: Path):
    """(line, module) for every string that is a module name (``"babelzoo.x.y"``,
    ``"babelzoo.x.y:function"``, or a relative ``".x.y"``, resolved from the module's package);
    docstrings are prose and are passed over."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    package = package_of(path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings \
                and MODULE_NAME.fullmatch(node.value):
            name = node.value.partition(":")[0]
            if name.startswith("."):
                dots = len(name) - len(name.lstrip("."))
                name = absolute(package, dots, name[dots:])
            yield node.lineno, name


def layer(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_import_goes_down_the_layers():
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 100
    upward = []
    for path in modules:
        source = module_name(path)
        assert layer(source) in RANK, f"{source}: its layer {layer(source)!r} is not in the documented order"
        for line, target in imports(path):
            if target.split(".")[0] != "babelzoo":
                continue
            if RANK[layer(target)] > RANK[layer(source)]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not upward, "imports that go up the layers:\n" + "\n".join(upward)


def test_no_module_names_a_module_of_an_upper_layer():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for line, target in named_modules(path):
            if target.split(".")[0] == "babelzoo" and RANK.get(layer(target), -1) > RANK[layer(source)]:
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} names {target}")
    assert not upward, "module names that go up the layers (register through an entry point instead):\n" + \
        "\n".join(upward)


def zoo_graph() -> nx.DiGraph:
    """The zoo's modules, an edge for every import of one by another (functions' included)."""
    modules = {module_name(path): path for path in (PACKAGE / "zoo").rglob("*.py")}
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for name, path in modules.items():
        for line, target in imports(path):
            if target in modules and target != name:
                graph.add_edge(name, target, line=line)
    return graph


def test_the_zoo_imports_one_way():
    graph = zoo_graph()
    assert graph.number_of_nodes() > 40 and graph.has_edge("babelzoo.zoo.factory", "babelzoo.zoo.model")
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not cycles, "import cycles in zoo/ (function-level imports count too):\n" + "\n".join(
        " <-> ".join(name.removeprefix("babelzoo.zoo.") for name in cycle) for cycle in cycles)


def test_the_walk_sees_function_level_type_only_and_relative_imports_and_module_names(tmp_path):
    """The checker itself: an import inside a function or under TYPE_CHECKING is found, and so
    is a string naming a module, absolute or relative; a docstring or a sentence is not."""
    source = tmp_path / "babelzoo" / "zoo" / "probe.py"
    source.parent.mkdir(parents=True)
    source.write_text('"""See babelzoo.knowledge.attach."""\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n'
                      '    from ..train import x\ndef f():\n    from ..knowledge.attach import attach_knowledge\n'
                      '    from . import layers\n'
                      'A = {"kb": "babelzoo.knowledge.kb_sources:attach", "rel": "..evaluation.tasks", "no": "see babelzoo.x"}\n',
                      encoding="utf-8")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "babelzoo"
    try:
        found, named = list(imports(source)), list(named_modules(source))
    finally:
        PACKAGE = saved
    assert sorted(found) == [(2, "typing"), (4, "babelzoo.train"), (6, "babelzoo.knowledge.attach"),
                             (7, "babelzoo.zoo"), (7, "babelzoo.zoo.layers")]
    assert named == [(8, "babelzoo.knowledge.kb_sources"), (8, "babelzoo.evaluation.tasks")]


def test_the_cycle_check_sees_a_function_level_cycle(tmp_path):
    zoo = tmp_path / "babelzoo" / "zoo"
    zoo.mkdir(parents=True)
    (zoo / "a.py").write_text("from .b import x\n", encoding="utf-8")
    (zoo / "b.py").write_text("def x():\n    from .a import y\n", encoding="utf-8")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "babelzoo"
    try:
        graph = zoo_graph()
    finally:
        PACKAGE = saved
    assert sorted(graph.edges) == [("babelzoo.zoo.a", "babelzoo.zoo.b"), ("babelzoo.zoo.b", "babelzoo.zoo.a")]
