"""Fine-tuning inputs a user may get wrong or change under a run, from real files: a train, dev or
tokenizer file replaced under the same path is a different run on resume; a checkpoint keeps its
own tokenizer; test files are checked before training and a bad one keeps what was measured;
labels are read as written."""

import json
from pathlib import Path

import pytest

from babelzoo.cli import main
from babelzoo.datasets.labelled import LabelError
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.finetune import TaskSpec, run_finetune
from babelzoo.finetune.run import TestFileError
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.train.identity import ResumeMismatch
from babelzoo.zoo.config import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")

WORDS = ["sun", "rain", "goal", "match", "vote", "law", "the", "is", "a", "big"]
TOPICS = {"weather": "sun", "sport": "goal", "politics": "vote"}
TINY = {"num_layers": 1, "hidden_size": 16, "num_heads": 2, "intermediate_size": 32, "dropout": 0.0,
        "attention_dropout": 0.0}


def save_tokenizer(directory: Path, extra=()) -> Path:
    WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, *extra]).save(directory)
    return directory


def write_tsv(path: Path, n: int, offset: int = 0, label=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{offset + i}\t{label or list(TOPICS)[i % 3]}\tthe {TOPICS[list(TOPICS)[i % 3]]} is big"
            for i in range(n)]
    path.write_text("index_id\tcategory\ttext\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def data(tmp_path):
    root = tmp_path / "data"
    write_tsv(root / "eng" / "train.tsv", 24)
    write_tsv(root / "eng" / "dev.tsv", 6, 100)
    for lang, offset in (("eng", 200), ("xx", 300), ("yy", 400)):
        write_tsv(root / lang / "test.tsv", 6, offset)
    save_tokenizer(tmp_path / "tokenizer")
    return tmp_path


def config(tmp, out="run", tokenizer=None, **task) -> TrainConfig:
    spec = {"kind": "sequence_classification", "init": "random", "train": f"{tmp}/data/eng/train.tsv",
            "dev": f"{tmp}/data/eng/dev.tsv", "test": f"{tmp}/data/*/test.tsv", "label_column": "category",
            "id_column": "index_id", "head": {"pooling": "mean"}, **task}
    return TrainConfig(model="xlmr_tiny", tokenizer=tokenizer or {"path": str(tmp / "tokenizer")}, task=spec,
                       model_overrides=TINY, output_dir=str(tmp / out), optim=OptimConfig(optimizer="adamw", lr=1e-2),
                       checkpoints=CheckpointConfig(every=1000),
                       logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False), batch_size=8,
                       max_steps=2, eval_every=2)


def quiet(message):
    pass


# --- resume knows the files the run read --------------------------------------------------------

@pytest.mark.parametrize("replace, line", [
    (lambda tmp: write_tsv(tmp / "data" / "eng" / "train.tsv", 24, 50), "data.train_sha256: '"),
    (lambda tmp: write_tsv(tmp / "data" / "eng" / "dev.tsv", 6, 150), "data.dev_sha256: '"),
    (lambda tmp: save_tokenizer(tmp / "tokenizer", extra=["##s"]), "data.tokenizer_sha256: '"),
])
def test_a_file_replaced_under_the_same_path_is_refused_on_resume(data, replace, line):
    first = run_finetune(config(data), log=quiet)
    assert first["summary"]["steps"] == 2
    replace(data)
    with pytest.raises(ResumeMismatch, match="was written by a different run") as err:
        run_finetune(config(data), log=quiet)
    message = str(err.value)
    assert line in message and "(checkpoint) → '" in message and "To start fresh, choose a new output_dir" in message
    # the dev set's old best score is not carried over: a new output_dir trains and selects afresh
    fresh = run_finetune(config(data, out="fresh"), log=quiet)
    assert fresh["summary"]["resumed_from"] is None


def test_the_same_content_under_another_data_dir_resumes(data, tmp_path):
    """Content, not path: the same files moved under another ${BABELZOO_DATA_DIR} resume."""
    task = {"train": "${BABELZOO_DATA_DIR}/eng/train.tsv", "dev": "${BABELZOO_DATA_DIR}/eng/dev.tsv",
            "test": "${BABELZOO_DATA_DIR}/*/test.tsv"}
    run_finetune(config(data, **task), data_dir=data / "data", log=quiet)
    moved = tmp_path / "moved"
    (data / "data").rename(moved)
    again = run_finetune(config(data, **task).replace(max_steps=4), data_dir=moved, log=quiet)
    assert again["summary"]["resumed_from"].endswith("step-00000002") and again["summary"]["steps"] == 4


# --- a checkpoint keeps its own tokenizer -------------------------------------------------------

def test_a_checkpoint_keeps_its_own_tokenizer(data):
    run_finetune(config(data), log=quiet)
    checkpoint = data / "run" / "best"
    same_size = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *reversed(WORDS)]  # same size, other ids
    WordPieceTokenizer(same_size).save(data / "other")
    with pytest.raises(ConfigError) as err:
        run_finetune(config(data, out="b", tokenizer={"path": str(data / "other")}, init=str(checkpoint)), log=quiet)
    assert str(err.value).startswith(f"task.init={checkpoint} has its own tokenizer (WordPieceTokenizer, 15 pieces) "
                                     f"and tokenizer: {{'path': '{data / 'other'}'}} is another (WordPieceTokenizer, "
                                     "15 pieces)")
    # the same vocabulary saved elsewhere is the same tokenizer; no recipe tokenizer takes the checkpoint's
    save_tokenizer(data / "copy")
    same = run_finetune(config(data, out="c", tokenizer={"path": str(data / "copy")}, init=str(checkpoint)), log=quiet)
    own = run_finetune(config(data, out="d", init=str(checkpoint)).replace(tokenizer={}), log=quiet)
    assert same["model"].tokenizer.encode("the sun") == own["model"].tokenizer.encode("the sun") == [2, 11, 5, 3]


