"""``babelzoo demo``: the whole pipeline on embedded data, in minutes on a CPU.

1. corpora: human translations of the Gramps catalogs (installed with the package), split into
   a training part and a fixed held-out part (:mod:`babelzoo.datasets.embedded`);
2. a sentencepiece tokenizer trained on the training part with α-smoothed language sampling;
3. a tiny Unicoder-layout encoder pre-trained on the shared trainer with cross-lingual objectives
   (MLM, TLM, CLWR, CLPC, XLCo), one objective sampled per step;
4. evaluation beside peers (multilingual USE, all-MiniLM-L6-v2, the same architecture with random
   weights) on held-out sentence retrieval and CLDR lexicon induction, plus Tatoeba and Multi30k
   when ``--data-dir`` is given; the leaderboard is printed and written with ``results.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Sequence

DEMO_LANGS = ("en", "de", "fr", "es", "ru", "zh-CN", "ja", "ar")
TATOEBA_OF = {"de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "zh-CN": "cmn", "ja": "jpn", "ar": "ara"}
BLI_OF = {"de": "de", "fr": "fr", "es": "es", "ru": "ru", "zh-CN": "zh-hans", "ja": "ja", "ar": "ar"}


def build_corpora(langs: Sequence[str]):
    """Training-split corpora: English↔X translation pairs and every language's sentences."""
    from .datasets.embedded import EMBEDDED_PACKAGES, aligned, embedded_corpus, split_rows
    from .datasets.text import MonolingualCorpus, ParallelCorpus, ReadReport

    corpus = embedded_corpus(EMBEDDED_PACKAGES)
    rows = split_rows(corpus, heldout=False)
    source = ("+".join(EMBEDDED_PACKAGES) + " catalogs",)
    pairs = []
    for lang in langs[1:]:
        got = aligned(rows, "en", lang)
        pairs.append(ParallelCorpus("en", lang, got, ReadReport(source, len(got), len(got))))
    mono = []
    for lang in langs:
        sentences = list(dict.fromkeys(row[lang] for row in rows if lang in row))
        mono.append(MonolingualCorpus(lang, sentences, ReadReport(source, len(sentences), len(sentences))))
    return mono, pairs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="babelzoo demo", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="run folder (default runs/demo)")
    parser.add_argument("--steps", type=int, default=600, help="optimizer steps (default 600)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--data-dir", type=Path, default=os.environ.get("BABELZOO_DATA_DIR"),
                        help="standard sets (tatoeba/, multi30k/) to evaluate on as well")
    parser.add_argument("--limit", type=int, default=300, help="evaluation items per language (default 300)")
    parser.add_argument("--peers", nargs="*", default=["muse_v3", "all_minilm_l6_v2"],
                        help="peer models to compare with (default: muse_v3 all_minilm_l6_v2)")
    parser.add_argument("--fresh", action="store_true", help="start over instead of resuming in --out")
    args = parser.parse_args(argv)

    import shutil

    import torch

    from .evaluation.encoders import BabelEncoder
    from .evaluation.leaderboard import ModelSpec, run_matrix, write_outputs
    from .evaluation.tasks import TaskContext
    from .objectives.mixture import Mixture
    from .train.cli import build_data, build_tokenizer
    from .train.config import TrainConfig
    from .train.trainer import Trainer
    from .zoo.factory import create_model

    start = time.perf_counter()
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    langs = DEMO_LANGS
    print(f"[1/4] corpora: Gramps translations, languages {', '.join(langs)}")
    mono, pairs = build_corpora(langs)
    for corpus in pairs:
        print(f"      en-{corpus.tgt_lang}: {len(corpus)} training pairs")

    objectives = {"mlm": {"weight": 1.0, "max_length": 48}, "tlm": {"weight": 1.0, "max_length": 96},
                  "clwr": {"weight": 0.5, "max_length": 48}, "clpc": {"weight": 0.5, "max_length": 96},
                  "xlco": {"weight": 1.0, "max_length": 48}}
    cfg = TrainConfig(model="unicoder_tiny", tokenizer={"vocab_size": 8000, "model_type": "unigram", "alpha": 0.3},
                      objectives=objectives, mixture="sample", output_dir=str(args.out / "train"),
                      max_steps=args.steps, batch_size=args.batch_size, optimizer="adamw", lr=1e-3,
                      schedule="linear", warmup_steps=min(100, args.steps // 10), precision="fp32",
                      checkpoint_every=max(100, args.steps // 3), keep_checkpoints=1, log_every=25,
                      tensorboard=False, seed=0)
    print("[2/4] tokenizer: sentencepiece unigram, 8000 pieces, α = 0.3")
    tokenizer, fingerprint = build_tokenizer(cfg, [*mono, *pairs])
    specials = tokenizer.specials
    corpora = {"mlm": mono, "tlm": pairs, "clwr": pairs, "clpc": pairs, "xlco": pairs}
    data = build_data(cfg, tokenizer, fingerprint, corpora, {name: None for name in corpora})
    model = create_model("unicoder_tiny", vocab_size=specials.vocab_size, pad_token_id=specials.pad,
                         num_languages=len(langs), max_positions=128)
    mixture = Mixture.from_spec(objectives, specials, model.config, mode="sample")
    print(f"[3/4] pre-training unicoder_tiny ({model.num_parameters():,} parameters) for {args.steps} steps "
          f"with {', '.join(objectives)}")
    Trainer(model, mixture, data, cfg).fit()
    model.tokenizer = tokenizer
    model.save_pretrained(args.out / "model", tokenizer)

    print("[4/4] evaluating beside peers")
    random_model = create_model("unicoder_tiny", vocab_size=specials.vocab_size, pad_token_id=specials.pad,
                                num_languages=len(langs), max_positions=128)
    specs = [ModelSpec("babelzoo demo (unicoder_tiny)", kind="object",
                       encoder=BabelEncoder("babelzoo demo (unicoder_tiny)", model, tokenizer)),
             ModelSpec("random init (unicoder_tiny)", kind="object",
                       encoder=BabelEncoder("random init (unicoder_tiny)", random_model, tokenizer))]
    specs += [ModelSpec(peer, kind="peer", source=peer) for peer in args.peers]
    tasks = ["gettext_retrieval", "bli_cldr"]
    if args.data_dir:
        tasks += ["tatoeba", "multi30k"]
    languages = [*langs[1:], *BLI_OF.values(), *TATOEBA_OF.values()]
    context = TaskContext(data_dir=Path(args.data_dir) if args.data_dir else None,
                          languages=list(dict.fromkeys(languages)), limit=args.limit)
    results, cells = run_matrix(specs, tasks, context)
    paths = write_outputs(results, cells, args.out / "leaderboard",
                          {"command": "babelzoo demo", "steps": args.steps, "limit": args.limit},
                          title="babelzoo demo leaderboard")
    print()
    print(paths["leaderboard"].read_text(encoding="utf-8"))
    print(f"wrote {args.out / 'model'} and {args.out / 'leaderboard'}; total {time.perf_counter() - start:.0f}s")
    return 0
