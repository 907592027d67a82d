"""The package's layers import only downwards.

Order, lowest first (a module may import from its own layer and from those below it):

1. ``errors``, ``registry``, ``_lazy``, ``typed``, ``_files``, ``_threads``: the base every part shares;
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
9. ``sources``: the offline sources (installed packages that ship weights, peers and data), which
   register into the registries of the layers below, so no model, objective, trainer or task
   code imports them;
10. the commands and entry points: ``cli``, ``demo``, ``encode``, ``hub``, ``__main__``, the package itself.

Every ``import`` is counted, at module level and inside functions; only ``if TYPE_CHECKING:``
blocks (annotations, never executed) are not. Parts found by name at run time go through a
registry instead of an import (text families: ``zoo.family.BUILTIN_FAMILIES``; the knowledge
objectives ``build_objective`` finds: ``objectives.mixture.KNOWLEDGE_OBJECTIVES``; the knowledge
data sources and the offline sources' data sources: ``datasets.sources.BUILTIN_SOURCES``; a
recipe's knowledge base: ``train.cli.ATTACH_KNOWLEDGE``; the offline sources' weights, peers and
tasks: ``PretrainedWeights.loader`` names, ``evaluation.encoders.BUILTIN_PEERS``,
``evaluation.tasks.BUILTIN_TASK_MODULES``).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "babelzoo"
LAYERS = [("errors", "registry", "_lazy", "typed", "_files", "_threads"), ("datasets",), ("zoo",), ("compression",), ("deploy",), ("objectives",), ("train",), ("knowledge",),
          ("finetune",), ("evaluation",), ("sources",), ("cli", "demo", "encode", "hub", "__main__", "")]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path):
    """(line, imported module) for every import outside ``if TYPE_CHECKING:`` blocks."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
               for n in ast.walk(node)}
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                yield node.lineno, ".".join(base + ([node.module] if node.module else []))
            else:
                yield node.lineno, node.module or ""


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


def test_the_walk_sees_function_level_and_relative_imports(tmp_path):
    """The checker itself: an upward import inside a function is found, a TYPE_CHECKING one is not."""
    source = tmp_path / "babelzoo" / "zoo" / "probe.py"
    source.parent.mkdir(parents=True)
    source.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..train import x\n"
                      "def f():\n    from ..knowledge.fusion import attach_knowledge\n", encoding="utf-8")
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "babelzoo"
    try:
        found = list(imports(source))
    finally:
        PACKAGE = saved
    assert found == [(1, "typing"), (5, "babelzoo.knowledge.fusion")]
