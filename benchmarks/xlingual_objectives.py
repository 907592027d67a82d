"""Do cross-lingual pre-training objectives align languages? One tiny encoder, one tokenizer, one
data set, one seed and one step budget, pre-trained with different objective mixtures and
compared on sentence retrieval.

Arms (each step trains one objective drawn with probability ∝ its weight, so every arm makes
the same number of optimizer steps over batches of the same size):

* ``mlm``            — masked LM on the monolingual sides (mBERT-style MMLM, Devlin et al. 2019);
* ``mlm_tlm``        — + translation LM (XLM, Lample & Conneau 2019);
* ``unicoder``       — + CLWR, CLPC and code-switched CLMLM (Unicoder, Huang et al. 2019);
* ``unicoder_xlco``  — + sentence-level InfoNCE (InfoXLM's XLCo, Chi et al. 2021).

Data: Multi30k task 1 *training* split (Elliott et al. 2016; 29,000 image descriptions, line-
aligned in en, de, fr, cs). MLM reads every language's side as monolingual text; the pair
objectives read the en↔de, en↔fr and en↔cs translation pairs in both directions; CLMLM reads
parallel documents of three consecutive pairs. Every batch holds one language (pair), as XLM's
do. The test splits are never read for training.

Evaluation (identical for every arm; the protocol is stored with the numbers): each sentence is
framed ``[CLS] x [SEP]``, encoded without language ids, the non-padding tokens of the *last*
layer are mean-pooled and L2-normalised, and the nearest neighbour by cosine among all candidates
must be the translation (accuracy@1). Tatoeba (Artetxe & Schwenk 2019; XTREME, Hu et al. 2020):
the languages the training data covers (deu, fra, ces), all 1,000 pairs, English→X and
X→English. Multi30k ``test_2016_flickr``: en↔de/fr/cs. Accuracies of the other hidden states
(0 = embeddings) are kept in the JSON for reference only. A randomly initialised copy of the
model is evaluated as a floor.

    python -m benchmarks run xlingual_objectives --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo.datasets.loader import CorpusMixture, EpochOrder, TokenizedCorpus  # noqa: E402
from babelzoo.datasets.text import MonolingualCorpus, ReadReport, multi30k_pairs  # noqa: E402
from babelzoo.evaluation.encoders import BabelEncoder  # noqa: E402
from babelzoo.evaluation.tasks import TaskContext, load_tasks  # noqa: E402
from babelzoo.objectives.mixture import Mixture  # noqa: E402
from babelzoo.train.run import build_tokenizer  # noqa: E402
from babelzoo.train.config import TrainConfig  # noqa: E402
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig  # noqa: E402
from babelzoo.train.trainer import Trainer  # noqa: E402
from babelzoo.zoo.factory import create_model  # noqa: E402
from benchmarks._results import logged_means, write_results  # noqa: E402

LANGS = ("en", "de", "fr", "cs")
TATOEBA_OF = {"de": "deu", "fr": "fra", "cs": "ces"}
ARMS = {
    "mlm": ("mlm",),
    "mlm_tlm": ("mlm", "tlm"),
    "unicoder": ("mlm", "tlm", "clwr", "clpc", "clmlm"),
    "unicoder_xlco": ("mlm", "tlm", "clwr", "clpc", "clmlm", "xlco"),
}
DOCUMENT = 3  # sentences per CLMLM parallel document


def objective_spec(names: Sequence[str], args: argparse.Namespace, language_ids: bool = True
                   ) -> dict[str, dict[str, Any]]:
    """The mixture spec of one arm: the same options for an objective in every arm.
    ``language_ids=False`` for tokenizers without language tokens (a pretrained model's own)."""
    every = {
        "mlm": {"weight": args.w_mlm, "max_length": 64},
        "tlm": {"weight": args.w_tlm, "max_length": 128},
        "clwr": {"weight": args.w_clwr, "max_length": 64},
        "clpc": {"weight": args.w_clpc, "max_length": 128, "miner": args.clpc_miner, "negatives": 1},
        "clmlm": {"weight": args.w_clmlm, "max_length": 128},
        # InfoNCE on the representation the benchmark evaluates: mean over the last layer.
        "xlco": {"weight": args.w_xlco, "max_length": 64, "pooling": "mean", "normalize": True,
                 "temperature": args.xlco_temperature, "symmetric": True},
    }
    extra = {} if language_ids else {"use_language_ids": False}
    return {name: {**every[name], **extra} for name in names}


class ParallelDocuments(torch.utils.data.Dataset):
    """Item i: the pairs ``DOCUMENT·i .. DOCUMENT·i + DOCUMENT − 1`` of a tokenised parallel
    corpus, as one parallel document for CLMLM."""

    def __init__(self, pairs: TokenizedCorpus, size: int = DOCUMENT):
        self.pairs, self.size = pairs, size

    def __len__(self) -> int:
        return len(self.pairs) // self.size

    def __getitem__(self, index: int) -> list:
        return [self.pairs[index * self.size + k] for k in range(self.size)]


def read_corpora(data_dir: Path, limit: Optional[int]):
    """Multi30k train: one monolingual corpus per language and the six en↔X directions."""
    pairs = []
    for lang in LANGS[1:]:
        corpus = multi30k_pairs(data_dir, "train", "en", lang)
        if limit:
            corpus.pairs = corpus.pairs[:limit]
        pairs += [corpus, corpus.swapped()]
    mono = {}
    for corpus in pairs[::2]:
        mono.setdefault("en", corpus.sources)
        mono[corpus.tgt_lang] = corpus.targets
    mono_corpora = [MonolingualCorpus(lang, s, ReadReport(("multi30k train",), len(s), len(s)))
                    for lang, s in mono.items()]
    return mono_corpora, pairs


def build_datasets(mono, pairs, tokenizer, fingerprint: Optional[str], cache: Path, batch_size: int, seed: int,
                   encode_lang: bool = True):
    """``{objective: (dataset, sampler)}``: one language (pair) per batch (group_size = batch).
    ``encode_lang=False`` for tokenizers that know no languages (a pretrained model's own)."""
    def tok(corpus):
        return TokenizedCorpus.from_corpus(corpus, tokenizer, cache_dir=cache, fingerprint=fingerprint,
                                           encode_lang=encode_lang)

    def grouped(corpora: dict) -> tuple:
        mixture = CorpusMixture(corpora)
        return mixture, EpochOrder(mixture.sizes, alpha=1.0, group_size=batch_size, seed=seed)

    mono_t = {c.lang: tok(c) for c in mono}
    pair_t = {f"{c.src_lang}-{c.tgt_lang}": tok(c) for c in pairs}
    pair_data = grouped(pair_t)
    docs = grouped({key: ParallelDocuments(t) for key, t in pair_t.items()})
    return {"mlm": grouped(mono_t), "tlm": pair_data, "clwr": pair_data, "clpc": pair_data, "clmlm": docs,
            "xlco": pair_data}


def new_model(tokenizer, seed: int, args: argparse.Namespace):
    """The same initial weights for every arm (seeded right before construction)."""
    torch.manual_seed(seed)
    specials = tokenizer.specials
    # No language embeddings (as XLM-R): evaluation sentences carry no language id, so every arm
    # is encoded exactly as it was trained.
    return create_model(args.model, vocab_size=specials.vocab_size, pad_token_id=specials.pad, num_languages=0,
                        max_positions=160, num_layers=args.layers, dropout=args.dropout,
                        attention_dropout=args.dropout)


def evaluate(model, tokenizer, data_dir: Path, limit: Optional[int], name: str) -> dict[str, Any]:
    """Tatoeba (covered languages) and Multi30k test accuracy@1 for every hidden state."""
    tasks = load_tasks()
    context = TaskContext(data_dir=data_dir, languages=list(TATOEBA_OF.values()), limit=limit, log=lambda _: None)
    by_layer = {}
    for layer in range(model.config.text.num_layers + 1):
        encoder = BabelEncoder(name, model, tokenizer, layer=layer, use_language_ids=False, max_length=128)
        rows = tasks.get("tatoeba")(encoder, context) + tasks.get("multi30k")(encoder, context)
        table: dict[str, dict[str, dict[str, float]]] = {}
        for r in rows:
            src, tgt = r.protocol["direction"].split("->")
            english = src in ("eng", "en")
            table.setdefault(r.task, {}).setdefault(tgt if english else src, {})[
                "en2x" if english else "x2en"] = r.value
        for task, langs in table.items():
            values = [v for cell in langs.values() for v in cell.values()]
            table[task]["mean"] = {"en2x": float(np.mean([c["en2x"] for c in langs.values()])),
                                   "x2en": float(np.mean([c["x2en"] for c in langs.values()])),
                                   "both": float(np.mean(values))}
        by_layer[layer] = table
    return by_layer


def arm_config(spec: dict[str, dict[str, Any]], args: argparse.Namespace, out_dir: Path) -> TrainConfig:
    """The training run of one arm: AdamW, linear decay after warm-up, fp32, one checkpoint."""
    return TrainConfig(model=args.model, objectives=spec, mixture="sample", output_dir=str(out_dir),
                       max_steps=args.steps, batch_size=args.batch_size,
                       optim=OptimConfig(optimizer="adamw", lr=args.lr, weight_decay=0.01, schedule="linear",
                                         warmup_steps=args.warmup),
                       checkpoints=CheckpointConfig(every=args.steps, keep=1),
                       logging=LoggingConfig(every=max(1, args.steps // 10), progress=False, tensorboard=False,
                                             measure_mfu=False),
                       precision="fp32", seed=args.seed, device="cpu", keep_cpu_buffers=True)


def run_arm(arm: str, args, tokenizer, data, work: Path) -> dict[str, Any]:
    names = ARMS[arm]
    spec = objective_spec(names, args)
    out_dir = work / "arms" / arm
    if out_dir.exists():
        shutil.rmtree(out_dir)  # this script's own run folder: start fresh, never resume
    cpu0, wall0 = time.process_time(), time.perf_counter()
    model = new_model(tokenizer, args.seed, args)
    torch.manual_seed(args.seed + 1)
    mixture = Mixture.from_spec(spec, tokenizer.specials, model.config, mode="sample")
    summary = Trainer(model, mixture, {n: data[n] for n in names}, arm_config(spec, args, out_dir)).fit()
    cpu_train, wall_train = time.process_time() - cpu0, time.perf_counter() - wall0
    results = evaluate(model, tokenizer, args.data_dir, args.limit, arm)
    return {"arm": arm, "objectives": spec, "steps": summary["steps"], "skipped_steps": summary["skipped_steps"],
            "tokens": summary["tokens"], "final_metrics": logged_means(out_dir, 100, ("/loss", "/accuracy")),
            "cpu_s": {"train": round(cpu_train, 1), "total": round(time.process_time() - cpu0, 1)},
            "wall_s": {"train": round(wall_train, 1), "total": round(time.perf_counter() - wall0, 1)},
            "by_layer": results}


def markdown(report: dict[str, Any]) -> str:
    layer = str(report["protocol"]["layer"])
    langs = list(TATOEBA_OF.values())
    head = ["arm", "steps", "CPU s", "wall s"]
    head += [f"tatoeba {l} en→x / x→en" for l in langs] + ["tatoeba mean"]
    head += [f"m30k {l} en→x / x→en" for l in TATOEBA_OF] + ["m30k mean"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in report["arms"]:
        t = row["by_layer"][layer]
        cells = [row["arm"], str(row["steps"]), f"{row['cpu_s']['total']:.0f}", f"{row['wall_s']['total']:.0f}"]
        for task, keys in (("tatoeba", langs), ("multi30k", list(TATOEBA_OF))):
            for key in keys:
                cells.append(f"{100 * t[task][key]['en2x']:.1f} / {100 * t[task][key]['x2en']:.1f}")
            cells.append(f"**{100 * t[task]['mean']['both']:.1f}**")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def add_arm_arguments(parser: argparse.ArgumentParser, steps: Optional[int], lr: Optional[float],
                      warmup: Optional[int]) -> None:
    """The options every arm shares: data, model, budget and objective weights."""
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("BABELZOO_DATA_DIR",
                                                                               REPO.parent / "shared" / "data")))
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--out", type=Path, help="write JSON here (and the table beside it as .md)")
    parser.add_argument("--model", default="unicoder_tiny")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=steps, help="optimizer steps per arm")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=lr)
    parser.add_argument("--warmup", type=int, default=warmup)
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--dropout", type=float, default=0.1, help="hidden and attention dropout")
    parser.add_argument("--train-limit", type=int, default=None, help="use only the first N training pairs")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    for name, weight in (("mlm", 1.0), ("tlm", 1.0), ("clwr", 0.5), ("clpc", 0.5), ("clmlm", 0.5), ("xlco", 1.0)):
        parser.add_argument(f"--w-{name}", type=float, default=weight, help=f"sampling weight of {name}")
    parser.add_argument("--clpc-miner", default="random", choices=["random", "hard"])
    parser.add_argument("--xlco-temperature", type=float, default=0.05)


