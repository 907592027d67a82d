"""The hf_dataset source (Hugging Face ``datasets``, local files, offline): a split read whole or
streamed; a streamed corpus's seeded order, its position as a small state, resume without
reading the rows before it again, α-sampling over streamed sources, a streamed pre-training
run that stops and resumes bit for bit where an uninterrupted one goes, and one whose files
(a single file, a dataset folder's, a glob's) changed that is not resumed."""

import json
import os

import numpy as np
import pytest
import yaml

pytest.importorskip("datasets")

from babelzoo.datasets.loader import PairExample, TextExample  # noqa: E402
from babelzoo.datasets.sources import parse_source  # noqa: E402
from babelzoo.datasets.streaming import HfDataset, StreamedCorpus, StreamedMixture  # noqa: E402
from babelzoo.errors import ConfigError, InputError  # noqa: E402
from babelzoo.train.cli import pretrain_main  # noqa: E402
from babelzoo.train.data import DataStream  # noqa: E402
from babelzoo.typed import Where  # noqa: E402


class CharTokenizer:
    """One id per character (the tests read what was drawn back from the ids)."""

    languages = ()

    def encode(self, text, lang=None, add_special_tokens=False):
        return [ord(c) for c in text]


def decode(ids) -> str:
    return "".join(map(chr, ids))


@pytest.fixture()
def lines(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_text("".join(f"sentence {i}\n" if i % 10 else f"sentence {i}\n\n" for i in range(200)),
                    encoding="utf-8")  # a blank line after every tenth sentence
    return path


def source(path, **options) -> HfDataset:
    return parse_source({"kind": "hf_dataset", "path": "text", "data_files": str(path), "lang": "en", **options},
                        Where().key("data").key("mlm").key(0))


def corpus(path, seed=0, **options) -> StreamedCorpus:
    return StreamedCorpus(source(path, **options), CharTokenizer(), "chars", seed)


def test_a_split_read_whole_keeps_every_sentence_and_counts_the_blank_rows(lines):
    (read,) = source(lines, streaming=False, prefix="query: ").corpora()
    assert read.lang == "en" and len(read) == 200 and read.sentences[3] == "query: sentence 3"
    assert (read.report.kept, read.report.skipped) == (200, 20)


def test_the_streamed_order_is_seeded_and_covers_the_stream(lines):
    one, same, other = corpus(lines, shuffle_buffer=16), corpus(lines, shuffle_buffer=16), corpus(lines, 1, shuffle_buffer=16)
    drawn = [decode(e.ids) for e in one.take(150)]
    assert [decode(e.ids) for e in same.take(150)] == drawn
    assert [decode(e.ids) for e in other.take(150)] != drawn
    assert all(isinstance(e, TextExample) and e.lang == "en" for e in one.take(3))
    assert len(set(drawn)) == 150 and drawn != [f"sentence {i}" for i in range(150)]  # shuffled, none twice
    assert one.skipped == 17 and one.epoch == 0  # the blank rows after sentences 0, 10, ..., 160, skipped


def test_epochs_follow_one_another(tmp_path):
    path = tmp_path / "five.txt"
    path.write_text("a\nb\nc\nd\ne\n", encoding="utf-8")
    stream = corpus(path, shuffle_buffer=2)
    drawn = [decode(e.ids) for e in stream.take(20)]
    assert stream.epoch >= 3 and sorted(drawn[:4]) != [] and set(drawn) == set("abcde")
    assert all(drawn.count(c) >= 3 for c in "abcde")


def test_resuming_from_the_state_reads_no_row_twice_and_continues_the_order(lines):
    uninterrupted = corpus(lines, shuffle_buffer=16)
    expected = [decode(e.ids) for e in uninterrupted.take(140)]
    first = corpus(lines, shuffle_buffer=16)
    assert [decode(e.ids) for e in first.take(100)] == expected[:100]
    state = json.loads(json.dumps(first.state_dict()))  # what a checkpoint keeps
    assert len(state["buffer"]) == 16 and state["rows_read"] == 116 + 12  # sentences 0-115 and 12 blank rows

    resumed = corpus(lines, shuffle_buffer=16)
    resumed.load_state_dict(state)
    seen = []
    original = resumed.source.row_text
    resumed.source.row_text = lambda row, index: seen.append(row["text"]) or original(row, index)
    assert [decode(e.ids) for e in resumed.take(40)] == expected[100:]
    # every row read after resuming is new: datasets seeks to the offset, nothing before it comes back
    assert len(seen) == 40 + 4 and seen[0] == "sentence 116"


def test_pairs_from_two_columns(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps({"en": f"house {i}", "de": f"Haus {i}"}) + "\n" for i in range(30)),
                    encoding="utf-8")
    spec = {"kind": "hf_dataset", "path": "json", "data_files": str(path), "columns": ["en", "de"],
            "src_lang": "en", "tgt_lang": "de", "shuffle_buffer": 4}
    pairs = parse_source(spec, Where())
    assert pairs.provides == "pair"
    stream = StreamedCorpus(pairs, CharTokenizer(), "chars", 0)
    examples = stream.take(10)
    assert all(isinstance(e, PairExample) and (e.src_lang, e.tgt_lang) == ("en", "de") for e in examples)
    assert all(decode(e.src).replace("house", "Haus") == decode(e.tgt) for e in examples)


