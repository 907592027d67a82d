"""Hugging Face checkpoint interoperability: BERT, XLM-R, ALBERT, ModernBERT, XLNet and the
encoder–decoders BART, mBART and T5 (``seq2seq.py``), both directions.

Each family is one declarative key table (``bert.py``, ``xlmr.py``, ``albert.py``) read by one
engine (``keymap.py``) in both directions, so import and export cannot drift apart::

    from babelzoo.zoo.convert import export_hf, import_hf

    model = import_hf("path/to/hf-bert")          # strict: mismatches are errors naming keys
    export_hf(model, "out/")                      # transformers.AutoModel.from_pretrained("out/")

A model with a task head (:mod:`babelzoo.zoo.heads`) converts to and from the family's fine-tuned
classes (``BertForSequenceClassification``, ``XLMRobertaForTokenClassification``...): each such
class is a :class:`TaskClass` whose table fills the key map's ``head`` group.

On the command line: ``babelzoo convert --from-hf DIR --to DIR`` and
``babelzoo convert --to-hf DIR --from DIR``.
"""

from __future__ import annotations

from ..._lazy import lazy_getattr

# names load on first use, so that a command's --help does not import torch
_API = {
    **dict.fromkeys(["export_hf"], "exporter"),
    **dict.fromkeys(["FAMILIES", "family_for", "family_for_model_type"], "families"),
    **dict.fromkeys(["HFFamily", "TaskClass"], "hf_family"),
    **dict.fromkeys(["import_hf"], "importer"),
    **dict.fromkeys(["KeyMap"], "keymap"),
}

__all__ = sorted(_API)

__getattr__ = lazy_getattr(__name__, _API)
