"""XLM-R (Conneau et al. 2020): ``XLMRobertaModel``, ``XLMRobertaForMaskedLM`` and the fine-tuned
``XLMRobertaForSequenceClassification`` / ``XLMRobertaForTokenClassification``.

RoBERTa's layout: position ids start at ``pad_token_id + 1`` (padding sits at ``pad_token_id``),
so ``max_position_embeddings`` counts that offset (514 rows for 512 tokens); the encoder is
prefixed ``roberta.`` in head-model checkpoints and the MLM head is ``lm_head``, whose activation
is always the exact GELU. Neither task class keeps the pooler: the sequence classifier reads the
first token through its own dense + tanh layer (``classifier.dense``, then ``classifier.out_proj``).
"""

from __future__ import annotations

from ..families.transformer.config import TransformerConfig
from .bert import KEYS as BERT_KEYS
from .hf_family import COMMON_REQUIRED, HFFamily, TaskClass, common_text_from_hf, common_text_to_hf
from .keymap import KeyMap

KEYS = KeyMap(
    base=BERT_KEYS.base,  # RoBERTa keeps BERT's encoder names
    pooler={"pooler.dense.{p}": "pooler.dense.{p}"},
    mlm={
        "lm_head.dense.{p}": "lm_head.dense.{p}",
        "lm_head.layer_norm.{p}": "lm_head.norm.{p}",
        "lm_head.bias": "lm_head.bias",
    },
    decoder={"lm_head.decoder.weight": "lm_head.decoder.weight"},
)

DEFAULTS = dict(vocab_size=250002, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.1,
                attention_probs_dropout_prob=0.1, max_position_embeddings=514, type_vocab_size=1,
                initializer_range=0.02, layer_norm_eps=1e-5, pad_token_id=1)


def text_from_hf(hf, where: str) -> dict:
    pad = hf.get("pad_token_id", DEFAULTS["pad_token_id"])
    return common_text_from_hf(hf, DEFAULTS, where, position_offset=pad + 1)


def text_to_hf(text: TransformerConfig) -> dict:
    return {**common_text_to_hf(text), "bos_token_id": 0, "eos_token_id": 2}


TASKS = (
    TaskClass("XLMRobertaForSequenceClassification", "sequence_classification",
              {"classifier.dense.{p}": "head.dense.{p}", "classifier.out_proj.{p}": "head.out.{p}"},
              pooler=False, head={"pooling": "cls", "hidden_layer": True}),
    TaskClass("XLMRobertaForTokenClassification", "token_classification", {"classifier.{p}": "head.out.{p}"},
              pooler=False),
)

FAMILY = HFFamily(
    name="xlmr", model_type="xlm-roberta", keys=KEYS, prefix="roberta.",
    base_class="XLMRobertaModel", mlm_class="XLMRobertaForMaskedLM",
    classes=("XLMRobertaModel", "XLMRobertaForMaskedLM"),
    patterns=("xlmr", "xlmr_*"),
    defaults=DEFAULTS, text_from_hf=text_from_hf, text_to_hf=text_to_hf,
    required={**COMMON_REQUIRED,
              "embedding_size is None (no factorised embedding)": lambda t: t.embedding_dim == t.hidden_size,
              "share_layers is False": lambda t: not t.share_layers,
              "position_offset == pad_token_id + 1": lambda t: t.position_offset == t.pad_token_id + 1,
              "activation == 'gelu' when there is an MLM head (RoBERTa's head always uses exact GELU)":
                  lambda t: not t.mlm_head or t.activation == "gelu"},
    tied={"lm_head.decoder.bias": "lm_head.bias"},
    tasks=TASKS,
    tokenizer=("sentencepiece", "sentencepiece.bpe.model"),
)
