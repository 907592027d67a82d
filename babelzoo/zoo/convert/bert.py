"""BERT (Devlin et al. 2019): ``BertModel``, ``BertForMaskedLM``, ``BertForPreTraining``, and the
fine-tuned ``BertForSequenceClassification`` / ``BertForTokenClassification``.

Head-model checkpoints prefix the encoder with ``bert.`` and keep the MLM head under
``cls.predictions``; ``BertModel`` checkpoints have no prefix and carry the pooler. The sequence
classifier is one Linear on the pooler's output; the token classifier one Linear per token, on an
encoder without pooler.
"""

from __future__ import annotations

from ..families.transformer.config import TransformerConfig
from .hf_family import COMMON_REQUIRED, HFFamily, TaskClass, common_text_from_hf, common_text_to_hf
from .keymap import KeyMap

KEYS = KeyMap(
    base={
        "embeddings.word_embeddings.weight": "embeddings.word.weight",
        "embeddings.position_embeddings.weight": "embeddings.position.weight",
        "embeddings.token_type_embeddings.weight": "embeddings.segment.weight",
        "embeddings.LayerNorm.{p}": "embeddings.norm.{p}",
        ("encoder.layer.{i}.attention.self.query.{p}", "encoder.layer.{i}.attention.self.key.{p}",
         "encoder.layer.{i}.attention.self.value.{p}"): "encoder.layers.{i}.attention.qkv.{p}",
        "encoder.layer.{i}.attention.output.dense.{p}": "encoder.layers.{i}.attention.out.{p}",
        "encoder.layer.{i}.attention.output.LayerNorm.{p}": "encoder.layers.{i}.attention_norm.{p}",
        "encoder.layer.{i}.intermediate.dense.{p}": "encoder.layers.{i}.ffn.up.{p}",
        "encoder.layer.{i}.output.dense.{p}": "encoder.layers.{i}.ffn.down.{p}",
        "encoder.layer.{i}.output.LayerNorm.{p}": "encoder.layers.{i}.ffn_norm.{p}",
    },
    pooler={"pooler.dense.{p}": "pooler.dense.{p}"},
    mlm={
        "cls.predictions.transform.dense.{p}": "lm_head.dense.{p}",
        "cls.predictions.transform.LayerNorm.{p}": "lm_head.norm.{p}",
        "cls.predictions.bias": "lm_head.bias",
    },
    decoder={"cls.predictions.decoder.weight": "lm_head.decoder.weight"},
)

# BertConfig's defaults, used where an older config.json leaves a field out.
DEFAULTS = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1, max_position_embeddings=512, type_vocab_size=2,
                initializer_range=0.02, layer_norm_eps=1e-12, pad_token_id=0)


def text_from_hf(hf, where: str) -> dict:
    return common_text_from_hf(hf, DEFAULTS, where)


def text_to_hf(text: TransformerConfig) -> dict:
    return common_text_to_hf(text)


TASKS = (
    TaskClass("BertForSequenceClassification", "sequence_classification", {"classifier.{p}": "head.out.{p}"},
              pooler=True, head={"pooling": "pooler", "hidden_layer": False}),
    TaskClass("BertForTokenClassification", "token_classification", {"classifier.{p}": "head.out.{p}"},
              pooler=False),
)

FAMILY = HFFamily(
    name="bert", model_type="bert", keys=KEYS, prefix="bert.",
    base_class="BertModel", mlm_class="BertForMaskedLM",
    classes=("BertModel", "BertForMaskedLM", "BertForPreTraining"),
    patterns=("bert", "bert_*", "mbert", "mbert_*"),
    defaults=DEFAULTS, text_from_hf=text_from_hf, text_to_hf=text_to_hf,
    required={**COMMON_REQUIRED,
              "embedding_size is None (no factorised embedding)": lambda t: t.embedding_dim == t.hidden_size,
              "share_layers is False": lambda t: not t.share_layers,
              "position_offset == 0": lambda t: t.position_offset == 0},
    tied={"cls.predictions.decoder.bias": "cls.predictions.bias"},
    heads_not_kept=("cls.seq_relationship.",),
    tasks=TASKS,
    tokenizer=("wordpiece", "vocab.txt"),
)
