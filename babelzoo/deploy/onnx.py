"""ONNX export of babelzoo encoders and sentence vectors from ONNX Runtime.

:func:`export_onnx` writes a self-contained folder::

    model.onnx            inputs  input_ids [batch, length] int64, attention_mask [batch, length] int64
                                  (+ language_ids [batch, length] for models with language embeddings)
                          outputs last_hidden_state [batch, length, hidden] (the exported layer),
                                  sentence_embedding [batch, hidden] (pooled, not normalised),
                                  logits (with head=True: [batch, labels] or [batch, length, labels])
    babelzoo_onnx.json    what the graph holds: architecture, layer, pooling, opset, quantization,
                          parity with PyTorch
    config.json           the babelzoo model config (labels of the head, sizes)
    tokenizer files       the model's tokenizer, so the folder is all a runtime needs

The graph comes from ``torch.onnx.export(..., dynamo=True)`` with dynamic batch and length axes;
the model runs padded there (attention sees the mask), and :class:`OnnxEncoder` sorts sentences by
length first, so a batch carries little padding.

``quantize="int8"`` is ONNX Runtime's dynamic quantization (int8 weights per output channel,
uint8 activations per call). Two things keep a multilingual encoder accurate where a default
int8 export is not: on x86 CPUs without VNNI the u8·s8 products are summed in saturating 16-bit
pairs, so weights keep 7 bits there (``reduce_range``, decided on the exporting CPU and recorded);
and ``calibration`` texts turn on SmoothQuant (Xiao et al. 2023), as in
:func:`babelzoo.compression.quantize`: every linear layer's input channel j is divided by
s_j = max|X_j|^α / max|W_{:,j}|^{1−α} and its weight column multiplied by it, so activation
outliers move into the weights, which are quantized per channel. ``keep_fp32`` leaves chosen
products in float (:data:`FLOAT_PRODUCTS`): ``"ffn_out"``, the feed-forward layers' output
projections, whose inputs (after GELU) are the most outlier-heavy activations of a Transformer
layer and so lose the most to per-call uint8 scales.

Every family whose forward pass is a function of the token ids and the mask exports. What does
not: models that read images or audio (their towers take other inputs than text), encoder–
decoders (export the encoder's states with the PyTorch model; generation loops over the decoder),
and the recurrent families (LSTM/GRU, InferSent): ``torch.export`` cannot trace their packed
sequences, whose batch sizes per step depend on the lengths in the batch. Transformer-XL exports
as one segment per call, as the PyTorch model encodes a sentence: no memory is carried over.
"""

from __future__ import annotations

import copy
import importlib
import logging
import tempfile
import warnings
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
from torch import nn

from .._files import read_json_object, replace_owned_folder, write_json_atomic
from ..errors import BabelzooError, InputError

logger = logging.getLogger(__name__)

ONNX_FILE = "model.onnx"
INFO_FILE = "babelzoo_onnx.json"
FORMAT = 1
OPSET = 23
# The opsets torch.onnx's exporter writes: its operators are opset 18's, and onnxscript's version
# converter takes the graph up to 25. Below, the conversion fails and the graph stays opset 18;
# above, the graph is one ONNX Runtime refuses to load.
OPSETS = range(18, 26)
QUANTIZATIONS = ("int8",)
EXTRA = ("onnx", "onnxscript", "onnxruntime")  # setup.py's onnx extra: export needs all three
INSTALL_EXTRA = 'pip install -c requirements/constraints.txt -e ".[onnx]"'


class OnnxExportError(BabelzooError, ValueError):
    """A model or folder that cannot be exported to, or read as, a babelzoo ONNX export."""


def require_onnx(packages: Sequence[str] = EXTRA) -> None:
    """Refuse, naming the ``onnx`` extra and its install command, unless ``packages`` import
    (all three for an export, ``onnxruntime`` alone to run one)."""
    missing = []
    for name in packages:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    if missing:
        raise OnnxExportError(f"{', '.join(missing)} not installed: ONNX export and inference need babelzoo's "
                              f"onnx extra; install it from the babelzoo checkout with {INSTALL_EXTRA}")


