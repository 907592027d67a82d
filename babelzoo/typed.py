"""Typed configs from YAML or JSON mappings: one coercion and validation helper for config
dataclasses.

:func:`build` makes a dataclass from a mapping. An unknown key (with a close match and every
valid key), a missing required field and a value of the wrong type are each a
:class:`~babelzoo.errors.ConfigError` naming the key path, and the file and line when the
mapping came from a YAML file (:func:`key_lines`)::

    >>> build(TextSource, {"path": "de.txt", "lang": 3}, Where("data.mlm[0]", "r.yaml", key_lines(text)))
    ConfigError: r.yaml:14 data.mlm[0].lang=3 must be a string, got int

Accepted annotations: ``bool``, ``int``, ``float`` (YAML 1.1 reads ``1e-3`` as a string and an
integer stands for a float), ``str``, ``Optional``/``Union``, ``Literal``, ``list[T]``,
``tuple[T, ...]``, ``dict``/``dict[str, T]``, ``Any`` and nested dataclasses.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any, Mapping, Optional, Sequence

from .errors import ConfigError

_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
          tuple: "a list", dict: "a mapping"}


def unknown_key(key: str, valid: Sequence[str], what: str) -> str:
    """``unknown <what> key 'x'; did you mean 'y'? Valid keys: ...``"""
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} key {key!r}{hint} Valid keys: {', '.join(valid)}"


@dataclasses.dataclass(frozen=True)
class Where:
    """Where a value came from: a file (or None), the key path inside it, the line of each key
    path (:func:`key_lines`)."""

    path: str = ""
    file: Optional[str] = None
    lines: Optional[Mapping[str, int]] = None

    def key(self, key: str | int) -> "Where":
        path = f"{self.path}[{key}]" if isinstance(key, int) else f"{self.path}.{key}" if self.path else str(key)
        return dataclasses.replace(self, path=path)

    def __str__(self) -> str:
        line = self.lines.get(self.path) if self.lines else None
        file = f"{self.file}:{line}" if self.file and line is not None else self.file or ""
        return f"{file} {self.path}".strip() or "config"


def coerce(value: Any, hint: Any, where: Where) -> Any:
    """``value`` checked against the annotation ``hint`` (see the module docstring)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for option in (a for a in args if a is not type(None)):
            try:
                return coerce(value, option, where)
            except ConfigError as err:
                errors.append(err)
        raise errors[0]
    if origin is typing.Literal:
        if value in args:
            return value
        raise ConfigError(f"{where}={value!r} must be one of {', '.join(map(repr, args))}")
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if isinstance(value, hint):
            return value
        return build(hint, value, where)
    kind = origin or hint
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if kind is float and isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    if kind is str and isinstance(value, str):
        return value
    if kind in (list, tuple) and isinstance(value, (list, tuple)):
        if not args:
            return kind(value)
        if kind is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise ConfigError(f"{where}={list(value)!r} must be a list of {len(args)} items")
            return tuple(coerce(v, a, where.key(i)) for i, (v, a) in enumerate(zip(value, args)))
        return kind(coerce(v, args[0], where.key(i)) for i, v in enumerate(value))
    if kind in (dict, Mapping, typing.Mapping) and isinstance(value, Mapping):
        if not args:
            return dict(value)
        return {coerce(k, args[0], where): coerce(v, args[1], where.key(str(k))) for k, v in value.items()}
    raise ConfigError(f"{where}={value!r} must be {_KINDS.get(kind, str(hint))}, got {type(value).__name__}")


def build(cls: type, data: Any, where: Where = Where(), what: Optional[str] = None) -> Any:
    """``cls(**data)`` with every key and value checked; errors name ``where``."""
    what = what or cls.__name__
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of {what} keys, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls) if f.init]
    for key in data:
        if key not in names:
            raise ConfigError(f"{where.key(str(key))}: {unknown_key(str(key), names, what)}")
    required = [f.name for f in dataclasses.fields(cls) if f.init and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING]
    missing = [name for name in required if name not in data]
    if missing:
        raise ConfigError(f"{where}: {what} needs {', '.join(missing)}")
    values = {key: coerce(value, hints[key], where.key(key)) for key, value in data.items()}
    return cls(**values)


def key_lines(text: str) -> dict[str, int]:
    """The 1-based line of every key of a YAML document, by dotted path (``data.mlm[0].path``);
    top-level keys by their name."""
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

    walk(yaml.compose(text), "")
    return lines
