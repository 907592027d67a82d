"""The zero-shot protocol is derived from the files a run reads: a dev file of a target language,
a dev file that is the train file, a test glob that takes in the train or dev file, and a
task.source that names no test language are refused before training, and so is a dev dataset
split of a target language (told by its files or its config name); a run whose source, or whose
dev split's language, cannot be told says so in results.json instead of certifying a zero-shot
mean. The shipped SIB-200 and UD recipes certify on the real data."""

import json
from pathlib import Path

import pytest

from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.finetune import TaskSpec, run_finetune
from babelzoo.finetune.data import digest_of
from babelzoo.finetune.protocol import certify
from babelzoo.train.config import TrainConfig, load_recipe, recipe_path
from babelzoo.train.settings import LoggingConfig
from babelzoo.zoo.config import ConfigError

pytestmark = pytest.mark.usefixtures("one_thread")

TOPICS = {"weather": "sun", "sport": "goal", "politics": "vote"}


def write_tsv(path: Path, n: int, offset: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [f"{offset + i}\t{t}\tthe {TOPICS[t]} is big" for i, t in ((i, list(TOPICS)[i % 3]) for i in range(n))]
    path.write_text("index_id\tcategory\ttext\n" + "\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture
def root(tmp_path):
    data = tmp_path / "sib"
    for lang, offset in (("eng_Latn", 0), ("deu_Latn", 1000), ("fra_Latn", 2000)):
        write_tsv(data / lang / "train.tsv", 24, offset)
        write_tsv(data / lang / "dev.tsv", 6, offset + 100)
        write_tsv(data / lang / "test.tsv", 6, offset + 200)
    return data


def spec(root, **task) -> TaskSpec:
    base = {"train": f"{root}/eng_Latn/train.tsv", "dev": f"{root}/eng_Latn/dev.tsv", "test": f"{root}/*/test.tsv",
            "label_column": "category", "id_column": "index_id"}
    return TaskSpec.from_dict({**base, **task}).resolve()


def check(s: TaskSpec):
    return certify(s, digest_of(s.train), digest_of(s.dev) if s.dev else None)


def test_the_source_is_derived_from_the_train_path(root):
    got = check(spec(root))
    assert got.certified and got.source == "eng_Latn" and got.targets == ["deu_Latn", "fra_Latn"]
    assert got.note.startswith(f"trained on {root}/eng_Latn/train.tsv and selected on {root}/eng_Latn/dev.tsv, both "
                               "eng_Latn (from the train file's path); 2 target language(s)")
    assert check(spec(root, source="eng_Latn")).source == "eng_Latn"


@pytest.mark.parametrize("task, message", [
    ({"dev": "{r}/deu_Latn/dev.tsv"},
     ("task.dev={r}/deu_Latn/dev.tsv belongs to deu_Latn, a target language of task.test: zero-shot transfer "
      "selects on the source language only")),
    ({"dev": "{r}/eng_Latn/train.tsv"},
     "task.dev={r}/eng_Latn/train.tsv holds the same data as task.train={r}/eng_Latn/train.tsv"),
    ({"dev": "{r}/eng_Latn/test.tsv"},
     "task.test='{r}/*/test.tsv' takes task.dev ({r}/eng_Latn/test.tsv) as test language 'eng_Latn'"),
    ({"test": "{r}/eng_Latn/*.tsv"},
     "task.test='{r}/eng_Latn/*.tsv' takes task.train ({r}/eng_Latn/train.tsv) as test language 'train'"),
    ({"source": "eng"},
     ("task.source='eng' is none of the 3 test languages; did you mean 'eng_Latn'? (available: deu_Latn, "
      "eng_Latn, fra_Latn); name the source as task.test names it")),
    ({"source": "deu_Latn"},
     "task.source='deu_Latn' but task.train={r}/eng_Latn/train.tsv belongs to eng_Latn"),
    ({"test": {"en": "{r}/eng_Latn/test.tsv", "de": "{r}/deu_Latn/test.tsv"}, "source": "eng_Latn"},
     "task.source='eng_Latn' is none of the 2 test languages"),
])
def test_a_protocol_that_mixes_source_and_targets_is_refused(root, task, message):
    task = {k: ({a: b.format(r=root) for a, b in v.items()} if isinstance(v, dict) else v.format(r=root))
            for k, v in task.items()}
    with pytest.raises(ConfigError) as err:
        check(spec(root, **task))
    assert str(err.value).startswith(message.format(r=root))


def test_a_copy_of_the_train_file_under_another_name_is_not_a_test_file(root):
    (root / "deu_Latn" / "test.tsv").write_bytes((root / "eng_Latn" / "train.tsv").read_bytes())
    with pytest.raises(ConfigError, match="takes task.train .* as test language 'deu_Latn'"):
        check(spec(root))


def test_a_source_that_cannot_be_told_is_not_certified(root, tmp_path):
    elsewhere = tmp_path / "mine"
    write_tsv(elsewhere / "train.tsv", 24, 5000)
    got = check(spec(root, train=str(elsewhere / "train.tsv"), dev=None, dev_fraction=0.2))
    assert not got.certified and got.source is None
    assert got.note.startswith(f"the source language cannot be told: task.train ({elsewhere}/train.tsv) lies outside "
                               "task.test's language folders and task.source is not set")
    # naming it certifies it
    named = check(spec(root, train=str(elsewhere / "train.tsv"), dev=None, dev_fraction=0.2, source="eng_Latn"))
    assert named.certified and named.targets == ["deu_Latn", "fra_Latn"]


def test_results_say_honestly_when_the_zero_shot_mean_is_not_certified(root, tmp_path):
    elsewhere = tmp_path / "mine"
    write_tsv(elsewhere / "train.tsv", 24, 5000)
    WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "is", "big", *TOPICS.values()]).save(
        tmp_path / "tok")
    task = {"kind": "sequence_classification", "init": "random", "train": str(elsewhere / "train.tsv"),
            "dev_fraction": 0.25, "test": f"{root}/*/test.tsv", "label_column": "category", "id_column": "index_id"}
    cfg = TrainConfig(model="xlmr_tiny", tokenizer={"path": str(tmp_path / "tok")}, task=task,
                      model_overrides={"num_layers": 1, "hidden_size": 16, "num_heads": 2, "intermediate_size": 32},
                      output_dir=str(tmp_path / "run"), max_steps=2, batch_size=8, eval_every=2,
                      logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False))
    result = run_finetune(cfg, log=lambda _: None)
    saved = json.loads((tmp_path / "run" / "results.json").read_text())
    assert saved["protocol"]["zero_shot"] is False and saved["mean_zero_shot"] is None
    assert saved["protocol"]["zero_shot_note"].startswith("the source language cannot be told")
    assert len(result["test"]) == 3 and saved["mean"] == result["mean"]


