"""The seeds' pre-training systems side by side: one tokenizer, one data set, one step budget,
the shipped recipes, then the same fine-tuning and retrieval tests for every arm.

Each arm is a shipped recipe (``babelzoo pretrain --config <recipe>``), run through the path
users run (:func:`babelzoo.train.run.build_run` and the :class:`~babelzoo.train.trainer.Trainer`)
with the same overrides for every arm:

* data: the embedded gettext catalogs (Gramps and Django, en, de, fr, es, ru, cs), in the form
  each objective consumes: sentences (``catalog_text``), documents of consecutive messages of
  one program file (``catalog_documents``; the catalogs hold no English documents, as English is
  the msgid) or English↔X pairs (``catalog_pairs``), the training split only;
* one unigram tokenizer trained on the sentences of that data, shared by every arm;
* the same compute: every arm trains until it has used ``--cpu-seconds`` of process CPU time
  (or ``--steps`` optimizer steps, whichever comes first), with the same batch size (examples
  per step), learning rate and schedule, seed, fp32 and no language ids (the evaluation encodes
  without them); objectives differ in cost per step, so the table gives the steps and tokens each
  arm reached;
* the recipe's own model (each system's family at tiny size: 2 layers, width 128), MLM and the
  Transformer objectives on ``xlmr_tiny``.

Evaluation of every arm, identical to :mod:`benchmarks.xlingual_transfer`'s ``scratch``
setting: the shipped fine-tuning recipes ``sib200_e5_small`` and ``udpos_e5_small`` (``lr=5e-4``,
no prefix, 128 tokens, the same overrides for every arm) train on English only and select on
English only, then report accuracy on every language's test file (zero-shot transfer: no
target-language label is read); Tatoeba and Flores-200 (the SIB-200 sentences) retrieval of the
pre-trained encoder (its sentence vector: mean-pooled last layer, or the encoder's own pooling
where the family defines one), English↔X accuracy@1. A randomly initialised ``xlmr_tiny`` is the
floor. The Transformer-XL memory comparison (held-out long-document loss with and without
memory at equal tokens seen) is :mod:`benchmarks.long_documents`.

    python -m benchmarks run objectives_zoo --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import os
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

from babelzoo.datasets.sources import parse_source  # noqa: E402
from babelzoo.evaluation.encoders import BabelEncoder  # noqa: E402
from babelzoo.evaluation.tasks import TaskContext, load_tasks  # noqa: E402
from babelzoo.finetune.run import run_finetune  # noqa: E402
from babelzoo.objectives.mixture import objective_class  # noqa: E402
from babelzoo.train.run import build_run, build_tokenizer  # noqa: E402
from babelzoo.train.config import TrainConfig, load_recipe, recipe_path  # noqa: E402
from babelzoo.typed import Where  # noqa: E402
from babelzoo.zoo.factory import create_model  # noqa: E402
from benchmarks._results import finished_arms, logged_means, write_results  # noqa: E402

LANGS = ("en", "de", "fr", "es", "ru", "cs")
PACKAGES = ("gramps", "django")
# arm -> (recipe, model override or None: the recipe's own)
ARMS = {
    "mlm": ("mmlm_tiny", "xlmr_tiny"),
    "sbo": ("sbo_tiny", None),
    "plm": ("plm_tiny", None),
    "unilm": ("unilm_tiny", None),
    "glm": ("glm_tiny", None),
    "segment_mlm": ("segment_mlm_tiny", None),
    "skip_thoughts": ("skip_thoughts_tiny", None),
    "quick_thoughts": ("quick_thoughts_tiny", None),
    "infersent": ("infersent_tiny", None),
}
FLOOR = "xlmr_tiny"
FINETUNE = {"sib200": "sib200_e5_small", "udpos": "udpos_e5_small"}
FINETUNE_SET = ("optim.lr=5e-4", "task.prefix=", "task.max_length=128")
COVERED = {"sib200": ("deu_Latn", "fra_Latn", "spa_Latn", "rus_Cyrl", "ces_Latn"),
           "udpos": ("UD_German-GSD", "UD_French-GSD", "UD_Spanish-GSD", "UD_Russian-GSD"),
           "tatoeba": ("deu", "fra", "spa", "rus", "ces"),
           "flores": ("deu_Latn", "fra_Latn", "spa_Latn", "rus_Cyrl", "ces_Latn")}
# retrieval languages: the covered ones and as many that no arm saw
RETRIEVAL = {"tatoeba": COVERED["tatoeba"] + ("ita", "pol", "hin", "swh", "cmn"),
             "flores": COVERED["flores"] + ("ita_Latn", "pol_Latn", "hin_Deva", "swh_Latn", "zho_Hans")}


def source_for(example_type: str) -> dict[str, Any]:
    """The benchmark's data in the form an objective consumes."""
    if example_type == "sentence":
        return {"kind": "catalog_text", "langs": list(LANGS), "packages": list(PACKAGES)}
    if example_type == "document":
        return {"kind": "catalog_documents", "langs": list(LANGS[1:]), "packages": list(PACKAGES)}
    if example_type == "pair":
        return {"kind": "catalog_pairs", "langs": list(LANGS), "pivot": "en", "packages": list(PACKAGES)}
    raise SystemExit(f"objectives_zoo: no benchmark data for {example_type!r} examples")


