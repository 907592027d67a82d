"""Leaderboard results are never silently wrong or empty: repeated model names, an empty cell,
an invalid limit and ignored overrides are errors; a task that fails part-way keeps the
languages it finished."""

import numpy as np
import pytest

from babelzoo.evaluation.leaderboard import ModelSpec, build_encoder, run_matrix
from babelzoo.evaluation.tasks import TaskContext
from babelzoo.zoo.config import ConfigError


class Letters:
    """A sentence vector of letter counts; fails on the sentences of one language."""

    name, protocol = "letters", {"pooling": "counts"}

    def __init__(self, fail_on=None):
        self.fail_on = fail_on

    def encode(self, sentences, lang=None):
        if lang == self.fail_on:
            raise RuntimeError(f"cannot encode {lang}")
        out = np.zeros((len(sentences), 26), dtype=np.float32)
        for i, s in enumerate(sentences):
            for c in s.lower():
                if "a" <= c <= "z":
                    out[i, ord(c) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


@pytest.fixture
def data(tmp_path):
    folder = tmp_path / "tatoeba"
    folder.mkdir()
    sentences = {"deu": ["Guten Morgen", "Danke schön", "Wie geht es"], "fra": ["Bonjour", "Merci", "Ça va"],
                 "nld": ["Goedemorgen", "Dank je", "Hoe gaat het"]}
    english = ["Good morning", "Thank you", "How are you"]
    for lang, lines in sentences.items():
        (folder / f"tatoeba.{lang}-eng.{lang}").write_text("\n".join(lines) + "\n", encoding="utf-8")
        (folder / f"tatoeba.{lang}-eng.eng").write_text("\n".join(english) + "\n", encoding="utf-8")
    return tmp_path


def quiet(_):
    pass


def test_repeated_model_names_are_refused():
    specs = [ModelSpec("a", kind="object", encoder=Letters()), ModelSpec("a", kind="object", encoder=Letters())]
    with pytest.raises(ConfigError, match=r"the name\(s\) \['a'\] appear more than once"):
        run_matrix(specs, ["tatoeba"], TaskContext(), log=quiet)


def test_languages_matching_no_file_are_not_an_ok_cell(data):
    results, cells = run_matrix([ModelSpec("a", kind="object", encoder=Letters())], ["tatoeba"],
                                TaskContext(data_dir=data, languages=["due", "far"], log=quiet), log=quiet)
    assert results == [] and cells[0].status == "skipped"
    assert "none of the languages ['due', 'far'] has a Tatoeba file" in cells[0].detail
    for item in (data / "tatoeba").iterdir():
        item.unlink()
    results, cells = run_matrix([ModelSpec("a", kind="object", encoder=Letters())], ["tatoeba"],
                                TaskContext(data_dir=data, log=quiet), log=quiet)
    assert cells[0].status == "skipped" and "there is no Tatoeba file (tatoeba.XXX-eng.XXX)" in cells[0].detail


@pytest.mark.parametrize("limit", [0, -5, 2.5, True])
def test_limit_must_be_a_positive_count(limit):
    with pytest.raises(ConfigError, match=rf"limit={limit!r} must be a positive number"):
        TaskContext(limit=limit)


def test_a_failure_part_way_keeps_the_languages_done(data):
    results, cells = run_matrix([ModelSpec("a", kind="object", encoder=Letters(fail_on="nld"))], ["tatoeba"],
                                TaskContext(data_dir=data, log=quiet), log=quiet)
    assert cells[0].status == "failed"
    assert "stopped at nld after 2 of 3 languages: RuntimeError: cannot encode nld (4 numbers kept)" in cells[0].detail
    assert sorted(r.metric for r in results) == ["acc@1 deu->eng", "acc@1 eng->deu", "acc@1 eng->fra",
                                                 "acc@1 fra->eng"]


def test_overrides_on_a_checkpoint_are_an_error(tmp_path):
    spec = ModelSpec("c", kind="checkpoint", source=str(tmp_path), overrides={"dropout": 0.0})
    with pytest.raises(ConfigError, match=r"overrides \['dropout'\] apply to zoo and random models"):
        build_encoder(spec)


def test_a_fine_tuning_task_keeps_the_test_languages_done(tmp_path, monkeypatch):
    """sib200 fine-tunes once, then tests each language; a failure at the second keeps the first."""
    import babelzoo
    import babelzoo.finetune.run as run
    from babelzoo.datasets.wordpiece import WordPieceTokenizer
    from babelzoo.evaluation.encoders import BabelEncoder

    for lang in ("aaa_Latn", "eng_Latn"):
        for split, n in (("train", 24), ("dev", 6), ("test", 9)):
            folder = tmp_path / "sib200" / lang
            folder.mkdir(parents=True, exist_ok=True)
            rows = [f"{i}\t{('sports', 'travel')[i % 2]}\tthe {('goal', 'train')[i % 2]} is big" for i in range(n)]
            (folder / f"{split}.tsv").write_text("index_id\tcategory\ttext\n" + "\n".join(rows) + "\n")
    tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "is", "big", "goal", "train"])
    model = babelzoo.create_model("xlmr_tiny", num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64,
                                  vocab_size=tokenizer.vocab_size, pad_token_id=0)
    real, calls = run.predict, []

    def predict(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise MemoryError("out of memory on the second test file")
        return real(*args, **kwargs)

    monkeypatch.setattr(run, "predict", predict)
    context = TaskContext(data_dir=tmp_path, log=quiet, options={"sib200": {
        "recipe": "sib200_tiny", "set": ["tokenizer={}", "task.epochs=1", "eval_every=0", f"output_dir={tmp_path / 'r'}"]}})
    results, cells = run_matrix([ModelSpec("tiny", kind="object", encoder=BabelEncoder("tiny", model, tokenizer))],
                                ["sib200"], context, log=quiet)
    assert cells[0].status == "failed"
    assert "stopped at eng_Latn after 1 of 2 test files: MemoryError: out of memory" in cells[0].detail
    assert [r.metric for r in results] == ["acc aaa_Latn"] and results[0].protocol["source"] == "eng_Latn"
