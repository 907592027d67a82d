"""Import a Hugging Face model directory into a :class:`BabelModel`, strictly.

The checkpoint's keys are checked against the shapes its own ``config.json`` implies (so a
wrong vocabulary size or a missing layer is reported in Hugging Face's names), then mapped
through the family's key table and loaded with :func:`load_state_strict`. The only keys left out
are named in advance: index buffers (``position_ids``/``token_type_ids``), alias copies of tied
tensors (checked equal first) and pre-training heads a babelzoo encoder does not hold (a warning
names them). A fine-tuned classifier (``*ForSequenceClassification``, ``*ForTokenClassification``,
named by ``architectures``) becomes a task head (:mod:`babelzoo.zoo.heads`).
"""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any, Mapping, Optional

import torch

from ..checkpoint_io import CheckpointError, load_state_strict, model_state
from ..config import ConfigError, EncoderConfig
from ..model_config import ModelConfig
from ..model import BabelModel
from .families import family_for_model_type
from .hf_family import HFFamily, TaskClass, head_from_hf
from .files import CONFIG, find_hf_weights, read_hf_config, read_hf_weights
from .keymap import compare_shapes, to_hf, to_ours
from .seq2seq import families, import_seq2seq
from .tokenizers import load_hf_tokenizer


def import_hf(directory: str | Path):
    """Load a Hugging Face ``BertModel``/``BertForMaskedLM``/``BertForPreTraining``,
    ``XLMRobertaModel``/``XLMRobertaForMaskedLM`` or ``AlbertModel``/``AlbertForMaskedLM``
    directory as a babelzoo model (architecture ``bert``, ``xlmr`` or ``albert``).

    The model gets a pooler and an MLM head exactly when the checkpoint has them, and its
    tokenizer (``model.tokenizer``) when the directory holds one::

        model = import_hf("all-MiniLM-L6-v2/")
        out = model(input_ids, attention_mask=mask)

    A ``BertFor{Sequence,Token}Classification`` or ``XLMRobertaFor{Sequence,Token}Classification``
    directory gets the matching task head, its labels from ``id2label``::

        model = import_hf("xlmr-ner/")
        logits = model.head_logits(input_ids, attention_mask=mask)   # [B, L, num_labels]

    A ``BartForConditionalGeneration``, ``MBartForConditionalGeneration`` or
    ``T5ForConditionalGeneration`` directory becomes a :class:`~babelzoo.zoo.families.seq2seq.model.Seq2SeqModel`.
    """
    directory = Path(directory)
    where = str(directory / CONFIG)
    hf = read_hf_config(directory)
    if hf.get("model_type") in families():
        return import_seq2seq(directory, hf)
    family = family_for_model_type(hf.get("model_type"), where)
    task = _task_class(hf, family, where)
    keys = family.key_map(task)
    weights = find_hf_weights(directory)
    state, names = _normalise(read_hf_weights(weights), family, str(weights))

    # A task class that keeps the pooler needs it (a missing one is reported as missing keys);
    # otherwise the checkpoint says: older classifiers may carry a pooler they never use.
    has_pooler = (task is not None and task.pooler) or bool(keys.hf_keys("pooler", 1) & set(state))
    has_mlm = bool(keys.hf_keys("mlm", 1) & set(state))
    head = head_from_hf(hf, task, where) if task is not None else None
    try:
        text = family.text_config(**family.text_from_hf(hf, where), pooler=has_pooler, mlm_head=has_mlm,
                          tie_word_embeddings=bool(hf.get("tie_word_embeddings", True)))
        config = ModelConfig(architecture=family.name, text=text, head=head)
    except ConfigError as err:
        raise CheckpointError(f"{where}: {err}") from None
    tokenizer = load_hf_tokenizer(directory, family, text, hf)
    if tokenizer is not None:
        text = _pad_from_tokenizer(tokenizer, text, where)
        config = dataclasses.replace(config, text=text)
    unmet = [need for need, ok in family.required.items() if not ok(text)]
    if unmet:
        raise CheckpointError(f"{where}: babelzoo cannot represent this {family.model_type} model: needs {unmet}")
    _drop_tied_aliases(state, family, text, names, str(weights))

    model = BabelModel(config)
    pairs = keys.pairs(text.num_layers, active_groups(config))
    expected = {k: tuple(v.shape) for k, v in to_hf(model_state(model), pairs).items()}
    prefixed = any(name.startswith(family.prefix) for name in names.values())
    encoder_keys = keys.hf_keys("base", text.num_layers) | keys.hf_keys("pooler", text.num_layers)
    shown = {k: family.prefix + k for k in expected if prefixed and k in encoder_keys}
    compare_shapes(expected, state, str(weights), {**shown, **names})
    load_state_strict(model, to_ours(state, pairs), str(weights))
    if tokenizer is not None:
        model.tokenizer = tokenizer
    return model