def shared_tokenizer(args: argparse.Namespace, work: Path):
    """One unigram tokenizer on the benchmark's sentences (saved under ``work``)."""
    source = parse_source(source_for("sentence"), Where(label="benchmark data"))
    source.load()
    cfg = TrainConfig(output_dir=str(work / f"tokenizer-{args.vocab_size}"),
                      tokenizer={"vocab_size": args.vocab_size, "model_type": "unigram", "alpha": 0.3},
                      seed=args.seed)
    tokenizer, _ = build_tokenizer(cfg, lambda: source.texts(None))
    return tokenizer, work / f"tokenizer-{args.vocab_size}" / "tokenizer"


def arm_config(arm: str, args: argparse.Namespace, tokenizer_dir: Path, work: Path) -> tuple[TrainConfig, Path]:
    """The arm's recipe with the benchmark's data, tokenizer and budget."""
    recipe, model = ARMS[arm]
    path = recipe_path(recipe)
    cfg = load_recipe(path)
    overrides = {**cfg.model_overrides, "num_languages": 0, "dropout": args.dropout}
    if "max_positions" in overrides:
        overrides["max_positions"] = 160  # fine-tuning reads 128 tokens
    data = {name: [source_for(objective_class(options.get("objective", name)).consumes)]
            for name, options in cfg.objectives.items()}
    objectives = {name: {**options, "use_language_ids": False} for name, options in cfg.objectives.items()}
    out_dir = work / "pretrain" / arm
    cfg = cfg.replace(model=model or cfg.model, model_overrides=overrides, tokenizer={"path": str(tokenizer_dir)},
                      objectives=objectives, data=data, output_dir=str(out_dir), max_steps=args.steps,
                      batch_size=args.batch_size,
                      optim={"optimizer": "adamw", "lr": args.lr, "schedule": "linear", "warmup_steps": args.warmup},
                      checkpoints={"every": args.steps, "keep": 1, "resume": False},
                      logging={"every": 50, "progress": False, "tensorboard": False}, precision="fp32", seed=args.seed,
                      device="cpu", max_seconds=args.cpu_seconds, budget_clock="cpu")
    return cfg, path


def pretrain(arm: str, args: argparse.Namespace, tokenizer_dir: Path, work: Path):
    """(model, tokenizer, record) after the arm's pre-training."""
    cfg, path = arm_config(arm, args, tokenizer_dir, work)
    if Path(cfg.output_dir).exists():
        shutil.rmtree(cfg.output_dir)  # this script's own run folder: start fresh, never resume
    cpu0, wall0 = time.process_time(), time.perf_counter()
    run = build_run(cfg, path)
    summary = run.trainer().fit()
    model, tokenizer = run.model, run.tokenizer
    record = {"recipe": ARMS[arm][0], "model": cfg.model, "objectives": cfg.objectives,
              "data": {name: items[0]["kind"] for name, items in cfg.data.items()},
              "parameters": model.num_parameters(), "steps": summary["steps"], "tokens": summary["tokens"],
              "final_metrics": logged_means(cfg.output_dir, 3),
              "cpu_s": round(time.process_time() - cpu0, 1), "wall_s": round(time.perf_counter() - wall0, 1)}
    return model, tokenizer, record


