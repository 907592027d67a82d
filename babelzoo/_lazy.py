"""Lazy package attributes (PEP 562): a package lists ``{name: module}`` and each name is imported
from its module on first access, then cached in the package, so importing the package stays fast."""

from __future__ import annotations

import importlib
import sys
from typing import Callable, Mapping


def lazy_getattr(package: str, api: Mapping[str, str], relative: bool = True) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: ``api`` maps names to their modules, given
    relative to ``package`` (``"fusion"``) or, with ``relative=False``, absolute."""

    def __getattr__(name: str):
        module = api.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}" if relative else module), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__


def faiss():
    """The ``faiss`` module, imported on first use; a clear error naming the extras that install
    it (``faiss-cpu`` or ``faiss-gpu``) when neither is."""
    try:
        import faiss as module
    except ImportError:
        from .errors import BabelzooError

        class MissingFaiss(BabelzooError, ImportError):
            pass

        raise MissingFaiss("FAISS is not installed: pip install 'babelzoo[cpu]' (faiss-cpu) or, on a CUDA "
                           "machine, 'babelzoo[gpu]' (faiss-gpu)") from None
    return module
