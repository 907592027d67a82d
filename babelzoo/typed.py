"""Typed configs from YAML or JSON mappings: the one coercion and validation helper that every
config dataclass uses (model parts, recipes, fine-tuning tasks, masking, KG embedding training,
leaderboards, data sources).

:func:`build` makes a dataclass from a mapping. An unknown key (with a close match and every
valid key), a missing required field and a value of the wrong type are each a
:class:`~babelzoo.errors.ConfigError` naming the key path, and the file and line when the
mapping came from a YAML file (:func:`key_lines`)::

    >>> build(TextSource, {"path": "de.txt", "lang": 3}, Where("data.mlm[0]", "r.yaml", key_lines(text)))
    ConfigError: r.yaml:14 data.mlm[0].lang=3 must be a string, got int

Values are read two ways. :func:`coerce` accepts the spellings YAML produces (``1e-3`` is a
string in YAML 1.1, an integer stands for a float, a list for a tuple) and converts them;
:func:`check` (``strict``) accepts a value only of the declared type (an int for a float) and
never converts, for files babelzoo writes itself (``config.json``). A dataclass checks its own
fields with :func:`check_fields` in ``__post_init__``, so a config built in Python is held to
the same types as one read from a file.

Accepted annotations: ``bool``, ``int``, ``float``, ``str``, ``Optional``/``Union``, ``Literal``,
``list[T]``, ``tuple[T, ...]``, ``tuple[A, B]``, ``dict``/``dict[str, T]``, ``Any``, nested
dataclasses, and ``Annotated[T, Range(...)]`` for a number with bounds.

Numbers are held to what the code downstream can use, whatever the field: a ``float`` is finite
(NaN or infinity in a learning rate trains to NaN weights, in a clipping norm switches clipping
off) unless its annotation says ``Range(finite=False)``; an ``int`` fits in 64 bits (a tensor,
numpy); a :data:`Seed` is one that torch and numpy both accept. A field's own bounds go in its
annotation (``lr: Annotated[float, Range(0, low_open=True)]``) or in ``__post_init__``.

Config files (recipes, leaderboards, KG embedding recipes) are read by one loader,
:func:`load_config` (``--set`` overrides by :func:`set_keys`). A part of a config kept as the
mapping it was written as is typed by ``Annotated[dict, Section(read)]``, and a function's keyword
options (an objective's constructor) by :func:`options_class` / :func:`read_options`, with the
same errors.

YAML files given by users are read only through :func:`read_yaml` / :func:`load_yaml`: plain data
(no ``!!python`` tags), and a document whose aliases would expand past :data:`MAX_ALIAS_VALUES`
values (a "billion laughs" file), refers to itself, or nests deeper than :data:`MAX_DEPTH` is an
error naming the file and line, found before anything is expanded.
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import functools
import inspect
import math
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Callable, Mapping, NamedTuple, Optional, Sequence

from ._files import read_utf8
from .errors import ConfigError

_KINDS = {int: "an integer", float: "a number", str: "a string", bool: "true or false", list: "a list",
          tuple: "a list", dict: "a mapping", type(None): "null"}


class TypeMismatch(ConfigError):
    """A value of the wrong type (``expected`` names the type)."""

    def __init__(self, where: "Where", value: Any, expected: str):
        super().__init__(f"{where}={value!r} must be {expected}, got {type(value).__name__}")
        self.where, self.value, self.expected = where, value, expected


def unknown_key(key: str, valid: Sequence[str], what: str) -> str:
    """``unknown <what> key 'x'; did you mean 'y'? Valid keys: ...``"""
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"unknown {what} key {key!r}{hint} Valid keys: {', '.join(valid)}"


@dataclasses.dataclass(frozen=True)
class Where:
    """Where a value came from: its key path (``data.mlm[0].lang``), shown after ``label``
    (``TrainConfig.``); the file it was read from (or None) and the line of each key path
    (:func:`key_lines`)."""

    path: str = ""
    file: Optional[str] = None
    lines: Optional[Mapping[str, int]] = None
    label: str = ""

    def key(self, key: str | int) -> "Where":
        path = f"{self.path}[{key}]" if isinstance(key, int) else f"{self.path}.{key}" if self.path else str(key)
        return dataclasses.replace(self, path=path)

    def location(self) -> str:
        """``file:line`` (or ``file``, or ``""``) of this key path."""
        line = self.lines.get(self.path) if self.lines else None
        return f"{self.file}:{line}" if self.file and line is not None else self.file or ""

    def __str__(self) -> str:
        return f"{self.location()} {self.label}{self.path}".strip() or "config"


@dataclasses.dataclass(frozen=True)
class Range:
    """Bounds of a number, in its annotation: ``Annotated[float, Range(0, 1, high_open=True)]``
    takes 0 ≤ x < 1. ``finite=False`` lets a float be ±infinity (never NaN)."""

    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    finite: bool = True

    def holds(self, value: float) -> bool:
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def __str__(self) -> str:
        if self.high is None and self.low == 0:
            return "positive" if self.low_open else "non-negative"
        if self.high is None:
            return f"{'above' if self.low_open else 'at least'} {self.low}"
        if self.low is None:
            return f"{'below' if self.high_open else 'at most'} {self.high}"
        return f"in {'(' if self.low_open else '['}{self.low}, {self.high}{')' if self.high_open else ']'}"


@dataclasses.dataclass(frozen=True)
class Section:
    """In a field's annotation, ``Annotated[dict, Section(read)]``: a part of a config kept as
    the mapping it was written as (what ``--set`` reaches into, what ``to_dict`` and a run's
    identity hold) and read by ``read(value, where)`` into its typed dataclass whenever the
    config is built, so that a mistake in it is found when the file is loaded, named with its
    file, line and key. The code that uses the part reads it with the same ``read``."""

    read: Callable[[Any, "Where"], Any]


INT64 = Range(-2 ** 63, 2 ** 63 - 1)  # every int field: what a tensor or a numpy array holds
Seed = Annotated[int, Range(0, 2 ** 32 - 1)]  # np.random.seed takes [0, 2**32); torch.manual_seed more


def _bounded(value: Any, hint: Any, where: Where, strict: bool) -> Any:
    """``Annotated[T, Range(...), ...]``: the value read as ``T``, then held to each range;
    ``Annotated[T, Section(read)]``: the value read as ``T``, then by ``read``."""
    inner, *extras = typing.get_args(hint)
    sections = [s for s in extras if isinstance(s, Section)]
    if sections:
        value = _read(value, inner, where, strict)
        for section in sections:
            section.read(value, where)
        return value
    ranges = [r for r in extras if isinstance(r, Range)]

    def check(number: Any) -> Any:
        if isinstance(number, (int, float)) and not isinstance(number, bool) and not math.isnan(number):
            for bounds in ranges:
                if not bounds.holds(number):
                    raise ConfigError(f"{where}={number!r} must be {bounds}")
        return number

    # the field's own range first: it says more than the bounds every number has
    return check(_read(check(value), inner, where, strict, finite=all(r.finite for r in ranges)))


def _integer(value: int, where: Where) -> int:
    """An int field's value, within 64 bits (what a tensor or a numpy array holds)."""
    if not INT64.holds(value):
        raise ConfigError(f"{where}={value!r} must be an integer from {INT64.low} to {INT64.high}")
    return value