def test_a_tokenizer_larger_than_the_vocabulary_is_refused_before_training(data):
    save_tokenizer(data / "large", extra=[f"w{i}" for i in range(20)])
    cfg = config(data, tokenizer={"path": str(data / "large")}).replace(
        model_overrides={**TINY, "vocab_size": 15})
    with pytest.raises(ConfigError, match=r"tokenizer: \{'path': '.*large'\} has 35 pieces but the vocabulary of "
                                          r"model 'xlmr_tiny' \(random\) holds 15: ids from 15 on have no embedding"):
        run_finetune(cfg, log=quiet)
    assert not (data / "run").exists()  # refused before any step


# --- test files: checked up front, a bad one keeps what was measured ----------------------------

@pytest.mark.parametrize("test, message", [
    ("{d}/data/*/missing.tsv", "task.test='{d}/data/*/missing.tsv' matches no file"),
    ("{d}/data/*", "task.test='{d}/data/*' matches {d}/data/eng, a folder"),
    ({"xx": "{d}/data/xx"}, "task.test (xx): {d}/data/xx is a folder, not a file"),
    ({"xx": "{d}/data/xx/nope.tsv"}, "task.test (xx): {d}/data/xx/nope.tsv: no such file"),
])
def test_test_files_are_checked_before_training(data, test, message):
    test = {k: v.format(d=data) for k, v in test.items()} if isinstance(test, dict) else test.format(d=data)
    with pytest.raises(ConfigError) as err:
        run_finetune(config(data, test=test), log=quiet)
    assert str(err.value).startswith(message.format(d=data))
    assert not (data / "run").exists()


def test_an_unknown_test_label_keeps_the_accuracies_measured_before_it(data):
    bad = data / "data" / "yy" / "test.tsv"
    bad.write_text(bad.read_text() + "999\tcooking\tthe big sun\n", encoding="utf-8")
    with pytest.raises(TestFileError) as err:
        run_finetune(config(data), log=quiet)
    assert str(err.value).startswith(f"{bad}:8: label 'cooking' (column 'category') is not one of the 3 labels")
    assert f"the accuracies of the 2 test file(s) before it are in {data / 'run' / 'results.json'}" in str(err.value)
    saved = json.loads((data / "run" / "results.json").read_text())
    assert set(saved["test"]) == {"eng", "xx"} and saved["test"]["xx"]["n"] == 6
    assert saved["incomplete"].startswith(f"stopped at yy ({bad}): {bad}:8: label 'cooking'")


def test_the_cli_names_the_bad_test_line_in_one_line(data, capsys):
    bad = data / "data" / "yy" / "test.tsv"
    bad.write_text(bad.read_text() + "999\tcooking\tthe big sun\n", encoding="utf-8")
    recipe = data / "r.yaml"
    recipe.write_text(json.dumps(config(data).to_dict()), encoding="utf-8")
    assert main(["finetune", "--config", str(recipe)]) == 2
    err = capsys.readouterr().err.strip().splitlines()  # the training summary, then the one error line
    assert [line for line in err if line.startswith("babelzoo")] == err[-1:]
    assert err[-1].startswith(f"babelzoo finetune: {bad}:8: label 'cooking'") and "Traceback" not in err


def test_eval_refuses_an_out_that_is_a_file_before_evaluating(tmp_path, capsys):
    taken = tmp_path / "results.txt"
    taken.write_text("keep me\n", encoding="utf-8")
    board = tmp_path / "board.yaml"
    board.write_text(f"tasks: [tatoeba]\nmodels: [{{name: xlmr_tiny, kind: zoo}}]\nout: {taken}\n", encoding="utf-8")
    assert main(["eval", "--config", str(board)]) == 2
    assert capsys.readouterr().err.strip() == (f"babelzoo eval: {board}: out={taken} is a file; the tables and plots "
                                               "need a folder: name a folder (it is created if missing)")
    assert main(["eval", "--config", str(board), "--out", str(taken / "sub")]) == 2
    assert f"--out={taken / 'sub'} lies inside {taken}, which is a file" in capsys.readouterr().err
    assert taken.read_text() == "keep me\n"


# --- labels are read as written ---------------------------------------------------------------

def test_an_empty_label_list_is_refused():
    with pytest.raises(ConfigError, match=r"task.labels=\[\]: list the labels, or leave labels out"):
        TaskSpec.from_dict({"train": "a.tsv", "dev": "b.tsv", "labels": []})
    with pytest.raises(ConfigError, match="'pos ' has whitespace around it"):
        TaskSpec.from_dict({"train": "a.tsv", "dev": "b.tsv", "labels": ["pos ", "neg"]})


def test_a_header_repeated_mid_file_is_refused(data):
    train = data / "data" / "eng" / "train.tsv"
    lines = train.read_text().splitlines()
    train.write_text("\n".join(lines[:5] + [lines[0]] + lines[5:]) + "\n", encoding="utf-8")
    with pytest.raises(LabelError, match=rf"{train}:6: the header line \['index_id', 'category', 'text'\] again"):
        run_finetune(config(data), log=quiet)


def test_a_label_with_whitespace_around_it_is_refused(data):
    train = data / "data" / "eng" / "train.tsv"
    train.write_text(train.read_text() + "77\tsport \tthe goal is big\n", encoding="utf-8")
    with pytest.raises(LabelError, match=rf"{train}:26: label 'sport ' \(column 'category'\) has whitespace around "
                                         r"it; labels are compared exactly: write 'sport'"):
        run_finetune(config(data), log=quiet)
