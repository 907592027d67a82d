"""What a Rust ``tokenizers`` pipeline needs from a sentencepiece model file: its normaliser
(the compiled character map and the whitespace options) and its model type, read from the
serialised ``ModelProto`` (sentencepiece_model.proto; field numbers below), and a character
map compiled by sentencepiece itself from a per-codepoint rule table.
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass
from typing import Iterator, Mapping, Sequence

from .tokenizer import TokenizerError

# ModelProto: 2 trainer_spec, 3 normalizer_spec. TrainerSpec: 3 model_type (1 unigram, 2 bpe,
# 3 word, 4 char), 35 byte_fallback. NormalizerSpec: 2 precompiled_charsmap, 3 add_dummy_prefix,
# 4 remove_extra_whitespaces, 5 escape_whitespaces.
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


@dataclass(frozen=True)
class ModelSpec:
    model_type: str
    byte_fallback: bool
    charsmap: bytes
    add_dummy_prefix: bool
    remove_extra_whitespaces: bool


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if i >= len(buf):
            raise TokenizerError("truncated varint")
        byte = buf[i]
        value |= (byte & 0x7F) << shift
        i += 1
        if byte < 0x80:
            return value, i
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, object]]:
    """(field number, value) of each top-level field of a protobuf message."""
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i:i + size], i + size
        elif wire in (1, 5):
            size = 8 if wire == 1 else 4
            value, i = buf[i:i + size], i + size
        else:
            raise TokenizerError(f"unsupported wire type {wire}")
        yield number, value


def _message(buf: bytes, number: int) -> dict[int, object]:
    """The last occurrence of each field of the sub-message ``number`` (proto2 semantics)."""
    out: dict[int, object] = {}
    for n, value in _fields(buf):
        if n == number:
            out.update(_fields(value))
    return out


def model_spec(proto: bytes, where: str) -> ModelSpec:
    try:
        trainer, normalizer = _message(proto, 2), _message(proto, 3)
    except TokenizerError as err:
        raise TokenizerError(f"{where}: not a sentencepiece model ({err})") from None
    return ModelSpec(model_type=MODEL_TYPES.get(trainer.get(3, 1), "unigram"), byte_fallback=bool(trainer.get(35, 0)),
                     charsmap=bytes(normalizer.get(2, b"")), add_dummy_prefix=bool(normalizer.get(3, 1)),
                     remove_extra_whitespaces=bool(normalizer.get(4, 1)))


def compile_charsmap(mapping: Mapping[int, Sequence[int]]) -> bytes:
    """sentencepiece's compiled form (``precompiled_charsmap``) of a per-codepoint map, which
    ``tokenizers.normalizers.Precompiled`` applies: built by sentencepiece's own rule compiler
    (``normalization_rule_tsv``) while training a throw-away character model."""
    import sentencepiece as spm

    with tempfile.TemporaryDirectory() as tmp:
        rules = os.path.join(tmp, "rules.tsv")
        with open(rules, "w", encoding="ascii") as f:
            for cp, out in sorted(mapping.items()):
                f.write(f"{cp:X}\t{' '.join(f'{c:X}' for c in out)}\n")
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(["a b"] * 4), model_writer=model, model_type="char",
                                       vocab_size=8, hard_vocab_limit=False, normalization_rule_tsv=rules,
                                       add_dummy_prefix=False, remove_extra_whitespaces=False, num_threads=1,
                                       minloglevel=2)
    return model_spec(model.getvalue(), "compiled normalisation rules").charsmap


def metaspace_pipeline(model, spec: ModelSpec, prefix=None):
    """A ``tokenizers.Tokenizer`` around ``model`` that normalises and splits text as the
    sentencepiece model of ``spec`` does: ``prefix`` (a normaliser applied before
    sentencepiece's own), the compiled character map, extra spaces removed (collapsed, then
    stripped at both ends), words split before each space, which becomes ``▁``."""
    from tokenizers import Regex, decoders, normalizers, pre_tokenizers
    from tokenizers import Tokenizer as RustTokenizer

    steps = [] if prefix is None else [prefix]
    if spec.charsmap:
        steps.append(normalizers.Precompiled(spec.charsmap))
    if spec.remove_extra_whitespaces:
        steps += [normalizers.Replace(Regex(" {2,}"), " "), normalizers.Replace(Regex("^ | $"), "")]
    tok = RustTokenizer(model)
    if steps:
        tok.normalizer = normalizers.Sequence(steps)
    scheme = "always" if spec.add_dummy_prefix else "never"
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme, split=True)
    metaspace = decoders.Metaspace(replacement="\u2581", prepend_scheme=scheme, split=True)
    tok.decoder = decoders.Sequence([decoders.ByteFallback(), metaspace]) if spec.byte_fallback else metaspace
    return tok


def whitespace_split_pipeline(model, charsmap: bytes, prefix=None):
    """The ``tokenizers.Tokenizer`` that ``transformers`` builds for a sentencepiece unigram
    vocabulary (``XLMRobertaTokenizer``, ``AlbertTokenizer``): ``prefix`` (a normaliser run
    first), the compiled character map, then words split at whitespace, each marked with a
    leading ``▁``. Unlike :func:`metaspace_pipeline`, every whitespace character that survives
    normalisation separates words, not only U+0020."""
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import decoders, normalizers, pre_tokenizers

    steps = [] if prefix is None else [prefix]
    if charsmap:
        steps.append(normalizers.Precompiled(charsmap))
    tok = RustTokenizer(model)
    if steps:
        tok.normalizer = steps[0] if len(steps) == 1 else normalizers.Sequence(steps)
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                 pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always",
                                                                          split=True)])
    tok.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    return tok