def _real(value: int | float | str, where: Where, finite: bool) -> float:
    """A float field's value as a float: never NaN, and finite unless ``finite`` is False."""
    try:
        number = float(value)
    except OverflowError:  # an int beyond any float
        number = math.inf
    if math.isnan(number) or (finite and math.isinf(number)):
        raise ConfigError(f"{where}={value!r} must be a finite number")
    return number


def option(hint: Any) -> Callable[[str], Any]:
    """An ``argparse`` ``type=`` for a number option, held to what a config field annotated
    ``hint`` (``float``, ``int``, ``Annotated[int, Range(1)]``, :data:`Seed`) is held to, so that
    ``--lr nan`` or ``--top -5`` is refused by the parser, naming the option, before anything is
    read: ``argument --lr: 'nan' must be a finite number``."""
    import argparse

    kind, *extras = typing.get_args(hint) if typing.get_origin(hint) is Annotated else (hint,)
    ranges = [r for r in extras if isinstance(r, Range)]
    finite = all(r.finite for r in ranges)

    def parse(text: str) -> Any:
        value = kind(text)  # a ValueError: argparse says "invalid int value: 'x'"
        if kind is float and (math.isnan(value) or (finite and math.isinf(value))):
            raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
        for bounds in ranges + ([INT64] if kind is int else []):  # the option's own range says more
            if not bounds.holds(value):
                raise argparse.ArgumentTypeError(f"{text!r} must be {bounds}")
        return value

    parse.__name__ = kind.__name__
    return parse


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: hints[f.name] for f in dataclasses.fields(cls)}