def check_opset(opset: int, option: str = "opset=") -> None:
    """Refuse an opset torch.onnx cannot write (see :data:`OPSETS`), naming ``option``."""
    if opset not in OPSETS:
        raise OnnxExportError(f"{option}{opset}: torch.onnx writes opsets {OPSETS[0]} to {OPSETS[-1]} (default "
                              f"{OPSET}, whose Attention operator ONNX Runtime runs fused; 18 for older runtimes)")


def written_opset(path: str | Path) -> int:
    """The opset of the ONNX operators the graph file at ``path`` imports."""
    import onnx

    imports = onnx.load(str(path), load_external_data=False).opset_import
    return next(entry.version for entry in imports if entry.domain in ("", "ai.onnx"))


def _onnxruntime():
    require_onnx(("onnxruntime",))
    import onnxruntime

    return onnxruntime


class SmoothedLinear(nn.Module):
    """y = (x / s)·(W·diag(s))ᵀ + b: the product of ``linear`` with SmoothQuant's per-input-channel
    scales s moved from the activations into the weights (equal in exact arithmetic; in int8 the
    activations lose their outlier channels)."""

    def __init__(self, linear: nn.Linear, scale: torch.Tensor):
        super().__init__()
        self.register_buffer("inverse_scale", (1.0 / scale).float())
        self.linear = nn.Linear(linear.in_features, linear.out_features, linear.bias is not None)
        with torch.no_grad():
            self.linear.weight.copy_(linear.weight.float() * scale[None, :])
            if linear.bias is not None:
                self.linear.bias.copy_(linear.bias.float())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x * self.inverse_scale)


def smoothed(model: nn.Module, texts: Sequence[str], alpha: float = 0.5, max_length: int = 128) -> nn.Module:
    """A copy of ``model`` whose encoder linear layers carry SmoothQuant's scales for ``texts``
    (the same scales :func:`babelzoo.compression.quantize` uses)."""
    from ..compression.quantization import _linear_names, activation_maxima, smoothing_scales

    if not 0.0 <= alpha <= 1.0:
        raise InputError(f"alpha={alpha} must lie in [0, 1] (SmoothQuant's migration strength)")
    tokenizer = getattr(model, "tokenizer", None)
    copied = copy.deepcopy(model, {id(tokenizer): tokenizer}).eval()
    names = _linear_names(copied, None)
    maxima = activation_maxima(copied, texts, names, max_length)
    for name in names:
        parent, _, child = name.rpartition(".")
        owner = copied.get_submodule(parent)
        linear = getattr(owner, child)
        setattr(owner, child, SmoothedLinear(linear, smoothing_scales(maxima[name], linear.weight.detach(), alpha)))
    return copied


class _OptionalLanguage(nn.Module):
    """Language embeddings where id -1 means "no language" (a zero vector), as ``language_ids=None``
    gives in PyTorch; a graph input cannot be absent."""

    def __init__(self, embedding: nn.Embedding):
        super().__init__()
        self.embedding = embedding

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids.clamp(min=0)) * ids.ge(0).unsqueeze(-1).to(self.embedding.weight.dtype)


def _with_optional_languages(model: nn.Module) -> nn.Module:
    tokenizer = getattr(model, "tokenizer", None)
    copied = copy.deepcopy(model, {id(tokenizer): tokenizer})
    copied.embeddings.language = _OptionalLanguage(copied.embeddings.language)
    return copied


class _Graph(nn.Module):
    """What ``model.onnx`` computes: the layer's states, their pooled sentence vector, and the
    head's logits."""

    def __init__(self, model: nn.Module, layer: int, pooling: str, head: bool, languages: bool):
        super().__init__()
        self.model, self.layer, self.pooling, self.head, self.languages = model, layer, pooling, head, languages

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                language_ids: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, ...]:
        hidden_states = self.layer != -1 or (self.head and self.model.head.needs_hidden_states)
        out = self.model(input_ids, attention_mask=attention_mask, language_ids=language_ids,
                         output_hidden_states=hidden_states)
        hidden = out.last_hidden if self.layer == -1 else out.hidden_states[self.layer]
        pooled = self.model.sentence_embedding(hidden, attention_mask, self.pooling)
        return (hidden, pooled, self.model.head(out)) if self.head else (hidden, pooled)


