"""Adapting multilingual-e5-small to the languages it serves poorly: the shipped recipe, its
ablations and sentence-transformers' multilingual distillation, on one benchmark run.

    BABELZOO_DATA_DIR=../shared/data python benchmarks/adaptation.py --work runs/adaptation
    python benchmarks/adaptation.py --work runs/adaptation --arms e5,recipe    # one session...
    python benchmarks/adaptation.py --work runs/adaptation --arms st           # ...and the next

Arms (``--arms``, run in this order; every trained arm uses the recipe's pairs source,
steps, batch, learning rate, warm-up and maximum length, and ``--max-steps``/``--langs`` apply
to all of them):

- ``e5``: multilingual-e5-small as loaded, no training.
- ``recipe``: ``babelzoo pretrain --config adapt_e5_small`` as shipped (translation ranking;
  only ``output_dir`` and, when asked, ``max_steps`` and ``languages`` set), run as a user runs it.
- ``st``: the peer. The same e5 weights exported by babelzoo to Hugging Face's layout, loaded by
  sentence-transformers as Transformer + mean Pooling and trained by its own loop with its
  ``MSELoss`` (Reimers & Gurevych 2020, as its ``make_multilingual`` example: the labels are a
  frozen copy's vectors of the English side, both sides learn them) on exactly the pairs the
  recipe reads, in the order babelzoo draws them (its α-sampling plan), with the recipe's
  optimiser settings. Its saved folder is imported by babelzoo and evaluated like every arm.
- ``+distill``: the recipe plus multilingual distillation (``distill_sentence``, e5 as its own
  frozen teacher) on the same pairs, summed every step: the recipe's first version, at its steps.
- ``distill``: that distillation alone, no ranking.
- ``steps400``: the recipe with its first version's schedule (400 steps, 40 warm-up).
- ``margin0.3``: the recipe's ranking with LaBSE's additive margin (0.3) taken from each
  positive's similarity; the recipe ranks with the plain in-batch softmax at the same scale, both
  ways (sentence-transformers' ``MultipleNegativesSymmetricRankingLoss``).
- ``+tlm``: the recipe plus ``tlm`` on the same pairs (e5 gains a fresh tied MLM head).
- ``+vocab``: the recipe from e5 grown by the pieces learned from the pairs (see NOTES).
- ``+bare``: the recipe with its pairs read a second time without e5's ``"query: "`` prefix (a
  second source, sampled as often as the first): MTEB gives e5 no prompt for bitext mining, so
  its protocol reads the sentences bare.
- ``+own``: the recipe with ``--set pairs_dir=DIR``, a user's own pairs: DIR holds the SIB-200
  train split (Flores-200 sentences with their English, about 700 pairs) of each ``--own-pairs``
  language; e5, the recipe and ``+own`` are judged on those languages' SIB-200 dev and test
  sentences, which no arm trains on.

The ablations are ``--set`` overrides derived from the shipped recipe
(:func:`benchmarks._adaptation.arms.arm_overrides`),
recorded with each arm. Every arm is evaluated by the leaderboard's own tasks with e5's
protocol (``"query: "`` prefix, mean of the last layer over real tokens, cosine, accuracy@1):
Tatoeba on the adapted languages (full test files) and on every other Tatoeba language
(``--other-limit`` sentences each); and under MTEB's protocol (``tatoeba_mteb``: X → English,
F1 and accuracy, no prefix, as MTEB runs e5 on bitext mining), the same sentences; with
``--sib200``, SIB-200 zero-shot topic accuracy (the ``sib200_e5_small`` fine-tuning recipe from
the arm's model: English train, English dev) and ``flores_retrieval`` for the adapted languages
SIB-200 holds.

With ``--int8``, the recipe arm's model is exported with ``babelzoo convert --to-onnx`` in fp32
and with ``--quantize int8``, and the two exports are compared on Tatoeba per adapted language
and on sentences/s (the deployment path, where int8 is most likely to hurt).

Each arm trains into ``--work``/ARM (a recipe arm's ``babelzoo pretrain`` run in ARM/run, its
model in ARM/run/model; st's model in ARM/model) and is reused when the run is
started again with the same settings (the shipped recipe's text included); a run reports every
arm of ``--work`` made with its settings, so a long run can be resumed arm by arm across
sessions. The results (``--out``.json, .md, .png) are rewritten as each arm trains and as it is
evaluated.

The parts live in :mod:`benchmarks._adaptation`: the arms as recipe overrides (``arms``), a run's
options, folders and kept results (``run``), training (``training``), evaluation and the int8
check (``evaluation``), and the report (``report``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo._provenance import checkout_commit  # noqa: E402
from benchmarks._adaptation.arms import ARMS, OBJECTIVE, RECIPE, RECIPE_ARMS, RUN_FOLDER, VOCAB_INIT, VOCAB_MARK  # noqa: E402
from benchmarks._adaptation.evaluation import (  # noqa: E402
    FINETUNE_RECIPE,
    evaluate,
    evaluate_heldout,
    evaluate_own,
    int8_check,
    sib200_command,
    sib200_finetune,
    sib200_targets,
)
from benchmarks._adaptation.report import NOTES, markdown, pct, plot  # noqa: E402
from benchmarks._adaptation.run import Run, keep, model_files, model_of, saved  # noqa: E402
from benchmarks._adaptation.training import arm_settings, train_recipe_arm, train_st_arm, trained  # noqa: E402
from benchmarks._results import default_out, write_results  # noqa: E402


def machine(threads: int) -> dict[str, Any]:
    import sentence_transformers
    import transformers

    from babelzoo._provenance import cpu_name

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__,
            "sentence_transformers": sentence_transformers.__version__, "threads": threads, "cpus": os.cpu_count(),
            "cpu": cpu_name(), "platform": platform.platform()}


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python benchmarks/adaptation.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=os.environ.get("BABELZOO_DATA_DIR", str(REPO.parent / "shared" / "data")))
    parser.add_argument("--arms", default=",".join(ARMS),
                        help=f"comma-separated, of {', '.join(ARMS)} (run in that order)")
    parser.add_argument("--langs", default="auto", help="Tatoeba codes to adapt to, comma-separated (default: the "
                                                        "recipe's rule)")
    parser.add_argument("--max-steps", type=int, default=None, help="training steps (default: the recipe's)")
    parser.add_argument("--other-limit", type=int, default=200,
                        help="sentence pairs per other Tatoeba language (0: all)")
    parser.add_argument("--work", default=str(REPO / "runs" / "adaptation"), help="the arms' folders")
    parser.add_argument("--out", default=str(default_out("adaptation").with_suffix("")),
                        help="writes OUT.json, OUT.md and OUT.png")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    parser.add_argument("--train-only", action="store_true",
                        help="train the arms and report their speed, evaluate nothing (a short, quiet run of "
                             "--max-steps steps measures the throughput ratio with every arm under the same load)")
    parser.add_argument("--sib200", action="store_true", help="also SIB-200 zero-shot (one fine-tuning per arm) "
                                                              "and Flores retrieval, for adapted languages it holds")
    parser.add_argument("--sib200-arms", default=None, metavar="ARMS",
                        help="with --sib200: the arms fine-tuned on SIB-200, comma-separated (default: every arm; "
                             "each fine-tuning takes minutes on a CPU)")
    parser.add_argument("--sib200-set", action="append", default=[], metavar="KEY=VALUE",
                        help=f"an override of the {FINETUNE_RECIPE} recipe for every arm (e.g. task.epochs=2)")
    parser.add_argument("--own-pairs", default="", metavar="LANGS",
                        help="SIB-200 languages (e.g. yor_Latn,hau_Latn) whose train split becomes the +own arm's "
                             "pairs_dir, judged on their dev and test sentences")
    parser.add_argument("--int8", action="store_true",
                        help="export the recipe arm's model to ONNX fp32 and int8 with `babelzoo convert` and compare "
                             "them on every adapted language (accuracy and sentences/s)")
    args = parser.parse_args(argv)
    arms = [a for a in args.arms.split(",") if a]
    unknown = [a for a in arms if a not in ARMS]
    if unknown or not arms:
        parser.error(f"--arms: unknown {unknown}; choose from {', '.join(ARMS)}")
    if args.other_limit < 0 or args.threads < 1 or (args.max_steps is not None and args.max_steps < 1):
        parser.error("--other-limit must be ≥ 0, --threads and --max-steps ≥ 1")
    args.arm_list = arms
    args.own_pairs = [lang for lang in args.own_pairs.split(",") if lang]
    if "+own" in arms and not args.own_pairs:
        parser.error("--arms +own needs --own-pairs LANGS")
    args.sib200_arms = ARMS if args.sib200_arms is None else [a for a in args.sib200_arms.split(",") if a]
    if any(a not in ARMS for a in args.sib200_arms):
        parser.error(f"--sib200-arms: choose from {', '.join(ARMS)}")
    return args


def main(argv: Optional[Sequence[str]] = None) -> int:
    from babelzoo.datasets.labelled import sib200_languages
    from babelzoo.datasets.text import tatoeba_languages
    from babelzoo.offline.adaptation import e5_small_accuracy

    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    run = Run(args)
    cfg = run.recipe_config()
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    adapted = run.adapted()
    others = [lang for lang in tatoeba_languages(run.data_dir) if lang not in adapted]
    sib = sib200_targets(adapted, sib200_languages(run.data_dir)) if args.sib200 else []
    reference = e5_small_accuracy()
    report: dict[str, Any] = {
        "suite": "adaptation",
        "command": shlex.join(["python", "benchmarks/adaptation.py", *(sys.argv[1:] if argv is None else argv)]),
        "commit": checkout_commit(), "machine": machine(args.threads),
        "settings": {"recipe": RECIPE, "max_steps": args.max_steps or cfg.max_steps, "train_only": args.train_only,
                     "batch_size": cfg.batch_size, "lr": cfg.optim.lr, "warmup_steps": cfg.optim.warmup_steps,
                     "max_length": cfg.objectives[OBJECTIVE].get("max_length"),
                     "init": cfg.init, "langs": args.langs, "other_limit": args.other_limit, "sib200": args.sib200,
                     "sib200_arms": list(args.sib200_arms), "sib200_set": args.sib200_set,
                     "data_dir": str(run.data_dir)},
        "languages": adapted, "other_languages": others, "sib200_languages": sib,
        "reference": {lang: reference[lang] for lang in adapted if lang in reference}, "arms": {},
        "notes": [*NOTES, f"Every recipe arm but +vocab starts from `init: {json.dumps(cfg.init)}`; st trains every "
                          "weight, as sentence-transformers' example does, so the throughput ratio compares the two "
                          "methods as run, not the same computation."]}
    if args.sib200 and not sib:
        report["notes"].append(f"--sib200: none of the adapted languages is in {run.data_dir / 'sib200'}.")

    def save() -> None:
        write_results(out.with_suffix(".json"), report, markdown, "adaptation")
        plot(report, out.with_suffix(".png"))

    for arm in ARMS:
        if arm in args.arm_list:
            run_arm(run, arm, report["arms"].setdefault(arm, {}), adapted, others, sib, save)
        else:
            entry = earlier_arm(run, arm, adapted, others, sib)
            if entry is None:
                continue
            report["arms"][arm] = entry
        data = run.work / "recipe" / RUN_FOLDER / "model" / "adaptation.json"
        if arm == "recipe" and data.is_file():  # what its pairs source read: languages, pairs, test sentences removed
            report["data"] = json.loads(data.read_text(encoding="utf-8"))
        save()
    if args.int8:
        if trained(run.work / "recipe") is None:
            raise SystemExit(f"--int8 exports the recipe arm's model, and {run.work / 'recipe'} has none: run the "
                             "recipe arm first")
        report["int8"] = int8_check(run, "recipe", adapted)
        save()
    print(markdown(report))
    return 0


def eval_key(run: Run, arm: str, adapted: list[str], others: list[str], sib: list[str]) -> dict:
    """What an evaluation depends on: its languages, limit, data and the model."""
    return {"adapted": adapted, "others": others, "other_limit": run.args.other_limit, "flores": sib,
            "data_dir": str(run.data_dir), "model": str(model_of(run, arm)), "files": model_files(run, arm)}


def heldout_key(run: Run, arm: str) -> dict:
    return {"pairs": hashlib.sha256(json.dumps(run.heldout(), sort_keys=True).encode()).hexdigest(),
            "files": model_files(run, arm)}


def sib200_key(run: Run, arm: str, sib: list[str]) -> dict:
    return {"command": sib200_command(run, arm, model_of(run, arm), sib)[3:], "files": model_files(run, arm)}


def run_arm(run: Run, arm: str, entry: dict, adapted: list[str], others: list[str], sib: list[str],
            save: Callable[[], None]) -> None:
    """Train (or reuse) and evaluate (or reuse) one arm into ``entry``, calling ``save`` once it
    has trained; says what it did."""
    start = time.perf_counter()
    if arm in RECIPE_ARMS:
        entry["train"] = train_recipe_arm(run, arm)
    elif arm == "st":
        entry["train"] = train_st_arm(run)
    if entry.get("train"):
        t = entry["train"]
        print(f"[{arm}] trained: {t['steps']} steps, {t['tokens_per_s']:,.0f} tokens/s, {t['wall_s']:.0f}s wall, "
              f"{t['cpu_s']:.0f}s CPU", flush=True)
        save()
    if run.args.train_only:
        return
    folder, key = run.work / arm, eval_key(run, arm, adapted, others, sib)
    entry["eval"] = saved(folder / "eval.json", key) or keep(folder / "eval.json", key, evaluate(
        run, arm, model_of(run, arm), adapted, others, sib, lambda m: print(f"[{arm}] {m.strip()}", flush=True)))
    key = heldout_key(run, arm)
    entry["heldout"] = saved(folder / "heldout.json", key) or keep(folder / "heldout.json", key, evaluate_heldout(
        arm, model_of(run, arm), run.heldout()))
    if run.args.own_pairs and arm in ("e5", "recipe", "+own"):
        key = {"languages": run.args.own_pairs, "files": model_files(run, arm)}
        entry["own"] = saved(folder / "own.json", key) or keep(folder / "own.json", key, evaluate_own(
            run, arm, model_of(run, arm)))
    if sib and arm in run.args.sib200_arms:
        key = sib200_key(run, arm, sib)
        entry["sib200"] = saved(folder / "sib200.json", key) or keep(folder / "sib200.json", key, sib200_finetune(
            run, arm, sib200_command(run, arm, model_of(run, arm), sib)))
    ev = entry["eval"]
    print(f"[{arm}] adapted mean {pct(ev['adapted_mean'])}, other mean {pct(ev['other_mean'])}; evaluated in "
          f"{ev['eval_wall_s']:.0f}s wall, {ev['eval_cpu_s']:.0f}s CPU ({time.perf_counter() - start:.0f}s here)",
          flush=True)


def earlier_arm(run: Run, arm: str, adapted: list[str], others: list[str], sib: list[str]) -> Optional[dict]:
    """An arm not asked for this time, as an earlier run with the same settings left it in
    ``--work`` (so a run resumed arm by arm reports every arm), else None."""
    if arm == "+vocab" and not (run.work / VOCAB_INIT / VOCAB_MARK).is_file():
        return None  # never trained here
    folder, settings = run.work / arm, arm_settings(run, arm)
    entry: dict[str, Any] = {}
    if settings is not None:
        path = folder / "settings.json"
        if not path.is_file() or json.loads(path.read_text(encoding="utf-8")) != settings or trained(folder) is None:
            return None
        entry["train"] = trained(folder)
    entry["eval"] = saved(folder / "eval.json", eval_key(run, arm, adapted, others, sib))
    if entry["eval"] is None:
        return None
    own = [("own", folder / "own.json", {"languages": run.args.own_pairs, "files": model_files(run, arm)})] \
        if run.args.own_pairs else []
    for name, path, key in [("heldout", folder / "heldout.json", heldout_key(run, arm)), *own] + (
            [("sib200", folder / "sib200.json", sib200_key(run, arm, sib))] if sib else []):
        result = saved(path, key)
        if result is not None:
            entry[name] = result
    return entry


if __name__ == "__main__":
    sys.exit(main())