def _union(value: Any, hint: Any, where: Where, strict: bool, finite: bool) -> Any:
    args = typing.get_args(hint)
    if value is None and type(None) in args:
        return None
    mismatches = []
    for option in (a for a in args if a is not type(None)):
        try:
            return _read(value, option, where, strict, finite)
        except TypeMismatch as err:
            mismatches.append(err.expected)
    expected = " or ".join([*mismatches, "null"] if type(None) in args else mismatches)
    raise TypeMismatch(where, value, expected)


def _read(value: Any, hint: Any, where: Where, strict: bool, finite: bool = True) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin is Annotated:
        return _bounded(value, hint, where, strict)
    if origin in (typing.Union, types.UnionType):
        return _union(value, hint, where, strict, finite)
    if origin is typing.Literal:
        if value in args:
            return value
        raise ConfigError(f"{where}={value!r} must be one of {', '.join(map(repr, args))}")
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        if isinstance(value, hint):
            return value
        if strict or not isinstance(value, Mapping):
            raise TypeMismatch(where, value, f"a mapping of {hint.__name__} fields")
        return build(hint, value, where)
    kind = origin or hint
    if kind is type(None) and value is None:
        return None
    if kind is bool and isinstance(value, bool):
        return value
    if kind is int and isinstance(value, int) and not isinstance(value, bool):
        return _integer(value, where)
    if kind is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        number = _real(value, where, finite)
        return value if strict else number
    if not strict:
        if kind is int and isinstance(value, float) and value.is_integer():
            return _integer(int(value), where)
        if kind is float and isinstance(value, str):
            try:
                return _real(value, where, finite)
            except ValueError as err:
                if isinstance(err, ConfigError):
                    raise
    if kind is str and isinstance(value, str):
        return value
    sequence = (tuple,) if strict and kind is tuple else (list, tuple)
    if kind in (list, tuple) and isinstance(value, sequence):
        if not args:
            return value if strict else kind(value)
        if kind is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            if len(args) != len(value):
                raise ConfigError(f"{where}={value!r} must be a list of {len(args)} items")
            items = [_read(v, a, where.key(i), strict) for i, (v, a) in enumerate(zip(value, args))]
        else:
            items = [_read(v, args[0], where.key(i), strict) for i, v in enumerate(value)]
        return value if strict else kind(items)
    if kind in (dict, Mapping, typing.Mapping) and isinstance(value, Mapping):
        if not args:
            return value if strict else dict(value)
        items = {_read(k, args[0], where, strict): _read(v, args[1], where.key(str(k)), strict)
                 for k, v in value.items()}
        return value if strict else items
    if isinstance(kind, type) and kind not in _KINDS:  # any other class: an instance of it
        if isinstance(value, kind):
            return value
        raise TypeMismatch(where, value, f"a {kind.__name__}")
    raise TypeMismatch(where, value, _kind_name(hint))