@pytest.mark.parametrize("name, source, targets", [
    ("sib200_tiny", "eng_Latn", 29), ("sib200_e5_small", "eng_Latn", 29),
    ("udpos_tiny", "UD_English-EWT", 6), ("udpos_e5_small", "UD_English-EWT", 6),
])
def test_shipped_recipes_certify_on_the_real_data(shared_data, name, source, targets):
    s = TaskSpec.from_dict(load_recipe(recipe_path(name)).task).resolve(shared_data)
    got = check(s)
    assert got.certified and got.source == source and len(got.targets) == targets


def write_jsonl(path: Path, n: int, offset: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"index_id": offset + i, "category": t, "text": f"the {TOPICS[t]} is big"}
            for i, t in ((i, list(TOPICS)[i % 3]) for i in range(n))]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def hf_split(**options) -> dict:
    return {"kind": "hf_dataset", "path": "json", "split": "train", **options}


@pytest.fixture
def hub(tmp_path):
    """A dataset folder whose configs are named as task.test names languages, its files outside
    the test folders: ``{deu_Latn, eng_Latn} × validation``."""
    pytest.importorskip("datasets")
    folder = tmp_path / "hub"
    for lang, offset in (("deu_Latn", 1300), ("eng_Latn", 300)):
        write_jsonl(folder / lang[:3] / "dev.jsonl", 6, offset)
    configs = "".join(f"- config_name: {lang}\n  data_files:\n  - split: validation\n    path: {lang[:3]}/dev.jsonl\n"
                      for lang in ("deu_Latn", "eng_Latn"))
    (folder / "README.md").write_text(f"---\nconfigs:\n{configs}---\n", encoding="utf-8")
    return folder


