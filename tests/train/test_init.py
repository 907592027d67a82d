"""A recipe's ``init``: the model starts from pretrained weights (a checkpoint directory here),
optionally with a subset of its layers, as a distilled student starts from its teacher; bad
``init`` values are refused with the file and line; a run started this way resumes."""

from __future__ import annotations

import json
import re

import pytest
import torch
import yaml

from babelzoo.errors import ConfigError
from babelzoo.train.run import build_run
from babelzoo.train.cli import pretrain_main
from babelzoo.train.config import load_recipe
from babelzoo.yaml_files import key_lines

SHAPE = {"hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "max_positions": 64, "num_layers": 4}


@pytest.fixture(scope="module")
def teacher_dir(tmp_path_factory):
    """A 4-layer xlm_tiny trained 2 steps on CLDR names: its checkpoint holds weights and tokenizer."""
    babel = pytest.importorskip("babel")
    folder = tmp_path_factory.mktemp("teacher")
    names = sorted(babel.Locale.parse("de").territories.values())
    (folder / "de.txt").write_text("\n".join(names) + "\n", encoding="utf-8")
    spec = {"model": "xlm_tiny", "model_overrides": SHAPE, "tokenizer": {"vocab_size": 300, "model_type": "unigram"},
            "objectives": {"mlm": {"max_length": 24}},
            "data": {"mlm": [{"kind": "text", "path": str(folder / "de.txt"), "lang": "de"}]},
            "output_dir": str(folder / "run"), "max_steps": 2, "batch_size": 8, "progress": False,
            "tensorboard": False, "measure_mfu": False}
    (folder / "teacher.yaml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    assert pretrain_main(["--config", str(folder / "teacher.yaml")]) == 0
    return folder, folder / "run" / "checkpoints" / "step-00000002"


def student_recipe(tmp_path, teacher_dir, init, **changes):
    folder, checkpoint = teacher_dir
    # the checkpoint fits xlm_tiny with these overrides (its vocabulary included), as create_model checks
    spec = {"model": "xlm_tiny", "model_overrides": {**SHAPE, "vocab_size": 300}, "init": init, "tokenizer": {"path": str(checkpoint)},
            "objectives": {"distill_mlm": {"teacher": str(checkpoint), "max_length": 24, "alpha_hidden": 1.0}},
            "data": {"distill_mlm": [{"kind": "text", "path": str(folder / "de.txt"), "lang": "de"}]},
            "output_dir": str(tmp_path / "run"), "max_steps": 2, "batch_size": 8, "progress": False,
            "tensorboard": False, "measure_mfu": False, **changes}
    path = tmp_path / "student.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def test_layers_picked_from_the_teacher_equal_its_weights(tmp_path, teacher_dir):
    from babelzoo.zoo.pretrained import from_pretrained

    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(teacher_dir[1]), "layers": [1, 3]})
    run = build_run(load_recipe(path), path)
    model, objective = run.model, run.objectives
    teacher = from_pretrained(teacher_dir[1])
    assert model.config.text.num_layers == 2 and objective.teacher.config.text.num_layers == 4
    mine, theirs = model.state_dict(), teacher.state_dict()
    for key, value in mine.items():
        if key.startswith("encoder.layers."):
            index, _, rest = key[len("encoder.layers."):].partition(".")
            source = f"encoder.layers.{[1, 3][int(index)]}.{rest}"
        else:
            source = key
        assert torch.equal(value, theirs[source]), key
    assert model.training and all(p.requires_grad for p in model.parameters())
    assert objective.layer_map == [0, 2, 4]


def test_a_student_started_from_its_teacher_trains_and_resumes(tmp_path, teacher_dir):
    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(teacher_dir[1]), "layers": [0, 2]})
    assert pretrain_main(["--config", str(path)]) == 0
    assert pretrain_main(["--config", str(path), "--set", "max_steps=3"]) == 0
    log = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["resumed_from"].endswith("step-00000002")


def test_changing_init_on_resume_is_refused(tmp_path, teacher_dir, capsys):
    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(teacher_dir[1]), "layers": [0, 2]})
    assert pretrain_main(["--config", str(path)]) == 0
    assert pretrain_main(["--config", str(path), "--set", "max_steps=3", "--set", "init.layers=[1,3]"]) == 2
    assert "init.layers" in capsys.readouterr().err


