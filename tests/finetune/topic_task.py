"""A small topic-classification task written to files (three topics, one topic word per
sentence), its tokenizer and a tiny fine-tuning recipe: shared by the fine-tuning tests."""

from pathlib import Path

import torch

from babelzoo.datasets.wordpiece import WordPieceTokenizer
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig

WORDS = ["sun", "rain", "goal", "match", "vote", "law", "the", "is", "a", "big", "today", "again"]
TOPICS = {"weather": ["sun", "rain"], "sport": ["goal", "match"], "politics": ["vote", "law"]}


def sentences(n, seed):
    g = torch.Generator().manual_seed(seed)
    rows = []
    filler = ["the", "is", "a", "big", "today", "again"]
    for i in range(n):
        topic = list(TOPICS)[i % 3]
        words = [filler[int(torch.randint(0, 6, (1,), generator=g))] for _ in range(4)]
        words.insert(int(torch.randint(0, 5, (1,), generator=g)), TOPICS[topic][int(torch.randint(0, 2, (1,), generator=g))])
        rows.append((i, topic, " ".join(words)))
    return rows


def write_tsv(path: Path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("index_id\tcategory\ttext\n" + "".join(f"{i}\t{c}\t{t}\n" for i, c, t in rows), encoding="utf-8")


def recipe(tmp_path, tokenizer_dir, **task):
    spec = {"kind": "sequence_classification", "init": "random", "train": "${BABELZOO_DATA_DIR}/topics/eng/train.tsv",
            "dev": "${BABELZOO_DATA_DIR}/topics/eng/dev.tsv", "test": "${BABELZOO_DATA_DIR}/topics/*/test.tsv",
            "label_column": "category", "id_column": "index_id", "epochs": 4, "head": {"pooling": "mean"}, **task}
    return TrainConfig(model="xlmr_tiny", tokenizer={"path": str(tokenizer_dir)}, task=spec,
                       model_overrides={"num_layers": 1, "hidden_size": 32, "num_heads": 2, "intermediate_size": 64,
                                        "dropout": 0.0, "attention_dropout": 0.0},
                       output_dir=str(tmp_path / "run"), optim=OptimConfig(optimizer="adamw", lr=1e-2),
                       logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False),
                       checkpoints=CheckpointConfig(every=1000), batch_size=8, eval_every=6)


def write_tokenizer(directory: Path) -> Path:
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS, "##s"]
    WordPieceTokenizer(vocab).save(directory)
    return directory


def write_topic_data(root: Path, write=write_tsv, suffix: str = "tsv") -> Path:
    """``root/topics/{eng/train,eng/dev,*/test}.<suffix>``, each written by ``write(path,
    rows)``; returns ``root``."""
    topics = root / "topics"
    write(topics / "eng" / f"train.{suffix}", sentences(96, 0))
    write(topics / "eng" / f"dev.{suffix}", sentences(24, 1))
    for lang, seed in (("eng", 2), ("xx", 3), ("yy", 4)):
        write(topics / lang / f"test.{suffix}", sentences(30, seed))
    return root
