"""Masked-LM knowledge distillation from a frozen teacher (DistilBERT, TinyBERT).

Sanh et al. 2019, "DistilBERT, a distilled version of BERT: smaller, faster, cheaper and
lighter", §2–3; Jiao et al. 2020, "TinyBERT: Distilling BERT for Natural Language
Understanding", §3.1. Batches are BERT's masked LM (:class:`~babelzoo.objectives.mlm.MLM`:
``[CLS] X [SEP]``, 15% masked 80/10/10); teacher and student read the same corrupted ids::

    L = α_ce · T² · (1/|M|) Σ_{i∈M} KL(softmax(z_t,i/T) ‖ softmax(z_s,i/T))     DistilBERT's L_ce
      + α_mlm · L_MLM(student)                                                  its own masked LM
      + α_hidden · Σ_{m=0}^{L_s} MSE(W_m h_s^(m), h_t^(g(m)))                   TinyBERT's L_embd + L_hidn
      + α_cos · (1/|R|) Σ_{i∈R} (1 − cos(W_{L_s} h_s,i^(L_s), h_t,i^(L_t)))     DistilBERT's L_cos

z_t, z_s are the MLM logits of the teacher and the student at the masked positions M, T the
temperature. h^(0) is the embedding output, h^(m) the output of layer m; the layer map g is
uniform unless given (g(m) = ⌊m · L_t / L_s⌋, so g(0) = 0 and g(L_s) = L_t), or a list of L_s + 1
teacher indices (``layer_map``). W_m are learned linear maps owned by this objective when the
widths differ (TinyBERT's W_h), the identity otherwise. MSE and cos run over the real (non-padding)
tokens R: MSE(a, b) = (1/(|R| d_t)) Σ_{i∈R} ‖a_i − b_i‖².

Defaults follow DistilBERT's training (T = 2, α_ce = 5, α_mlm = 2, α_cos = 1, no hidden MSE); a
term with weight 0 is not computed, so a teacher without an MLM head distils through
``alpha_ce: 0`` and the hidden or cosine terms alone.
"""

from __future__ import annotations

from typing import Mapping, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..datasets.specials import SpecialIds
from ..zoo.config import ConfigError, EncoderConfig
from ..zoo.model_config import ModelConfig
from .base import Loss, register_objective
from .batching import IGNORE, encoder_inputs, unwrap
from .masking import MaskingConfig
from .mlm import MLM, token_prediction_loss
from .teacher import TeacherMixin, TeacherSpec, text_config