def check_exportable(model: nn.Module) -> None:
    """Refuse, naming why, a model whose graph is not a function of token ids and a mask."""
    from ..zoo.model import BabelModel

    if not isinstance(model, BabelModel):
        kind = type(model).__name__
        hint = (" (an encoder–decoder: its generation loops over the decoder; export the encoder's states "
                "from PyTorch)" if hasattr(model, "generate") else "")
        raise OnnxExportError(f"ONNX export takes a babelzoo text encoder (BabelModel); got {kind}{hint}")
    for part in ("vision", "audio"):
        if getattr(model.config, part, None) is not None:
            raise OnnxExportError(f"model {model.config.architecture!r} reads {part} input besides text; ONNX "
                                  f"export covers text encoders (input_ids and attention_mask) only")
    reason = getattr(model.encoder, "not_exportable", None)
    if reason is not None:
        raise OnnxExportError(f"model {model.config.architecture!r} cannot be exported to ONNX: {reason}")
    if getattr(model, "quantization", None) is not None:
        raise OnnxExportError("the model is quantized in PyTorch; export the full-precision model and pass "
                              "quantize='int8' (ONNX Runtime's int8 kernels)")


def export_onnx(model: nn.Module, directory: str | Path, *, tokenizer=None, layer: int = -1,
                pooling: Optional[str] = None, head: bool = False, quantize: Optional[str] = None,
                calibration: Optional[Sequence[str]] = None, alpha: float = 0.5,
                keep_fp32: Sequence[str] = (), opset: int = OPSET) -> Path:
    """Write ``model`` as a self-contained ONNX folder (see the module docstring) and return it.

    ``layer`` picks the states exported (``hidden_states`` index, -1 = last), ``pooling`` the
    sentence vector's pooling (default: the one the model fixes, else mean), ``head`` adds the
    task head's logits. ``quantize="int8"`` quantizes the graph for ONNX Runtime, with
    SmoothQuant when ``calibration`` texts are given, leaving the products ``keep_fp32`` names
    (:data:`FLOAT_PRODUCTS`) in float. The export is checked against the
    PyTorch model on a padded batch before the folder is written; the differences found, and
    the opset the written graph has, are recorded in ``babelzoo_onnx.json``. A folder babelzoo
    did not write is refused untouched."""
    check_exportable(model)
    check_opset(opset)
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise OnnxExportError("the export needs the model's tokenizer beside the graph: pass tokenizer= or load "
                              "the model with its tokenizer (from_pretrained, create_model(..., pretrained=True))")
    if quantize is not None and quantize not in QUANTIZATIONS:
        raise OnnxExportError(f"unknown ONNX quantization {quantize!r}; choose one of {', '.join(QUANTIZATIONS)}")
    if calibration is not None and quantize is None:
        raise OnnxExportError("calibration texts (SmoothQuant) apply to quantize='int8'")
    unknown = [kind for kind in keep_fp32 if kind not in FLOAT_PRODUCTS]
    if unknown or (keep_fp32 and quantize is None):
        raise OnnxExportError(f"keep_fp32={list(keep_fp32)!r}: products kept in float apply to quantize='int8' and "
                              f"are named by {', '.join(FLOAT_PRODUCTS)}")
    if head and model.head is None:
        raise OnnxExportError(f"head=True, but model {model.config.architecture!r} has no task head")
    layers = model.config.text.num_layers
    if not -1 <= layer <= layers:
        raise OnnxExportError(f"layer={layer}: the model has hidden states 0..{layers} (-1 = last)")
    require_onnx()
    model = model.eval()
    pooling = model.sentence_pooling(pooling, default="mean")
    source = smoothed(model, calibration, alpha) if calibration is not None else model
    languages = bool(model.config.text.num_languages)
    if languages:
        source = _with_optional_languages(source)
    graph = _Graph(source, layer, pooling, head, languages).eval()
    info = {"format": FORMAT, "architecture": model.config.architecture, "layer": layer, "pooling": pooling,
            "fixed_pooling": model.config.text.sentence_pooling, "hidden_size": model.config.text.hidden_size,
            "max_positions": model.config.text.max_positions, "language_ids": languages,
            "num_languages": model.config.text.num_languages,
            "inputs": _input_names(languages), "outputs": _output_names(head),
            "head": _head_info(model) if head else None, "quantization": None}

    def write(folder: Path) -> None:
        path = folder / ONNX_FILE
        _export_graph(graph, path, languages, head, opset)
        info["parity_fp32"], info["sentence_cosine_fp32"] = _parity(model, graph, path, languages)
        if quantize is not None:
            info["quantization"] = quantize_onnx(path, path, calibration=calibration, alpha=alpha,
                                                 keep_fp32=keep_fp32)
            info["parity_int8"], info["sentence_cosine_int8"] = _parity(model, graph, path, languages)
        info["opset"] = written_opset(path)
        if info["opset"] != opset:
            logger.warning("opset %d was asked for; torch.onnx wrote opset %d, recorded as such", opset, info["opset"])
        tokenizer.save(folder)
        (folder / "config.json").write_text(model.config.to_json(), encoding="utf-8")
        write_json_atomic(folder / INFO_FILE, info)

    return replace_owned_folder(directory, write, what="ONNX export")


