"""Export a babelzoo model as a Hugging Face model directory that ``transformers`` loads with
``AutoModel`` / ``AutoModelForMaskedLM`` (or, with a task head, ``AutoModelForSequenceClassification``
/ ``AutoModelForTokenClassification``): ``config.json``, ``model.safetensors`` and the tokenizer's
files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..checkpoint_io import CheckpointError, _atomic_write, model_state, replace_directory, save_weights
from ..family import family_of
from ..sentences import attached_tokenizer
from .families import family_for
from .hf_family import head_to_hf
from .files import CONFIG
from .importer import active_groups
from .keymap import to_hf
from .seq2seq import export_seq2seq
from .tokenizers import save_hf_tokenizer

_OTHER_PARTS = ("vision", "audio", "knowledge", "fusion")


def export_hf(model, directory: str | Path, family: Optional[str] = None, tokenizer=None) -> Path:
    """Write ``model`` in the Hugging Face layout of ``family`` (``bert``, ``xlmr``, ``albert``;
    default: the family of ``model.config.architecture``).

    A model with an MLM head is written as ``*ForMaskedLM`` (encoder under the ``bert.``/
    ``roberta.``/``albert.`` prefix, pooler kept when present), one without as ``*Model``. A
    model with a task head is written as the family's class for that head kind
    (``BertForSequenceClassification``...), with ``id2label``/``label2id`` from its labels. A
    model the family cannot hold (pre-LN, relative positions, language embeddings, another
    modality, a head the HF class computes differently...) is an error naming each unmet
    requirement.

    An encoder–decoder is written as ``BartForConditionalGeneration``,
    ``MBartForConditionalGeneration`` or ``T5ForConditionalGeneration`` (``family`` ``bart``,
    ``mbart``, ``t5``; by default the one its layout fits).
    """
    config = model.config
    if any(conversion.encoder_decoder for conversion in family_of(config.text).hf_conversions()):
        return export_seq2seq(model, directory, family, tokenizer)
    fam = family_for(family or config.architecture)
    parts = [p for p in _OTHER_PARTS if getattr(config, p, None) is not None]
    if parts:
        raise CheckpointError(f"cannot export {config.architecture!r} as {fam.model_type}: it has "
                              f"{', '.join(parts)} part(s), which a text encoder checkpoint cannot hold")
    text = config.text
    if text.family != fam.text_config.family:
        raise CheckpointError(f"cannot export {config.architecture!r} as {fam.model_type}: its text encoder is of "
                              f"family {text.family!r}, not {fam.text_config.family!r}")
    unmet = [need for need, ok in fam.required.items() if not ok(text)]
    if unmet:
        raise CheckpointError(f"cannot export {config.architecture!r} as {fam.model_type}: needs {unmet}")
    task = None
    if config.head is not None:
        try:
            task = fam.task_for(config.head.kind)
        except CheckpointError as err:
            raise CheckpointError(f"cannot export {config.architecture!r}: {err}") from None
        unmet = task.unmet(config)
        if unmet:
            raise CheckpointError(f"cannot export {config.architecture!r} with its {config.head.kind} head as "
                                  f"{task.name}: needs {unmet}")

    keys = fam.key_map(task)
    state = to_hf(model_state(model), keys.pairs(text.num_layers, active_groups(config)))
    if text.mlm_head and not text.tie_word_embeddings:
        # an untied transformers 5 head adds its decoder's own bias; transformers 4 reads `bias`
        state.update({alias: state[target].clone() for alias, target in fam.tied.items()})
    if text.mlm_head or task is not None:
        encoder_keys = keys.hf_keys("base", text.num_layers) | keys.hf_keys("pooler", text.num_layers)
        state = {(fam.prefix + k if k in encoder_keys else k): v for k, v in state.items()}
    dtype = next(iter(state.values())).dtype
    hf_config = {"architectures": [fam.hf_class(config)], "model_type": fam.model_type, **fam.text_to_hf(text),
                 **(head_to_hf(config.head) if task is not None else {}),
                 "dtype": str(dtype).removeprefix("torch.")}

    tokenizer = tokenizer if tokenizer is not None else attached_tokenizer(model)

    def write(folder: Path) -> None:  # a whole directory: no earlier model's files stay beside these
        save_weights(state, folder / "model.safetensors")
        _atomic_write(folder / CONFIG,
                      lambda tmp: Path(tmp).write_text(json.dumps(hf_config, indent=2) + "\n", encoding="utf-8"))
        if tokenizer is not None:
            save_hf_tokenizer(tokenizer, folder, fam, text)

    return replace_directory(directory, write, what="Hugging Face model")
