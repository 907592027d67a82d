"""Every section of a recipe is typed when the recipe loads: a wrong key or a wrong type in
init, tokenizer, objectives, data (and a fine-tuning task) is an error naming the file, the line
and the key, before anything is read or built."""

import dataclasses
import re

import pytest

from babelzoo.errors import ConfigError
from babelzoo.train.config import (InitSpec, ObjectiveData, TokenizerSpec, load_recipe, read_data, read_init,
                                   read_recipe_config, read_tokenizer)
from babelzoo.typed import Where

BASE = """model: xlm_tiny
objectives:
  mlm: {max_length: 32}
data:
  mlm:
    - {kind: text, path: de.txt, lang: de}
"""


@pytest.mark.parametrize("extra, message", [
    ("init: {pretrained: true, layer: [0]}\n", r"r.yaml:7 TrainConfig.init.layer: unknown init key 'layer'; did you "
                                               r"mean 'layers'\?"),
    ("init:\n  freeze: embeddings\n", r"r.yaml:8 TrainConfig.init.freeze='embeddings' must be a list of strings, got "
                                      r"str"),
    ("tokenizer: {vocab_size: 800, alpha: [0.3]}\n", r"r.yaml:7 TrainConfig.tokenizer.alpha=\[0.3\] must be a "
                                                      r"number, got list"),
    ("tokenizer: {path: tok, vocab_size: 8}\n", r"r.yaml:7 TrainConfig.tokenizer: with path, no training options are "
                                                r"used; remove \['vocab_size'\]"),
    ("knowledge: {kb: cldr, fusion_layer: [1]}\n", r"r.yaml:7 TrainConfig.knowledge.fusion_layer: unknown knowledge key "
                                                   r"'fusion_layer'; did you mean 'fusion_layers'\?"),
    ("knowledge:\n  kb: cldr\n  entity_dim: wide\n", r"r.yaml:9 TrainConfig.knowledge.entity_dim='wide' must be an "
                                                     r"integer or null, got str"),
    ("knowledge: {entity_dim: 8}\n", r"r.yaml:7 TrainConfig.knowledge: knowledge needs kb"),
    ("tokenizer:\n  vocab_size: many\n", r"r.yaml:8 TrainConfig.tokenizer.vocab_size='many' must be an integer, got "
                                         r"str"),
    ("tokenizer: {from_model: xlmr_base, vocab_size: 8}\n", r"r.yaml:7 TrainConfig.tokenizer: with from_model, no "
                                                           r"other option is used; remove \['vocab_size'\]"),
])
def test_a_section_mistake_names_the_file_line_and_key(tmp_path, extra, message):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + extra, encoding="utf-8")
    with pytest.raises(ConfigError, match="^" + re.escape(str(tmp_path)) + "/" + message):
        load_recipe(path)


@pytest.mark.parametrize("objectives, data, message", [
    ("  mlm: {max_lenght: 32}\n", "  mlm: [{kind: text, path: de.txt, lang: de}]\n",
     r"r.yaml:3 TrainConfig.objectives.mlm.max_lenght: unknown mlm option key 'max_lenght'; did you mean "
     r"'max_length'\?"),
    ("  mlm:\n    max_length: long\n", "  mlm: [{kind: text, path: de.txt, lang: de}]\n",
     r"r.yaml:4 TrainConfig.objectives.mlm.max_length='long' must be an integer, got str"),
    ("  mlm: {}\n", "  mlm:\n    - {kind: text, path: de.txt, lang: 3}\n",
     r"r.yaml:6 TrainConfig.data.mlm\[0\].lang=3 must be a string, got int"),
    ("  mlm: {}\n", "  mlm:\n    - {kind: txt, path: de.txt}\n",
     r"r.yaml:6 TrainConfig.data.mlm\[0\].kind: unknown data source 'txt'"),
    ("  mlm: {}\n", "  mlm:\n    alpha: 0.7\n    source: []\n",
     r"r.yaml:5 TrainConfig.data.mlm: expected a list of sources or \{alpha: a, sources: \[...\]\}, got keys "
     r"\['alpha', 'source'\]"),
    ("  mlm: {}\n", "  mlm:\n    alpha: much\n    sources: [{kind: text, path: de.txt, lang: de}]\n",
     r"r.yaml:6 TrainConfig.data.mlm.alpha='much' must be a number or null, got str"),
])
def test_objective_and_data_mistakes_name_the_file_line_and_key(tmp_path, objectives, data, message):
    path = tmp_path / "r.yaml"
    path.write_text(f"model: xlm_tiny\nobjectives:\n{objectives}data:\n{data}", encoding="utf-8")
    with pytest.raises(ConfigError, match="^" + re.escape(str(tmp_path)) + "/" + message):
        load_recipe(path)


