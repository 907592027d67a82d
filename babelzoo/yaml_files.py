"""YAML files given by users (recipes, leaderboards, KG embedding recipes, ``--set`` values) are
read only through :func:`read_yaml` / :func:`load_yaml`: plain data (no ``!!python`` tags), and a
document whose aliases would expand past :data:`MAX_ALIAS_VALUES` values (a "billion laughs"
file), refers to itself, or nests deeper than :data:`MAX_DEPTH` is an error naming the file and
line, found before anything is expanded. :func:`key_lines` gives the line of every key path, which
:class:`~babelzoo.typed.Where` puts in error messages.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from ._files import read_utf8
from .errors import ConfigError

MAX_ALIAS_VALUES = 10_000  # values that aliases may add to one document (a shipped recipe adds < 100)
MAX_DEPTH = 64  # nested mappings and lists in one document


class YAMLRefused(ConfigError):
    """A YAML text that is not valid, or not plain bounded data; ``reason`` without the place."""

    def __init__(self, file: Optional[str], line: Optional[int], reason: str):
        place = f"{file}:{line}" if file and line else file or (f"line {line}" if line else "")
        super().__init__(f"{place}: {reason}" if place else reason)
        self.file, self.line, self.reason = file, line, reason


def _loader_class():
    """A safe YAML loader that counts what aliases expand to as it composes the document, so a
    file that would expand exponentially, or contains itself, is refused before any of it is
    built (PyYAML itself would spend minutes and gigabytes, or recurse without end)."""
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        def __init__(self, text: str):
            super().__init__(text)
            self.open_anchors: set[str] = set()  # anchors of the collections being composed
            self.values: dict[int, int] = {}  # id(node) -> values it stands for, aliases expanded
            self.added = 0  # values the aliases so far add to the document
            self.depth = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                if event.anchor in self.open_anchors:
                    raise YAMLRefused(None, event.start_mark.line + 1,
                                      f"alias *{event.anchor} is inside its own anchor &{event.anchor} "
                                      "(a recursive structure)")
                node = super().compose_node(parent, index)
                self.added += self.values[id(node)]
                if self.added > MAX_ALIAS_VALUES:
                    raise YAMLRefused(None, event.start_mark.line + 1,
                                      f"aliases expand the document by more than {MAX_ALIAS_VALUES:,} values "
                                      f"(at *{event.anchor}); write the values out, or repeat fewer of them")
                return node
            if self.depth >= MAX_DEPTH:
                raise YAMLRefused(None, event.start_mark.line + 1,
                                  f"mappings and lists nested more than {MAX_DEPTH} deep")
            anchor = getattr(event, "anchor", None)
            if anchor is not None:
                self.open_anchors.add(anchor)
            self.depth += 1
            try:
                node = super().compose_node(parent, index)
            finally:
                self.depth -= 1
                self.open_anchors.discard(anchor)
            children = [c for pair in node.value for c in pair] if isinstance(node, yaml.MappingNode) else \
                node.value if isinstance(node, yaml.SequenceNode) else []
            self.values[id(node)] = 1 + sum(self.values[id(child)] for child in children)
            return node

    return BoundedLoader


def _compose(text: str, file: Optional[str]):
    """The node graph of ``text`` (None for an empty document), or a :class:`YAMLRefused`."""
    import yaml

    loader = _loader_class()(text)
    try:
        return loader, loader.get_single_node()
    except YAMLRefused as err:
        raise YAMLRefused(file, err.line, err.reason) from None
    except yaml.YAMLError as err:
        raise _invalid(err, file) from None


def _invalid(err, file: Optional[str]) -> YAMLRefused:
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    problem = getattr(err, "problem", None) or str(err)
    return YAMLRefused(file, mark.line + 1 if mark is not None else None, f"invalid YAML ({problem})")


def load_yaml(text: str, file: Optional[str] = None) -> tuple[Any, dict[str, int]]:
    """The plain data of one YAML document and the line of each key path (:func:`key_lines`).
    Tags beyond YAML's own (``!!python/object``), invalid YAML, a recursive alias and aliases
    that expand past :data:`MAX_ALIAS_VALUES` values are a :class:`YAMLRefused` naming
    ``file`` and the line."""
    import yaml

    loader, node = _compose(text, file)
    try:
        if node is None:
            return None, {}
        return loader.construct_document(node), _node_lines(node)
    except yaml.YAMLError as err:
        raise _invalid(err, file) from None
    finally:
        loader.dispose()


def read_yaml(path: str | Path) -> tuple[Any, dict[str, int]]:
    """:func:`load_yaml` of the file ``path``; text that is not UTF-8 is a ``ConfigError``
    naming the file, the line and the byte. A missing file is an ``OSError`` naming it."""
    return load_yaml(read_utf8(path, ConfigError), str(path))


def key_lines(text: str) -> dict[str, int]:
    """The 1-based line of every key of a YAML document, by dotted path (``data.mlm[0].path``);
    top-level keys by their name."""
    loader, node = _compose(text, None)
    loader.dispose()
    return _node_lines(node) if node is not None else {}


def _node_lines(root) -> dict[str, int]:
    import yaml

    lines: dict[str, int] = {}

    def walk(node, path: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key, child in node.value:
                if isinstance(key, yaml.ScalarNode):
                    name = f"{path}.{key.value}" if path else key.value
                    lines.setdefault(name, key.start_mark.line + 1)
                    walk(child, name)
        elif isinstance(node, yaml.SequenceNode):
            for i, child in enumerate(node.value):
                name = f"{path}[{i}]"
                lines.setdefault(name, child.start_mark.line + 1)
                walk(child, name)

    walk(root, "")
    return lines
