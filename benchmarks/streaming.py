"""Streaming pre-training beside the cached path, and what resuming a stream costs.

    BABELZOO_DATA_DIR=../shared/data python benchmarks/streaming.py --work /tmp/streaming

1. One corpus (Multi30k's English, German, French and Czech training captions, repeated to
   ``--lines`` lines, so that the resumed positions below lie inside the first epoch), one
   tokenizer, the shipped ``mlm_tiny`` recipe run as users run it (``babelzoo pretrain``) for
   ``--steps`` steps with that corpus as an ``hf_dataset`` source: tokenised into the cache first
   (``streaming: false``, with the recipe's ``num_workers`` and with 0) and streamed
   (``streaming: true``, tokenised as each step asks). Reported: training tokens/s (the steps' own
   time) and the run's wall time, start-up and tokenising the corpus included.
2. Resuming a stream at step N: a stream advanced to step N (the rows read, as a run leaves them)
   saves its state; a fresh process loads it and draws step N+1's batch. Reported beside the
   time that reading the rows before step N again would take (what resuming by replaying costs).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from benchmarks._results import default_out, write_results  # noqa: E402

RECIPE = "mlm_tiny"
LANGS = ("en", "de", "fr", "cs")
TARGET_RATIO, TARGET_RESUME_S = 0.9, 5.0


def build_corpus(data_dir: Path, lines: int, path: Path) -> Path:
    """Multi30k's training captions of every language, repeated to ``lines`` lines."""
    if path.is_file() and sum(1 for _ in path.open(encoding="utf-8")) == lines:
        return path
    captions = []
    for lang in LANGS:
        with gzip.open(data_dir / "multi30k" / f"train.{lang}.gz", "rt", encoding="utf-8") as f:
            captions += [line.strip() for line in f if line.strip()]
    with path.open("w", encoding="utf-8") as out:
        for i in range(lines):
            out.write(captions[i % len(captions)] + "\n")
    return path


def source(corpus: Path, streaming: bool) -> dict:
    return {"kind": "hf_dataset", "path": "text", "data_files": str(corpus), "lang": "en", "streaming": streaming}


def pretrain(work: Path, name: str, corpus: Path, streaming: bool, steps: int, tokenizer: Optional[Path],
             extra: Sequence[str] = ()) -> dict:
    """``babelzoo pretrain --config mlm_tiny`` on the corpus; its summary and wall time."""
    out = work / name
    sets = [f"data.mlm={json.dumps([source(corpus, streaming)])}", f"output_dir={out}", f"max_steps={steps}",
            f"checkpoints.every={steps}", "logging.progress=false", "logging.tensorboard=false", "logging.every=10", *extra]
    if tokenizer is not None:
        sets.append(f"tokenizer={json.dumps({'path': str(tokenizer)})}")
    command = [sys.executable, "-m", "babelzoo", "pretrain", "--config", RECIPE,
               *[part for s in sets for part in ("--set", s)]]
    start = time.perf_counter()
    with open(work / f"{name}.log", "w", encoding="utf-8") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
    wall = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{shlex.join(command)} failed; see {work / f'{name}.log'}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {"command": "babelzoo " + shlex.join(command[3:]), "wall_s": wall,
            "tokens_per_s": summary["tokens_per_s"], **after_first_step(out / "metrics.jsonl"),
            "train_time_s": summary["train_time_s"],
            "data_time_fraction": summary.get("data_time_fraction"), "steps": summary["steps"],
            "final_loss": summary.get("final_loss")}


def after_first_step(metrics: Path) -> dict[str, float]:
    """Training tokens/s and data wait over steps 2..N: step 1 also opens what the run reads (the
    stream and its shuffle buffer; the cached run's loader), once per run however long it is."""
    rows = [r for r in map(json.loads, metrics.read_text(encoding="utf-8").splitlines()) if "step_time" in r]
    later = [r for r in rows if r["step"] > 1]
    time_s = sum(r["step_time"] for r in later)
    return {"steady_tokens_per_s": sum(r["tokens"] for r in later) / time_s,
            "steady_data_time_fraction": sum(r["data_time"] for r in later) / time_s,
            "first_step_s": next(r["step_time"] for r in rows if r["step"] == 1)}


