"""Multilingual sentence embeddings by knowledge distillation.

Reimers & Gurevych 2020, "Making Monolingual Sentence Embeddings Multilingual using Knowledge
Distillation", §2: a frozen teacher M embeds the source (English) side s_i of a translation pair;
the student M̂ learns to map both s_i and its translation t_i onto that vector::

    L = (1/|B|) Σ_i [ ‖M(s_i) − M̂(s_i)‖² + ‖M(s_i) − M̂(t_i)‖² ]

A sentence vector is the mean of the last layer's states over the real (non-padding) tokens of
``[CLS] X [SEP]``, as :class:`~babelzoo.evaluation.encoders.BabelEncoder` pools (``pooling`` and
``layer`` choose otherwise, for student and teacher alike). The reference implementation's
``MSELoss`` averages over the 2·d coordinates too: it is this loss divided by 2·d.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, register_objective
from .contrastive import DualEncoderObjective
from .teacher import TeacherMixin, TeacherSpec, text_config

INPUTS = ("input_ids", "attention_mask", "position_ids", "segment_ids", "language_ids")


@register_objective
class DistillSentence(TeacherMixin, DualEncoderObjective):
    """Reimers & Gurevych's multilingual distillation over translation pairs (source, target):
    the student's vectors of both sides regress onto the teacher's vector of the source.
    ``teacher``: a zoo name with pretrained weights, a checkpoint directory or a model, sharing
    the student's vocabulary and width."""

    name = "distill_sentence"
    consumes = "pair"
    from_run = ("teacher",)

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, teacher: TeacherSpec,
                 pooling: str = "mean", layer: Optional[int] = None, max_length: int = 128,
                 use_language_ids: bool = True):
        super().__init__(specials, pooling=pooling, layer=layer, max_length=max_length,
                         use_language_ids=use_language_ids)
        self.set_teacher(teacher, config, max_length)
        width, theirs = text_config(config).hidden_size, self.teacher.config.text.hidden_size
        if width != theirs:
            raise ConfigError(f"{self.name}: the student's sentence vectors must live in the teacher's space, but "
                              f"the student has hidden_size={width} and the teacher {theirs}")

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        student_src, student_tgt = self.embed(model, batch)
        half = student_src.shape[0]
        sources = {k: batch[k][:half] for k in INPUTS if k in batch}
        with torch.no_grad():
            target = self.sentence_vectors(self.teacher, sources).float()  # M(s_i)
        on_src = (target - student_src.float()).pow(2).sum(-1).mean()  # (1/|B|) Σ ‖M(s_i) − M̂(s_i)‖²
        on_tgt = (target - student_tgt.float()).pow(2).sum(-1).mean()  # (1/|B|) Σ ‖M(s_i) − M̂(t_i)‖²
        loss = on_src + on_tgt
        with torch.no_grad():
            cos = F.normalize(target, dim=-1) @ F.normalize(student_tgt.float(), dim=-1).T
            labels = torch.arange(half, device=cos.device)
            metrics = {"loss": loss.detach(), "source_loss": on_src.detach(), "target_loss": on_tgt.detach(),
                       "cosine": cos.diagonal().mean(),
                       # does M̂(t_i) lie closest to M(s_i) among the batch's translations
                       "accuracy": (cos.argmax(-1) == labels).float().mean(),
                       "truncated": batch["truncated"]}
        return Loss(loss, metrics, batch["attention_mask"].sum())
