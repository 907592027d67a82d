"""The family seam holds in the source: no code outside a family tests a family's config class
(it asks the family through :func:`~babelzoo.zoo.family.family_of`), and
:meth:`LayerStack.run <babelzoo.zoo.layers.LayerStack.run>` is the package's only loop over
layers (families supply blocks and per-layer state, never a loop of their own)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from babelzoo.zoo.family import FAMILIES, load_all_families

PACKAGE = Path(__file__).resolve().parents[2] / "babelzoo"
LAYER_LOOP = PACKAGE / "zoo" / "layers" / "stack.py"
DEFAULT_MODEL = "babelzoo.zoo.model:BabelModel"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def sources() -> list[tuple[str, str]]:
    return [(module_name(p), p.read_text(encoding="utf-8")) for p in sorted(PACKAGE.rglob("*.py"))]


def family_modules() -> dict[str, set[str]]:
    """Config class name -> the modules of its family (config, parts, encoder, own model class)."""
    load_all_families()
    owned = {}
    for _, family in FAMILIES.items():
        paths = [family.build, family.encoder] + ([family.model] if family.model != DEFAULT_MODEL else [])
        owned[family.config.__name__] = {family.config.__module__} | {p.partition(":")[0] for p in paths}
    return owned


def _names(node: ast.AST) -> set[str]:
    """The class names a type argument spells: ``C``, ``module.C`` or a tuple of them."""
    if isinstance(node, ast.Tuple):
        return set().union(*(_names(e) for e in node.elts))
    if isinstance(node, ast.Attribute):
        return {node.attr}
    return {node.id} if isinstance(node, ast.Name) else set()


def class_tests(source: str) -> list[tuple[int, set[str]]]:
    """(line, class names) of every ``isinstance``/``issubclass`` call and ``type(x) is C``
    comparison in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("isinstance", "issubclass") and len(node.args) == 2):
            found.append((node.lineno, _names(node.args[1])))
        elif (isinstance(node, ast.Compare) and isinstance(node.left, ast.Call)
              and isinstance(node.left.func, ast.Name) and node.left.func.id == "type"):
            found.append((node.lineno, set().union(*(_names(c) for c in node.comparators))))
    return found


def foreign_config_tests(module: str, source: str, owned: dict[str, set[str]]) -> list[str]:
    return [f"{module}:{line} tests {name}" for line, names in class_tests(source) for name in sorted(names)
            if name in owned and module not in owned[name]]


def _mentions_layers(node: ast.AST) -> bool:
    return any((isinstance(n, ast.Attribute) and n.attr.endswith("layers"))
               or (isinstance(n, ast.Name) and n.id.endswith("layers")) for n in ast.walk(node))


def _targets(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _calls_a_layer(body: list[ast.AST], loop_names: set[str]) -> bool:
    """Does ``body`` call a block: ``x.layers[i](...)``, ``x.layer(i)(...)`` or the loop's
    own variable (``for layer in self.layers: layer(...)``)?"""
    for node in (n for part in body for n in ast.walk(part)):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Subscript) and _mentions_layers(f.value):
            return True
        if isinstance(f, ast.Call) and isinstance(f.func, ast.Attribute) and f.func.attr == "layer":
            return True
        if isinstance(f, ast.Name) and f.id in loop_names:
            return True
    return False


