"""How babelzoo degrades when another process competes for the cores: the demo's training steps
and an encoder, quiet and beside one CPU-bound process, with the thread count babelzoo chooses
(:mod:`babelzoo._threads`) and with every core's thread (torch's default, as before).

    python benchmarks/cpu_contention.py                    # the steps and the encoder (about 3 minutes on 2 cores)
    python benchmarks/cpu_contention.py --demo             # and `babelzoo demo` itself, quiet and contended

Each cell runs in a fresh interpreter: the shipped ``demo`` recipe's model and objectives
(``babelzoo.train.run.build_run``: the embedded catalogs, its tokenizer, ``--steps`` optimizer
steps through the :class:`~babelzoo.train.trainer.Trainer`), then ``model.encode`` of
``--sentences`` catalog sentences. The competitor is a Python loop that keeps one core busy
(``while True: x += 1``), started before the cell and stopped after it. ``BABELZOO_THREADS``
pins the "every core" policy to ``os.cpu_count()`` threads. Reported: seconds per step and
sentences/s, and each policy's contended ÷ quiet time; with ``--demo``, the demo's wall time.
Writes JSON (``--out``) and a Markdown table beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks._results import default_out, write_results  # noqa: E402

# a busy loop that ends with the benchmark that started it, even when that one is killed
COMPETITOR = ("import os\nparent = os.getppid()\nx = 0\nwhile True:\n    x += 1\n"
              "    if x % 5_000_000 == 0 and os.getppid() != parent:\n        break\n")
POLICIES = {"chosen": None, "every core": str(os.cpu_count() or 1)}


def cell(steps: int, sentences: int) -> dict:
    """One measurement in this interpreter (the ``--cell`` entry point)."""
    from babelzoo.datasets.sources import parse_source
    from babelzoo.train.run import build_run
    from babelzoo.train.config import load_recipe, recipe_path
    from babelzoo.typed import Where

    with tempfile.TemporaryDirectory() as tmp:
        path = recipe_path("demo")
        cfg = load_recipe(path).replace(output_dir=tmp, max_steps=steps, checkpoints={"every": steps},
                                        logging={"progress": False, "every": steps, "measure_mfu": False,
                                                 "tensorboard": False})
        run = build_run(cfg, path)
        model, tokenizer = run.model, run.tokenizer
        start = time.perf_counter()
        summary = run.trainer().fit()
        train_s = time.perf_counter() - start
        source = parse_source({"kind": "catalog_text", "langs": ["en", "de", "fr", "es", "ru"]}, Where(label="text"))
        source.load()
        texts = [t for lang_texts in source.texts(None).values() for t in lang_texts][:sentences]
        model.tokenizer = tokenizer
        model.encode(texts[:64])  # warm-up (and the encoder's thread choice)
        start = time.perf_counter()
        model.encode(texts, batch_size=64)
        encode_s = time.perf_counter() - start
    return {"steps": steps, "step_s": train_s / steps, "train_s": train_s, "threads": summary["cpu_threads"],
            "threads_why": summary["cpu_threads_why"], "sentences": len(texts),
            "sentences_per_s": len(texts) / encode_s}


def measured(command: list[str], policy: Optional[str], contended: bool) -> tuple[float, str]:
    """Run ``command`` (with the policy's ``BABELZOO_THREADS``), beside a competitor if
    ``contended``; its wall time and standard output."""
    env = {k: v for k, v in os.environ.items() if k != "BABELZOO_THREADS"}
    if policy is not None:
        env["BABELZOO_THREADS"] = policy
    competitor = subprocess.Popen([sys.executable, "-c", COMPETITOR]) if contended else None
    try:
        time.sleep(0.5 if contended else 0)
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO)
        wall = time.perf_counter() - start
    finally:
        if competitor is not None:
            competitor.kill()
            competitor.wait()
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return wall, done.stdout


def markdown(report: dict) -> str:
    lines = ["# CPU contention: one competing CPU-bound process", "",
             f"Machine: {report['machine']}; {report['cpus']} CPUs. Command: `{report['command']}`", "",
             f"The demo recipe's training ({report['steps']} steps, fresh interpreter each) and `model.encode` of "
             f"{report['sentences']} sentences; *chosen*: babelzoo's thread choice, *every core*: "
             "`BABELZOO_THREADS` = the CPU count (torch's default before the choice).", "",
             "| threads | competitor | threads used | s/step | contended ÷ quiet | sentences/s | contended ÷ quiet |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for policy, rows in report["cells"].items():
        quiet = rows["quiet"]
        for label, row in rows.items():
            lines.append(f"| {policy} | {label} | {row['threads']} | {row['step_s']:.3f} | "
                         f"{row['step_s'] / quiet['step_s']:.2f}× | {row['sentences_per_s']:.0f} | "
                         f"{quiet['sentences_per_s'] / row['sentences_per_s']:.2f}× |")
    if "demo" in report:
        d = report["demo"]
        lines += ["", f"`babelzoo demo --fresh` (chosen threads): quiet {d['quiet_s']:.0f} s, beside one competitor "
                  f"{d['contended_s']:.0f} s: **{d['contended_s'] / d['quiet_s']:.2f}×** (target ≤ 2.5×)."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--sentences", type=int, default=2000)
    p.add_argument("--demo", action="store_true", help="also time `babelzoo demo --fresh`, quiet and contended")
    p.add_argument("--out", default=str(default_out("cpu_contention")))
    p.add_argument("--cell", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cell:
        print(json.dumps(cell(args.steps, args.sentences)))
        return {}
    from benchmarks._speed.common import machine

    import torch

    report = {"command": "python benchmarks/cpu_contention.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "machine": machine(torch.device("cpu"))["cpu"], "cpus": os.cpu_count(), "steps": args.steps,
              "sentences": args.sentences, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "cells": {}}
    command = [sys.executable, str(Path(__file__).resolve()), "--cell", "--steps", str(args.steps),
               "--sentences", str(args.sentences)]
    for policy, threads in POLICIES.items():
        rows = {}
        for label, contended in (("quiet", False), ("one competitor", True)):
            _, out = measured(command, threads, contended)
            rows[label] = json.loads(out.strip().splitlines()[-1])
            print(f"{policy:>10} | {label:<14} | {rows[label]['threads']} threads | {rows[label]['step_s']:.3f} s/step | "
                  f"{rows[label]['sentences_per_s']:.0f} sentences/s", flush=True)
        report["cells"][policy] = rows
    if args.demo:
        with tempfile.TemporaryDirectory() as tmp:
            demo = [sys.executable, "-m", "babelzoo", "demo", "--fresh", "--out", tmp]
            quiet, _ = measured(demo, None, False)
            contended, _ = measured(demo, None, True)
        report["demo"] = {"quiet_s": quiet, "contended_s": contended}
        print(f"demo: quiet {quiet:.0f} s, contended {contended:.0f} s ({contended / quiet:.2f}x)", flush=True)
    table = markdown(report)
    write_results(args.out, report, markdown, "cpu_contention")
    print(table)
    return report


if __name__ == "__main__":
    main()
