"""An encoder–decoder family's key table (:class:`Seq2SeqFamily`): what BART, mBART and T5
(:mod:`.bart`, :mod:`.t5`) declare and :mod:`.seq2seq` converts with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Union

from ...errors import CheckpointError
from ..families.seq2seq.config import Seq2SeqConfig
from .keymap import KeyMap, Pair

Table = Union[Mapping[object, str], Callable[[Seq2SeqConfig], Mapping[object, str]]]


@dataclass(frozen=True)
class Seq2SeqFamily:
    """A Hugging Face encoder–decoder class and its key table. ``encoder``/``decoder`` map the
    stacks' keys (without prefixes; a function of the config where the layout depends on it);
    ``final_norm`` joins both when the config has final norms; ``top`` holds the model-level
    keys; ``stack_prefix`` precedes ``encoder.``/``decoder.`` on the HF side; ``aliases`` are
    the HF keys that repeat the word embedding; ``untied_head`` the LM head's pair when it is not
    tied. ``fixed`` lists the config fields the HF class fixes: import sets them, export
    requires them."""

    encoder_decoder: ClassVar[bool] = True

    name: str
    model_type: str
    hf_class: str
    encoder: Table
    decoder: Table
    top: Mapping[object, str]
    final_norm: Mapping[object, str]
    stack_prefix: str
    aliases: tuple[str, ...]
    untied_head: Mapping[object, str]
    text_from_hf: Callable[[Mapping[str, Any], str], dict]
    text_to_hf: Callable[[Seq2SeqConfig], dict]
    fixed: Mapping[str, Any]

    def word_key(self) -> str:
        return next(hf for hf, ours in self.top.items() if ours == "word.weight")

    def unmet(self, text: Seq2SeqConfig) -> list[str]:
        """The fixed fields ``text`` has other values for."""
        return [f"{name}={value!r} (is {getattr(text, name)!r})" for name, value in self.fixed.items()
                if getattr(text, name) != value]

    def pairs(self, text: Seq2SeqConfig) -> list[Pair]:
        """Every expanded pair of a model of config ``text``."""
        def table(part: Table) -> dict:
            found = dict(part(text) if callable(part) else part)
            return {**found, **self.final_norm} if text.final_layer_norm else found

        top = {hf: ours for hf, ours in self.top.items() if ours != "final_logits_bias" or text.logits_bias}
        if not text.tie_word_embeddings:
            top.update(self.untied_head)
        encoder = _prefixed(table(self.encoder), self.stack_prefix + "encoder.", "encoder.")
        decoder = _prefixed(table(self.decoder), self.stack_prefix + "decoder.", "decoder.")
        return (KeyMap(base=encoder).pairs(text.num_layers, ["base"]) +
                KeyMap(base=decoder).pairs(text.num_decoder_layers, ["base"]) + KeyMap(base=top).pairs(0, ["base"]))


def _prefixed(table: Mapping[object, str], hf_prefix: str, our_prefix: str) -> dict:
    def hf(key):
        return tuple(hf_prefix + k for k in key) if isinstance(key, tuple) else hf_prefix + key

    return {hf(k): our_prefix + v for k, v in table.items()}


def differing_sides(hf: Mapping[str, Any], defaults: Mapping[str, Any], where: str, *pairs: tuple[str, str]) -> None:
    """Refuse an HF config whose encoder and decoder differ in a width babelzoo shares."""
    for a, b in pairs:
        va, vb = hf.get(a, defaults.get(a)), hf.get(b, defaults.get(b))
        if va != vb:
            raise CheckpointError(f"{where}: {a}={va} but {b}={vb}; babelzoo's encoder and decoder share this width")