def multi30k_tokenizer(args: argparse.Namespace, mono, pairs, work: Path):
    """(tokenizer, fingerprint): a unigram model trained on the Multi30k training sides."""
    tok_cfg = TrainConfig(output_dir=str(work / f"tokenizer-{args.vocab_size}-{args.train_limit or 'all'}"),
                          tokenizer={"vocab_size": args.vocab_size, "model_type": "unigram", "alpha": 0.3},
                          seed=args.seed)
    return build_tokenizer(tok_cfg, [*mono, *pairs])


def finish(report: dict[str, Any], render: Callable[[dict], str], args: argparse.Namespace, start_cpu: float,
           start: float, script: str = "xlingual_objectives") -> None:
    """Print the table and the run's cost; write both with ``--out``."""
    report["cpu_s"] = round(time.process_time() - start_cpu, 1)
    report["wall_s"] = round(time.perf_counter() - start, 1)
    print()
    print(render(report))
    print(f"\ntotal CPU {report['cpu_s']:.0f}s, wall {report['wall_s']:.0f}s ({torch.get_num_threads()} threads)")
    if args.out:
        write_results(args.out, report, render, script)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_arm_arguments(parser, steps=3000, lr=1e-3, warmup=200)
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "xlingual_objectives")
    parser.add_argument("--limit", type=int, default=None, help="evaluation pairs per language (default all)")
    parser.add_argument("--random-baseline", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    start_cpu, start = time.process_time(), time.perf_counter()
    work = args.work_dir
    mono, pairs = read_corpora(args.data_dir, args.train_limit)
    tokenizer, fingerprint = multi30k_tokenizer(args, mono, pairs, work)
    data = build_datasets(mono, pairs, tokenizer, fingerprint, work / "cache", args.batch_size, args.seed)
    print(f"data: Multi30k train, {len(mono[0])} sentences × {len(mono)} languages, {len(pairs)} directions; "
          f"tokenizer {tokenizer.specials.vocab_size} pieces ({time.perf_counter() - start:.0f}s)", flush=True)
    protocol = {"pooling": "mean over non-padding tokens", "layer": args.layers, "similarity": "cosine",
                "metric": "accuracy@1", "language_ids": False, "framing": "[CLS] x [SEP]",
                "tatoeba": {"languages": list(TATOEBA_OF.values()), "pairs": args.limit or 1000},
                "multi30k": {"split": "test_2016_flickr", "pairs": args.limit or 1000}}
    report: dict[str, Any] = {"protocol": protocol, "model": args.model, "layers": args.layers,
                              "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                              "data": "Multi30k train (en, de, fr, cs)", "arms": []}
    if args.random_baseline:
        cpu0, wall0 = time.process_time(), time.perf_counter()
        results = evaluate(new_model(tokenizer, args.seed, args), tokenizer, args.data_dir, args.limit, "random")
        report["arms"].append({"arm": "random init", "steps": 0, "by_layer": results,
                               "cpu_s": {"total": round(time.process_time() - cpu0, 1)},
                               "wall_s": {"total": round(time.perf_counter() - wall0, 1)}})
    for arm in args.arms:
        row = run_arm(arm, args, tokenizer, data, work)
        report["arms"].append(row)
        t = row["by_layer"][args.layers]
        print(f"{arm}: tatoeba {100 * t['tatoeba']['mean']['both']:.1f}  multi30k "
              f"{100 * t['multi30k']['mean']['both']:.1f}  CPU {row['cpu_s']['total']:.0f}s  wall "
              f"{row['wall_s']['total']:.0f}s  {row['final_metrics']}", flush=True)
    report["by_layer_keys"] = "str(layer) -> task -> language -> {en2x, x2en}"
    report = json.loads(json.dumps(report))  # layer keys become strings, as in the file
    finish(report, markdown, args, start_cpu, start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
