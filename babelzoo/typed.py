"""Typed configs from YAML or JSON mappings: the one coercion and validation helper that every
config dataclass uses (model parts, recipes, fine-tuning tasks, masking, KG embedding training,
leaderboards, data sources).

:func:`build` makes a dataclass from a mapping. An unknown key (with a close match and every
valid key), a missing required field and a value of the wrong type are each a
:class:`~babelzoo.errors.ConfigError` naming the key path, and the file and line when the
mapping came from a YAML file (:func:`~babelzoo.yaml_files.key_lines`)::

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
annotation (``lr: Annotated[float, Range(0, low_open=True)]``) or in ``__post_init__``. A part of
a config kept as the mapping it was written as is typed by ``Annotated[dict, Section(read)]``.

Built on this module: :mod:`babelzoo.yaml_files` reads the YAML files users give,
:mod:`babelzoo.config_files` is the one loader of config files (``--set`` overrides included),
and :mod:`babelzoo.options` types a function's keyword options and a command's number options,
with the same errors.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import re
import types
import typing
from typing import Annotated, Any, Callable, Mapping, Optional, Sequence

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
    (:func:`~babelzoo.yaml_files.key_lines`)."""

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


@functools.cache
def field_hints(cls: type) -> dict[str, Any]:
    """The annotation of each field of the dataclass ``cls``, ``Annotated`` extras kept."""
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


def check_fields(obj: Any, label: Optional[str] = None, strict: bool = False) -> None:
    """Check (``strict``) or coerce every field of a dataclass instance against its annotation,
    in place (frozen dataclasses too): call it first in ``__post_init__``. Errors read
    ``<label>.<field>=<value> must be ...``; ``label`` defaults to the class name."""
    prefix = f"{label if label is not None else type(obj).__name__}."
    for name, hint in field_hints(type(obj)).items():
        where = Where(name, label=prefix)
        value = _read(getattr(obj, name), hint, where, strict)
        if not strict:
            object.__setattr__(obj, name, value)


def build(cls: type, data: Any, where: Where = Where(), what: Optional[str] = None) -> Any:
    """``cls(**data)`` with every key checked and every value coerced; errors name ``where``
    (given to the class too when it declares ``where: InitVar[Optional[Where]]``). An error the class's own validation raises about one of its fields (``Cls.field=...``) is
    given that field's file and line."""
    what = what or cls.__name__
    if not isinstance(data, Mapping):
        raise ConfigError(f"{where}: expected a mapping of {what} keys, got {type(data).__name__}")
    nest = getattr(cls, "nest_flat_keys", None)  # a class whose settings moved into groups reads the old keys
    if nest is not None:
        data, lines = nest(data, where.lines, where.path)
        where = dataclasses.replace(where, lines=lines)
    hints = field_hints(cls)
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
    if "where" in getattr(cls, "__dataclass_fields__", {}) and "where" not in names:
        values["where"] = where  # an init-only ``where``: the class reads its sections with their lines
    try:
        return cls(**values)
    except ConfigError as err:
        field = next((m[1] for m in re.finditer(r"(?:^|[\s.])(\w+)=", str(err)) if m[1] in names), None)
        location = where.key(field).location() if field else where.location()
        if not location or str(err).startswith(location):
            raise
        raise (ConfigError if isinstance(err, TypeMismatch) else type(err))(f"{location}: {err}") from None