@pytest.mark.parametrize("options, message", [
    ({"lang": None}, "lang: the language of column 'text'"),
    ({"lang": None, "columns": ["en"], "src_lang": "en", "tgt_lang": "de"}, "columns: \\[src, tgt\\] makes"),
    ({"shuffle_buffer": 0}, "shuffle_buffer, size and tokenizer_sentences must be at least 1"),
])
def test_bad_options_are_refused_by_name(lines, options, message):
    with pytest.raises(ConfigError, match=message):
        source(lines, **options)


def test_a_row_without_the_column_is_an_error_naming_it(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"sentence": "hello"}) + "\n", encoding="utf-8")
    spec = {"kind": "hf_dataset", "path": "json", "data_files": str(path), "lang": "en"}
    with pytest.raises(InputError, match=r"data.mlm\[0\] .*row 0 has no column 'text' \(its columns: sentence\)"):
        StreamedCorpus(parse_source(spec, Where().key("data").key("mlm").key(0)), CharTokenizer(), "c", 0).take(1)


def test_alpha_sampling_over_streamed_sources(tmp_path):
    parts = []
    for name, n in (("big", 900), ("small", 100)):
        path = tmp_path / f"{name}.txt"
        path.write_text("".join(f"{name} {i}\n" for i in range(n)), encoding="utf-8")
        parts.append(StreamedCorpus(source(path, shuffle_buffer=8, size=n), CharTokenizer(), "c", 0))
    mixture = StreamedMixture(parts, [900, 100], 0.5, seed=0)
    drawn = [decode(e.ids).split()[0] for e in mixture.take(4000)]
    q_small = 100 ** 0.5 / (900 ** 0.5 + 100 ** 0.5)  # 0.25
    assert abs(drawn.count("small") / len(drawn) - q_small) < 0.03
    state = json.loads(json.dumps(mixture.state_dict()))
    expected = [decode(e.ids) for e in mixture.take(50)]
    again = StreamedMixture([StreamedCorpus(p.source, CharTokenizer(), "c", 0) for p in parts], [900, 100], 0.5, 0)
    again.load_state_dict(state)
    assert [decode(e.ids) for e in again.take(50)] == expected


def test_the_stream_cuts_each_step_as_ranks_and_micro_batches_share_it(lines):
    whole = DataStream(corpus(lines, shuffle_buffer=16), lambda ex: [decode(e.ids) for e in ex], batch_size=8,
                       grad_accum=1, rank=0, world_size=1, seed=0)
    steps = [whole.next_step()[0] for _ in range(3)]
    ranks = [DataStream(corpus(lines, shuffle_buffer=16), lambda ex: [decode(e.ids) for e in ex], batch_size=2,
                        grad_accum=2, rank=r, world_size=2, seed=0) for r in (0, 1)]
    for step in steps:
        micro = [ranks[r].next_step() for r in (0, 1)]
        # slot m × W + r: micro-batch 0 of rank 0, of rank 1, micro-batch 1 of rank 0, of rank 1
        assert micro[0][0] + micro[1][0] + micro[0][1] + micro[1][1] == step
    with pytest.raises(ConfigError, match="streamed data is read in step order by the training process"):
        DataStream(corpus(lines), lambda ex: ex, batch_size=2, grad_accum=1, rank=0, world_size=1, seed=0,
                   num_workers=1)


def recipe(tmp_path, text, **changes):
    spec = {"model": "xlmr_tiny",
            "model_overrides": {"hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "num_layers": 2,
                                "max_positions": 64},
            "tokenizer": {"vocab_size": 40, "model_type": "unigram"},
            "objectives": {"mlm": {"max_length": 24}},
            "data": {"mlm": [{"kind": "hf_dataset", "path": "text", "data_files": str(text), "lang": "en",
                              "shuffle_buffer": 32}]},
            "output_dir": str(tmp_path / "run"), "max_steps": 8, "batch_size": 4, "checkpoint_every": 4,
            "schedule": "constant", "warmup_steps": 0, "num_workers": 0, "progress": False, "tensorboard": False,
            "log_every": 1, **changes}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def losses(run) -> list[float]:
    return [r["loss"] for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "loss" in r]