def test_a_set_override_is_typed_by_its_section_and_named_by_its_key(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(BASE, encoding="utf-8")
    # a value --set gives has no line in the file: the error names the file and the key
    with pytest.raises(ConfigError, match=rf"^{path} TrainConfig.init.layers='all' must be a list of integers or "
                                          r"null, got str$"):
        load_recipe(path, ["init.layers=all"])
    with pytest.raises(ConfigError, match=rf"^{path} TrainConfig.data.mlm\[0\].lang=3 must be a string"):
        load_recipe(path, ["data.mlm=[{kind: text, path: de.txt, lang: 3}]"])
    assert load_recipe(path, ["init.layers=[0, 2]", "init.pretrained=true"]).init == {"layers": [0, 2],
                                                                                       "pretrained": True}


def test_sections_read_into_their_typed_dataclasses():
    assert read_init({}, Where("init")) is None
    assert read_init({"layers": [0, 2], "freeze": ["embeddings.*"]}, Where("init")) == InitSpec(
        layers=[0, 2], freeze=["embeddings.*"])
    assert read_tokenizer({"from_model": "xlmr_base"}, Where()) == TokenizerSpec(from_model="xlmr_base")
    assert read_tokenizer({"vocab_size": 800.0, "alpha": "0.5"}, Where()) == TokenizerSpec(
        train={"vocab_size": 800, "alpha": 0.5})  # YAML 1.1's spellings read as the annotations say
    data = read_data({"mlm": {"alpha": 0.7, "sources": [{"kind": "text", "path": "de.txt", "lang": "de"}]}},
                     Where("data"))
    assert isinstance(data["mlm"], ObjectiveData) and data["mlm"].alpha == 0.7
    (source,) = data["mlm"].sources
    assert (source.kind, source.lang, source.where) == ("text", "de", "data.mlm.sources[0]")


def test_the_recipe_keeps_each_section_as_written(tmp_path):
    path = tmp_path / "r.yaml"
    path.write_text(BASE + "tokenizer: {vocab_size: 800}\n", encoding="utf-8")
    cfg = load_recipe(path)
    assert cfg.tokenizer == {"vocab_size": 800} and cfg.objectives == {"mlm": {"max_length": 32}}
    assert dataclasses.replace(cfg).to_dict() == cfg.to_dict()  # what a run's identity holds is unchanged


def test_a_finetune_task_mistake_names_the_file_line_and_key(tmp_path, capsys):
    from babelzoo.finetune.cli import finetune_main

    path = tmp_path / "ft.yaml"
    path.write_text("model: xlmr_tiny\ntask:\n  kind: sequence_classification\n  train: t.tsv\n  dev: d.tsv\n"
                    "  epoch: 3\n", encoding="utf-8")
    cfg, where = read_recipe_config(path)
    assert where.lines["task.epoch"] == 6
    assert finetune_main(["--config", str(path), "--print-config"]) == 2
    assert capsys.readouterr().err.startswith(f"babelzoo finetune: {path}:6 task.epoch: unknown task key 'epoch'; did "
                                              "you mean 'epochs'?")

# enough distinct pieces for a 36-piece sentencepiece vocabulary
GERMAN = "".join(f"{a} {b} sieht {c}\n" for a in ("der hund", "die katze", "ein vogel", "das pferd")
                 for b in ("heute", "morgen", "gestern", "oft") for c in ("wasser", "zucker", "himmel", "flüsse"))


def test_the_sections_are_typed_once_and_the_build_reads_the_typed_parts(tmp_path, monkeypatch):
    from babelzoo.train import config as config_module
    from babelzoo.train.config import ObjectiveSpec
    from babelzoo.train.run import build_run

    path = tmp_path / "r.yaml"
    (tmp_path / "de.txt").write_text(GERMAN, encoding="utf-8")
    path.write_text(f"model: xlmr_tiny\ntokenizer: {{vocab_size: 36}}\nobjectives:\n  mlm: {{max_length: 16}}\n"
                    f"  tlm: {{objective: mlm, weight: 2, max_length: 8}}\ndata:\n"
                    f"  mlm: &de [{{kind: text, path: {tmp_path / 'de.txt'}, lang: de}}]\n  tlm: *de\n"
                    f"output_dir: {tmp_path / 'run'}\n", encoding="utf-8")
    cfg = load_recipe(path)
    parts = cfg.parts
    assert parts.objectives == {"mlm": ObjectiveSpec("mlm", 1.0, {"max_length": 16}),
                                "tlm": ObjectiveSpec("mlm", 2.0, {"max_length": 8})}
    assert isinstance(parts.objectives["tlm"].weight, float)  # the YAML integer read as the weight's type
    assert parts.init is None and parts.knowledge is None and parts.tokenizer == TokenizerSpec(train={"vocab_size": 36})
    assert (parts.where.file, parts.where.lines["objectives.tlm"]) == (str(path), 5)
    for name in ("read_init", "read_tokenizer", "read_knowledge", "read_objectives", "read_data"):
        monkeypatch.setattr(config_module, name, None)  # a build that parsed a section again would fail here
    run = build_run(cfg)
    assert run.objectives.weights == {"mlm": 1.0, "tlm": 2.0}
    assert run.objectives.objectives["tlm"].max_length == 8
    # the build read its own copy of the sources: the config's stay parsed, not read
    (source,) = cfg.parts.data["mlm"].sources
    assert getattr(source, "_corpora", None) is None and run.sources[0]._corpora  # one source for both entries
    assert cfg.parts.data["tlm"].sources[0] == source and len(run.sources) == 1


def test_a_build_error_names_the_line_of_a_config_loaded_from_a_file(tmp_path):
    from babelzoo.train.run import build_run

    path = tmp_path / "r.yaml"
    (tmp_path / "de.txt").write_text(GERMAN, encoding="utf-8")
    path.write_text(f"model: xlmr_tiny\ntokenizer: {{vocab_size: 36}}\nobjectives:\n  mlm: {{weight: 2}}\n"
                    f"data:\n  mlm: [{{kind: text, path: {tmp_path / 'de.txt'}, lang: de}}]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:4 objectives.mlm.weight: a single objective "
                                          "takes no weight"):
        build_run(load_recipe(path, [f"output_dir={tmp_path / 'run'}"]))