def _input_names(languages: bool) -> list[str]:
    return ["input_ids", "attention_mask"] + (["language_ids"] if languages else [])


def _output_names(head: bool) -> list[str]:
    return ["last_hidden_state", "sentence_embedding"] + (["logits"] if head else [])


def _head_info(model) -> dict[str, Any]:
    return {"kind": model.head.name, "per_token": model.head.per_token, "labels": list(model.config.head.labels)}


def _example(batch: int, length: int, vocab: int, languages: bool, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Token ids with ragged padding (each row shorter than the last), the mask, language ids."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab, (batch, length), generator=generator)
    mask = torch.ones(batch, length, dtype=torch.long)
    for row in range(1, batch):
        mask[row, max(1, length - 2 * row):] = 0
    example = (ids, mask)
    return example + (torch.zeros(batch, length, dtype=torch.long),) if languages else example  # language 0


def _export_graph(graph: _Graph, path: Path, languages: bool, head: bool, opset: int) -> None:
    vocab = graph.model.config.text.vocab_size
    example = _example(3, 9, vocab, languages)
    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    shapes = tuple({0: batch, 1: length} for _ in example)
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the exporter's notes on axis names and deprecations
            program = torch.onnx.export(graph, example, dynamo=True, dynamic_shapes=shapes, opset_version=opset,
                                        input_names=_input_names(languages), output_names=_output_names(head),
                                        external_data=False, verbose=False, report=False)
    except Exception as err:  # the exporter's own message says which operation it could not trace
        raise OnnxExportError(f"torch.onnx could not export model {graph.model.config.architecture!r}: "
                              f"{type(err).__name__}: {str(err).splitlines()[0]}") from err
    program.save(str(path))


def _parity(model, graph: _Graph, path: Path, languages: bool) -> tuple[dict[str, float], float]:
    """The largest |difference| of any value of each output between ONNX Runtime and PyTorch on a
    padded batch of odd length (states at real tokens only; padding states are not defined), and
    the smallest cosine between a sentence vector of ONNX Runtime and PyTorch's."""
    session = _session(path, threads=None)
    example = _example(4, 13, model.config.text.vocab_size, languages, seed=1)
    with torch.no_grad():
        reference = _Graph(model, graph.layer, graph.pooling, graph.head, languages)(*example)
    outputs = session.run(None, dict(zip(_input_names(languages), (t.numpy() for t in example))))
    real = example[1].bool().numpy()
    diffs = {"last_hidden_state": float(np.abs(outputs[0] - reference[0].numpy())[real].max()),
             "sentence_embedding": float(np.abs(outputs[1] - reference[1].numpy()).max())}
    if graph.head:
        logits, want = outputs[2], reference[2].numpy()
        diffs["logits"] = float(np.abs(logits - want)[real].max() if graph.model.head.per_token
                                else np.abs(logits - want).max())
    got, want = outputs[1], reference[1].numpy()
    cosines = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    return diffs, float(cosines.min())


# products an int8 export may keep in float, each found by the operator that makes its input
FLOAT_PRODUCTS = {"ffn_out": ("Gelu", "FastGelu", "BiasGelu", "Relu")}


def float_products(graph, kinds: Sequence[str]) -> list[str]:
    """Names of the MatMul/Gemm nodes of ``graph`` (an ``onnx.ModelProto``) that ``kinds`` keep in
    float: for ``"ffn_out"``, those whose input is made by the feed-forward activation (through
    SmoothQuant's per-channel scaling, a Mul or Div, when the export is smoothed)."""
    made_by = {output: node for node in graph.graph.node for output in node.output}
    producers = {op for kind in kinds for op in FLOAT_PRODUCTS[kind]}

    def source(name: str):
        node = made_by.get(name)
        while node is not None and node.op_type in ("Mul", "Div"):
            node = made_by.get(node.input[0])
        return node.op_type if node is not None else None

    return [node.name for node in graph.graph.node
            if node.op_type in ("MatMul", "Gemm") and source(node.input[0]) in producers]


def quantize_onnx(source: str | Path, target: str | Path, *, calibration: Optional[Sequence[str]] = None,
                  alpha: float = 0.5, reduce_range: Optional[bool] = None,
                  keep_fp32: Sequence[str] = ()) -> dict[str, Any]:
    """ONNX Runtime's dynamic int8 quantization of the graph ``source`` into ``target`` (they may
    be the same file): MatMul and Gemm weights per output channel, activations per call, but for
    the products ``keep_fp32`` names (:data:`FLOAT_PRODUCTS`). ``reduce_range`` (7-bit weights)
    defaults to this CPU's need (see the module docstring). Returns what was done, for
    ``babelzoo_onnx.json``."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from ..zoo.layers.quantized import full_range_activations

    if reduce_range is None:
        reduce_range = not full_range_activations()
    with tempfile.TemporaryDirectory() as tmp:
        prepared, out = Path(tmp) / "prepared.onnx", Path(tmp) / ONNX_FILE
        quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)  # shapes inferred, graph optimised: what the quantizer reads best
        kept = float_products(onnx.load(str(prepared)), keep_fp32) if keep_fp32 else []
        if keep_fp32 and not kept:
            raise OnnxExportError(f"keep_fp32={list(keep_fp32)!r}: the graph has no such product")
        quantize_dynamic(str(prepared), str(out), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=reduce_range, op_types_to_quantize=["MatMul", "Gemm"], nodes_to_exclude=kept)
        out.replace(target)
    info: dict[str, Any] = {"scheme": "int8", "weights": "int8 per output channel", "activations": "uint8 per call",
                            "reduce_range": reduce_range}
    if keep_fp32:
        info["kept_fp32"] = {"products": list(keep_fp32), "nodes": len(kept)}
    if calibration is not None:
        info["smoothing"] = {"method": "smoothquant", "alpha": alpha, "texts": len(calibration)}
    return info


def _session(path: Path, threads: Optional[int]):
    ort = _onnxruntime()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if threads is not None:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def read_export_info(directory: str | Path) -> dict[str, Any]:
    """``babelzoo_onnx.json`` of an export folder, checked."""
    directory = Path(directory)
    path = directory / INFO_FILE
    if not path.is_file() or not (directory / ONNX_FILE).is_file():
        raise OnnxExportError(f"{directory}: not a babelzoo ONNX export (it needs {ONNX_FILE} and {INFO_FILE}; "
                              f"write one with babelzoo convert --to-onnx)")
    info = read_json_object(path, OnnxExportError)
    if info.get("format") != FORMAT:
        raise OnnxExportError(f"{path}: unsupported format {info.get('format')!r} (expected {FORMAT})")
    return info


class OnnxEncoder:
    """Sentence vectors from an ONNX export, as :class:`~babelzoo.evaluation.encoders.BabelEncoder`
    gives them from the PyTorch model: ``prefix`` + sentence, tokenized, truncated to
    ``max_length``, sorted by token count and batched, pooled, L2-normalised (``normalize``).

    The export fixes the layer and the pooling its ``sentence_embedding`` output uses; another
    ``pooling`` pools ``last_hidden_state`` here, another ``layer`` is refused (export that layer)."""

    def __init__(self, directory: str | Path, *, prefix: str = "", batch_size: int = 64,
                 max_length: Optional[int] = None, pooling: Optional[str] = None, layer: Optional[int] = None,
                 normalize: bool = True, threads: Optional[int] = None, name: Optional[str] = None):
        from ..datasets.tokenizer import load_tokenizer

        self.directory = Path(directory)
        self.info = read_export_info(self.directory)
        if layer is not None and layer != self.info["layer"]:
            raise OnnxExportError(f"{self.directory}: the export holds layer {self.info['layer']}, not {layer}; "
                                  f"export it again with --layer {layer}")
        fixed = self.info.get("fixed_pooling")
        if fixed is not None and pooling not in (None, fixed):
            raise OnnxExportError(f"pooling={pooling!r} was asked for, but {self.info['architecture']!r} fixes its "
                                  f"sentence vectors' pooling to {fixed!r}")
        self.tokenizer = load_tokenizer(self.directory)
        if self.tokenizer is None:
            raise OnnxExportError(f"{self.directory}: no tokenizer files beside {ONNX_FILE}")
        self.name = name or self.directory.name
        self.prefix, self.batch_size, self.normalize = prefix, batch_size, normalize
        self.pooling = pooling or self.info["pooling"]
        self.max_length = min(max_length or 512, self.info["max_positions"])
        self.session = _session(self.directory / ONNX_FILE, threads)

    @property
    def protocol(self) -> dict[str, Any]:
        return {"pooling": self.pooling, "layer": self.info["layer"], "prefix": self.prefix,
                "max_length": self.max_length, "similarity": "cosine", "runtime": "onnxruntime",
                "quantization": (self.info.get("quantization") or {}).get("scheme")}

    def encode(self, sentences: Sequence[str], lang: Optional[str] = None, progress: bool = False) -> np.ndarray:
        """[N, D] float32 vectors, one per sentence, in input order (``progress``: a bar on stderr)."""
        texts = [self.prefix + s for s in sentences]
        rows = self.tokenizer.batch_encode(texts, max_length=self.max_length, padding=False, truncation=True,
                                           return_tensors=None)["input_ids"] if texts else []
        return self.encode_ids(rows, lang, progress)

    def encode_ids(self, rows: Sequence[Sequence[int]], lang: Optional[str] = None, progress: bool = False
                   ) -> np.ndarray:
        """Like :meth:`encode`, from token ids (special tokens included, already truncated),
        batched as the PyTorch path batches them (:func:`~babelzoo.zoo.sentences.sorted_batches`)."""
        from ..zoo.sentences import l2_normalised, progress_bar, sorted_batches

        out = np.zeros((len(rows), self.info["hidden_size"]), dtype=np.float32)
        bar = progress_bar(len(rows), progress)
        try:
            for index, ids, mask in sorted_batches(rows, self.tokenizer.specials.pad, self.batch_size):
                out[index] = self._pooled(ids, mask, lang)
                if bar is not None:
                    bar.update(len(index))
        finally:
            if bar is not None:
                bar.close()
        return l2_normalised(out) if self.normalize else out

    def _pooled(self, ids: np.ndarray, mask: np.ndarray, lang: Optional[str]) -> np.ndarray:
        feed = {"input_ids": ids, "attention_mask": mask}
        if self.info["language_ids"]:
            index = self.tokenizer.specials.languages.get(lang, -1) if lang else -1
            index = index if index < self.info["num_languages"] else -1  # -1: no language embedding
            feed["language_ids"] = np.full(ids.shape, index, dtype=np.int64)
        hidden, pooled = self.session.run(["last_hidden_state", "sentence_embedding"], feed)
        if self.pooling == self.info["pooling"]:
            return pooled
        from ..zoo.layers.outputs import pool

        return pool(torch.from_numpy(hidden), torch.from_numpy(mask), self.pooling).numpy()