def uniform_layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """g(m) = ⌊m · L_t / L_s⌋ for m = 0..L_s: student hidden state m ↔ teacher hidden state g(m)."""
    return [m * teacher_layers // student_layers for m in range(student_layers + 1)]


def soft_cross_entropy(student: torch.Tensor, teacher: torch.Tensor, temperature: float) -> torch.Tensor:
    """T² · mean over rows of KL(softmax(teacher/T) ‖ softmax(student/T)), logits [N, V]."""
    log_q = F.log_softmax(student.float() / temperature, dim=-1)
    log_p = F.log_softmax(teacher.float() / temperature, dim=-1)
    kl = (log_p.exp() * (log_p - log_q)).sum(-1)
    return temperature ** 2 * kl.mean()


def masked_mse(student: torch.Tensor, teacher: torch.Tensor, real: torch.Tensor) -> torch.Tensor:
    """(1/(|R| d)) Σ_{i∈R} ‖student_i − teacher_i‖² over the real tokens R (``real``: bool [B, L])."""
    return F.mse_loss(student[real].float(), teacher[real].float())


@register_objective
class DistillMLM(TeacherMixin, MLM):
    """DistilBERT/TinyBERT distillation of ``teacher`` into the model being trained (see the
    module docstring for the loss).

    ``teacher``: a zoo name with pretrained weights, a checkpoint directory or a model; it must
    share the student's vocabulary. ``layer_map``: for each student hidden state 0..L_s (the
    embeddings, then each layer) the teacher hidden state it matches (default: uniform).
    Owns ``projections`` (W_m) when the hidden or cosine term is on and the widths differ."""

    name = "distill_mlm"
    consumes = "sentence"
    from_run = ("word_starts", "teacher")

    def __init__(self, specials: SpecialIds, config: EncoderConfig | ModelConfig, *, teacher: TeacherSpec,
                 temperature: float = 2.0, alpha_ce: float = 5.0, alpha_mlm: float = 2.0, alpha_hidden: float = 0.0,
                 alpha_cos: float = 1.0, layer_map: Optional[Sequence[int]] = None,
                 masking: MaskingConfig | Mapping | None = None, word_starts: Optional[torch.Tensor] = None,
                 max_length: int = 128, use_language_ids: bool = True):
        super().__init__(specials, masking=masking, word_starts=word_starts, max_length=max_length,
                         use_language_ids=use_language_ids)
        self.set_teacher(teacher, config, max_length)
        if not temperature > 0:
            raise ConfigError(f"{self.name}: temperature={temperature!r} must be positive")
        weights = {"alpha_ce": alpha_ce, "alpha_mlm": alpha_mlm, "alpha_hidden": alpha_hidden, "alpha_cos": alpha_cos}
        if any(w < 0 for w in weights.values()) or not any(w > 0 for w in weights.values()):
            raise ConfigError(f"{self.name}: the weights {weights} must be non-negative, at least one positive")
        self.temperature, self.alpha_ce, self.alpha_mlm = temperature, alpha_ce, alpha_mlm
        self.alpha_hidden, self.alpha_cos = alpha_hidden, alpha_cos
        student, teacher_text = text_config(config), self.teacher.config.text
        if (alpha_ce > 0 or alpha_mlm > 0) and not student.mlm_head:
            raise ConfigError(f"{self.name}: alpha_ce and alpha_mlm read the student's MLM head, which it lacks "
                              "(mlm_head=False): build it with mlm_head: true, or set both to 0")
        if alpha_ce > 0 and not teacher_text.mlm_head:
            raise ConfigError(f"{self.name}: the teacher {self.teacher.config.architecture!r} has no MLM head, so it "
                              "has no logits to distil: set alpha_ce: 0 (distil hidden states: alpha_hidden, "
                              "alpha_cos)")
        s_layers, t_layers = student.num_layers, teacher_text.num_layers
        layer_map = list(layer_map) if layer_map is not None else uniform_layer_map(s_layers, t_layers)
        if len(layer_map) != s_layers + 1 or not all(0 <= g <= t_layers for g in layer_map):
            raise ConfigError(f"{self.name}: layer_map={layer_map} must give, for each of the student's "
                              f"{s_layers + 1} hidden states (embeddings, layers 1..{s_layers}), a teacher hidden "
                              f"state in 0..{t_layers}")
        self.layer_map = layer_map
        self.projections = None
        if (alpha_hidden > 0 or alpha_cos > 0) and student.hidden_size != teacher_text.hidden_size:
            self.projections = nn.ModuleList(nn.Linear(student.hidden_size, teacher_text.hidden_size)
                                             for _ in layer_map)

    def project(self, m: int, hidden: torch.Tensor) -> torch.Tensor:
        """W_m h_s^(m) (the identity when the widths agree)."""
        return hidden if self.projections is None else self.projections[m](hidden)

    def forward(self, model: nn.Module, batch: dict[str, torch.Tensor]) -> Loss:
        hidden_states = self.alpha_hidden > 0
        out = model(**encoder_inputs(model, batch, self.use_language_ids), output_hidden_states=hidden_states)
        ref = self.teacher_outputs(batch, output_hidden_states=hidden_states)
        labels, real = batch["labels"], batch["attention_mask"].bool()
        total, metrics = 0.0, {}
        if self.alpha_mlm > 0:
            mlm, scored = token_prediction_loss(model, out.last_hidden, labels)
            total = total + self.alpha_mlm * mlm
            metrics.update(mlm_loss=mlm.detach(), accuracy=scored["accuracy"], predicted=scored["predicted"])
        if self.alpha_ce > 0:
            positions = labels.ne(IGNORE)
            z_s = unwrap(model).mlm_logits(out.last_hidden, positions)
            with torch.no_grad():
                z_t = self.teacher.mlm_logits(ref.last_hidden, positions)
            ce = soft_cross_entropy(z_s, z_t, self.temperature)
            total = total + self.alpha_ce * ce
            with torch.no_grad():
                metrics["ce_loss"] = ce.detach()
                metrics["teacher_agreement"] = (z_s.argmax(-1) == z_t.argmax(-1)).float().mean()
        if hidden_states:
            mse = sum(masked_mse(self.project(m, out.hidden_states[m]), ref.hidden_states[g], real)
                      for m, g in enumerate(self.layer_map))
            total = total + self.alpha_hidden * mse
            metrics["hidden_loss"] = mse.detach()
        if self.alpha_cos > 0:
            s = self.project(len(self.layer_map) - 1, out.last_hidden)[real].float()
            cos = (1 - F.cosine_similarity(s, ref.last_hidden[real].float(), dim=-1)).mean()
            total = total + self.alpha_cos * cos
            metrics["cos_loss"] = cos.detach()
        metrics.update(loss=total.detach(), truncated=batch["truncated"])
        return Loss(total, metrics, batch["attention_mask"].sum())