def active_groups(config: ModelConfig) -> list[str]:
    """The key groups a model of ``config`` has."""
    text = config.text
    groups = ["base"]
    if text.pooler:
        groups.append("pooler")
    if text.mlm_head:
        groups.append("mlm")
        if not text.tie_word_embeddings:
            groups.append("decoder")
    if config.head is not None:
        groups.append("head")
    return groups


def _task_class(hf: Mapping[str, Any], family: HFFamily, where: str) -> Optional[TaskClass]:
    """The task class ``architectures`` names, if any; an architecture the family does not
    import is an error listing those it does."""
    architectures = hf.get("architectures") or []
    supported = (*family.classes, *(t.name for t in family.tasks))
    for cls in architectures:
        if cls not in supported:
            raise CheckpointError(f"{where}: architecture {cls!r} is not supported; model_type "
                                  f"{family.model_type!r} imports from {', '.join(supported)}")
    tasks = sorted({cls for cls in architectures if family.task_named(cls) is not None})
    if len(tasks) > 1:
        raise CheckpointError(f"{where}: architectures names several task classes ({', '.join(tasks)}); "
                              f"a babelzoo model holds one task head")
    return family.task_named(tasks[0]) if tasks else None


def _normalise(raw: Mapping[str, torch.Tensor], family: HFFamily,
               source: str) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Strip the base-model prefix, drop known buffers and pre-training heads. Returns the
    state and a map from each kept key back to its name in the checkpoint."""
    state: dict[str, torch.Tensor] = {}
    names: dict[str, str] = {}
    dropped_heads = []
    for key, tensor in raw.items():
        short = key[len(family.prefix):] if key.startswith(family.prefix) else key
        if short in family.buffers:
            continue
        if family.heads_not_kept and short.startswith(family.heads_not_kept):
            dropped_heads.append(key)
            continue
        if short in state:
            raise CheckpointError(f"{source}: {names[short]!r} and {key!r} are the same weight with and "
                                  f"without the {family.prefix!r} prefix")
        state[short] = tensor
        names[short] = key
    if dropped_heads:
        warnings.warn(f"{source}: pre-training head weights not kept (a babelzoo encoder holds no such "
                      f"head; objectives own their heads): {', '.join(sorted(dropped_heads))}", stacklevel=3)
    return state, names


def _drop_tied_aliases(state: dict[str, torch.Tensor], family: HFFamily, text: EncoderConfig,
                       names: Mapping[str, str], source: str) -> None:
    """Older checkpoints also store the tied copies (decoder weight = word embeddings, decoder
    bias = MLM bias). They must equal what they are tied to; then they are redundant.

    With ``tie_word_embeddings=false``, transformers 5 unties the decoder bias too: its forward
    pass adds the decoder's own bias and leaves the head's ``bias`` unused, so that decoder bias
    is the one that counts (transformers 4 kept both equal)."""
    aliases = dict(family.tied)
    if text.tie_word_embeddings:
        aliases.update({hf: family.word_key() for hf in family.keys.decoder})
    for alias, target in aliases.items():
        if alias not in state or target not in state:
            continue
        if not text.tie_word_embeddings and alias in family.tied:
            state[target] = state.pop(alias)
            continue
        if state[alias].shape != state[target].shape or not torch.equal(state[alias], state[target]):
            raise CheckpointError(f"{source}: {names[alias]} differs from {names[target]}, but the model ties "
                                  f"them (set tie_word_embeddings=false in config.json if the decoder is untied)")
        del state[alias]


def _pad_from_tokenizer(tokenizer, text: EncoderConfig, where: str) -> EncoderConfig:
    """The model must pad with the tokenizer's pad id. Without a position offset the config's
    ``pad_token_id`` names only the padding row (BertModel computes nothing from it), so a
    checkpoint whose config keeps BERT's default beside another tokenizer (multilingual-e5-small
    over XLM-R's, which pads with 1) takes the tokenizer's; with an offset (RoBERTa positions
    count from it) a different pad id is an error."""
    pad = tokenizer.specials.pad
    if pad == text.pad_token_id:
        return text
    if not text.positions_from_pad:
        return text.replace(pad_token_id=pad)
    raise CheckpointError(f"{where}: tokenizer pads with id {pad} but the model's pad_token_id is "
                          f"{text.pad_token_id}")