RESUME_CHILD = """
import json, sys, time
start = time.perf_counter()
from babelzoo.datasets.streaming import StreamedCorpus
from babelzoo.datasets.tokenizer import load_tokenizer
from babelzoo.datasets.sources import parse_source
from babelzoo.typed import Where
spec, tokenizer_dir, state_file, batch = json.loads(sys.argv[1])
imported = time.perf_counter()
tokenizer = load_tokenizer(tokenizer_dir)
corpus = StreamedCorpus(parse_source(spec, Where()), tokenizer, "t", 0)
corpus.load_state_dict(json.load(open(state_file)))
examples = corpus.take(batch)
print(json.dumps({"resume_s": time.perf_counter() - imported, "import_s": imported - start,
                  "first": examples[0].ids[:5]}))
"""


def resume_cost(work: Path, corpus: Path, tokenizer: Path, step: int, batch: int) -> dict:
    """Advance a stream to ``step`` (reading its rows, as a run would have), save its state, and
    time a fresh process that loads it and draws the next step's batch."""
    from babelzoo.datasets.sources import parse_source
    from babelzoo.datasets.streaming import StreamedCorpus
    from babelzoo.typed import Where

    spec = source(corpus, True)
    stream = StreamedCorpus(parse_source(spec, Where()), None, "t", 0)
    start = time.perf_counter()
    for _ in range(step):
        stream.take_text(batch)  # the rows only: the tokens are not needed to stand at step N
    replay = time.perf_counter() - start
    state_file = work / f"stream-state-{step}.json"
    state_file.write_text(json.dumps(stream.state_dict()), encoding="utf-8")
    child = subprocess.run([sys.executable, "-c", RESUME_CHILD, json.dumps([spec, str(tokenizer), str(state_file),
                                                                            batch])],
                           capture_output=True, text=True, cwd=REPO)
    if child.returncode:
        raise SystemExit(f"resuming at step {step} failed:\n{child.stderr[-2000:]}")
    measured = json.loads(child.stdout.strip().splitlines()[-1])
    return {"step": step, "rows_read": stream.rows_read, "state_bytes": state_file.stat().st_size,
            "reading_again_s": replay, **measured}


def source_default(name: str) -> Any:
    """A default of the hf_dataset source (what the runs above use)."""
    import dataclasses

    from babelzoo.datasets.streaming import HfDataset

    return next(f.default for f in dataclasses.fields(HfDataset) if f.name == name)


def machine() -> dict[str, Any]:
    import torch

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
    except (OSError, StopIteration):
        cpu = platform.processor()
    return {"python": platform.python_version(), "torch": torch.__version__, "cpus": os.cpu_count(), "cpu": cpu}