def test_a_streamed_run_stopped_and_resumed_trains_as_an_uninterrupted_one(tmp_path, lines):
    from safetensors.torch import load_file

    whole, parts = tmp_path / "whole", tmp_path / "parts"
    whole.mkdir(), parts.mkdir()
    assert pretrain_main(["--config", str(recipe(whole, lines))]) == 0
    assert pretrain_main(["--config", str(recipe(parts, lines)), "--set", "max_steps=4"]) == 0
    saved = json.loads((parts / "run" / "checkpoints" / "step-00000004" / "trainer.json").read_text())
    stream = saved["data"]["datasets"]["data"]
    assert stream["next_step"] == 4 and len(stream["stream"]["buffer"]) == 32  # the position, not the data read
    assert pretrain_main(["--config", str(recipe(parts, lines))]) == 0
    assert losses(parts / "run") == losses(whole / "run")
    a = load_file(whole / "run" / "checkpoints" / "step-00000008" / "model.safetensors")
    b = load_file(parts / "run" / "checkpoints" / "step-00000008" / "model.safetensors")
    assert all(np.array_equal(a[k].numpy(), b[k].numpy()) for k in a)


def test_a_failed_steps_batch_is_drawn_again_after_an_emergency_checkpoint(lines):
    def stream():
        return DataStream(corpus(lines, shuffle_buffer=16), lambda ex: [decode(e.ids) for e in ex], batch_size=4,
                          grad_accum=1, rank=0, world_size=1, seed=0)

    run = stream()
    run.next_step()
    second = run.next_step()
    run.step -= 1  # the trainer's emergency checkpoint: the second step failed, its batch is drawn again
    state = json.loads(json.dumps(run.state_dict()))
    resumed = stream()
    resumed.load_state_dict(state)
    assert resumed.next_step() == second
    run.step -= 1
    with pytest.raises(InputError, match="its position before step 0 is gone"):
        run.state_dict()


def test_prefetching_draws_what_a_plain_read_draws_and_saves_the_same_positions(lines):
    from babelzoo.train.data import StreamPlan

    def plan(prefetch):
        return StreamPlan("mlm", corpus(lines, shuffle_buffer=16), batch_size=3, grad_accum=2, world_size=1,
                          prefetch=prefetch)

    ahead, plain = plan(True), plan(False)
    for step in range(6):
        before = ahead.state_dict(step), plain.state_dict(step)
        assert json.dumps(before[0]) == json.dumps(before[1])  # the position before the step, not the prefetched one
        drawn = [[decode(e.ids) for e in p.examples(step, m, 0)] for p in (ahead, plain) for m in (0, 1)]
        assert drawn[:2] == drawn[2:]
        assert json.dumps(ahead.state_dict(step)) == json.dumps(plain.state_dict(step))  # the step just drawn
        assert json.dumps(ahead.state_dict(step + 1)) == json.dumps(plain.state_dict(step + 1))
    assert ahead._ahead is not None and plain._ahead is None  # step 6 is being read ahead
    resumed = plan(True)
    resumed.load_state_dict(json.loads(json.dumps(ahead.state_dict(6))), 6)
    ahead.close()
    assert [decode(e.ids) for e in resumed.examples(6, 0, 0)] == [decode(e.ids) for e in plain.examples(6, 0, 0)]


def test_an_error_reading_ahead_is_raised_when_its_step_is_asked_for(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"text": f"row {i}"}) + "\n" for i in range(8)) + '{"body": "x"}\n',
                    encoding="utf-8")
    from babelzoo.train.data import StreamPlan

    streamed = StreamedCorpus(parse_source({"kind": "hf_dataset", "path": "json", "data_files": str(path), "lang": "en",
                                            "shuffle_buffer": 1}, Where().key("data").key("mlm").key(0)),
                              CharTokenizer(), "chars", 0)
    plan = StreamPlan("mlm", streamed, batch_size=4, grad_accum=1, world_size=1)
    assert len(plan.examples(0, 0, 0)) == 4  # step 1's rows (4..7, then the bad one) are read ahead meanwhile
    with pytest.raises(InputError, match=r"data.mlm\[0\] .*row 8 has no value in column 'text'"):
        plan.examples(1, 0, 0)