def retrieval(model, tokenizer, args: argparse.Namespace, name: str) -> dict[str, Any]:
    """Tatoeba and Flores English↔X accuracy@1 of the pre-trained encoder, per language."""
    encoder = BabelEncoder(name, model, tokenizer, layer=-1, max_length=128, use_language_ids=False)
    model.eval()
    out = {}
    for task, langs in (("tatoeba", RETRIEVAL["tatoeba"]), ("flores", RETRIEVAL["flores"])):
        start = time.perf_counter()
        context = TaskContext(data_dir=args.data_dir, languages=list(langs), log=lambda _: None)
        table: dict[str, list[float]] = {}
        for row in load_tasks().get("tatoeba" if task == "tatoeba" else "flores_retrieval")(encoder, context):
            src, tgt = row.protocol["direction"].split("->")
            table.setdefault(src if tgt in ("eng", "eng_Latn") else tgt, []).append(row.value)
        both = {lang: float(np.mean(v)) for lang, v in table.items()}
        covered = [both[lang] for lang in COVERED[task] if lang in both]
        others = [v for lang, v in both.items() if lang not in COVERED[task]]
        out[task] = {"by_language": both, "covered": float(np.mean(covered)) if covered else None,
                     "other": float(np.mean(others)) if others else None,
                     "seconds": round(time.perf_counter() - start, 1)}
    return out


def finetune(task: str, model, tokenizer, args: argparse.Namespace, work: Path, name: str) -> dict[str, Any]:
    """Fine-tune a copy of ``model`` on English by the task's shipped recipe; test accuracies."""
    overrides = list(FINETUNE_SET)
    fixed = model.config.text.sentence_pooling
    if task == "sib200" and fixed is not None:  # an architecture that fixes its sentence vector
        overrides.append(f"task.head.pooling={fixed}")
    cfg = load_recipe(recipe_path(FINETUNE[task]), overrides)
    cfg = cfg.replace(model=model.config.architecture, output_dir=str(work / "finetune" / name / task),
                      checkpoints={"resume": False}, logging={"progress": False}, seed=args.seed)
    start = time.perf_counter()
    result = run_finetune(cfg, data_dir=args.data_dir, base=model, tokenizer=tokenizer, log=lambda _: None)
    test = {lang: row["accuracy"] for lang, row in result["test"].items()}
    source = result["protocol"]["source"]
    covered = [test[lang] for lang in COVERED[task] if lang in test]
    others = [v for lang, v in test.items() if lang != source and lang not in COVERED[task]]
    return {"test": test, "source": test.get(source), "mean_zero_shot": result["mean_zero_shot"],
            "covered": float(np.mean(covered)) if covered else None,
            "other": float(np.mean(others)) if others else None, "dev": result["dev"],
            "best_step": result["protocol"]["best_step"], "seconds": round(time.perf_counter() - start, 1)}


