"""Evaluating an arm's model: Tatoeba under e5's protocol and MTEB's, the held-out catalog pairs, a
user's own pairs, SIB-200 fine-tuning and Flores retrieval; and the int8 check of the deployment
path (the ONNX exports compared on the adapted languages)."""

from __future__ import annotations

import json
import random
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from babelzoo._provenance import portable_text

from .arms import E5
from .run import Run, keep, model_files, model_of, saved, sib200_rows, timed_child

PREFIX = "query: "
MTEB_PREFIX = ""  # the prompt MTEB's reference implementation gives e5 for bitext mining: none
EVAL_MAX_LENGTH = 512  # e5's own limit: no test sentence is cut
FINETUNE_RECIPE = "sib200_e5_small"
# SIB-200 (Flores) folder codes whose Tatoeba file is named otherwise
SIB_TO_TATOEBA = {"arb": "ara", "zho": "cmn"}
INT8_SPEED_SENTENCES = 100  # per adapted language, the X side of its Tatoeba file, for the speed comparison
# the exports --int8 compares, as `babelzoo convert --to-onnx` options; CALIBRATION stands for the
# file of calibration texts (calibration_file), which SmoothQuant's activation scales are read from
CALIBRATION = "{calibration}"
ONNX_VARIANTS = {"fp32": [], "int8": ["--quantize", "int8"],
                 "int8-ffn-fp32": ["--quantize", "int8", "--keep-fp32", "ffn_out"],
                 "int8-smooth": ["--quantize", "int8", "--calibration", CALIBRATION],
                 "int8-smooth-ffn-fp32": ["--quantize", "int8", "--calibration", CALIBRATION, "--keep-fp32", "ffn_out"]}
CALIBRATION_PAIRS = 32  # per adapted language, both sides: held-out training pairs, never a test sentence


def by_language(results) -> dict[str, dict[str, float]]:
    """``{lang: {"en2x", "x2en", "mean"}}`` from the retrieval tasks' rows."""
    table: dict[str, dict[str, float]] = {}
    for r in results:
        src, tgt = r.protocol["direction"].split("->")
        english = src in ("eng", "en", "eng_Latn")
        table.setdefault(tgt if english else src, {})["en2x" if english else "x2en"] = r.value
    for row in table.values():
        row["mean"] = (row["en2x"] + row["x2en"]) / 2
    return table


def mean_of(table: Mapping[str, Mapping[str, float]], key: str = "mean") -> Optional[float]:
    return sum(row[key] for row in table.values()) / len(table) if table else None


def sib200_targets(adapted: Sequence[str], present: Sequence[str]) -> list[str]:
    """The SIB-200 folders (``khm_Khmr``) of the adapted Tatoeba languages."""
    return [lang for lang in present if SIB_TO_TATOEBA.get(lang.split("_")[0], lang.split("_")[0]) in adapted]


def arm_encoder(arm: str, model_dir: Optional[Path], prefix: str = PREFIX):
    """The arm's model as the leaderboard encodes with it (e5's protocol: ``prefix`` "query: ")."""
    from babelzoo.evaluation.encoders import CachedEncoder
    from babelzoo.evaluation.leaderboard import ModelSpec, build_encoder

    where = {"kind": "zoo", "source": E5} if model_dir is None else {"kind": "checkpoint", "source": str(model_dir)}
    spec = ModelSpec.from_dict({"name": arm, **where, "prefix": prefix, "max_length": EVAL_MAX_LENGTH})
    return CachedEncoder(build_encoder(spec))


def mteb_by_language(results) -> dict[str, dict[str, float]]:
    """``{lang: {"f1", "accuracy"}}`` from ``tatoeba_mteb``'s rows."""
    table: dict[str, dict[str, float]] = {}
    for r in results:
        table.setdefault(r.protocol["direction"].split("->")[0], {})[r.metric.split()[0]] = r.value
    return table


def evaluate_heldout(arm: str, model_dir: Optional[Path], pairs: Mapping[str, list[tuple[str, str]]]) -> dict:
    """Accuracy@1 of each adapted language on its held-out catalog pairs, both directions."""
    from babelzoo.evaluation.tasks.retrieval import bitext_results

    start, encoder = time.perf_counter(), arm_encoder(arm, model_dir)
    results = [r for lang, rows in pairs.items() if len(rows) >= 2
               for r in bitext_results("heldout_pairs", encoder, rows, "eng", lang, {"split": "heldout"})]
    table = by_language(results)
    for lang, row in table.items():
        row["n"] = len(pairs[lang])
    return {"pairs": table, "mean": mean_of(table), "wall_s": time.perf_counter() - start}