@pytest.mark.parametrize("dev, lang, told", [
    (lambda r, hub: hf_split(data_files=str(write_jsonl(r / "deu_Latn" / "dev.jsonl", 6, 1100))),
     "deu_Latn", "by its file {r}/deu_Latn/dev.jsonl"),
    (lambda r, hub: hf_split(data_files=[str(write_jsonl(r / lang / "dev.jsonl", 6, o)) for lang, o in
                                         (("eng_Latn", 100), ("fra_Latn", 2100))]),
     "fra_Latn", "by its file {r}/fra_Latn/dev.jsonl"),
    (lambda r, hub: {"kind": "hf_dataset", "path": str(hub), "name": "deu_Latn", "split": "validation"},
     "deu_Latn", "by its config name 'deu_Latn'"),
], ids=["data_files", "data_files_list", "config_name"])
def test_a_dev_split_of_a_target_language_is_refused_as_its_file_is(root, hub, dev, lang, told):
    value = dev(root, hub)
    shown = TaskSpec.from_dict({"train": "x", "dev": value}).dev.describe()
    with pytest.raises(ConfigError) as err:
        check(spec(root, dev=value))
    assert str(err.value).startswith(f"task.dev={shown} belongs to {lang} ({told.format(r=root)}), a target language "
                                     "of task.test: zero-shot transfer selects on the source language only")


def test_a_dev_split_in_a_test_splits_folder_belongs_to_its_language(root):
    pytest.importorskip("datasets")
    tests = {lang: hf_split(data_files=str(write_jsonl(root / lang / "test.jsonl", 6, o + 200)))
             for lang, o in (("eng_Latn", 0), ("deu_Latn", 1000))}
    dev = hf_split(data_files=str(write_jsonl(root / "deu_Latn" / "dev.jsonl", 6, 1100)))
    with pytest.raises(ConfigError, match=r"belongs to deu_Latn \(by its file .*/deu_Latn/dev.jsonl\), a target"):
        check(spec(root, test=tests, dev=dev))
    english = hf_split(data_files=str(write_jsonl(root / "eng_Latn" / "dev.jsonl", 6, 100)))
    same = check(spec(root, test=tests, dev=english))
    assert same.certified and same.source == "eng_Latn" and same.targets == ["deu_Latn"]


def test_a_dev_split_whose_language_cannot_be_told_certifies_only_with_task_source(root, hub, tmp_path):
    dev = hf_split(data_files=str(write_jsonl(tmp_path / "mine" / "dev.jsonl", 6, 100)))
    shown = f"hf_dataset json (data_files {tmp_path}/mine/dev.jsonl), split train"
    got = check(spec(root, dev=dev))
    assert not got.certified and got.source == "eng_Latn" and got.targets == ["deu_Latn", "fra_Latn"]
    assert got.note.startswith(f"the language of task.dev ({shown}) cannot be told: its files ({tmp_path}/mine/"
                               "dev.jsonl) lie outside task.test's language folders and its config names no test "
                               "language, and task.source is not set")
    named = check(spec(root, dev=dev, source="eng_Latn"))
    assert named.certified and named.note.startswith(
        f"trained on {root}/eng_Latn/train.tsv and selected on {shown}, both eng_Latn (from the train file's path; "
        "task.dev as task.source says)")
    english = check(spec(root, dev={"kind": "hf_dataset", "path": str(hub), "name": "eng_Latn", "split": "validation"}))
    assert english.certified and english.note.startswith(
        f"trained on {root}/eng_Latn/train.tsv and selected on hf_dataset {hub} (config eng_Latn), split validation, "
        "both eng_Latn (from the train file's path; task.dev by its config name 'eng_Latn')")
