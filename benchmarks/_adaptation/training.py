"""Training the arms: each recipe arm by ``babelzoo pretrain`` as a user runs it (``+vocab``'s grown
e5 and ``+own``'s pairs made first), the st arm by sentence-transformers' own loop on the same
pairs; an arm's folder is reused only under the settings it was trained with."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Optional

import torch

from babelzoo._files import write_json_atomic
from babelzoo._provenance import portable_text

from .arms import (
    E5,
    OBJECTIVE,
    OWN_EXCLUDE,
    OWN_PAIRS,
    RECIPE,
    RECIPE_ARMS,
    RUN_FOLDER,
    VOCAB_INIT,
    VOCAB_MARK,
    read_shipped_recipe,
)
from .run import REPO, Run, sib200_rows, timed_child


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
    from babelzoo.train.run import pretrained_tokenizer

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
    record = {"command": portable_text("babelzoo " + shlex.join(command[3:])), "overrides": command[7::2],
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


def st_examples(run: Run) -> tuple[list[tuple[str, str]], int]:
    """The recipe's training pairs in the order its trainer draws them, one list of steps × batch
    pairs; and the steps. The source's corpora are one dataset, one after another, and the
    recipe's α samples over its sources, as ``babelzoo pretrain`` composes them
    (:func:`babelzoo.train.run.combine`, :class:`babelzoo.train.data.BatchPlan`)."""
    from babelzoo.train.run import combine
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
                    scheduler="WarmupLinear", warmup_steps=cfg.optim.warmup_steps, optimizer_class=torch.optim.AdamW,
                    optimizer_params={"lr": cfg.optim.lr, "betas": tuple(cfg.optim.betas), "eps": cfg.optim.eps},
                    weight_decay=cfg.optim.weight_decay, max_grad_norm=cfg.optim.max_grad_norm, show_progress_bar=False)
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
