"""Options typed like config fields: a function's keyword options as a dataclass (an objective's
constructor, a tokenizer's ``train``, a KG embedding model's constructor), read from a recipe with
the errors of :func:`babelzoo.typed.build`; and a command's number options, held to the bounds
of a config field's annotation.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import inspect
import math
import typing
from typing import Annotated, Any, Callable, Mapping, Optional

from .typed import INT64, Range, Where, build


def option(hint: Any) -> Callable[[str], Any]:
    """An ``argparse`` ``type=`` for a number option, held to what a config field annotated
    ``hint`` (``float``, ``int``, ``Annotated[int, Range(1)]``, :data:`~babelzoo.typed.Seed`) is held to, so that
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
    """``options`` read as :func:`options_class` fields of ``func`` (:func:`~babelzoo.typed.build`: an unknown
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
