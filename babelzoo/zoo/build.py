"""The module for a config: :func:`build_model` (a fusion model, or the model class of the text
config's family) and :func:`with_head` (a model with a fresh task head on its encoder).

Below the checkpoint loader (:mod:`babelzoo.zoo.pretrained`) and the factory, above every model
class."""

from __future__ import annotations

from .checkpoint_io import load_state_strict, model_state
from .model_config import HeadConfig, ModelConfig
from .family import family_of
from .multimodal import FusionModel
from .sentences import share_tokenizer


def build_model(config: ModelConfig):
    """The module for a config: a fusion model when the config has a fusion part, otherwise the
    model class of the text config's family (a :class:`BabelModel` whose parts come from the
    family; an encoder–decoder family's own model). A vision or audio part without a fusion
    part is a :class:`~babelzoo.errors.ConfigError`
    (:meth:`~babelzoo.zoo.model_config.ModelConfig.check_towers`)."""
    if config.fusion is not None:
        return FusionModel(config)
    config.check_towers()
    return family_of(config.text).model_class()(config)


def with_head(model, head: HeadConfig | dict):
    """A new model: ``model``'s config with ``head`` (a :class:`HeadConfig` or a dict of its
    fields), the encoder's weights copied strictly and the head freshly initialised. A head the
    model already had is replaced. The tokenizer comes along::

        base = create_model("multilingual_e5_small", pretrained=True)
        model = with_head(base, {"kind": "token_classification", "labels": UPOS_TAGS})
    """
    if isinstance(head, dict):
        head = HeadConfig.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in head.items()})
    new = build_model(model.config.override(head=head))
    encoder = {k: v for k, v in model_state(model).items() if not k.startswith("head.")}
    state = {**encoder, **{k: v for k, v in model_state(new).items() if k.startswith("head.")}}
    load_state_strict(new, state, f"{model.config.architecture} encoder")
    share_tokenizer(model, new)
    return new
