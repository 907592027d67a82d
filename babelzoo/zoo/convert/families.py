"""The Hugging Face families babelzoo converts, looked up by ``model_type`` (import) or by
babelzoo architecture name (export)."""

from __future__ import annotations

from ...errors import CheckpointError
from ...registry import Registry
from . import albert, bert, modernbert, xlmr, xlnet
from .family import Family

FAMILIES: Registry[Family] = Registry("Hugging Face model_type")
for _family in (bert.FAMILY, xlmr.FAMILY, albert.FAMILY, modernbert.FAMILY, xlnet.FAMILY):
    FAMILIES.register(_family, name=_family.model_type)


def family_for_model_type(model_type, where: str) -> Family:
    if model_type not in FAMILIES:
        raise CheckpointError(f"{where}: {FAMILIES.unknown_message(str(model_type))}")
    return FAMILIES.get(model_type)


def family_for(name: str) -> Family:
    """A family by its babelzoo name (``bert``, ``xlmr``, ``albert``), its HF ``model_type``,
    or a babelzoo architecture it covers (``mbert_base``, ``xlmr_tiny``)."""
    for _, family in FAMILIES.items():
        if name in (family.name, family.model_type) or family.matches(name):
            return family
    known = ", ".join(f.name for _, f in FAMILIES.items())
    raise CheckpointError(f"no Hugging Face family for architecture {name!r}; pass family= one of {known}")
