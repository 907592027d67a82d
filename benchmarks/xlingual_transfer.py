"""The cross-lingual pre-training objectives judged by zero-shot transfer after fine-tuning.

The arms of :mod:`benchmarks.xlingual_objectives` ((a) MLM, (b) + TLM, (c) + CLWR + CLPC +
CLMLM, (d) (c) + XLCo), pre-trained on the Multi30k training split (en, de, fr, cs; one language
(pair) per batch, every arm the same number of optimizer steps over batches of the same size),
then each fine-tuned on English only by the shipped recipes and tested on every language
present (the ``babelzoo finetune`` path, :func:`babelzoo.finetune.run_finetune`):

* SIB-200 topic classification (recipe ``sib200_e5_small``): train ``eng_Latn/train``, select
  on ``eng_Latn/dev``, accuracy on every language's ``test``;
* UD POS (recipe ``udpos_e5_small``): train English EWT, select on a held-back tenth of it,
  UPOS accuracy on every treebank's test file;
* Tatoeba accuracy@1 of the pre-trained (not fine-tuned) encoder, English↔X, mean-pooled last
  layer, cosine nearest neighbour.

Two settings:

* ``scratch``: the tiny encoder of ``xlingual_objectives`` (its tokenizer trained on Multi30k
  train), random init, the same step budget; the fine-tuning recipes with ``lr`` raised for a
  randomly initialised model and no ``"query: "`` prefix (the same overrides for every arm).
* ``e5``: continued pre-training of ``multilingual_e5_small`` (its own tokenizer, a freshly
  initialised MLM head tied to its frozen word embeddings) for a fixed number of steps per arm,
  then the shipped recipes unchanged.

"Covered" languages are those the pre-training data holds (de, fr, cs; UD German and French);
every other language is reported too. No target-language label is read for training or model
selection: the recipes train and select on English only.

    python -m benchmarks run xlingual_transfer_e5 --data-dir ../shared/data
    python -m benchmarks run xlingual_transfer_scratch --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo.evaluation.encoders import BabelEncoder  # noqa: E402
from babelzoo.evaluation.tasks import TaskContext, load_tasks  # noqa: E402
from babelzoo.finetune.run import run_finetune  # noqa: E402
from babelzoo.objectives.mixture import Mixture  # noqa: E402
from babelzoo.train.config import load_recipe, recipe_path  # noqa: E402
from babelzoo.train.trainer import Trainer  # noqa: E402
from babelzoo.zoo.factory import create_model  # noqa: E402
from benchmarks._results import finished_arms, logged_means, write_results  # noqa: E402
from benchmarks.xlingual_objectives import (ARMS, add_arm_arguments, arm_config, build_datasets,  # noqa: E402
                                            finish, multi30k_tokenizer, new_model, objective_spec,
                                            read_corpora)

E5 = "multilingual_e5_small"
COVERED = {"sib200": ("deu_Latn", "fra_Latn", "ces_Latn"), "udpos": ("UD_German-GSD", "UD_French-GSD")}
RECIPES = {"sib200": "sib200_e5_small", "udpos": "udpos_e5_small"}
TATOEBA = ("deu", "fra", "ces", "hin", "swh", "rus")
TATOEBA_COVERED = ("deu", "fra", "ces")


def freeze_word_embeddings(model) -> None:
    for name, param in model.named_parameters():
        if name.startswith("embeddings.word"):
            param.requires_grad_(False)


def pretrain(arm: str, model, tokenizer, data, args, work: Path, language_ids: bool) -> dict[str, Any]:
    """Train ``model`` in place with the arm's objective mixture; the run's record."""
    spec = objective_spec(ARMS[arm], args, language_ids=language_ids)
    out_dir = work / "pretrain" / arm
    if out_dir.exists():
        shutil.rmtree(out_dir)  # this script's own run folder: start fresh, never resume
    torch.manual_seed(args.seed + 1)
    mixture = Mixture.from_spec(spec, tokenizer.specials, model.config, mode="sample")
    cpu0, wall0 = time.process_time(), time.perf_counter()
    summary = Trainer(model, mixture, {n: data[n] for n in ARMS[arm]}, arm_config(spec, args, out_dir)).fit()
    return {"objectives": spec, "steps": summary["steps"], "skipped_steps": summary["skipped_steps"],
            "tokens": summary["tokens"], "final_metrics": logged_means(out_dir, 100, ("/loss", "/accuracy")),
            "cpu_s": round(time.process_time() - cpu0, 1), "wall_s": round(time.perf_counter() - wall0, 1)}


def tatoeba(model, tokenizer, args, name: str) -> dict[str, Any]:
    """Tatoeba accuracy@1 per language, both directions, of the pre-trained encoder."""
    start = time.perf_counter()
    encoder = BabelEncoder(name, model, tokenizer, layer=-1, prefix=args.prefix, max_length=128,
                           use_language_ids=False)
    context = TaskContext(data_dir=args.data_dir, languages=list(TATOEBA), log=lambda _: None)
    model.eval()
    table: dict[str, dict[str, float]] = {}
    for row in load_tasks().get("tatoeba")(encoder, context):
        src, tgt = row.protocol["direction"].split("->")
        english = src == "eng"
        table.setdefault(tgt if english else src, {})["en2x" if english else "x2en"] = row.value
    both = {lang: float(np.mean(list(cell.values()))) for lang, cell in table.items()}
    return {"by_language": table, "mean": float(np.mean(list(both.values()))),
            "mean_covered": float(np.mean([both[lang] for lang in TATOEBA_COVERED if lang in both])),
            "seconds": round(time.perf_counter() - start, 1)}


def finetune(task: str, model, tokenizer, args, work: Path, name: str) -> dict[str, Any]:
    """Fine-tune a copy of ``model`` on English by the task's shipped recipe; test accuracies."""
    cfg = load_recipe(recipe_path(RECIPES[task]), list(args.finetune_set))
    cfg = cfg.replace(model=name, output_dir=str(work / "finetune" / name / task), checkpoints={"resume": False},
                      logging={"progress": False}, seed=args.seed)
    start = time.perf_counter()
    result = run_finetune(cfg, data_dir=args.data_dir, base=model, tokenizer=tokenizer, log=lambda _: None)
    test = {lang: row["accuracy"] for lang, row in result["test"].items()}
    covered = [test[lang] for lang in COVERED[task] if lang in test]
    source = result["protocol"]["source"]
    return {"test": test, "source": test.get(source), "mean_zero_shot": result["mean_zero_shot"],
            "mean_covered": float(np.mean(covered)) if covered else None, "dev": result["dev"],
            "best_step": result["protocol"]["best_step"], "protocol": result["protocol"],
            "seconds": round(time.perf_counter() - start, 1)}


