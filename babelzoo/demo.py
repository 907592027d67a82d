"""``babelzoo demo``: the whole pipeline on embedded data, in minutes on a CPU.

1. corpora: human translations of the Gramps catalogs (installed with the package), split into
   a training part and a fixed held-out part (:mod:`babelzoo.datasets.embedded`);
2. a sentencepiece tokenizer trained on the training part with α-smoothed language sampling;
3. a tiny Unicoder-layout encoder pre-trained on the shared trainer with cross-lingual objectives
   (MLM, TLM, CLWR, CLPC, XLCo) and knowledge objectives from the embedded CLDR knowledge base
   (entity-level masked LM over its facts, verbalised in every demo language, and XLCo over its
   English↔X entity names; the entities the evaluation holds out are left out), one objective
   sampled per step;
4. evaluation beside peers (multilingual USE, all-MiniLM-L6-v2, the same architecture with random
   weights) on held-out sentence retrieval, CLDR lexicon induction and CLDR entity linking (both
   on held-out entities), plus Tatoeba and Multi30k when ``--data-dir`` is given; the
   leaderboard is printed and written with ``results.json``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Sequence

from .errors import command

DEMO_LANGS = ("en", "de", "fr", "es", "ru", "zh-CN", "ja", "ar")
TATOEBA_OF = {"de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "zh-CN": "cmn", "ja": "jpn", "ar": "ara"}
BLI_OF = {"de": "de", "fr": "fr", "es": "es", "ru": "ru", "zh-CN": "zh-hans", "ja": "ja", "ar": "ar"}
NAME_TYPES = ("territory", "language", "currency", "script")
KB_LANG_OF = {"en": "en", "de": "de", "fr": "fr", "es": "es", "ru": "ru", "zh-CN": "zh", "ja": "ja", "ar": "ar"}


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


def build_knowledge(langs: Sequence[str]):
    """From the CLDR knowledge base, without the entities evaluation holds out: verbalised facts
    in ``langs`` (for entity-level MLM) and English↔X entity names (a dictionary for XLCo)."""
    from .datasets.text import ParallelCorpus, ReadReport
    from .knowledge import load_kb
    from .knowledge.facts import is_heldout_entity, kb_facts, kb_name_pairs

    kb = load_kb("cldr")
    kb_langs = {lang: KB_LANG_OF[lang] for lang in langs}
    facts, report = kb_facts(kb, kb_langs, exclude=is_heldout_entity)
    names = kb_name_pairs(kb, kb_langs, exclude=is_heldout_entity, types=NAME_TYPES)
    source = ("CLDR names",)
    pairs = [ParallelCorpus("en", lang, got, ReadReport(source, len(got), len(got))) for lang, got in names.items()]
    return facts, report, pairs


@command("demo")
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="babelzoo demo", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="run folder (default runs/demo)")
    parser.add_argument("--steps", type=int, default=3000, help="optimizer steps (default 3000)")
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

    from .datasets.text import MonolingualCorpus, ReadReport
    from .evaluation.encoders import BabelEncoder
    from .evaluation.leaderboard import ModelSpec, run_matrix, write_outputs
    from .evaluation.tasks import TaskContext
    from .knowledge.facts import FactDataset
    from .objectives.mixture import Mixture
    from .train.cli import build_data, build_tokenizer
    from .train.config import TrainConfig
    from .train.trainer import Trainer
    from .zoo.factory import create_model

    start = time.perf_counter()
    if args.fresh and args.out.exists():
        shutil.rmtree(args.out)
    langs = DEMO_LANGS
    print(f"[1/4] corpora: Gramps translations, languages {', '.join(langs)}")
    mono, pairs = build_corpora(langs)
    for corpus in pairs:
        print(f"      en-{corpus.tgt_lang}: {len(corpus)} training pairs")

    print("      knowledge: CLDR facts and entity names in the same languages (held-out entities left out)")
    facts, fact_report, name_pairs = build_knowledge(langs)
    print(f"      {fact_report}")
    print(f"      names: {sum(len(c) for c in name_pairs)} English↔X entity-name pairs")

    # XLCo pools and compares sentences the way the leaderboard does (mean of the last layer,
    # cosine), so what it aligns is what is measured.
    objectives = {"mlm": {"weight": 1.0, "max_length": 48}, "tlm": {"weight": 1.0, "max_length": 96},
                  "clwr": {"weight": 0.5, "max_length": 48}, "clpc": {"weight": 0.5, "max_length": 96},
                  "xlco": {"weight": 2.0, "max_length": 48, "pooling": "mean", "normalize": True,
                           "temperature": 0.05, "symmetric": True},
                  "entity_mlm": {"weight": 1.0, "max_length": 48},
                  "xlco_names": {"objective": "xlco", "weight": 1.0, "max_length": 24, "pooling": "mean",
                                 "normalize": True, "temperature": 0.05, "symmetric": True}}
    cfg = TrainConfig(model="unicoder_tiny", tokenizer={"vocab_size": 8000, "model_type": "unigram", "alpha": 0.3},
                      objectives=objectives, mixture="sample", output_dir=str(args.out / "train"),
                      max_steps=args.steps, batch_size=args.batch_size, optimizer="adamw", lr=1e-3,
                      schedule="linear", warmup_steps=min(100, args.steps // 10), precision="fp32",
                      checkpoint_every=max(100, args.steps // 3), keep_checkpoints=1, log_every=25,
                      tensorboard=False, seed=0, keep_cpu_buffers=True)
    print("[2/4] tokenizer: sentencepiece unigram, 8000 pieces, α = 0.3")
    fact_texts = []
    for lang in langs:
        texts = [f.text for f in facts if f.lang == lang]
        fact_texts.append(MonolingualCorpus(lang, texts, ReadReport(("CLDR facts",), len(texts), len(texts))))
    tokenizer, fingerprint = build_tokenizer(cfg, [*mono, *pairs, *fact_texts, *name_pairs])
    specials = tokenizer.specials
    corpora = {"mlm": mono, "tlm": pairs, "clwr": pairs, "clpc": pairs, "xlco": pairs, "xlco_names": name_pairs}
    data = build_data(cfg, tokenizer, fingerprint, corpora, {name: None for name in corpora})
    data["entity_mlm"] = FactDataset(facts, tokenizer)
    # No language embeddings: a sentence's vector should not depend on a language tag that
    # retrieval may not know (Tatoeba's ISO 639-3 codes), and XLCo wants it language-agnostic.
    # The initial weights (model and objective heads) come from the run's seed, so two fresh runs
    # are identical; the caller's RNG state is left as it was.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        model = create_model("unicoder_tiny", vocab_size=specials.vocab_size, pad_token_id=specials.pad,
                             num_languages=0, max_positions=128)
        mixture = Mixture.from_spec(objectives, specials, model.config, mode="sample")
    print(f"[3/4] pre-training unicoder_tiny ({model.num_parameters():,} parameters) for {args.steps} steps "
          f"with {', '.join(objectives)}")
    Trainer(model, mixture, data, cfg).fit()
    model.tokenizer = tokenizer
    model.save_pretrained(args.out / "model", tokenizer)

    print("[4/4] evaluating beside peers")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed + 1)
        random_model = create_model("unicoder_tiny", vocab_size=specials.vocab_size, pad_token_id=specials.pad,
                                    num_languages=0, max_positions=128)
    specs = [ModelSpec("babelzoo demo (unicoder_tiny)", kind="object",
                       encoder=BabelEncoder("babelzoo demo (unicoder_tiny)", model, tokenizer)),
             ModelSpec("random init (unicoder_tiny)", kind="object",
                       encoder=BabelEncoder("random init (unicoder_tiny)", random_model, tokenizer))]
    specs += [ModelSpec(peer, kind="peer", source=peer) for peer in args.peers]
    tasks = ["gettext_retrieval", "bli_cldr", "cldr_linking"]
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