def evaluate(name: str, model, tokenizer, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    row = retrieval(model, tokenizer, args, name)
    for task in FINETUNE:
        row[task] = finetune(task, model, tokenizer, args, work, name)
    return row


# options that change no number: a report written under other values of these still counts
NOT_PROTOCOL = ("out", "work_dir", "arms", "floor", "data_dir")


def markdown(report: dict[str, Any]) -> str:
    head = ["arm", "model", "params", "steps", "tokens seen", "pre-train CPU s",
            "SIB-200 en", "SIB-200 covered", "SIB-200 zero-shot", "UD POS en", "UD POS covered",
            "UD POS zero-shot", "Tatoeba covered", "Tatoeba other", "Flores covered", "Flores other"]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]

    def pct(value: Optional[float]) -> str:
        return "–" if value is None else f"{100 * value:.1f}"

    for row in report["arms"]:
        p = row.get("pretrain", {})
        s, u, t, f = row["sib200"], row["udpos"], row["tatoeba"], row["flores"]
        cells = [row["arm"], row["model"], f"{row['parameters'] / 1e6:.2f} M", str(p.get("steps", 0)),
                 f"{p.get('tokens', 0):,}", f"{p.get('cpu_s', 0):.0f}"]
        cells += [pct(v) for v in (s["source"], s["covered"], s["mean_zero_shot"], u["source"], u["covered"],
                                   u["mean_zero_shot"], t["covered"], t["other"], f["covered"], f["other"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("BABELZOO_DATA_DIR",
                                                                               REPO.parent / "shared" / "data")))
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--out", type=Path, help="write JSON here (and the table beside it as .md)")
    parser.add_argument("--steps", type=int, default=1500, help="at most this many optimizer steps per arm")
    parser.add_argument("--cpu-seconds", type=float, default=180.0,
                        help="the compute budget of each arm's pre-training, in process CPU seconds")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per step")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                        help=f"also evaluate a randomly initialised {FLOOR}")
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "objectives_zoo")
    args = parser.parse_args(argv)
    start_cpu, start = time.process_time(), time.perf_counter()
    work = args.work_dir
    tokenizer, tokenizer_dir = shared_tokenizer(args, work)
    print(f"tokenizer: {tokenizer.specials.vocab_size} pieces ({time.perf_counter() - start:.0f}s)", flush=True)
    report: dict[str, Any] = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "protocol": {"data": {"packages": list(PACKAGES), "languages": list(LANGS), "split": "train"},
                     "finetuning": dict(FINETUNE), "overrides": list(FINETUNE_SET),
                     "zero_shot": "fine-tuned and selected on English only", "covered": {k: list(v) for k, v in
                                                                                           COVERED.items()},
                     "retrieval": {"languages": {k: list(v) for k, v in RETRIEVAL.items()},
                                   "vector": "the encoder's sentence vector (BabelEncoder, last layer)",
                                   "metric": "accuracy@1, mean of en→X and X→en"}},
        "arms": []}

    def record(row: dict[str, Any]) -> None:
        report["arms"].append(row)
        s, u, t, f = row["sib200"], row["udpos"], row["tatoeba"], row["flores"]
        print(f"{row['arm']}: SIB-200 en {s['source']:.3f} zero-shot {s['mean_zero_shot']:.3f} | UD POS en "
              f"{u['source']:.3f} zero-shot {u['mean_zero_shot']:.3f} | Tatoeba covered {t['covered']:.3f} | "
              f"Flores covered {f['covered']:.3f}", flush=True)
        if args.out:  # after every arm, so a long run's finished arms are kept
            report["wall_s"] = round(time.perf_counter() - start, 1)
            write_results(args.out, report, markdown, "objectives_zoo")

    done = finished_arms(args.out, report, NOT_PROTOCOL)
    if done:
        report["arms"] = list(done.values())
        print(f"kept from {args.out}: {', '.join(done)}", flush=True)
    if args.floor and "random init" not in done:
        torch.manual_seed(args.seed)
        model = create_model(FLOOR, vocab_size=tokenizer.specials.vocab_size, pad_token_id=tokenizer.specials.pad,
                             num_languages=0, max_positions=160)
        record({"arm": "random init", "model": FLOOR, "parameters": model.num_parameters(),
                **evaluate("random", model, tokenizer, args, work)})
    for arm in args.arms:
        if arm in done:
            continue
        model, tokenizer, pre = pretrain(arm, args, tokenizer_dir, work)
        record({"arm": arm, "model": pre["model"], "parameters": pre["parameters"], "pretrain": pre,
                **evaluate(arm, model, tokenizer, args, work)})
    report["cpu_s"] = round(time.process_time() - start_cpu, 1)
    report["wall_s"] = round(time.perf_counter() - start, 1)
    table = markdown(report)
    print()
    print(table)
    print(f"\ntotal CPU {report['cpu_s']:.0f}s, wall {report['wall_s']:.0f}s ({torch.get_num_threads()} threads)")
    if args.out:
        write_results(args.out, report, markdown, "objectives_zoo")
    return 0


if __name__ == "__main__":
    sys.exit(main())