def test_a_narrow_student_keeps_the_teachers_strongest_neurons(tmp_path, teacher_dir):
    from babelzoo.compression import prune_ffn, prune_layers
    from babelzoo.zoo.pretrained import from_pretrained

    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(teacher_dir[1]), "layers": [0, 2],
                                                  "intermediate_size": 40})
    model = build_run(load_recipe(path), path).model
    expected = prune_ffn(prune_layers(from_pretrained(teacher_dir[1]), [0, 2]), 40).state_dict()
    assert model.config.text.intermediate_size == 40 and model.config.text.num_layers == 2
    assert all(torch.equal(value, expected[key]) for key, value in model.state_dict().items())


def test_frozen_parameters_keep_their_initial_values_through_training_and_resume(tmp_path, teacher_dir):
    from babelzoo.zoo.pretrained import from_pretrained

    init = {"pretrained": str(teacher_dir[1]), "layers": [0, 2], "freeze": ["embeddings.word.*", "encoder.layers.0.*"]}
    path = student_recipe(tmp_path, teacher_dir, init)
    model = build_run(load_recipe(path), path).model
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert "embeddings.word.weight" in frozen and "encoder.layers.0.ffn.up.weight" in frozen
    assert not any(n.startswith(("encoder.layers.1.", "embeddings.position")) for n in frozen)
    assert pretrain_main(["--config", str(path)]) == 0
    assert pretrain_main(["--config", str(path), "--set", "max_steps=3"]) == 0
    teacher = from_pretrained(teacher_dir[1]).state_dict()
    trained = from_pretrained(tmp_path / "run" / "checkpoints" / "step-00000003").state_dict()
    for name in frozen:
        assert torch.equal(trained[name], teacher[name]), name
    assert not torch.equal(trained["encoder.layers.1.ffn.up.weight"], teacher["encoder.layers.2.ffn.up.weight"])


@pytest.mark.parametrize("init, key, message", [
    ({"pretrained": "DIR", "freeze": ["embedding.word.*"]}, "init.freeze",
     r" init.freeze: 'embedding.word.\*' matches no parameter of the model; its parameters start embeddings.word.\*"),
    ({"pretrained": "DIR", "layers": [0, 9]}, "init.layers",
     r" init.layers: prune_layers: keep must list distinct ascending layers of 0..3, got \[0, 9\]"),
    ({"pretrained": "DIR", "layers": "two"}, "init.layers", r" init.layers='two' must be a list of integers"),
    ({"pretrained": "DIR", "intermediate_size": 65}, "init.intermediate_size",
     r" init.intermediate_size: prune_ffn: size must be an integer in 1..64"),
    ({"pretrained": "DIR", "from": "x"}, "init.from", r" init.from: unknown init key 'from'"),
    ({"pretrained": False}, "init.pretrained", r" init.pretrained=False starts from nothing"),
    ({"pretrained": "DIR", "train_rows_from": 300}, "init.train_rows_from",
     r" init.train_rows_from: 300 leaves none of the 300 word-embedding rows to train"),
    ({"pretrained": "DIR", "train_rows_from": 250, "freeze": ["embeddings.word.*"]}, "init.train_rows_from",
     r" init.train_rows_from: the word embeddings are frozen \(init.freeze\)"),
])
def test_bad_init_is_refused_with_its_line(tmp_path, teacher_dir, capsys, init, key, message):
    init = {k: str(teacher_dir[1]) if v == "DIR" else v for k, v in init.items()}
    path = student_recipe(tmp_path, teacher_dir, init)
    line = key_lines(path.read_text(encoding="utf-8"))[key]
    assert pretrain_main(["--config", str(path)]) == 2
    err = capsys.readouterr().err
    # a mistake the init section's types show is found when the recipe loads, named as a TrainConfig key
    assert re.search(re.escape(f"student.yaml:{line}") + ":?" + message.replace(" init.", r" (TrainConfig\.)?init.", 1),
                     err), err


