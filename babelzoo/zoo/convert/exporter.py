"""Export a babelzoo model as a Hugging Face model directory that ``transformers`` loads with
``AutoModel`` / ``AutoModelForMaskedLM``: ``config.json``, ``model.safetensors`` and the
tokenizer's files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

from ..pretrained import CheckpointError, _atomic_write, model_state, save_weights
from .families import family_for
from .files import CONFIG
from .importer import active_groups
from .keymap import to_hf

_OTHER_PARTS = ("vision", "audio", "knowledge", "fusion")


def export_hf(model, directory: str | Path, family: Optional[str] = None, tokenizer=None) -> Path:
    """Write ``model`` in the Hugging Face layout of ``family`` (``bert``, ``xlmr``, ``albert``;
    default: the family of ``model.config.architecture``).

    A model with an MLM head is written as ``*ForMaskedLM`` (encoder under the ``bert.``/
    ``roberta.``/``albert.`` prefix, pooler kept when present), one without as ``*Model``. A
    model the family cannot hold (pre-LN, relative positions, language embeddings, another
    modality...) is an error naming each unmet requirement.
    """
    config = model.config
    fam = family_for(family or config.architecture)
    parts = [p for p in _OTHER_PARTS if getattr(config, p, None) is not None]
    if parts:
        raise CheckpointError(f"cannot export {config.architecture!r} as {fam.model_type}: it has "
                              f"{', '.join(parts)} part(s), which a text encoder checkpoint cannot hold")
    text = config.text
    unmet = [need for need, ok in fam.required.items() if not ok(text)]
    if unmet:
        raise CheckpointError(f"cannot export {config.architecture!r} as {fam.model_type}: needs {unmet}")

    state = to_hf(model_state(model), fam.keys.pairs(text.num_layers, active_groups(text)))
    if text.mlm_head and not text.tie_word_embeddings:
        # an untied transformers 5 head adds its decoder's own bias; transformers 4 reads `bias`
        state.update({alias: state[target].clone() for alias, target in fam.tied.items()})
    if text.mlm_head:
        encoder_keys = fam.keys.hf_keys("base", text.num_layers) | fam.keys.hf_keys("pooler", text.num_layers)
        state = {(fam.prefix + k if k in encoder_keys else k): v for k, v in state.items()}
    dtype = next(iter(state.values())).dtype
    hf_config = {"architectures": [fam.mlm_class if text.mlm_head else fam.base_class],
                 "model_type": fam.model_type, **fam.text_to_hf(text),
                 "dtype": str(dtype).removeprefix("torch.")}

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_weights(state, directory / "model.safetensors")
    _atomic_write(directory / CONFIG,
                  lambda tmp: Path(tmp).write_text(json.dumps(hf_config, indent=2) + "\n", encoding="utf-8"))
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is not None:
        from .tokenizers import save_hf_tokenizer

        save_hf_tokenizer(tokenizer, directory, fam, text)
    return directory
