"""The fine-tuning leaderboard tasks (sib200, udpos) on a small SIB-200-shaped folder: one
Result per test language with its protocol, the source language in its own column, peers
skipped with a reason."""

from pathlib import Path

import pytest
import torch

import babelzoo
from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.evaluation.encoders import BabelEncoder
from babelzoo.evaluation.tasks import TaskContext, TaskSkipped, load_tasks

TOPICS = {"sports": "goal", "travel": "train", "health": "doctor"}
# the training settings of both tiny fine-tuning recipes
TRAINING = "optimizer: adamw\nlr: 1.0e-2\nbatch_size: 8\neval_every: 4\ntensorboard: false\nmeasure_mfu: false\n"


def write_split(path: Path, n: int, offset: int):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["index_id\tcategory\ttext"]
    for i in range(n):
        topic = list(TOPICS)[i % 3]
        lines.append(f"{offset + i}\t{topic}\tthe {TOPICS[topic]} is big today")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture
def setup(tmp_path):
    root = tmp_path / "data" / "sib200"
    for lang in ("eng_Latn", "xxx_Latn"):
        write_split(root / lang / "train.tsv", 48, 0)
        write_split(root / lang / "dev.tsv", 12, 100)
        write_split(root / lang / "test.tsv", 15, 200)
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "is", "big", "today", *TOPICS.values()]
    tokenizer = WordPieceTokenizer(vocab)
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text("""model: xlmr_tiny
task:
  kind: sequence_classification
  source: eng_Latn
  train: ${BABELZOO_DATA_DIR}/sib200/eng_Latn/train.tsv
  dev: ${BABELZOO_DATA_DIR}/sib200/eng_Latn/dev.tsv
  test: ${BABELZOO_DATA_DIR}/sib200/*/test.tsv
  label_column: category
  id_column: index_id
  epochs: 2
  head: {pooling: mean}
""" + TRAINING, encoding="utf-8")
    model = babelzoo.create_model("xlmr_tiny", num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64,
                                  vocab_size=len(vocab), pad_token_id=0)
    encoder = BabelEncoder("tiny", model, tokenizer)
    context = TaskContext(data_dir=tmp_path / "data", log=lambda _: None,
                          options={"sib200": {"recipe": str(recipe), "set": ["task.epochs=3"]}})
    return encoder, context


def test_sib200_task_reports_every_language_with_its_protocol(setup):
    encoder, context = setup
    before = {k: v.clone() for k, v in encoder.model.state_dict().items()}
    rows = load_tasks().get("sib200")(encoder, context)
    assert [(r.metric, r.family) for r in rows] == [("acc eng_Latn", "acc en"), ("acc xxx_Latn", "acc zero-shot")]
    assert rows[0].value == rows[1].value  # the two test files are the same sentences
    protocol = rows[1].protocol
    assert protocol["overrides"] == ["task.epochs=3"] and protocol["epochs"] == 3 and protocol["n"] == 15
    assert protocol["source"] == "eng_Latn" and protocol["selection"].endswith("eng_Latn/dev.tsv")
    # the encoder the other tasks use is left as it was
    assert all(torch.equal(v, encoder.model.state_dict()[k]) for k, v in before.items())


def test_language_subset_keeps_the_source(setup):
    encoder, context = setup
    context.languages = ["xxx_Latn"]
    rows = load_tasks().get("sib200")(encoder, context)
    assert {r.metric for r in rows} == {"acc eng_Latn", "acc xxx_Latn"}
    context.languages = ["deu_Latn"]
    with pytest.raises(TaskSkipped, match="none of"):
        load_tasks().get("sib200")(encoder, context)


def test_a_peer_is_skipped_with_a_reason(setup):
    _, context = setup

    class Peer:
        name = "peer"

    with pytest.raises(TaskSkipped, match="cannot be fine-tuned here"):
        load_tasks().get("sib200")(Peer(), context)
    with pytest.raises(TaskSkipped, match="needs --data-dir with a ud/ folder"):
        load_tasks().get("udpos")(setup[0], context)


def test_unknown_task_option_is_an_error(setup):
    encoder, context = setup
    context.options = {"sib200": {"recipie": "x"}}
    with pytest.raises(ValueError, match=r"task_options.sib200: unknown key\(s\) \['recipie'\]"):
        load_tasks().get("sib200")(encoder, context)


# every word has one part of speech: a tagger that learns the words tags every test file alike
WORDS = {"the": "DET", "a": "DET", "dog": "NOUN", "cat": "NOUN", "runs": "VERB", "sleeps": "VERB", "big": "ADJ"}


def write_treebank(path: Path, sentences: list[list[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    blocks = []
    for n, words in enumerate(sentences):
        rows = [f"{i}\t{w}\t{w}\t{WORDS[w]}\t_\t_\t0\troot\t_\t_" for i, w in enumerate(words, 1)]
        blocks.append("\n".join([f"# sent_id = s{n}", f"# text = {' '.join(words)}", *rows]))
    path.write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")


def test_udpos_task_tags_every_treebank_with_its_protocol(tmp_path):
    sentences = [[det, *adj, noun, verb] for det in ("the", "a") for adj in ([], ["big"]) for noun in ("dog", "cat")
                 for verb in ("runs", "sleeps")]  # 16 sentences, 56 words
    root = tmp_path / "data" / "ud"
    write_treebank(root / "UD_English-Tiny" / "en_tiny-ud-dev.conllu", sentences * 4)
    for name in ("UD_English-Tiny/en_tiny", "UD_Xx-Tiny/xx_tiny"):
        write_treebank(root / f"{name}-ud-test.conllu", sentences)
    recipe = tmp_path / "tiny.yaml"
    recipe.write_text("""model: xlmr_tiny
task:
  kind: token_classification
  init: random
  source: UD_English-Tiny
  train: ${BABELZOO_DATA_DIR}/ud/UD_English-Tiny/en_tiny-ud-dev.conllu
  dev_fraction: 0.25
  test: ${BABELZOO_DATA_DIR}/ud/*/*-ud-test.conllu
  max_length: 16
  epochs: 4
""" + TRAINING, encoding="utf-8")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]
    model = babelzoo.create_model("xlmr_tiny", num_layers=1, hidden_size=32, num_heads=2, intermediate_size=64,
                                  vocab_size=len(vocab), pad_token_id=0)
    encoder = BabelEncoder("tiny", model, WordPieceTokenizer(vocab))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    context = TaskContext(data_dir=tmp_path / "data", log=lambda _: None, options={"udpos": {"recipe": str(recipe)}})
    rows = load_tasks().get("udpos")(encoder, context)
    assert [(r.metric, r.family) for r in rows] == [("acc UD_English-Tiny", "acc en"), ("acc UD_Xx-Tiny", "acc zero-shot")]
    assert rows[0].value == rows[1].value > 0.9  # the same sentences; each word has one tag
    protocol = rows[1].protocol
    assert protocol["source"] == "UD_English-Tiny" and protocol["n"] == 56 and protocol["epochs"] == 4
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())  # the encoder is left as it was
