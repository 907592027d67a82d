"""CoDEx-S link prediction: train TransE, DistMult, ComplEx and RotatE and report filtered MRR and
Hits@1/3/10 (head and tail prediction, mean of both) on the test split, beside the CoDEx paper
(Safavi & Koutra, EMNLP 2020, Table 4: TransE 0.354, ComplEx 0.465; LibKGE hyper-parameter
search, GPU).

    python -m benchmarks run codex_link_prediction --data-dir ../shared/data/codex-s \
        --models transe,distmult,complex,rotate

Model selection uses the validation split (best of periodic evaluations, early stopping); the
test split is evaluated once, with the selected weights. Every model has a CPU time budget
(``--max-minutes``); the settings below were chosen on the validation split only.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from typing import Optional, Sequence
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from babelzoo.knowledge.codex import load_codex  # noqa: E402
from babelzoo.knowledge.kge import LinkPredictionData, save_kge  # noqa: E402
from babelzoo.knowledge.kge_recipes import kge_recipe, train_by_recipe  # noqa: E402
from babelzoo.knowledge.link_prediction import evaluate  # noqa: E402
from benchmarks._results import write_results  # noqa: E402

PAPER_MRR = {"transe": 0.354, "complex": 0.465}  # CoDEx paper, CoDEx-S test, filtered MRR


def run(name: str, data: LinkPredictionData, minutes: float, epochs: int | None, log_every: int,
        save: Path | None = None) -> dict:
    cpu_start, wall_start = time.process_time(), time.perf_counter()

    def log(row: dict) -> None:
        print(f"  {name} epoch {row['epoch']:4g}  loss {row['loss']:.4f}  valid MRR {row['mrr']:.4f}  "
              f"{row['seconds']:.0f} CPU s", flush=True)

    model, summary, config = train_by_recipe(name, data, minutes, epochs, log_every, log)
    dim, model_kwargs = kge_recipe(name).dim, dict(kge_recipe(name).options)
    test = evaluate(model, data, "test")
    if save is not None:  # a KG embedding folder the leaderboard's codex_link_prediction task reads (kind: kge)
        save_kge(model, data.entities, data.relations, save / name, data="codex-s", best_epoch=summary["best_epoch"],
                 test={k: round(v, 4) for k, v in test.items()})
    return {"model": name, "dim": dim, "model_kwargs": model_kwargs, "train": {**vars(config)},
            "best_epoch": summary["best_epoch"], "epochs_run": summary["epochs"],
            "train_cpu_seconds": round(summary["seconds"], 1),
            "cpu_seconds": round(time.process_time() - cpu_start, 1),
            "wall_seconds": round(time.perf_counter() - wall_start, 1),
            "valid_mrr": round(summary["valid"]["mrr"], 4),
            "test": {k: round(v, 4) for k, v in test.items()},
            "paper_test_mrr": PAPER_MRR.get(name)}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=None, help="CoDEx-S folder (default: $BABELZOO_DATA_DIR/codex-s "
                        "or a checksummed download)")
    parser.add_argument("--models", default="transe,distmult,complex,rotate")
    parser.add_argument("--max-minutes", type=float, default=14.0,
                        help="training budget per model in CPU minutes (process time over all threads)")
    parser.add_argument("--epochs", type=int, default=None, help="override the epoch count (quick runs)")
    parser.add_argument("--eval-every", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="results JSON; a Markdown table is written beside it (.md)")
    parser.add_argument("--save", type=Path, default=None,
                        help="save each trained model in SAVE/NAME (kge.safetensors + kge.json) for the leaderboard")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    kb = load_codex("s", root=args.data_dir)
    data = LinkPredictionData.from_kb(kb)
    print(f"CoDEx-S: {data.num_entities} entities, {data.num_relations} relations, "
          f"{len(data.train)}/{len(data.valid)}/{len(data.test)} train/valid/test triples", flush=True)
    results = []
    for name in args.models.split(","):
        result = run(name, data, args.max_minutes, args.epochs, args.eval_every, args.save)
        results.append(result)
        t = result["test"]
        paper = f"{result['paper_test_mrr']:.3f}" if result["paper_test_mrr"] else "  -  "
        print(f"{name:9s} test MRR {t['mrr']:.4f} (paper {paper})  H@1 {t['hits@1']:.4f}  H@3 {t['hits@3']:.4f}  "
              f"H@10 {t['hits@10']:.4f}  head/tail MRR {t['head_mrr']:.4f}/{t['tail_mrr']:.4f}  "
              f"{result['wall_seconds']:.0f}s wall, {result['cpu_seconds']:.0f}s CPU", flush=True)
    table = markdown_table(results)
    print("\n" + table)
    if args.out:
        report = {"benchmark": "codex-s link prediction",
                  "protocol": "filtered MRR, Hits@1/3/10; head and tail prediction averaged; ties count half; "
                              "model selected on valid MRR",
                  "machine": {"threads": args.threads, "processor": platform.processor() or platform.machine(),
                              "torch": torch.__version__},
                  "test_triples": len(data.test), "entities": data.num_entities, "max_minutes": args.max_minutes,
                  "results": results}
        write_results(args.out, report, markdown, "codex_link_prediction")


def markdown(report: dict) -> str:
    results, threads = report["results"], report["machine"]["threads"]
    sizes = f", {report['test_triples']} triples, {report['entities']} entities" if "test_triples" in report else ""
    budget = f", training budget {report['max_minutes']:g} CPU minutes per model" if "max_minutes" in report else ""
    return ("# CoDEx-S link prediction\n\n"
            f"Test split, filtered ranking (head and tail averaged, ties count half){sizes}. Model selection on valid "
            f"MRR. CPU time is process time over {threads} thread(s){budget}. Paper: Safavi & Koutra (EMNLP 2020), "
            "Table 4 (LibKGE hyper-parameter search on GPU).\n\n"
            + markdown_table(results) + "\n\nSettings:\n\n" + "\n".join(map(setting_line, results)) + "\n")


def setting_line(r: dict) -> str:
    train = r["train"]
    return (f"- {r['model']}: dim {r['dim']}, {json.dumps(r['model_kwargs'])}, loss {train['loss']}, "
            f"lr {train['lr']}, batch {train['batch_size']}"
            + (f", {train['negatives']} negatives" if train["loss"] != "1vsall" else "")
            + (f", {train['regularizer']} {train['regularization_weight']}" if train["regularizer"] else "")
            + (f", label smoothing {train['label_smoothing']}" if train["label_smoothing"] else "")
            + f"; best epoch {r['best_epoch']} of {r['epochs_run']}")


def markdown_table(results: list[dict]) -> str:
    lines = ["| model | test MRR | paper MRR | Hits@1 | Hits@3 | Hits@10 | valid MRR | epochs | CPU time | wall time |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        t = r["test"]
        paper = f"{r['paper_test_mrr']:.3f}" if r["paper_test_mrr"] else "–"
        lines.append(f"| {r['model']} | {t['mrr']:.3f} | {paper} | {t['hits@1']:.3f} | {t['hits@3']:.3f} | "
                     f"{t['hits@10']:.3f} | {r['valid_mrr']:.3f} | {r['epochs_run']} | "
                     f"{r['cpu_seconds'] / 60:.1f} min | {r['wall_seconds'] / 60:.1f} min |")
    return "\n".join(lines)

if __name__ == "__main__":
    main()