def corpus_folder(tmp_path):
    """``corpus/a.txt`` and ``corpus/b.txt``, 60 sentences each."""
    folder = tmp_path / "corpus"
    folder.mkdir()
    for name, start in (("a.txt", 0), ("b.txt", 60)):
        (folder / name).write_text("".join(f"sentence {i}\n" for i in range(start, start + 60)), encoding="utf-8")
    return folder


LAYOUTS = {"folder": lambda folder: {"path": str(folder)},
           "glob": lambda folder: {"path": "text", "data_files": str(folder / "*.txt")},
           "file": lambda folder: {"path": "text", "data_files": str(folder / "a.txt")}}


def streamed_recipe(tmp_path, layout, folder, **changes):
    data = {"mlm": [{"kind": "hf_dataset", **LAYOUTS[layout](folder), "lang": "en", "shuffle_buffer": 16}]}
    settings = {"data": data, "tokenizer": {"vocab_size": 24, "model_type": "unigram"}, "max_steps": 2,
                "checkpoint_every": 2, **changes}
    return recipe(tmp_path, None, **settings)


def replace_keeping_size_and_time(path):
    """Other text of the same length, its modification time set back (as ``cp -p`` or ``rsync -a``
    leave a copied file's)."""
    before = path.stat()
    path.write_text(path.read_text(encoding="utf-8").replace("sentence 1", "sentence X"), encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns


def test_a_file_is_known_by_its_size_time_and_the_sha256_of_its_ends(tmp_path):
    import hashlib

    from babelzoo.datasets.hf_load import ENDS, file_identity

    path = tmp_path / "big.txt"
    data = bytes(range(256)) * 1000  # 256,000 bytes: the two 64 KiB ends and a middle between them
    path.write_bytes(data)
    known = file_identity(str(path))
    assert known == {"size": 256_000, "mtime_ns": path.stat().st_mtime_ns,
                     "ends_sha256": hashlib.sha256(data[:ENDS] + data[-ENDS:]).hexdigest()}
    small = tmp_path / "small.txt"
    small.write_bytes(data[:ENDS + 10])  # its ends overlap: every byte once
    assert file_identity(str(small))["ends_sha256"] == hashlib.sha256(data[:ENDS + 10]).hexdigest()


def test_a_streamed_folder_or_glob_records_the_files_datasets_reads(tmp_path):
    folder = corpus_folder(tmp_path)
    (folder / "notes.jsonl").write_text('{"text": "not read: the folder is read as its .txt files"}\n')
    for layout in ("folder", "glob"):
        spec = {"kind": "hf_dataset", **LAYOUTS[layout](folder), "lang": "en"}
        files = parse_source(spec, Where()).identity()["files"]
        assert list(files) == [str(folder / "a.txt"), str(folder / "b.txt")]
        assert files[str(folder / "b.txt")]["size"] == (folder / "b.txt").stat().st_size


@pytest.mark.parametrize("layout, change, named", [
    ("folder", "replace", "a.txt"), ("glob", "replace", "a.txt"), ("file", "replace", "a.txt"),
    ("folder", "add", "c.txt"), ("glob", "add", "c.txt"),
])
def test_a_streamed_run_whose_files_changed_is_not_resumed(tmp_path, capsys, layout, change, named):
    folder = corpus_folder(tmp_path)
    assert pretrain_main(["--config", str(streamed_recipe(tmp_path, layout, folder))]) == 0
    if change == "replace":
        replace_keeping_size_and_time(folder / "a.txt")
    else:
        (folder / "c.txt").write_text("sentence new\n", encoding="utf-8")
    capsys.readouterr()
    assert pretrain_main(["--config", str(streamed_recipe(tmp_path, layout, folder, max_steps=4))]) == 2
    refused = capsys.readouterr().err
    assert "step-00000002 was written by a different run" in refused
    assert f"data.dataset.files.{folder / named}.ends_sha256: " in refused
    assert not (tmp_path / "run" / "checkpoints" / "step-00000004").exists()


@pytest.mark.parametrize("layout", ["folder", "glob", "file"])
def test_a_streamed_run_whose_files_are_as_they_were_resumes(tmp_path, layout):
    folder = corpus_folder(tmp_path)
    assert pretrain_main(["--config", str(streamed_recipe(tmp_path, layout, folder))]) == 0
    if layout == "file":
        (folder / "c.txt").write_text("sentence new\n", encoding="utf-8")  # a file the run does not read
    assert pretrain_main(["--config", str(streamed_recipe(tmp_path, layout, folder, max_steps=4))]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["resumed_from"].endswith("step-00000002") and summary["steps"] == 4