def evaluate(run: Run, arm: str, model_dir: Optional[Path], adapted: list[str], others: list[str],
             sib: list[str], log: Callable[[str], None]) -> dict:
    from babelzoo.evaluation.tasks import TaskContext, load_tasks

    wall, cpu = time.perf_counter(), time.process_time()
    encoder = arm_encoder(arm, model_dir)
    tasks = load_tasks()
    limit = run.args.other_limit or None
    mteb = arm_encoder(arm, model_dir, prefix=MTEB_PREFIX)  # MTEB gives e5 no prompt for bitext mining
    out: dict[str, Any] = {"protocol": encoder.protocol, "mteb_protocol": mteb.protocol,
                           "seconds": {"load": time.perf_counter() - wall}}
    quiet = lambda m: None  # noqa: E731
    parts = [("tatoeba", "tatoeba", encoder, by_language, TaskContext(run.data_dir, adapted, log=log)),
             ("mteb", "tatoeba_mteb", mteb, mteb_by_language, TaskContext(run.data_dir, adapted, log=log))]
    if others:
        parts += [("other", "tatoeba", encoder, by_language, TaskContext(run.data_dir, others, limit=limit, log=quiet)),
                  ("mteb_other", "tatoeba_mteb", mteb, mteb_by_language,
                   TaskContext(run.data_dir, others, limit=limit, log=quiet))]
    if sib:
        parts.append(("flores", "flores_retrieval", encoder, by_language, TaskContext(run.data_dir, sib, log=log)))
    for key, task, model, table, context in parts:
        start = time.perf_counter()
        out[key] = table(tasks.get(task)(model, context))
        out["seconds"][key] = time.perf_counter() - start
    out.update(adapted_mean=mean_of(out["tatoeba"]), other_mean=mean_of(out.get("other", {})), other_limit=limit,
               mteb_f1=mean_of(out["mteb"], "f1"), mteb_accuracy=mean_of(out["mteb"], "accuracy"),
               mteb_other_f1=mean_of(out.get("mteb_other", {}), "f1"),
               eval_wall_s=time.perf_counter() - wall, eval_cpu_s=time.process_time() - cpu)
    return out


def evaluate_own(run: Run, arm: str, model_dir: Optional[Path]) -> dict:
    """English↔X accuracy@1 (e5's protocol) on the SIB-200 dev and test sentences of each
    ``--own-pairs`` language: what no arm trains on."""
    from babelzoo.evaluation.tasks.retrieval import bitext_results
    from babelzoo.evaluation.tasks.transfer_probe import SOURCE, parallel_pairs

    start, encoder = time.perf_counter(), arm_encoder(arm, model_dir)
    english = sib200_rows(run, SOURCE, ("dev", "test"))
    results = [r for lang in run.args.own_pairs for r in bitext_results(
        "own_heldout", encoder, parallel_pairs(english, sib200_rows(run, lang, ("dev", "test")), SOURCE, lang),
        SOURCE, lang, {"split": "dev+test"})]
    table = by_language(results)
    for lang, row in table.items():
        row["n"] = len(english)
    return {"languages": table, "mean": mean_of(table), "wall_s": time.perf_counter() - start}


def sib200_command(run: Run, arm: str, model_dir: Optional[Path], sib: list[str]) -> list[str]:
    """``babelzoo finetune --config sib200_e5_small`` from the arm's model, tested on English and
    the adapted languages SIB-200 holds."""
    tests = {lang: f"${{BABELZOO_DATA_DIR}}/sib200/{lang}/test.tsv" for lang in ["eng_Latn", *sib]}
    sets = [f"output_dir={run.work / arm / 'sib200'}", f"task.test={json.dumps(tests)}", *run.args.sib200_set]
    if model_dir is not None:
        sets.append(f"task.init={model_dir}")
    return [sys.executable, "-m", "babelzoo", "finetune", "--config", FINETUNE_RECIPE,
            "--data-dir", str(run.data_dir), *[part for item in sets for part in ("--set", item)]]


def sib200_finetune(run: Run, arm: str, command: list[str]) -> dict:
    """SIB-200 zero-shot accuracy of one fine-tuning run (:func:`sib200_command`)."""
    folder = run.work / arm / "sib200"
    folder.mkdir(parents=True, exist_ok=True)
    measured = timed_child(command, run.work / arm / "sib200.log", run.env)
    result = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    return {"accuracy": {lang: row["accuracy"] for lang, row in result["test"].items()}, "dev": result.get("dev"),
            "command": portable_text("babelzoo " + shlex.join(command[3:])), **measured}


# --- int8: the deployment path on the adapted languages ----------------------------------------------------

