"""Encoder–decoder checkpoints (BART, mBART, T5) to and from Hugging Face, with the same key-map
engine as the encoders (:mod:`babelzoo.zoo.convert.keymap`).

An encoder–decoder's table has three parts: the encoder's pairs (``{i}`` over its layers), the
decoder's (``{i}`` over its own, maybe different, number of layers) and the model-level ones
(word embedding, logits bias). HF keys that alias the word embedding (each stack's
``embed_tokens``, a tied ``lm_head``) must equal it and are then dropped on import; export writes
the word embedding once and transformers ties the rest.

A tokenizer travels with the weights: export writes it (``model.tokenizer``, or the one given) as
babelzoo saves tokenizers, ``tokenizer.json`` included, which ``transformers.AutoTokenizer``
reads; import attaches a tokenizer that babelzoo wrote there. A model's language tags
(``Seq2SeqConfig.languages``, mBART's codes) are kept in ``config.json`` as ``languages``.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Mapping

import torch

from ...datasets.tokenizer import saved_metadata
from ..checkpoint_io import CheckpointError, _atomic_write, load_state_strict, model_state, replace_directory, save_weights
from ..config import ConfigError
from ..model_config import ModelConfig
from ..sentences import attached_tokenizer
from ..families.seq2seq.model import Seq2SeqModel
from ..families.seq2seq.config import Seq2SeqConfig
from .families import hf_conversions
from .files import CONFIG, find_hf_weights, read_hf_weights
from .keymap import compare_shapes, to_hf, to_ours
from .seq2seq_family import Seq2SeqFamily
from .tokenizers import check_pad, check_size, read_tokenizer


def families() -> dict[str, Seq2SeqFamily]:
    """The encoder–decoder conversions the text families declare, by HF ``model_type``."""
    return {family.model_type: family for family in hf_conversions() if family.encoder_decoder}


def import_seq2seq(directory: Path, hf: Mapping[str, Any]):
    """A :class:`~babelzoo.zoo.families.seq2seq.model.Seq2SeqModel` holding the weights of the HF
    encoder–decoder in ``directory`` (config ``hf``), strictly."""
    where = str(directory / CONFIG)
    family = families()[hf["model_type"]]
    for cls in hf.get("architectures") or []:
        if cls != family.hf_class:
            raise CheckpointError(f"{where}: architecture {cls!r} is not supported; model_type "
                                  f"{family.model_type!r} imports from {family.hf_class}")
    languages = hf.get("languages") or ()
    if not isinstance(languages, (list, tuple)) or not all(isinstance(x, str) and x for x in languages):
        raise CheckpointError(f"{where}: languages must be a list of language codes, got {languages!r}")
    try:
        text = Seq2SeqConfig(**{**family.fixed, **family.text_from_hf(hf, where), "languages": tuple(languages)})
        config = ModelConfig(architecture=family.name, text=text)
    except ConfigError as err:
        raise CheckpointError(f"{where}: {err}") from None
    tokenizer = _saved_tokenizer(directory, text)
    weights = find_hf_weights(directory)
    state = read_hf_weights(weights)
    _drop_aliases(state, family, text, str(weights))
    model = Seq2SeqModel(config)
    pairs = family.pairs(text)
    expected = {k: tuple(v.shape) for k, v in to_hf(model_state(model), pairs).items()}
    compare_shapes(expected, state, str(weights))
    load_state_strict(model, to_ours(state, pairs), str(weights))
    if tokenizer is not None:
        model.tokenizer = tokenizer
    return model


def _saved_tokenizer(directory: Path, text: Seq2SeqConfig):
    """The tokenizer babelzoo saved beside the weights (checked against the model), or None.
    The tokenizer files of an original BART, mBART or T5 checkpoint are left unread."""
    if saved_metadata(directory) is None:
        if any((directory / name).is_file() for name in ("tokenizer.json", "sentencepiece.bpe.model", "spiece.model",
                                                         "vocab.json")):
            warnings.warn(f"{directory}: babelzoo reads the tokenizer files of the encoder–decoders it saved, not "
                          f"these; the model is imported without its tokenizer", stacklevel=4)
        return None
    tokenizer = read_tokenizer(directory)
    _check_tokenizer(tokenizer, text, str(directory))
    return tokenizer


def _check_tokenizer(tokenizer, text: Seq2SeqConfig, where: str) -> None:
    check_size(tokenizer, text, where)
    check_pad(tokenizer, text, where)


def _drop_aliases(state: dict[str, torch.Tensor], family: Seq2SeqFamily, text: Seq2SeqConfig, source: str) -> None:
    word = family.word_key()
    aliases = family.aliases + (tuple(family.untied_head) if text.tie_word_embeddings else ())
    for alias in aliases:
        if alias not in state or word not in state:
            continue
        if state[alias].shape != state[word].shape or not torch.equal(state[alias], state[word]):
            raise CheckpointError(f"{source}: {alias} differs from {word}, but the model ties them (set "
                                  f"tie_word_embeddings=false in config.json if the LM head is untied)")
        del state[alias]


def export_seq2seq(model, directory: str | Path, family: str | None = None, tokenizer=None) -> Path:
    """Write an encoder–decoder as the HF class of its layout (``BartForConditionalGeneration``,
    ``MBartForConditionalGeneration``, ``T5ForConditionalGeneration``; ``family`` names one, by
    default the one whose fixed fields the config has), with ``tokenizer`` (default: the model's
    own, when it has one). A config no class holds is an error naming what each one needs."""
    text = model.config.text
    tokenizer = tokenizer if tokenizer is not None else attached_tokenizer(model)
    if tokenizer is not None:
        _check_tokenizer(tokenizer, text, f"tokenizer for {directory}")
    known = families()
    if family is not None:
        by_name = {f.name: f for f in known.values()}
        if family not in by_name:
            raise CheckpointError(f"no Hugging Face encoder–decoder family {family!r}; known: {', '.join(by_name)}")
        chosen = by_name[family]
        unmet = chosen.unmet(text)
        if unmet:
            raise CheckpointError(f"cannot export {model.config.architecture!r} as {chosen.hf_class}: needs {unmet}")
    else:
        fitting = [f for f in known.values() if not f.unmet(text)]
        if not fitting:
            needs = "; ".join(f"{f.hf_class} needs {f.unmet(text)}" for f in known.values())
            raise CheckpointError(f"cannot export {model.config.architecture!r}: no Hugging Face class holds its "
                                  f"layout ({needs})")
        chosen = fitting[0]
    state = to_hf(model_state(model), chosen.pairs(text))
    if not text.tie_word_embeddings:  # transformers then ties nothing: each stack's embedding is written out
        state.update({alias: state[chosen.word_key()].clone() for alias in chosen.aliases})
    dtype = next(iter(state.values())).dtype
    hf_config = {"architectures": [chosen.hf_class], "model_type": chosen.model_type, **chosen.text_to_hf(text),
                 "dtype": str(dtype).removeprefix("torch.")}
    if text.languages:
        hf_config["languages"] = list(text.languages)

    def write(folder: Path) -> None:
        save_weights(state, folder / "model.safetensors")
        _atomic_write(folder / CONFIG,
                      lambda tmp: Path(tmp).write_text(json.dumps(hf_config, indent=2) + "\n", encoding="utf-8"))
        if tokenizer is not None:
            tokenizer.save(folder)

    return replace_directory(directory, write, what="Hugging Face model")