def _kind_name(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _kind_name(args[0])
    if origin in (list, tuple) and args and (origin is list or args[-1] is Ellipsis):
        return f"a list of {_kind_name(args[0]).removeprefix('an ').removeprefix('a ')}s"
    return _KINDS.get(origin or hint, getattr(hint, "__name__", str(hint)))


def coerce(value: Any, hint: Any, where: Where) -> Any:
    """``value`` checked against the annotation ``hint`` and converted from YAML's spellings."""
    return _read(value, hint, where, strict=False)


def check(value: Any, hint: Any, where: Where) -> Any:
    """``value`` checked against ``hint`` exactly (an int passes for a float); returned unchanged."""
    return _read(value, hint, where, strict=True)


@functools.cache
def options_class(func: Callable, name: str, skip: Optional[tuple[str, ...]] = None) -> type:
    """The options of ``func`` (an objective's constructor, a tokenizer's ``train``, a KG
    embedding model's constructor) as a frozen dataclass ``<name>Options``, made once: one field
    per keyword-only parameter (given ``skip``, the names of the arguments the caller supplies,
    per named parameter but those), typed by its annotation and defaulting to its default; a
    parameter without a default is a required field. Annotations that do not resolve (a
    plug-in's) leave their fields ``Any``."""
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except (NameError, TypeError):
        hints = {}
    named = (inspect.Parameter.KEYWORD_ONLY,) if skip is None else \
        (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    fields = []
    for param in inspect.signature(func).parameters.values():
        if param.kind not in named or param.name in (skip or ()) or param.name in ("self", "cls"):
            continue
        if param.default is inspect.Parameter.empty:
            spec = dataclasses.field()
        elif type(param.default).__hash__ is None:  # a mutable default: each instance its own copy
            spec = dataclasses.field(default_factory=functools.partial(copy.deepcopy, param.default))
        else:
            spec = dataclasses.field(default=param.default)
        fields.append((param.name, hints.get(param.name, Any), spec))
    return dataclasses.make_dataclass(f"{name}Options", fields, frozen=True, kw_only=True)


def read_options(func: Callable, options: Mapping[str, Any], where: Where, name: str,
                 skip: Optional[tuple[str, ...]] = None) -> dict[str, Any]:
    """``options`` read as :func:`options_class` fields of ``func`` (:func:`build`: an unknown
    option with a close match, a wrong type, a missing required option, each naming ``where``
    and the option): the options given, typed. When ``func`` takes ``**kwargs``, an option it
    does not name is passed on as given."""
    cls = options_class(func, name, skip)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(func).parameters.values()):
        known = {f.name for f in dataclasses.fields(cls)}
        extra = {key: value for key, value in options.items() if key not in known}
        options = {key: value for key, value in options.items() if key in known}
    else:
        extra = {}
    built = build(cls, options, where, what=f"{name} option")
    return {**{key: getattr(built, key) for key in options}, **extra}


def check_fields(obj: Any, label: Optional[str] = None, strict: bool = False) -> None:
    """Check (``strict``) or coerce every field of a dataclass instance against its annotation,
    in place (frozen dataclasses too): call it first in ``__post_init__``. Errors read
    ``<label>.<field>=<value> must be ...``; ``label`` defaults to the class name."""
    prefix = f"{label if label is not None else type(obj).__name__}."
    for name, hint in _hints(type(obj)).items():
        where = Where(name, label=prefix)
        value = _read(getattr(obj, name), hint, where, strict)
        if not strict:
            object.__setattr__(obj, name, value)


def build(cls: type, data: Any, where: Where = Where(), what: Optional[str] = None) -> Any:
    """``cls(**data)`` with every key checked and every value coerced; errors name ``where``.
    An error the class's own validation raises about one of its fields (``Cls.field=...``) is
    given that field's file and line."""
    what = what or cls.__name__
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of {what} keys, got {type(data).__name__}")
    hints = _hints(cls)
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
    try:
        return cls(**values)
    except ConfigError as err:
        field = next((m[1] for m in re.finditer(r"(?:^|[\s.])(\w+)=", str(err)) if m[1] in names), None)
        location = where.key(field).location() if field else where.location()
        if not location or str(err).startswith(location):
            raise
        raise (ConfigError if isinstance(err, TypeMismatch) else type(err))(f"{location}: {err}") from None


# --- YAML files ------------------------------------------------------------------------------

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


# --- the one loader of config files ----------------------------------------------------------

class Loaded(NamedTuple):
    """A config read by :func:`load_config`, and where each of its keys was read (``where.lines``
    leaves out the keys a ``--set`` override changed: their values are not on the file's line)."""

    config: Any
    where: Where


def load_config(cls: type, path: str | Path, overrides: Sequence[str] = (), *, what: Optional[str] = None,
                kind: str = "config", label: Optional[str] = None) -> Loaded:
    """The one loader of YAML config files (pre-training and fine-tuning recipes, leaderboards,
    KG embedding recipes): the file read by :func:`read_yaml`, ``key=value`` ``overrides``
    applied (:func:`set_keys`), and the result built into ``cls`` by :func:`build`, every
    section typed. A mistake in the file is an error naming the file, the line and the key path
    (``r.yaml:7 TrainConfig.data.mlm[0].lang=3 must be a string, got int``); one in an override
    names the key. ``kind`` names the file in messages (``recipe``), ``what`` its keys
    (``TrainConfig``), ``label`` the start of each key path (by default, the class name)."""
    what = what or cls.__name__
    data, lines = read_mapping(path, what, kind)
    where = Where(file=str(path), lines=lines, label=f"{label or cls.__name__}.")
    config = build(cls, data, where, what=what)  # the file's own mistakes, with their lines
    if not overrides:
        return Loaded(config, where)
    changed = [item.split("=", 1)[0].strip() for item in overrides]
    kept = {key: line for key, line in lines.items()
            if not any(key == c or key.startswith((f"{c}.", f"{c}[")) for c in changed)}
    where = dataclasses.replace(where, lines=kept)
    return Loaded(build(cls, set_keys(cls, data, overrides, what), where, what=what), where)


def read_mapping(path: str | Path, what: str, kind: str = "config") -> tuple[dict[str, Any], dict[str, int]]:
    """The raw mapping of a YAML config file (an empty file: ``{}``) and the line of each key
    path (:func:`read_yaml`); a missing file or a document that is not a mapping is an error."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError(f"{path}: a folder; a {kind} is a YAML file")
    if not path.is_file():
        raise ConfigError(f"{path}: no such {kind} file")
    data, lines = read_yaml(path)
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a {kind} must be a mapping of {what} keys, got {type(data).__name__}")
    return data, lines


def set_keys(cls: type, data: Mapping[str, Any], overrides: Sequence[str], what: Optional[str] = None) -> dict:
    """``data`` (a mapping of ``cls`` fields) with ``key=value`` strings applied: values parsed
    as YAML (``lr=5e-4``, ``betas=[0.9,0.98]``, ``progress=false``); ``a.b.c=v`` sets a key
    inside the field ``a`` when ``a`` is a mapping or a typed section
    (``objectives.mlm.masking.probability=0.2``)."""
    what = what or cls.__name__
    data, hints = dict(data), _hints(cls)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        try:
            value = load_yaml(raw)[0] if raw.strip() else ""
        except YAMLRefused as err:
            raise ConfigError(f"--set {item!r}: {err.reason}") from None
        top, *rest = key.split(".")
        if top not in hints:
            raise ConfigError(f"--set {item!r}: {unknown_key(top, list(hints), what)}")
        if not rest:
            data[top] = value
            continue
        if not _holds_keys(hints[top]):
            raise ConfigError(f"--set {item!r}: {what}.{top} is not a mapping, so {key!r} cannot be set")
        target = data[top] = _copy_mapping(data.get(top) or {})
        for part in rest[:-1]:
            child = target.get(part)
            if child is None:
                child = target[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(f"--set {item!r}: {part!r} holds {child!r}, not a mapping")
            target = child
        target[rest[-1]] = value
    return data


def _holds_keys(hint: Any) -> bool:
    """A field a dotted ``--set`` key reaches into: a mapping or a dataclass (or Optional one)."""
    if typing.get_origin(hint) is Annotated:
        return _holds_keys(typing.get_args(hint)[0])
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_holds_keys(a) for a in typing.get_args(hint) if a is not type(None))
    kind = typing.get_origin(hint) or hint
    return kind in (dict, Mapping, typing.Mapping) or (isinstance(hint, type) and dataclasses.is_dataclass(hint))


def _copy_mapping(value: Mapping) -> dict:
    return {k: _copy_mapping(v) if isinstance(v, Mapping) else v for k, v in value.items()}