def markdown(report: dict) -> str:
    runs, resumes = report["runs"], report["resume"]
    cached = runs["cached"]["tokens_per_s"]
    lines = ["# Streaming pre-training beside the cached path", "", f"`{report['command']}`", "",
             f"{report['machine']['cpus']} CPUs ({report['machine']['cpu']}), commit {report['commit']}. "
             f"Corpus: {report['lines']:,} lines; `{RECIPE}` for {report['steps']} steps, one tokenizer.", "",
             "| run | training tokens/s | ÷ cached | data wait | step 1 s | tokens/s, steps 2–N | data wait, "
             "steps 2–N | wall s (start-up and tokenising included) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, run in runs.items():
        lines.append(f"| {name} | {run['tokens_per_s']:,.0f} | {run['tokens_per_s'] / cached:.2f}× | "
                     f"{100 * (run['data_time_fraction'] or 0):.1f}% | {run['first_step_s']:.2f} | "
                     f"{run['steady_tokens_per_s']:,.0f} | {100 * run['steady_data_time_fraction']:.1f}% | "
                     f"{run['wall_s']:,.0f} |")
    lines += ["", "The streamed run reads its examples in the training process, the next step's in a background "
                  "thread while a step trains; its step 1 opens the stream and fills the shuffle buffer "
                  f"({report['shuffle_buffer']:,} rows), once per run."]
    lines += ["", "## Resuming a stream", "",
              f"A stream standing at step N (global batch {report['batch']}) is saved; a fresh process loads its "
              "state and draws step N+1's batch (after importing babelzoo). Beside it: reading the rows before step "
              "N again, without tokenising them.", "",
              "| step | rows read | state (bytes) | resume s | reading the rows again s |", "|---:|---:|---:|---:|---:|"]
    for r in resumes:
        lines.append(f"| {r['step']:,} | {r['rows_read']:,} | {r['state_bytes']:,} | {r['resume_s']:.2f} | "
                     f"{r['reading_again_s']:.1f} |")
    fastest = max((name for name in runs if name.startswith("cached")), key=lambda n: runs[n]["tokens_per_s"])
    ratio = runs["streamed"]["tokens_per_s"] / runs[fastest]["tokens_per_s"]
    steady = max((name for name in runs if name.startswith("cached")), key=lambda n: runs[n]["steady_tokens_per_s"])
    steady_ratio = runs["streamed"]["steady_tokens_per_s"] / runs[steady]["steady_tokens_per_s"]
    worst = max(r["resume_s"] for r in resumes)
    lines += ["", "## Targets", "", "| target | measured | goal | met |", "|---|---:|---:|---|",
              f"| streamed ÷ the fastest cached run ({fastest}), training tokens/s | {ratio:.2f} | ≥ {TARGET_RATIO} | "
              f"{'yes' if ratio >= TARGET_RATIO else '**no**'} |",
              f"| the same over steps 2–N ({steady}) | {steady_ratio:.2f} | ≥ {TARGET_RATIO} | "
              f"{'yes' if steady_ratio >= TARGET_RATIO else '**no**'} |",
              f"| resume at step {resumes[-1]['step']:,}, s | {resumes[-1]['resume_s']:.2f} | < {TARGET_RESUME_S:g} | "
              f"{'yes' if resumes[-1]['resume_s'] < TARGET_RESUME_S else '**no**'} |",
              f"| slowest resume, s | {worst:.2f} | | |"]
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/streaming.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("BABELZOO_DATA_DIR", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--work", default=str(REPO / "runs" / "streaming"))
    parser.add_argument("--out", default=str(default_out("streaming")))
    parser.add_argument("--lines", type=int, default=700_000)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--resume-steps", default="10,1000,10000")
    args = parser.parse_args(argv)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = build_corpus(Path(args.data_dir), args.lines, work / "corpus.txt")
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    runs = {"cached": pretrain(work, "cached", corpus, False, args.steps, None)}
    tokenizer = work / "cached" / "tokenizer"
    runs["cached, num_workers 0"] = pretrain(work, "cached-0", corpus, False, args.steps, tokenizer,
                                             ["num_workers=0"])
    runs["streamed"] = pretrain(work, "streamed", corpus, True, args.steps, tokenizer, ["num_workers=0"])
    from babelzoo.train.config import load_recipe, recipe_path

    batch = load_recipe(recipe_path(RECIPE)).batch_size
    resumes = [resume_cost(work, corpus, tokenizer, int(s), batch) for s in args.resume_steps.split(",")]
    report = {"suite": "streaming", "command": shlex.join(["python", "benchmarks/streaming.py",
                                                            *(sys.argv[1:] if argv is None else argv)]),
              "commit": commit, "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "machine": machine(),
              "lines": args.lines, "steps": args.steps, "batch": batch, "shuffle_buffer": source_default("shuffle_buffer"),
              "runs": runs, "resume": resumes}
    write_results(args.out, report, markdown, "streaming")
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
