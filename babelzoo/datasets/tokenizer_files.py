"""The files of a saved tokenizer, and the saving half of
:class:`~babelzoo.datasets.tokenizer.Tokenizer`; :func:`~babelzoo.datasets.tokenizer.load_tokenizer`
reads them back. A saved tokenizer is the backend's own files, babelzoo's metadata in
``babelzoo_tokenizer.json``::

    {"format": "babelzoo-tokenizer", "version": 1, "type": "sentencepiece",
     "specials": {"pad": 0, "cls": 1, ...}, "languages": ["de", "en"], "options": {...}}

and the files ``transformers.AutoTokenizer.from_pretrained(directory)`` loads and encodes with
the same ids: ``tokenizer.json`` (the ``tokenizers`` pipeline with the special tokens and the
framing), ``tokenizer_config.json`` and ``special_tokens_map.json``.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from pathlib import Path
from typing import TYPE_CHECKING, Union

from .._files import writing

if TYPE_CHECKING:
    import tokenizers

META_FILE = "babelzoo_tokenizer.json"
HF_TOKENIZER_FILE = "tokenizer.json"
HF_CONFIG_FILE = "tokenizer_config.json"
HF_SPECIALS_FILE = "special_tokens_map.json"
FORMAT = "babelzoo-tokenizer"
VERSION = 1


class TokenizerFiles(ABC):
    """The saving half of :class:`~babelzoo.datasets.tokenizer.Tokenizer` (a mixin: it reads the
    tokenizer's specials, special tokens, framing and languages). A backend writes its own files
    (:meth:`_save_backend`) and gives its content pipeline (:meth:`hf_pipeline`)."""

    @abstractmethod
    def _save_backend(self, directory: Path) -> dict:
        """Write the backend's files; return the options the metadata records."""

    @abstractmethod
    def hf_pipeline(self) -> "tokenizers.Tokenizer":
        """A ``tokenizers.Tokenizer`` that gives this tokenizer's content ids (no special tokens,
        no framing): :meth:`hf_tokenizer` adds those."""

    def _hf_options(self) -> dict:
        """Extra ``tokenizer_config.json`` entries (e.g. WordPiece's ``do_lower_case``)."""
        return {}

    def _special_strings(self) -> dict[str, str]:
        s = self.specials
        return {name: self.id_to_token(i) for name, i in
                (("cls", s.cls), ("sep", s.sep), ("pad", s.pad), ("unk", s.unk), ("mask", s.mask))}

    def hf_tokenizer(self) -> "tokenizers.Tokenizer":
        """The ``tokenizers.Tokenizer`` saved as ``tokenizer.json``: the content pipeline plus
        every special token (matched whole in text, never split) and the framing of
        ``pair_style`` as a template, so that it encodes texts and pairs with this tokenizer's
        ids. Language tags are special tokens there too, but no tag is inserted."""
        from tokenizers import AddedToken
        from tokenizers.processors import TemplateProcessing

        tok = self.hf_pipeline()
        special = dict(self.special_tokens())
        special.update({t: self.token_to_id(t) for t in self._special_strings().values()})
        tok.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                for t in sorted(special, key=special.__getitem__)])
        cls, sep = self.id_to_token(self.specials.cls), self.id_to_token(self.specials.sep)
        pair = (f"{cls} $A:0 {sep}:0 {sep}:0 $B:0 {sep}:0" if self.pair_style == "roberta"
                else f"{cls}:0 $A:0 {sep}:0 $B:1 {sep}:1")
        tok.post_processor = TemplateProcessing(single=f"{cls}:0 $A:0 {sep}:0", pair=pair,
                                                special_tokens=[(cls, self.specials.cls), (sep, self.specials.sep)])
        return tok

    def _save_hf(self, directory: Path) -> None:
        strings = self._special_strings()
        tags = [t for t in self.special_tokens() if t not in strings.values()]
        specials = {f"{k}_token": v for k, v in strings.items()}
        if self.pair_style == "roberta":
            specials.update(bos_token=strings["cls"], eos_token=strings["sep"])
        if tags:
            specials["additional_special_tokens"] = tags
        config = {"tokenizer_class": self.hf_class, **specials, **self._hf_options()}
        max_length = getattr(self, "max_length", None)
        if max_length is not None:
            config["model_max_length"] = max_length
        write_atomic(directory / HF_TOKENIZER_FILE, self.hf_tokenizer().to_str(pretty=True))
        write_atomic(directory / HF_CONFIG_FILE, json.dumps(config, indent=2, ensure_ascii=False))
        write_atomic(directory / HF_SPECIALS_FILE, json.dumps(specials, indent=2, ensure_ascii=False))

    def save(self, directory: Union[str, Path]) -> Path:
        """Write the backend's files, ``babelzoo_tokenizer.json`` and the Hugging Face files
        (``tokenizer.json``, ``tokenizer_config.json``, ``special_tokens_map.json``)."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        options = self._save_backend(directory)
        s = self.specials
        meta = {
            "format": FORMAT, "version": VERSION, "type": self.kind,
            "specials": {"pad": s.pad, "cls": s.cls, "sep": s.sep, "unk": s.unk, "mask": s.mask,
                         "vocab_size": s.vocab_size},
            "languages": list(self.languages),
            "options": {"pair_style": self.pair_style, "prefix_language_tag": self.prefix_language_tag,
                        **options, **({"trimmed_from": self.trimmed_from} if self.trimmed_from else {})},
        }
        # metadata first: over a directory saved before, its tokenizer.json (the old metadata)
        # is replaced by the Hugging Face file only once babelzoo_tokenizer.json exists
        write_atomic(directory / META_FILE, json.dumps(meta, indent=2, ensure_ascii=False))
        self._save_hf(directory)
        return directory

    def save_hf(self, directory: Union[str, Path]) -> Path:
        """Write only what Hugging Face reads: the backend's files (``vocab.txt``, a sentencepiece
        model), ``tokenizer.json``, ``tokenizer_config.json`` and ``special_tokens_map.json``."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        self._save_backend(directory)
        self._save_hf(directory)
        return directory


def write_atomic(path: Path, data: Union[str, bytes]) -> None:
    """Write ``data`` (text as UTF-8 with a final newline) beside ``path``, then rename it into place."""
    tmp = path.with_name(path.name + ".tmp")
    with writing(path):
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data if data.endswith("\n") else data + "\n", encoding="utf-8")
    os.replace(tmp, path)
