"""Every ``babelzoo`` command given malformed input (text that is not UTF-8, values that do not
parse, non-finite or out-of-range numbers, missing files, folders where files belong, files
where folders belong) stops with exit status 2 and exactly one line on stderr naming what is
wrong, no traceback, and changes no file outside the run's own output folder (``out``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from babelzoo.cli import DELEGATED, main

LATIN1 = "model: xlmr_tiny\n# r\u00e9sum\u00e9 of the run\n".encode("latin-1")
BOMB = "\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x]",
                  *(f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 8)),
                  "model: *a7"]) + "\n"


@pytest.fixture
def d(tmp_path, monkeypatch) -> Path:
    """A folder of malformed inputs; the commands run in it, with their cache in it too, so any
    stray write shows in its snapshot."""
    (tmp_path / "latin1.yaml").write_bytes(LATIN1)
    (tmp_path / "unclosed.yaml").write_text("model: xlmr_tiny\nlr: [0.1\n", encoding="utf-8")
    (tmp_path / "bomb.yaml").write_text(BOMB, encoding="utf-8")
    (tmp_path / "nan.yaml").write_text("model: xlmr_tiny\nlr: .nan\n", encoding="utf-8")
    (tmp_path / "corpus_folder.yaml").write_text(
        f"model: xlmr_tiny\nobjectives: {{mlm: {{}}}}\ndata:\n  mlm:\n    - {{kind: text, path: {tmp_path / 'folder'}, "
        f"lang: en}}\noutput_dir: {tmp_path / 'out'}\n", encoding="utf-8")
    (tmp_path / "board_unclosed.yaml").write_text("tasks: [tatoeba\n", encoding="utf-8")
    (tmp_path / "board_inf.yaml").write_text("tasks: [tatoeba]\nlimit: .inf\nmodels: [{name: a, kind: peer, "
                                             "source: muse_v3}]\n", encoding="utf-8")
    (tmp_path / "board_noname.yaml").write_text("tasks: [tatoeba]\nmodels: [{kind: peer, source: muse_v3}]\n",
                                                encoding="utf-8")
    (tmp_path / "folder").mkdir()
    (tmp_path / "file.txt").write_text("not a folder\n", encoding="utf-8")
    (tmp_path / "kb").mkdir()
    for split in ("train", "valid", "test"):
        (tmp_path / "kb" / f"{split}.tsv").write_text("".join(f"e{i}\tr{i % 2}\te{(i + 1) % 6}\n" for i in range(6)),
                                                     encoding="utf-8")
    (tmp_path / "latin1_kb.tsv").write_bytes("Q1\tcapital\tS\u00e3o Paulo\n".encode("latin-1"))
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_bytes('{"model_type": "bert", "note": "caf\u00e9"}'.encode("latin-1"))
    for lang, offset in (("eng_Latn", 0), ("deu_Latn", 100)):  # a zero-shot task: English trains, German tests
        for split, offset in (("train", offset), ("test", offset + 50)):
            (tmp_path / "sib" / lang).mkdir(parents=True, exist_ok=True)
            (tmp_path / "sib" / lang / f"{split}.tsv").write_text(
                "index_id\tcategory\ttext\n" + "".join(f"{offset + i}\t{('science', 'sports')[i % 2]}\tthe text {i}\n"
                                                      for i in range(6)), encoding="utf-8")
    (tmp_path / "sib" / "deu_Latn" / "dev.jsonl").write_text(
        "".join(json.dumps({"index_id": 200 + i, "category": "science", "text": f"der Text {i}"}) + "\n"
                for i in range(4)), encoding="utf-8")
    (tmp_path / "split_dev.yaml").write_text(
        f"model: xlmr_tiny\ntokenizer: {{from_model: multilingual_e5_small}}\ntask:\n  kind: sequence_classification\n"
        f"  init: random\n  train: {tmp_path}/sib/eng_Latn/train.tsv\n  dev: {{kind: hf_dataset, path: json, "
        f"data_files: {tmp_path}/sib/deu_Latn/dev.jsonl, split: train}}\n  test: {tmp_path}/sib/*/test.tsv\n"
        f"  label_column: category\n  id_column: index_id\noutput_dir: {tmp_path}/out/ft\n", encoding="utf-8")
    (tmp_path / "stream_empty.yaml").write_text(
        f"model: xlmr_tiny\ntokenizer: {{from_model: multilingual_e5_small}}\nobjectives: {{mlm: {{}}}}\n"
        f"data:\n  mlm:\n    - {{kind: hf_dataset, path: {tmp_path}/folder, lang: en}}\n"
        f"output_dir: {tmp_path}/out/stream\n", encoding="utf-8")
    for name, text in (("model/pytorch_model.bin", "weights of mine"), ("train/data.csv", "a,b\n")):
        (tmp_path / "proj" / name).parent.mkdir(parents=True, exist_ok=True)  # a user's project folder
        (tmp_path / "proj" / name).write_text(text, encoding="utf-8")
    (tmp_path / "proj_link").symlink_to(tmp_path / "proj")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BABELZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


# (argv with {d} for the inputs folder, a fragment the one line must hold)
CASES: dict[str, list[tuple[list[str], str]]] = {
    "list": [
        (["list", "models", "x*", "extra"], "babelzoo: unrecognized arguments: extra"),
        (["list", "--all"], "babelzoo: unrecognized arguments: --all"),
    ],
    "info": [
        (["info", "no_such_model"], "babelzoo info: unknown model 'no_such_model' (every model: babelzoo list models)"),
        (["info", "caf\udce9"], "babelzoo info: unknown model 'caf\\udce9'"),  # a name from a latin-1 shell
        (["info"], "babelzoo: the following arguments are required: name"),
    ],
    "demo": [
        (["demo", "--out", "{d}/file.txt"], "babelzoo demo: --out {d}/file.txt: exists and is not a folder"),
        (["demo", "--out", "{d}/out", "--steps", "0"], "TrainConfig.max_steps=0 must be at least 1"),
        (["demo", "--out", "{d}/out", "--batch-size", "-3"], "TrainConfig.batch_size=-3 must be at least 1"),
        (["demo", "--out", "{d}/kb"], "--out {d}/kb: not a folder babelzoo demo made"),  # refused, untouched
        (["demo", "--out", "{d}/proj", "--fresh"], "--out {d}/proj: not a folder babelzoo demo made"),
        (["demo", "--out", "{d}/proj_link", "--fresh"], "--out {d}/proj_link: not a folder babelzoo demo made"),
    ],
    "pretrain": [
        (["pretrain", "--config", "{d}/latin1.yaml"], "{d}/latin1.yaml:2: not UTF-8 text (byte 0xe9)"),
        (["pretrain", "--config", "{d}/unclosed.yaml"], "{d}/unclosed.yaml:3: invalid YAML"),
        (["pretrain", "--config", "{d}/bomb.yaml"], "{d}/bomb.yaml:5: aliases expand the document"),
        (["pretrain", "--config", "{d}/nan.yaml"], "{d}/nan.yaml:2 TrainConfig.optim.lr=nan must be a finite number"),
        (["pretrain", "--config", "{d}/missing.yaml"], "{d}/missing.yaml: no such recipe file"),
        (["pretrain", "--config", "mlm_tin"], "babelzoo pretrain: unknown recipe 'mlm_tin': no such file, nor a shipped "
         "recipe; did you mean 'mlm_tiny', 'mmlm_tiny', 'clmlm_tiny'? (every shipped recipe: babelzoo list recipes)"),
        (["pretrain", "--config", "{d}/folder"], "{d}/folder: a folder; a recipe is a YAML file"),
        (["pretrain", "--config", "mlm_tiny", "--set", "lr=[0.1"], "--set 'lr=[0.1': invalid YAML"),
        (["pretrain", "--config", "mlm_tiny", "--set", "lr=.inf"], "TrainConfig.optim.lr=inf must be a finite number"),
        (["pretrain", "--config", "mlm_tiny", "--set", "seed=1180591620717411303424"],
         "TrainConfig.seed=1180591620717411303424 must be in [0, 4294967295]"),
        (["pretrain", "--config", "mlm_tiny", "--set", "objectives.mlm.max_length=1e3"],
         "TrainConfig.objectives.mlm.max_length='1e3' must be an integer, got str"),
        (["pretrain", "--config", "mlm_tiny", "--set", "lr"], "--set 'lr': expected key=value"),
        (["pretrain", "--config", "{d}/corpus_folder.yaml"], "{d}/folder: a folder, not a text file"),
        (["pretrain", "--config"], "babelzoo pretrain: argument --config: expected one argument"),
        (["pretrain", "--config", "translation_ranking_tiny", "--set", "output_dir={d}/kb"],
         "output_dir {d}/kb: not a folder a babelzoo training run wrote (it holds test.tsv, train.tsv, valid.tsv)"),
        (["pretrain", "--config", "mlm_tiny", "--set", "model_dir=../x"],
         "TrainConfig.model_dir='../x' must name a folder inside output_dir"),
        (["pretrain", "--config", "{d}/stream_empty.yaml"],
         "{d}/stream_empty.yaml:6 TrainConfig.data.mlm[0]: datasets cannot load {d}/folder, split train"),
    ],
    "finetune": [
        (["finetune", "--config", "{d}/latin1.yaml"], "{d}/latin1.yaml:2: not UTF-8 text (byte 0xe9)"),
        (["finetune", "--config", "{d}/unclosed.yaml"], "{d}/unclosed.yaml:3: invalid YAML"),
        (["finetune", "--config", "{d}/bomb.yaml"], "{d}/bomb.yaml:5: aliases expand the document"),
        (["finetune", "--config", "{d}/missing.yaml"], "{d}/missing.yaml: no such recipe file"),
        (["finetune", "--config", "{d}/folder"], "{d}/folder: a folder; a recipe is a YAML file"),
        (["finetune", "--config", "sib200_tiny", "--set", "lr=.nan"], "TrainConfig.optim.lr=nan must be a finite number"),
        (["finetune", "--config", "sib200_tiny", "--set", "eps=!!python/name:os.system"], "invalid YAML"),
        (["finetune", "--config", "{d}/split_dev.yaml", "--set", "output_dir={d}/kb"],
         "output_dir {d}/kb: not a folder a babelzoo training run wrote (it holds test.tsv, train.tsv, valid.tsv)"),
        (["finetune", "--config", "{d}/split_dev.yaml"],  # a target-language dev set given as a dataset split
         "belongs to deu_Latn (by its file {d}/sib/deu_Latn/dev.jsonl), a target language of task.test"),
    ],
    "convert": [
        (["convert", "--from-hf", "{d}/hf", "--to", "{d}/out"], "{d}/hf/config.json:1: not UTF-8 text (byte 0xe9)"),
        (["convert", "--from-hf", "{d}/missing", "--to", "{d}/out"], "{d}/missing: no config.json"),
        (["convert", "--from-hf", "{d}/file.txt", "--to", "{d}/out"], "{d}/file.txt: no config.json"),
        (["convert", "--to-hf", "{d}/out", "--from", "{d}/missing"], "{d}/missing: not a checkpoint directory"),
        (["convert", "--to-hf", "{d}/out", "--from", "{d}/file.txt"], "{d}/file.txt: not a checkpoint directory"),
        (["convert", "--to-hf", "{d}/out", "--from", "{d}/folder"], "{d}/folder: no config.json"),
        (["convert", "--from-hf", "{d}/hf"], "babelzoo convert: --from-hf needs --to OUT_DIR"),
        (["convert", "--to-onnx", "{d}/out/onnx", "--from", "xlmr_tiny", "--opset", "17"],
         "--opset 17: torch.onnx writes opsets 18 to 25"),
        (["convert", "--to-onnx", "{d}/out/onnx", "--from", "xlmr_tiny", "--opset", "26"],
         "--opset 26: torch.onnx writes opsets 18 to 25"),
        (["convert", "--to-onnx", "{d}/out/onnx", "--from", "{d}/folder"], "{d}/folder: no config.json"),
    ],
    "eval": [
        (["eval", "--config", "{d}/latin1.yaml", "--out", "{d}/out"], "{d}/latin1.yaml:2: not UTF-8 text (byte 0xe9)"),
        (["eval", "--config", "{d}/board_unclosed.yaml", "--out", "{d}/out"],
         "{d}/board_unclosed.yaml:2: invalid YAML"),
        (["eval", "--config", "{d}/bomb.yaml", "--out", "{d}/out"], "{d}/bomb.yaml:5: aliases expand the document"),
        (["eval", "--config", "{d}/board_inf.yaml", "--out", "{d}/out"],
         "{d}/board_inf.yaml:2 LeaderboardConfig.limit=inf must be an integer or null, got float"),
        (["eval", "--config", "{d}/board_noname.yaml", "--out", "{d}/out"],
         "{d}/board_noname.yaml:2 LeaderboardConfig.models[0]: model spec needs name"),
        (["eval", "--config", "{d}/missing.yaml", "--out", "{d}/out"], "{d}/missing.yaml: no such leaderboard config file"),
        (["eval", "--config", "{d}/folder", "--out", "{d}/out"], "{d}/folder: a folder; a leaderboard config is a YAML file"),
        (["eval", "--config", "{d}/board_inf.yaml", "--limit", "0"], "argument --limit: '0' must be at least 1"),
        (["eval", "--config", "{d}/board_inf.yaml", "--limit", "nan"], "argument --limit: invalid int value: 'nan'"),
    ],
    "encode": [
        (["encode", "--model", "xlmr_tiny", "--input", "{d}/latin1_kb.tsv", "--output", "{d}/out/v.npy"],
         "{d}/latin1_kb.tsv:1: not UTF-8 text (byte 0xe3)"),
        (["encode", "--model", "xlmr_tiny", "--input", "{d}/folder", "--output", "{d}/out/v.npy"],
         "{d}/folder: Is a directory"),
        (["encode", "--model", "xlmr_tiny", "--input", "{d}/missing.txt", "--output", "{d}/out/v.npy"],
         "{d}/missing.txt: No such file or directory"),
        (["encode", "--model", "xlmr_tiny", "--input", "{d}/file.txt", "--output", "{d}/out/v.csv"],
         "--output {d}/out/v.csv: name a .npy file"),
        (["encode", "--model", "xlmr_tiny", "--input", "{d}/file.txt", "--output", "{d}/out/v.npy", "--batch-size",
          "0"], "--batch-size must be a positive integer, got 0"),
        (["encode", "--model", "xlmr_tiny", "--input", "{d}/file.txt", "--output", "{d}/out/v.npy", "--layer", "x"],
         "argument --layer: invalid int value: 'x'"),
        (["encode", "--model", "no_such_model", "--input", "{d}/file.txt", "--output", "{d}/out/v.npy"],
         "unknown model 'no_such_model'"),
        (["encode", "--model", "{d}/folder", "--input", "{d}/file.txt", "--output", "{d}/out/v.npy"],
         "{d}/folder: no config.json"),
        (["encode", "--input", "{d}/file.txt"], "the following arguments are required: --model, --output"),
    ],
    "kb": [
        (["kb", "info", "{d}/latin1_kb.tsv"], "{d}/latin1_kb.tsv:1: not UTF-8 text"),
        (["kb", "info", "{d}/missing.tsv"], "is no file or folder"),
        (["kb", "info", "{d}/folder"], "{d}/folder: no triples"),
        (["kb", "info", "{d}/kb", "--top", "-5"], "argument --top: '-5' must be non-negative"),
        (["kb", "link", "--kb", "{d}/latin1_kb.tsv", "Japan"], "{d}/latin1_kb.tsv:1: not UTF-8 text"),
        (["kb", "link", "--kb", "{d}/file.txt", "Japan"], "{d}/file.txt:1: expected 3 fields (head, relation, tail)"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--lr", "nan"],
         "argument --lr: 'nan' must be a finite number"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--gamma", "inf"],
         "argument --gamma: 'inf' must be a finite number"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--dim", "0"],
         "argument --dim: '0' must be at least 1"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--dim", "1e3"],
         "argument --dim: invalid int value: '1e3'"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--label-smoothing", "1.5"],
         "argument --label-smoothing: '1.5' must be in [0, 1)"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--seed", "-1"],
         "argument --seed: '-1' must be in [0, 4294967295]"),
        (["kb", "train-kge", "--data", "{d}/latin1_kb.tsv", "--model", "transe"], "{d}/latin1_kb.tsv:1: not UTF-8"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--out", "{d}/file.txt"],
         "{d}/file.txt: exists and is not a folder"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "transe", "--out", "{d}/hf"],
         "{d}/hf: not a folder babelzoo wrote as a KG embedding (it holds config.json); nothing was deleted"),
        (["kb", "train-kge", "--data", "{d}/kb", "--model", "gpt"], "argument --model: invalid choice: 'gpt'"),
        (["kb"], "babelzoo kb: the following arguments are required: ACTION"),
        (["kb", "eval", "--model", "xlmr_tiny", "--kg", "{d}/missing"], "is no file or folder"),
        (["kb", "eval", "--model", "xlmr_tiny", "--kg", "{d}/kb", "--out", "{d}/file.txt"],
         "--out {d}/file.txt: a file babelzoo did not write; nothing was changed"),
        (["kb", "eval", "--model", "{d}/folder", "--kg", "{d}/kb"], "{d}/folder: no config.json"),
        (["kb", "eval", "--model", "xlmr_tiny", "--kg", "{d}/kb", "--split", "dev"], "argument --split: invalid choice"),
        (["kb", "predict", "--model", "xlmr_tiny", "--kg", "{d}/kb", "e0", "r9"],
         "unknown relation 'r9': no id or text of the graph matches it (its relations: r0, r1)"),
        (["kb", "predict", "--model", "xlmr_tiny", "--kg", "{d}/kb", "e0", "r0", "--k", "0"],
         "argument --k: '0' must be at least 1"),
    ],
}

# Parsers that are not yet babelzoo.errors.ArgumentParser print argparse's usage text (3 lines).
USAGE_TEXT = [(["demo", "--steps", "abc"], "argument --steps: invalid int value: 'abc'"),
              (["finetune"], "the following arguments are required: --config")]


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under ``root`` but ``root/out``: its size and modification time."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if Path(folder, x) != root / "out"]
        for name in [*dirs, *files]:
            stat = os.stat(Path(folder, name), follow_symlinks=False)
            out[str(Path(folder, name).relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return out


def run(d: Path, argv: list[str], capsys) -> tuple[int, str]:
    before = snapshot(d)
    code = main([a.format(d=d) for a in argv])
    captured = capsys.readouterr()
    assert snapshot(d) == before, f"{argv} changed files outside out/"
    return code, captured.err


def test_every_command_is_fuzzed():
    assert set(CASES) == {"list", "info", *DELEGATED}


@pytest.mark.parametrize("argv, fragment", [case for cases in CASES.values() for case in cases],
                         ids=lambda value: " ".join(value)[:60] if isinstance(value, list) else None)
def test_malformed_input_is_one_line_and_exit_2_and_touches_nothing(d, capsys, argv, fragment):
    code, err = run(d, argv, capsys)
    command = argv[0]
    assert (code, err.count("\n")) == (2, 1), err
    assert "Traceback" not in err and err.startswith(("babelzoo: ", f"babelzoo {command}: ")), err
    assert fragment.format(d=d) in err, err


@pytest.mark.parametrize("argv, fragment", USAGE_TEXT, ids=lambda value: " ".join(value)[:60]
                         if isinstance(value, list) else None)
def test_a_command_line_argparse_cannot_parse_is_one_line(d, capsys, argv, fragment):
    try:
        code, err = run(d, argv, capsys)
    except SystemExit as stop:
        code, err = stop.code, capsys.readouterr().err
    assert (code, err.count("\n")) == (2, 1) and fragment in err, err
