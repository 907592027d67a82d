"""The Hugging Face families babelzoo converts, looked up by ``model_type`` (import) or by
babelzoo architecture name (export).

There is one family registry, :data:`babelzoo.zoo.family.FAMILIES`: each text family declares
its Hugging Face conversions (:attr:`TextFamily.hf <babelzoo.zoo.family.TextFamily.hf>`), and
the tables here are built from those declarations, so a family installed through the
``babelzoo.families`` entry points converts as a built-in one does."""

from __future__ import annotations

from ...errors import CheckpointError
from ...registry import Registry
from ..family import FAMILIES as TEXT_FAMILIES
from ..family import load_all_families
from .hf_family import HFFamily


def hf_conversions() -> list:
    """Every conversion the text families declare: each family's in its own order, the
    families in their registry's."""
    load_all_families()
    return [conversion for _, family in TEXT_FAMILIES.items() for conversion in family.hf_conversions()]


def _encoders() -> Registry[HFFamily]:
    found: Registry[HFFamily] = Registry("Hugging Face model_type")
    for conversion in hf_conversions():
        if not conversion.encoder_decoder:
            found.register(conversion, name=conversion.model_type)
    return found


#: The encoder conversions (:class:`HFFamily`) by HF ``model_type``; the encoder–decoders'
#: are :func:`babelzoo.zoo.convert.seq2seq.families`.
FAMILIES: Registry[HFFamily] = _encoders()


def family_for_model_type(model_type, where: str) -> HFFamily:
    if model_type not in FAMILIES:
        raise CheckpointError(f"{where}: {FAMILIES.unknown_message(str(model_type))}")
    return FAMILIES.get(model_type)


def family_for(name: str) -> HFFamily:
    """A family by its babelzoo name (``bert``, ``xlmr``, ``albert``), its HF ``model_type``,
    or a babelzoo architecture it covers (``mbert_base``, ``xlmr_tiny``)."""
    for _, family in FAMILIES.items():
        if name in (family.name, family.model_type) or family.matches(name):
            return family
    known = ", ".join(f.name for _, f in FAMILIES.items())
    raise CheckpointError(f"no Hugging Face family for architecture {name!r}; pass family= one of {known}")
