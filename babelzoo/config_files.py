"""The one loader of YAML config files (pre-training and fine-tuning recipes, leaderboards, KG
embedding recipes): :func:`load_config` reads a file (:func:`~babelzoo.yaml_files.read_yaml`),
applies ``--set key=value`` overrides (:func:`set_keys`) and builds the typed config
(:func:`~babelzoo.typed.build`), so that a mistake names the file, the line and the key path.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Mapping, NamedTuple, Optional, Sequence

from .errors import ConfigError
from .typed import Where, build, field_hints, unknown_key
from .yaml_files import YAMLRefused, load_yaml, read_yaml

class Loaded(NamedTuple):
    """A config read by :func:`load_config`, and where each of its keys was read (``where.lines``
    leaves out the keys a ``--set`` override changed: their values are not on the file's line)."""

    config: Any
    where: Where


def load_config(cls: type, path: str | Path, overrides: Sequence[str] = (), *, what: Optional[str] = None,
                kind: str = "config", label: Optional[str] = None) -> Loaded:
    """The one loader of YAML config files (pre-training and fine-tuning recipes, leaderboards,
    KG embedding recipes): the file read by :func:`~babelzoo.yaml_files.read_yaml`, ``key=value`` ``overrides``
    applied (:func:`set_keys`), and the result built into ``cls`` by :func:`~babelzoo.typed.build`, every
    section typed. A mistake in the file is an error naming the file, the line and the key path
    (``r.yaml:7 TrainConfig.data.mlm[0].lang=3 must be a string, got int``); one in an override
    names the key. ``kind`` names the file in messages (``recipe``), ``what`` its keys
    (``TrainConfig``), ``label`` the start of each key path (by default, the class name)."""
    what = what or cls.__name__
    data, lines = read_mapping(path, what, kind)
    nest = getattr(cls, "nest_flat_keys", None)  # settings that moved into groups, spelt as before
    if nest is not None:
        data, lines = nest(data, lines)
    where = Where(file=str(path), lines=lines, label=f"{label or cls.__name__}.")
    config = build(cls, data, where, what=what)  # the file's own mistakes, with their lines
    if not overrides:
        return Loaded(config, where)
    changed = [moved_key(cls, item.split("=", 1)[0].strip()) for item in overrides]
    kept = {key: line for key, line in lines.items()
            if not any(key == c or key.startswith((f"{c}.", f"{c}[")) for c in changed)}
    where = dataclasses.replace(where, lines=kept)
    return Loaded(build(cls, set_keys(cls, data, overrides, what), where, what=what), where)


def read_mapping(path: str | Path, what: str, kind: str = "config") -> tuple[dict[str, Any], dict[str, int]]:
    """The raw mapping of a YAML config file (an empty file: ``{}``) and the line of each key
    path (:func:`~babelzoo.yaml_files.read_yaml`); a missing file or a document that is not a mapping is an error."""
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
    data, hints = dict(data), field_hints(cls)
    nest = getattr(cls, "nest_flat_keys", None)  # settings that moved into groups: the old keys still set them
    if nest is not None:
        data = nest(data)[0]
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"--set {item!r}: expected key=value")
        key, raw = item.split("=", 1)
        key = moved_key(cls, key.strip())
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


def moved_key(cls: type, key: str) -> str:
    """``key`` (a dotted ``--set`` key) as ``cls`` spells it now: a setting that moved into a group
    (``cls.moved_keys``, e.g. ``lr`` → ``optim.lr``) under its new path."""
    top, dot, rest = key.partition(".")
    moved = getattr(cls, "moved_keys", {}).get(top)
    return moved + dot + rest if moved else key


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