def test_a_tokenizer_larger_than_the_weights_vocabulary_is_refused(tmp_path, teacher_dir, capsys):
    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(teacher_dir[1])},
                          tokenizer={"vocab_size": 400, "model_type": "unigram"})  # the weights embed 300
    assert pretrain_main(["--config", str(path)]) == 2
    assert ("model_overrides.vocab_size=300: the model would embed 300 pieces, but the tokenizer has 400"
            in capsys.readouterr().err)


def test_freeze_pieces_of_keeps_every_row_english_uses_and_trains_the_others(tmp_path, teacher_dir):
    babel = pytest.importorskip("babel")
    from babelzoo.zoo.pretrained import from_pretrained

    folder, checkpoint = teacher_dir
    en, de = babel.Locale.parse("en").territories, babel.Locale.parse("de").territories
    codes = sorted(set(en) & set(de))[:200]
    (tmp_path / "en.txt").write_text("\n".join(en[c] for c in codes) + "\n", encoding="utf-8")
    (tmp_path / "de.txt").write_text("\n".join(de[c] for c in codes) + "\n", encoding="utf-8")
    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(checkpoint), "freeze_pieces_of": ["en"]},
                          objectives={"translation_ranking": {"max_length": 24}},
                          data={"translation_ranking": [{"kind": "parallel", "src": str(tmp_path / "en.txt"),
                                                         "tgt": str(tmp_path / "de.txt"), "src_lang": "en",
                                                         "tgt_lang": "de"}]},
                          optimizer="adamw", weight_decay=0.0, lr=1e-2, max_steps=3, checkpoint_every=3,
                          # pieces of both languages, in the checkpoint's 300 rows
                          tokenizer={"vocab_size": 250, "model_type": "unigram"})
    assert pretrain_main(["--config", str(path)]) == 0
    before = from_pretrained(checkpoint).state_dict()["embeddings.word.weight"]
    trained = from_pretrained(tmp_path / "run" / "checkpoints" / "step-00000003")
    after = trained.state_dict()["embeddings.word.weight"]
    tokenizer = trained.tokenizer
    english = {i for c in codes for i in tokenizer.encode(en[c])} | set(tokenizer.specials.special)
    german = {i for c in codes for i in tokenizer.encode(de[c])} - english
    assert len(english) > 20 and len(german) > 20
    held = sorted(english)
    assert torch.equal(after[held], before[held])  # not one English piece moved
    changed = {i for i in range(after.shape[0]) if not torch.equal(after[i], before[i])}
    assert len(changed) >= 8 and changed <= german  # what trained: German-only pieces, and nothing else


def test_train_rows_from_trains_the_rows_from_that_id_and_keeps_every_row_before_it(tmp_path, teacher_dir):
    from babelzoo.zoo.pretrained import from_pretrained

    folder, checkpoint = teacher_dir
    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(checkpoint), "train_rows_from": 40},
                          optimizer="adamw", weight_decay=0.0, lr=1e-2, max_steps=3, checkpoint_every=3)
    assert pretrain_main(["--config", str(path)]) == 0
    before = from_pretrained(checkpoint).state_dict()
    after = from_pretrained(tmp_path / "run" / "checkpoints" / "step-00000003").state_dict()
    rows = before["embeddings.word.weight"], after["embeddings.word.weight"]
    assert torch.equal(rows[1][:40], rows[0][:40])  # not one row before the id moved
    moved = {i for i in range(40, rows[0].shape[0]) if not torch.equal(rows[1][i], rows[0][i])}
    assert len(moved) >= 8  # the run's pieces from id 40 on trained
    assert not torch.equal(after["encoder.layers.0.ffn.up.weight"], before["encoder.layers.0.ffn.up.weight"])


def test_freeze_pieces_of_a_language_the_run_lacks_is_refused(tmp_path, teacher_dir):
    path = student_recipe(tmp_path, teacher_dir, {"pretrained": str(teacher_dir[1]), "freeze_pieces_of": ["en"]})
    with pytest.raises(ConfigError, match=r"freeze_pieces_of: the run has no text of \['en'\] \(its languages: de\)"):
        build_run(load_recipe(path), path)
