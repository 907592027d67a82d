"""``babelzoo demo``: the whole pipeline on embedded data, in minutes on a CPU.

The shipped recipe ``demo`` (``babelzoo/recipes/demo.yaml``), run by the same path as
``babelzoo pretrain --config demo``, then the leaderboard:

1. corpora: human translations of the Gramps catalogs (installed with the package), the
   training part of a fixed split (:mod:`babelzoo.offline.embedded`), and the CLDR knowledge
   base's facts and entity names without the entities evaluation holds out;
2. a sentencepiece tokenizer trained on them with α-smoothed language sampling;
3. a tiny Unicoder-layout encoder pre-trained on the shared trainer with cross-lingual objectives
   (MLM, TLM, CLWR, CLPC, XLCo) and knowledge objectives (entity-level masked LM over the facts,
   XLCo over English↔X entity names), one objective sampled per step;
4. evaluation beside peers (multilingual USE, all-MiniLM-L6-v2, the same architecture with random
   weights) on held-out sentence retrieval, CLDR lexicon induction and CLDR entity linking (both
   on held-out entities), plus Tatoeba and Multi30k when ``--data-dir`` is given; the
   leaderboard is printed and written with ``results.json``.
"""

from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Optional, Sequence

from .errors import ArgumentParser, UsageError, command

logger = logging.getLogger(__name__)

DEMO_LANGS = ("en", "de", "fr", "es", "ru", "zh-CN", "ja", "ar")
TATOEBA_OF = {"de": "deu", "fr": "fra", "es": "spa", "ru": "rus", "zh-CN": "cmn", "ja": "jpn", "ar": "ara"}
DEMO_MARKER = ".babelzoo-demo"  # in a folder the demo made
DEMO_OUTPUTS = ("train", "model", "leaderboard")  # what --fresh removes, and nothing else
BLI_OF = {"de": "de", "fr": "fr", "es": "es", "ru": "ru", "zh-CN": "zh-hans", "ja": "ja", "ar": "ar"}


@command("demo")
def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="babelzoo demo", description="The whole pipeline on embedded data: "
                                     "corpora and a tokenizer, pre-training (the recipe demo), a leaderboard.")
    parser.add_argument("--out", type=Path, default=Path("runs/demo"), help="run folder (default runs/demo)")
    parser.add_argument("--steps", type=int, default=3000, help="optimizer steps (default 3000)")
    parser.add_argument("--batch-size", type=int, default=32, help="examples per step (default 32)")
    parser.add_argument("--data-dir", type=Path, default=os.environ.get("BABELZOO_DATA_DIR"),
                        help="standard sets (tatoeba/, multi30k/) to evaluate on as well")
    parser.add_argument("--limit", type=int, default=300, help="evaluation items per language (default 300)")
    parser.add_argument("--peers", nargs="*", default=["muse_v3", "all_minilm_l6_v2"],
                        help="peer models to compare with (default: muse_v3 all_minilm_l6_v2)")
    parser.add_argument("--fresh", action="store_true",
                        help="start over instead of resuming in --out (removes the demo's train/, model/ and "
                             "leaderboard/ there, nothing else)")
    return parser


def claim_run_folder(out: Path, fresh: bool) -> None:
    """Make ``out`` the demo's folder: a new or empty one is marked as the demo's; one the demo
    marked is resumed, or with ``fresh`` cleared of the train/, model/ and leaderboard/ babelzoo
    wrote there (and nothing else); any other folder, or such an entry babelzoo did not write, is
    refused before anything is written or deleted."""
    import shutil

    marker = out / DEMO_MARKER
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    entries = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if entries and not marker.is_file():
        shown = ", ".join(entries[:6]) + (", ..." if len(entries) > 6 else "")
        raise UsageError(f"--out {out}: not a folder babelzoo demo made (it holds {shown}); nothing was changed: "
                         "give a new or empty folder")
    if fresh:
        outputs = [out / name for name in DEMO_OUTPUTS if os.path.lexists(out / name)]
        problems = [problem for path in outputs if (problem := demo_output_problem(path)) is not None]
        if problems:
            raise UsageError(f"--out {out} --fresh: {'; '.join(problems)}; nothing was deleted: move those files "
                             "out, or give another --out")
        for path in outputs:
            shutil.rmtree(path)
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text("babelzoo demo run folder: train/, model/ and leaderboard/ are the demo's\n", encoding="utf-8")