def calibration_file(run: Run, adapted: list[str]) -> Path:
    """WORK/calibration-N.txt: SmoothQuant's calibration texts, as the encoder sees them (with e5's
    prefix): both sides of :data:`CALIBRATION_PAIRS` pairs (a seeded sample) of each adapted language's
    held-out split (``adaptation_pairs`` with ``split: heldout``: pairs training never reads,
    with every test sentence under the data dir removed), so no test sentence sets a scale."""
    from babelzoo._files import write_text_atomic
    from babelzoo.datasets.sources import parse_source
    from babelzoo.typed import Where

    path = run.work / f"calibration-{CALIBRATION_PAIRS}.txt"
    if not path.is_file():
        source = parse_source({"kind": "adaptation_pairs", "languages": adapted, "exclude": str(run.data_dir),
                               "split": "heldout", "prefix": PREFIX}, Where("calibration"))
        source.load()
        rng = random.Random(0)  # a seeded sample: a corpus lists its pairs by catalog (CLDR's names first)
        texts = [text for corpus in source.corpora()
                 for pair in rng.sample(corpus.pairs, min(CALIBRATION_PAIRS, len(corpus.pairs))) for text in pair]
        write_text_atomic(path, "\n".join(texts) + "\n")
    return path


def onnx_export(run: Run, arm: str, variant: str, adapted: list[str]) -> dict:
    """``babelzoo convert --to-onnx`` of the arm's model as a user runs it, with the options of
    ``variant`` (:data:`ONNX_VARIANTS`), into ARM/onnx-VARIANT; its command and times."""
    folder = run.work / arm / f"onnx-{variant}"
    options = [str(calibration_file(run, adapted)) if option == CALIBRATION else option
               for option in ONNX_VARIANTS[variant]]
    command = [sys.executable, "-m", "babelzoo", "convert", "--from", str(model_of(run, arm)), "--to-onnx",
               str(folder), *options]
    return {"command": portable_text("babelzoo " + shlex.join(command[3:])),
            **timed_child(command, run.work / arm / f"onnx-{variant}.log", run.env)}


def onnx_variant(run: Run, arm: str, variant: str, adapted: list[str]) -> dict:
    """One export of the arm's model and its Tatoeba per adapted language (e5's protocol, run by
    :class:`babelzoo.deploy.OnnxEncoder`), kept in ARM/onnx-VARIANT.json under the model's files."""
    from babelzoo.deploy import OnnxEncoder
    from babelzoo.evaluation.tasks import TaskContext, load_tasks

    path = run.work / arm / f"onnx-{variant}.json"
    key = {"files": model_files(run, arm), "options": ONNX_VARIANTS[variant], "adapted": adapted,
           **({"calibration_pairs": CALIBRATION_PAIRS} if CALIBRATION in ONNX_VARIANTS[variant] else {})}
    done = saved(path, key)
    if done is not None and (run.work / arm / f"onnx-{variant}").is_dir():
        return done
    export = onnx_export(run, arm, variant, adapted)
    encoder = OnnxEncoder(run.work / arm / f"onnx-{variant}", prefix=PREFIX, max_length=EVAL_MAX_LENGTH,
                          threads=run.args.threads, name=f"{arm} ONNX {variant}")
    context = TaskContext(run.data_dir, adapted, log=lambda m: None)
    return keep(path, key, {"export": export, "tatoeba": by_language(load_tasks().get("tatoeba")(encoder, context))})


def int8_check(run: Run, arm: str, adapted: list[str]) -> dict:
    """Every :data:`ONNX_VARIANTS` export of the arm's model: Tatoeba per adapted language, and
    sentences/s on the same sentences (measured together, interleaved)."""
    from babelzoo.datasets.text import tatoeba_pairs
    from babelzoo.deploy import OnnxEncoder
    from benchmarks.compression import encode_seconds

    variants = {variant: onnx_variant(run, arm, variant, adapted) for variant in ONNX_VARIANTS}
    encoders = {v: OnnxEncoder(run.work / arm / f"onnx-{v}", prefix=PREFIX, max_length=EVAL_MAX_LENGTH,
                               threads=run.args.threads, name=f"{arm} ONNX {v}") for v in ONNX_VARIANTS}
    sentences = [x for lang in adapted for x, _ in tatoeba_pairs(run.data_dir, lang).pairs[:INT8_SPEED_SENTENCES]]
    seconds = encode_seconds(encoders, sentences, repeats=3)
    return {"arm": arm, "exports": {v: r["export"] for v, r in variants.items()},
            "tatoeba": {v: r["tatoeba"] for v, r in variants.items()},
            "sentences_per_s": {v: len(sentences) / t for v, t in seconds.items()}, "speed_sentences": len(sentences),
            "threads": run.args.threads}
