"""The frozen teacher of knowledge distillation (``distill_mlm``, ``distill_sentence``).

A teacher is a zoo entry with published weights (``create_model(name, pretrained=True)``), a
checkpoint directory (``from_pretrained``) or a model object. It is frozen, kept in eval mode
and run under ``torch.no_grad()``. It is held outside the module tree (in a tuple), so it is not
a submodule: its weights never reach the optimizer, the trainer's checkpoints or
``objective.state_dict()``. :class:`TeacherMixin` moves it with the objective (``.to(device)``,
``.cuda()``, ``.half()``): the trainer moves the model and the objectives together, so the
teacher follows the student's device.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .batching import encoder_inputs

TeacherSpec = Any  # str (zoo name or checkpoint directory), Path or nn.Module


def load_teacher(teacher: TeacherSpec) -> nn.Module:
    """The model ``teacher`` names: a zoo entry with pretrained weights, a checkpoint
    directory, or a model given as is."""
    from ..zoo.factory import create_model, list_models
    from ..zoo.pretrained import from_pretrained

    if isinstance(teacher, nn.Module):
        return teacher
    if not isinstance(teacher, (str, Path)) or not str(teacher):
        raise ConfigError(f"teacher={teacher!r} must name a zoo model with pretrained weights, a checkpoint "
                          "directory, or be a model")
    if str(teacher) in list_models():
        return create_model(str(teacher), pretrained=True)
    if Path(teacher).is_dir():
        return from_pretrained(teacher)
    raise ConfigError(f"teacher={str(teacher)!r} is neither a registered model nor a checkpoint directory; "
                      f"models with pretrained weights: {', '.join(list_models(pretrained=True)) or 'none'}")


def text_config(config: EncoderConfig | ModelConfig) -> EncoderConfig:
    return config.text if isinstance(config, ModelConfig) else config


class TeacherMixin:
    """For an :class:`~babelzoo.objectives.base.Objective` that reads a frozen teacher:
    :meth:`set_teacher` once in ``__init__``, :attr:`teacher` and :meth:`teacher_outputs` in
    ``forward``."""

    def set_teacher(self, teacher: TeacherSpec, student: EncoderConfig | ModelConfig, max_length: int) -> None:
        model = load_teacher(teacher)
        config = getattr(model, "config", None)
        if not isinstance(config, ModelConfig):
            raise ConfigError(f"{self.name}: the teacher must be a babelzoo model (with a ModelConfig), got "
                              f"{type(model).__name__}")
        mine, theirs = text_config(student), config.text
        if mine.vocab_size != theirs.vocab_size:
            raise ConfigError(
                f"{self.name}: the teacher {config.architecture!r} has vocab_size={theirs.vocab_size}, the model "
                f"being trained vocab_size={mine.vocab_size}: teacher and student read the same token ids, so they "
                "must share the tokenizer and its vocabulary (build the student with the teacher's tokenizer, "
                "e.g. tokenizer: {from_model: <teacher>})")
        if theirs.position_embedding != "none" and max_length > theirs.max_positions:
            raise ConfigError(f"{self.name}: max_length={max_length} is longer than the teacher's "
                              f"max_positions={theirs.max_positions}")
        model.eval()
        model.requires_grad_(False)
        self._teacher: tuple[nn.Module] = (model,)  # a tuple: not a submodule

    @property
    def teacher(self) -> nn.Module:
        return self._teacher[0]

    def teacher_outputs(self, batch: dict[str, torch.Tensor], output_hidden_states: bool = False):
        """The teacher's :class:`~babelzoo.zoo.model.EncoderOutput` on ``batch``, without autograd."""
        teacher = self.teacher
        with torch.no_grad():
            return teacher(**encoder_inputs(teacher, batch, self.use_language_ids),
                           output_hidden_states=output_hidden_states)

    def _apply(self, fn, *args, **kwargs):
        # .to()/.cuda()/.half() reach the teacher too, though it is not a submodule
        if "_teacher" in self.__dict__:
            self.teacher._apply(fn, *args, **kwargs)
        return super()._apply(fn, *args, **kwargs)