def layer_loops(source: str) -> list[int]:
    """Lines of the loops in ``source`` that call a layer block each time round (statements
    and comprehensions)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.For, ast.AsyncFor)):
            names = _targets(node.target) if _mentions_layers(node.iter) else set()
            if _calls_a_layer(node.body, names):
                found.append(node.lineno)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
            names = set().union(*(_targets(g.target) for g in node.generators if _mentions_layers(g.iter)))
            parts = [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            if _calls_a_layer(parts, names):
                found.append(node.lineno)
    return found


def test_no_module_tests_a_family_config_class_outside_its_family():
    owned = family_modules()
    assert {"TransformerConfig", "Seq2SeqConfig", "TransformerXLConfig", "XLNetConfig"} <= set(owned)
    assert "babelzoo.zoo.families.transformer.model" in owned["TransformerConfig"]
    found = [hit for module, source in sources() for hit in foreign_config_tests(module, source, owned)]
    assert found == [], "ask the family (family_of(config).<capability>) instead: " + "; ".join(found)


@pytest.mark.parametrize("snippet, flagged, owner", [
    ("isinstance(config.text, TransformerConfig)", ["TransformerConfig"], "babelzoo.zoo.families.transformer.model"),
    ("isinstance(text, (zoo.Seq2SeqConfig, int))", ["Seq2SeqConfig"], "babelzoo.zoo.families.seq2seq.model"),
    ("issubclass(cls, TransformerXLConfig)", ["TransformerXLConfig"], "babelzoo.zoo.families.transformer_xl.config"),
    ("type(text) is XLNetConfig", ["XLNetConfig"], "babelzoo.zoo.families.xlnet.model"),
    ("isinstance(config, ModelConfig)", [], None),
    ("text.family == 'transformer'", [], None),
])
def test_the_config_check_finds_class_tests_in_any_spelling(snippet, flagged, owner):
    owned = family_modules()
    assert [hit.rpartition(" ")[2] for hit in foreign_config_tests("babelzoo.zoo.multimodal", snippet, owned)] == flagged
    if owner is not None:  # the family's own modules may test its class
        assert foreign_config_tests(owner, snippet, owned) == []


def test_layer_stack_run_is_the_only_loop_over_layers():
    assert layer_loops(LAYER_LOOP.read_text(encoding="utf-8")), "LayerStack.run's loop is no longer recognised"
    found = [f"{module}:{line}" for module, source in sources() if module != "babelzoo.zoo.layers.stack"
             for line in layer_loops(source)]
    assert found == [], "run the layers through LayerStack.run (blocks take (x, layer_state)): " + ", ".join(found)


@pytest.mark.parametrize("snippet, loops", [
    ("for i in range(start, end):\n    x = self.layers[i](x, mask, None, None, None, packing, rotary)", 1),
    ("for i in range(start, end):\n    x = self.layer(i)(x, state.mask, state.bias)", 1),
    ("for layer in self.layers:\n    h, g = layer(h, state, g, query)", 1),
    ("for i, layer in enumerate(self.decoder_layers):\n    x = layer(x, mask, bias, memory[i])", 1),
    ("for layer in self.fusion_layers:\n    if layer is not None:\n        hidden = layer(hidden, mask)", 1),
    ("xs = [layer(x) for layer in model.layers]", 1),
    ("memory = [layer.cross_attention.memory(encoded) for layer in self.layers]", 0),
    ("for block in self.layers:\n    block.attention.reset_memory()", 0),
    ("for i in range(n):\n    total += weights[i](x)", 0),
])
def test_the_loop_check_finds_every_way_of_calling_blocks_in_a_loop(snippet, loops):
    assert len(layer_loops(snippet)) == loops


def test_conversion_finds_its_families_in_the_family_registry():
    from babelzoo.zoo.convert import FAMILIES as HF
    from babelzoo.zoo.convert.families import hf_conversions
    from babelzoo.zoo.convert.seq2seq import families as encoder_decoders

    load_all_families()
    declared = {name: [c.model_type for c in family.hf_conversions()] for name, family in FAMILIES.items()}
    assert declared == {"cove": [], "modernbert": ["modernbert"], "rnn": [], "seq2seq": ["bart", "mbart", "t5"],
                        "transformer": ["bert", "xlm-roberta", "albert"], "transformer_xl": [], "xlnet": ["xlnet"]}
    assert HF.list() == ["albert", "bert", "modernbert", "xlm-roberta", "xlnet"]
    assert list(encoder_decoders()) == ["bart", "mbart", "t5"]  # declared order: export tries BART first
    # each conversion's text config is the one of the family that declares it
    owner = {c.model_type: name for name, family in FAMILIES.items() for c in family.hf_conversions()}
    assert all(owner[c.model_type] == c.text_config.family for c in hf_conversions() if not c.encoder_decoder)


def test_capabilities_are_declared_by_the_families_that_have_them():
    from babelzoo.zoo.family import family_names

    assert family_names(lambda f: f.fusion_tower) == ["transformer"]
    assert family_names(lambda f: f.segment_memory) == ["transformer_xl"]