def evaluate_arm(name: str, model, tokenizer, args, work: Path) -> dict[str, Any]:
    row = {"tatoeba": tatoeba(model, tokenizer, args, name)}
    for task in ("sib200", "udpos"):
        row[task] = finetune(task, model, tokenizer, args, work, name)
    return row


# Options that do not change a number: a report written under other values of these still counts.
NOT_PROTOCOL = ("out", "work_dir", "threads", "arms", "baseline", "keep_done", "data_dir")


def markdown(report: dict[str, Any]) -> str:
    head = ["arm", "steps", "pre-train CPU s", "SIB-200 en", "SIB-200 covered", "SIB-200 zero-shot",
            "UD POS en", "UD POS covered", "UD POS zero-shot", "Tatoeba covered", "Tatoeba mean"]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for row in report["arms"]:
        s, u, t = row["sib200"], row["udpos"], row["tatoeba"]
        cells = [row["arm"], str(row.get("pretrain", {}).get("steps", 0)),
                 f"{row.get('pretrain', {}).get('cpu_s', 0):.0f}"]
        cells += [f"{100 * v:.1f}" for v in (s["source"], s["mean_covered"], s["mean_zero_shot"], u["source"],
                                             u["mean_covered"], u["mean_zero_shot"], t["mean_covered"], t["mean"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", choices=["scratch", "e5"], required=True)
    add_arm_arguments(parser, steps=None, lr=None, warmup=None)
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                        help="also evaluate the starting point (random init / e5 as shipped)")
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--keep-done", action=argparse.BooleanOptionalAction, default=True,
                        help="keep the arms an earlier run with the same settings wrote to --out")
    parser.add_argument("--finetune-set", nargs="*", default=None,
                        help="recipe overrides for every arm (default: none for e5; lr=5e-4 and no prefix "
                             "for scratch)")
    args = parser.parse_args(argv)
    scratch = args.setting == "scratch"
    args.steps = args.steps or (1500 if scratch else 150)
    args.lr = args.lr or (1e-3 if scratch else 2e-5)
    args.warmup = args.warmup if args.warmup is not None else (200 if scratch else 15)
    args.prefix = "" if scratch else "query: "
    if args.finetune_set is None:
        args.finetune_set = ["optim.lr=5e-4", "task.prefix=", "task.max_length=128"] if scratch else []
    if not scratch:
        args.model = E5
    if args.threads:
        torch.set_num_threads(args.threads)
    work = args.work_dir or REPO / "runs" / f"xlingual_transfer_{args.setting}"
    start_cpu, start = time.process_time(), time.perf_counter()
    mono, pairs = read_corpora(args.data_dir, args.train_limit)
    if scratch:
        tokenizer, fingerprint = multi30k_tokenizer(args, mono, pairs, work)
        data = build_datasets(mono, pairs, tokenizer, fingerprint, work / "cache", args.batch_size, args.seed)

        def fresh():
            return new_model(tokenizer, args.seed, args)
    else:
        tokenizer = create_model(E5, pretrained=True).tokenizer
        data = build_datasets(mono, pairs, tokenizer, E5, work / "cache", args.batch_size, args.seed,
                              encode_lang=False)

        def fresh():
            model = create_model(E5, pretrained=True, mlm_head=True)
            freeze_word_embeddings(model)
            return model
    print(f"{args.setting}: Multi30k train, {len(mono[0])} sentences × {len(mono)} languages, {len(pairs)} "
          f"directions; {args.steps} steps per arm ({time.perf_counter() - start:.0f}s)", flush=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    report: dict[str, Any] = {"setting": args.setting, "model": args.model, "settings": settings,
                              "covered": {**COVERED, "tatoeba": list(TATOEBA_COVERED)}, "tatoeba": list(TATOEBA),
                              "protocol": {"pretraining": "Multi30k train (en, de, fr, cs)",
                                           "finetuning": {t: RECIPES[t] for t in RECIPES},
                                           "overrides": list(args.finetune_set),
                                           "zero_shot": "fine-tuned and selected on English only",
                                           "tatoeba": "mean-pooled last layer, cosine, accuracy@1, "
                                                      f"prefix {args.prefix!r}"},
                              "arms": []}

    def record(row: dict[str, Any]) -> None:
        report["arms"].append(row)
        print(f"{row['arm']}: SIB-200 en {row['sib200']['source']:.3f} covered {row['sib200']['mean_covered']:.3f} "
              f"zero-shot {row['sib200']['mean_zero_shot']:.3f} | UD POS en {row['udpos']['source']:.3f} covered "
              f"{row['udpos']['mean_covered']:.3f} zero-shot {row['udpos']['mean_zero_shot']:.3f} | Tatoeba "
              f"covered {row['tatoeba']['mean_covered']:.3f} all {row['tatoeba']['mean']:.3f}", flush=True)
        if args.out:  # after every arm, so a long run's finished arms are kept
            report["wall_s"] = round(time.perf_counter() - start, 1)
            write_results(args.out, report, markdown, "xlingual_transfer")

    done = finished_arms(args.out, report, NOT_PROTOCOL) if args.keep_done else {}
    if done:
        report["arms"] = list(done.values())
        print(f"kept from {args.out}: {', '.join(done)}", flush=True)
    if args.baseline:
        name = "random init" if scratch else f"{E5} (no continued pre-training)"
        if name not in done:
            model = fresh()
            record({"arm": name, **evaluate_arm(name.split(" ")[0], model, tokenizer, args, work)})
    for arm in args.arms:
        if arm in done:
            continue
        model = fresh()
        row = {"arm": arm, "pretrain": pretrain(arm, model, tokenizer, data, args, work, language_ids=scratch)}
        record({**row, **evaluate_arm(arm, model, tokenizer, args, work)})
    finish(report, markdown, args, start_cpu, start, "xlingual_transfer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
