"""Text encoder families: the seam a new family plugs into.

A family is a package under ``babelzoo/zoo/families/``: its ``config.py``, which imports no torch
(listing the zoo stays light), defines

* its config, a subclass of :class:`~babelzoo.zoo.config.EncoderConfig` with a ``family`` name
  and the family's own fields;
* a :class:`TextFamily` registered with :func:`register_family`, whose ``build`` names the
  function (``"module:function"``) that makes the model's parts from that config
  (:class:`TextParts`: embeddings, encoder, MLM head), and which says what the family can do
  (its Hugging Face conversions, whether it serves as a fusion model's text tower, whether it
  keeps a segment memory): code outside the family asks :func:`family_of` these questions
  instead of testing the config's class;
* its zoo entries (``@register_model``);

and its ``model.py``, the family's modules and that ``build`` function, composed from
:mod:`babelzoo.zoo.layers`. A plug-in family may lay out its two modules as it likes.

:class:`~babelzoo.zoo.model.BabelModel` composes the parts and never looks at the family; an
encoder that is a :class:`~babelzoo.zoo.layers.LayerStack` also serves fusion models. A family is
found by its name through an entry point naming its config module: babelzoo's own in
:data:`BUILTIN_FAMILIES`, another package's in the ``babelzoo.families`` group
(``mine = "my_package.mine_config"``); :data:`FAMILIES` and the model registry import it when
first asked. ``my_package/mine_config.py``::

    from dataclasses import dataclass
    from typing import ClassVar

    from babelzoo.zoo.config import EncoderConfig
    from babelzoo.zoo.model_config import ModelConfig
    from babelzoo.zoo.entries import register_model
    from babelzoo.zoo.family import TextFamily, register_family

    @dataclass(frozen=True)
    class MyConfig(EncoderConfig):
        family: ClassVar[str] = "mine"
        window: int = 64

        def encoder_flops_per_token(self, seq_len: int) -> float:
            return 2.0 * self.num_layers * self.hidden_size * self.window

    register_family(TextFamily("mine", MyConfig, build="my_package.mine:build",
                               encoder="my_package.mine:encoder"))

    @register_model
    def mine_tiny() -> ModelConfig:
        \"\"\"My family at tiny size.\"\"\"
        return ModelConfig(text=MyConfig(hidden_size=64, num_heads=2, num_layers=2, intermediate_size=128))
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Optional

from ..registry import Registry

# babelzoo's families: name -> config module, the built-in entry points of FAMILIES and of the
# model registry (imported when first asked for, so listing the zoo stays light).
BUILTIN_FAMILIES = {
    "transformer": "babelzoo.zoo.families.transformer.config",
    "rnn": "babelzoo.zoo.families.rnn.config",
    "modernbert": "babelzoo.zoo.families.modernbert.config",
    "xlnet": "babelzoo.zoo.families.xlnet.config",
    "transformer_xl": "babelzoo.zoo.families.transformer_xl.config",
    "seq2seq": "babelzoo.zoo.families.seq2seq.config",
    "cove": "babelzoo.zoo.families.cove.config",
}
ENTRY_POINT_GROUP = "babelzoo.families"


@dataclass
class TextParts:
    """What a family builds for a text model: ``embeddings`` (ids → [B, L, H]), ``encoder``
    (a :class:`~babelzoo.zoo.layers.LayerStack` or another module with the same ``forward``),
    ``lm_head`` (None without one), ``entities`` (the entity table of ERNIE fusion layers,
    :class:`~babelzoo.zoo.layers.entities.EntityFusion`, when the knowledge part asks for
    them). The embeddings name their word table ``word`` and the head its decoder ``decoder``,
    so ``tie_word_embeddings`` ties them for every family."""

    embeddings: Any
    encoder: Any
    lm_head: Optional[Any] = None
    entities: Optional[Any] = None


@dataclass(frozen=True)
class TextFamily:
    """``name`` (the config's ``family``), its ``config`` class, and the ``"module:function"``
    paths (imported when first used) of ``build(config, knowledge) -> TextParts`` (``knowledge``:
    the model's :class:`~babelzoo.zoo.model_config.KnowledgeConfig` or None, already checked by the
    text config's ``check_knowledge``) and of ``encoder(config)``, the encoder alone (an ELECTRA
    generator has no embeddings of its own). ``model`` is the model class a config of the family
    builds: :class:`~babelzoo.zoo.model.BabelModel` for an encoder, another class for a family
    whose model is not an encoder with parts (an encoder–decoder).

    What the family can do: ``hf`` names (``"module:attribute"``) its Hugging Face conversions
    (:class:`babelzoo.zoo.convert.HFFamily` objects, or the encoder–decoders'
    ``Seq2SeqFamily``), empty for none; ``fusion_tower``: its encoder serves as the text tower of
    a :class:`~babelzoo.zoo.multimodal.FusionModel` (the config has ``for_modality()`` and the
    Transformer fields a fusion layer is shaped by, and its stack runs [text; other] sequences);
    ``segment_memory``: its encoder carries a memory from segment to segment (the config's
    ``mem_len``, :func:`~babelzoo.zoo.families.transformer_xl.model.encode_segment`)."""

    name: str
    config: type
    build: str
    encoder: str
    model: str = "babelzoo.zoo.model:BabelModel"
    hf: tuple[str, ...] = ()
    fusion_tower: bool = False
    segment_memory: bool = False

    def model_class(self) -> type:
        return _resolve(self.model)

    def hf_conversions(self) -> list:
        """The family's Hugging Face conversions, in the order it declares them."""
        return [_resolve(path) for path in self.hf]

    def parts(self, config, knowledge=None) -> TextParts:
        return _resolve(self.build)(config, knowledge)

    def build_encoder(self, config):
        return _resolve(self.encoder)(config)


def _resolve(path: str):
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


FAMILIES: Registry[TextFamily] = Registry("text family", group=ENTRY_POINT_GROUP, builtin=BUILTIN_FAMILIES)


def register_family(family: TextFamily) -> TextFamily:
    FAMILIES.register(family, name=family.name)
    return family


def load_family_module(name: str) -> None:
    """Import the module that defines family ``name`` (built in, or from an entry point); an
    unknown name imports nothing."""
    if name not in FAMILIES:
        FAMILIES.load_plug_ins(name)


def load_builtin_families() -> None:
    for name in BUILTIN_FAMILIES:
        FAMILIES.get(name)


def load_all_families() -> None:
    """Import every built-in family and every family installed in the entry-point group."""
    FAMILIES.load_plug_ins()


def family_names(where: Callable[[TextFamily], bool]) -> list[str]:
    """The names of the families (built in and installed) for which ``where(family)`` holds,
    e.g. ``family_names(lambda f: f.fusion_tower)``."""
    return [name for name, family in FAMILIES.items() if where(family)]


def family_of(config) -> TextFamily:
    """The family of a text config (an :class:`~babelzoo.zoo.config.EncoderConfig`)."""
    return FAMILIES.get(type(config).family)