def demo_output_problem(path: Path) -> Optional[str]:
    """Why ``--fresh`` may not remove ``path`` (the demo's ``train``, ``model`` or
    ``leaderboard``), or None when it is a folder holding only what babelzoo wrote there as that:
    a training run's folder, a saved model, a leaderboard's files."""
    from ._files import foreign_entries, owned_kind
    from .evaluation.leaderboard import written_outputs
    from .train.run_folder import is_run_folder

    if path.is_symlink() or not path.is_dir():
        return f"{path} is {'a link' if path.is_symlink() else 'not a folder'}, not a folder babelzoo wrote"
    entries = sorted(p.name for p in path.iterdir())
    if path.name == "train":
        written = not entries or is_run_folder(path)
        foreign = [] if written else entries
    elif path.name == "model":
        written = not entries or owned_kind(path) == "model"
        foreign = foreign_entries(path) if written else entries
    else:
        listed = written_outputs(path)
        written = not entries or listed is not None
        foreign = [name for name in entries if name not in (listed or ())]
    if not foreign:
        return None
    shown = ", ".join(foreign[:6]) + (", ..." if len(foreign) > 6 else "")
    if not written:
        return f"{path} is not a {path.name} folder babelzoo wrote (it holds {shown})"
    return f"{path} holds files babelzoo did not write there ({shown})"


def run(args: argparse.Namespace) -> int:
    """The demo with parsed arguments."""

    import torch

    from .evaluation.encoders import BabelEncoder
    from .evaluation.leaderboard import ModelSpec, run_matrix, write_outputs
    from .evaluation.tasks import TaskContext
    from .train.run import build_run
    from .train.config import load_recipe, recipe_path
    from .train.run_checkpoints import finished_checkpoint
    from .zoo.factory import create_model

    start = time.perf_counter()
    claim_run_folder(args.out, fresh=args.fresh)
    recipe = recipe_path("demo")
    overrides = [f"output_dir={args.out / 'train'}", f"max_steps={args.steps}", f"batch_size={args.batch_size}",
                 f"optim.warmup_steps={min(100, args.steps // 10)}", f"checkpoints.every={max(100, args.steps // 3)}"]
    cfg = load_recipe(recipe, overrides)
    logger.info(f"[1/4] corpora and tokenizer ({recipe.name}): Gramps translations and CLDR facts and names in "
                f"{', '.join(DEMO_LANGS)}; sentencepiece unigram, {cfg.tokenizer['vocab_size']} pieces, "
                f"α = {cfg.tokenizer['alpha']}")
    run = build_run(cfg, recipe)
    model, tokenizer = run.model, run.tokenizer
    for name, dataset in run.data.items():
        logger.info(f"      {name}: {len(dataset[0] if isinstance(dataset, tuple) else dataset)} examples")
    finished = finished_checkpoint(cfg)
    if finished is None:
        logger.info(f"[2/4] pre-training {cfg.model} ({model.num_parameters():,} parameters) for {cfg.max_steps} "
                    f"steps with {', '.join(cfg.objectives)}, one objective sampled per step")
    else:
        logger.info(f"[2/4] reusing the finished pre-training run in {cfg.output_dir} (checkpoint {finished.name}, "
                    f"{cfg.max_steps} steps): nothing is trained now and the summary below is that run's; to train "
                    "again, pass --fresh or another --out")
    run.trainer().fit()
    model.tokenizer = tokenizer
    model.save_pretrained(args.out / "model", tokenizer)

    logger.info("[3/4] evaluating beside peers")
    specials = tokenizer.specials
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed + 1)
        random_model = create_model(cfg.model, vocab_size=specials.vocab_size, pad_token_id=specials.pad,
                                    **cfg.model_overrides)
    label = f"babelzoo demo ({cfg.model})"
    specs = [ModelSpec(label, kind="object", encoder=BabelEncoder(label, model, tokenizer)),
             ModelSpec(f"random init ({cfg.model})", kind="object",
                       encoder=BabelEncoder(f"random init ({cfg.model})", random_model, tokenizer))]
    specs += [ModelSpec(peer, kind="peer", source=peer) for peer in args.peers]
    tasks = ["gettext_retrieval", "bli_cldr", "cldr_linking"]
    if args.data_dir:
        tasks += ["tatoeba", "multi30k"]
    languages = [*DEMO_LANGS[1:], *BLI_OF.values(), *TATOEBA_OF.values()]
    context = TaskContext(data_dir=Path(args.data_dir) if args.data_dir else None,
                          languages=list(dict.fromkeys(languages)), limit=args.limit)
    results, cells = run_matrix(specs, tasks, context)
    logger.info("[4/4] leaderboard")
    paths = write_outputs(results, cells, args.out / "leaderboard",
                          {"command": "babelzoo demo", "recipe": "demo", "steps": args.steps, "limit": args.limit},
                          title="babelzoo demo leaderboard")
    print()
    print(paths["leaderboard"].read_text(encoding="utf-8"))
    print(f"wrote {args.out / 'model'} and {args.out / 'leaderboard'}; total {time.perf_counter() - start:.0f}s")
    return 0
