"""A griffe extension for the API reference: babelzoo's docstrings use reST roles
(``:class:`~babelzoo.zoo.config.EncoderConfig```, ``:meth:`prepare```), which Markdown shows as
they are written. Each becomes an optional cross-reference: a link where the target is on a
reference page, its name in code where it is not (an object outside the reference, another
library's), so a role never breaks the strict build."""

from __future__ import annotations

import re

import griffe

ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|data|attr|exc|obj):`(~?)([^`<]+?)`")


def target(path: str, obj: griffe.Object) -> str:
    """The full dotted path ``path`` names, seen from ``obj``'s docstring."""
    module = obj if obj.is_module else obj.module
    if path.startswith("."):  # relative to the docstring's package
        package = module.path if module.is_package else module.path.rpartition(".")[0]
        return package + path
    if "." in path.split("(")[0] and path.split(".")[0] in ("babelzoo", "torch", "numpy", "transformers"):
        return path
    owner = obj if obj.is_class else obj.parent if obj.parent is not None and obj.parent.is_class else module
    return f"{owner.path}.{path}"


def link(match: re.Match, obj: griffe.Object) -> str:
    short, path = match.group(1), match.group(2).strip().removesuffix("()")
    title = path.rsplit(".", 1)[-1] if short else path.lstrip(".")
    return f'<autoref identifier="{target(path, obj)}" optional><code>{title}</code></autoref>'


class ReSTRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(lambda match: link(match, obj), obj.docstring.value)
