"""Multi30k translation, English → German, French and Czech: does multilingual pre-training of
an encoder–decoder help at an equal fine-tuning budget?

Three arms, each an ``mbart_tiny`` (2+2 layers, width 128) with one shared tokenizer:

* **random init**: fine-tuned from random weights;
* **mBART denoising**: pre-trained by the shipped recipe ``mbart_denoising_tiny`` (35 % of the
  words masked in Poisson(3.5) spans, sentence permutation, language tags) on the embedded text
  (Gramps and Django catalog documents in de, fr, cs) and the monolingual sides of Multi30k
  ``train`` (en, de, fr, cs; runs of ``--doc-sentences`` consecutive captions as documents);
* **XNLG XAE**: pre-trained by the shipped recipe ``xae_tiny`` (cross-lingual auto-encoding on
  the embedded English↔de/fr/cs catalog translations, summed with the same denoising), on the
  same monolingual data.

The two pre-training arms get the same compute: ``--pretrain-cpu-seconds`` of process CPU time
each (or ``--pretrain-steps``, whichever ends first), same batch size, learning rate, schedule
and seed. No Multi30k translation pair is read in pre-training.

Fine-tuning is the shipped recipe ``translation_tiny`` (mBART's layout: the source ends with its
tag, the decoder starts from the target's tag) on Multi30k ``train`` for each direction
separately, the same ``--finetune-steps``, batch, learning rate and seed for every arm; the
pre-trained arms start from their checkpoint (``init: {pretrained: DIR}``). The last step is
evaluated: nothing is selected on the test set (``val`` is not used either). Each model
translates ``test_2016_flickr`` (beam ``--beams``, length penalty 1) through
:func:`babelzoo.evaluation.translation.translate`, scored with sacreBLEU BLEU and chrF (the
signatures are stored with the numbers).

Generation speed: one fine-tuned model (the first pre-trained arm's en→de) exported to
transformers (``MBartForConditionalGeneration``) and both libraries' ``generate`` timed on the
same test sources, batch 32, greedy and beam 4, interleaved, identical ids up to each row's end
token required (:func:`benchmarks.generate_speed.measure`). New tokens/s counts every returned
position; written tokens are those up to each end token. ``--speed-only`` times the models an
earlier run fine-tuned and adds the section to its report.

    python -m benchmarks run translation --data-dir ../shared/data
    python benchmarks/translation.py --quick            # a smoke run: tiny budgets, 64 test sentences
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo.datasets.sources import parse_source  # noqa: E402
from babelzoo.datasets.text import multi30k_pairs  # noqa: E402
from babelzoo.evaluation.translation import corpus_scores, translate  # noqa: E402
from babelzoo.objectives.batching import pad  # noqa: E402
from babelzoo.objectives.translation import Translation  # noqa: E402
from babelzoo.train.checkpoint import CheckpointManager  # noqa: E402
from babelzoo.train.run import build_run, build_tokenizer  # noqa: E402
from babelzoo.train.config import TrainConfig, load_recipe, recipe_path  # noqa: E402
from babelzoo.typed import Where  # noqa: E402
from benchmarks._results import logged_means, read_run, write_results  # noqa: E402
from benchmarks.generate_speed import measure  # noqa: E402

LANGS = ("en", "de", "fr", "cs")
TARGETS = ("de", "fr", "cs")
PACKAGES = ["gramps", "django"]
ARMS = {"random init": None, "mBART denoising": "mbart_denoising_tiny", "XNLG XAE": "xae_tiny"}
MODEL = "mbart_tiny"
FINETUNE = "translation_tiny"


def multi30k_file(data_dir: Path, split: str, lang: str) -> Path:
    return data_dir / "multi30k" / f"{split}.{lang}.gz"


def monolingual(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The denoising data: Multi30k train sides as documents, and the catalogs' documents."""
    sides = [{"kind": "documents", "path": str(multi30k_file(args.data_dir, "train", lang)), "lang": lang,
              "max_sentences": args.doc_sentences} for lang in LANGS]
    return sides + [{"kind": "catalog_documents", "langs": list(TARGETS), "packages": PACKAGES}]


def pretrain_data(recipe: str, args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    data = {"mbart_denoising": monolingual(args)}
    if recipe == "xae_tiny":
        data["xae"] = [{"kind": "catalog_pairs", "langs": list(LANGS), "pivot": "en", "packages": PACKAGES}]
    return data


def shared_tokenizer(args: argparse.Namespace, work: Path):
    """One unigram tokenizer (with a tag per language) on Multi30k train and the catalogs' text."""
    def texts() -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for lang in LANGS:
            with gzip.open(multi30k_file(args.data_dir, "train", lang), "rt", encoding="utf-8") as f:
                out[lang] = [line.strip() for line in f if line.strip()]
        catalogs = parse_source({"kind": "catalog_text", "langs": list(LANGS), "packages": PACKAGES},
                                Where(label="benchmark data"))
        catalogs.load()
        for lang, sentences in catalogs.texts(None).items():
            out[lang] = out.get(lang, []) + list(sentences)
        return out

    folder = work / f"tokenizer-{args.vocab_size}"
    cfg = TrainConfig(output_dir=str(folder), seed=args.seed,
                      tokenizer={"vocab_size": args.vocab_size, "model_type": "unigram", "alpha": 0.3,
                                 "languages": list(LANGS)})
    tokenizer, _ = build_tokenizer(cfg, texts)
    return tokenizer, folder / "tokenizer"


def common(cfg: TrainConfig, args: argparse.Namespace, out_dir: Path, steps: int, **fields) -> TrainConfig:
    return cfg.replace(model=MODEL, output_dir=str(out_dir), max_steps=steps, batch_size=args.batch_size,
                       optim={"optimizer": "adamw", "lr": args.lr, "schedule": "linear", "warmup_steps": args.warmup},
                       checkpoints={"every": steps, "keep": 1, "resume": False},
                       logging={"every": 50, "progress": False, "tensorboard": False}, precision="fp32", seed=args.seed,
                       device="cpu", **fields)


def train(cfg: TrainConfig, path: Path) -> dict[str, Any]:
    """Run a recipe's config through the path ``babelzoo pretrain`` runs; its summary."""
    if Path(cfg.output_dir).exists():
        shutil.rmtree(cfg.output_dir)  # this script's own run folder: start fresh, never resume
    cpu0, wall0 = time.process_time(), time.perf_counter()
    run = build_run(cfg, path)
    summary = run.trainer().fit()
    model, tokenizer = run.model, run.tokenizer
    checkpoint = CheckpointManager(Path(cfg.output_dir) / "checkpoints", 1, 0).latest()
    return {"model": model, "tokenizer": tokenizer, "checkpoint": str(checkpoint), "steps": summary["steps"],
            "tokens": summary["tokens"], "final_loss": logged_means(cfg.output_dir, 3),
            "cpu_s": round(time.process_time() - cpu0, 1), "wall_s": round(time.perf_counter() - wall0, 1)}


def pretrain(arm: str, args: argparse.Namespace, tokenizer_dir: Path, work: Path) -> dict[str, Any]:
    recipe = ARMS[arm]
    path = recipe_path(recipe)
    cfg = load_recipe(path)
    objectives = {name: dict(options) for name, options in cfg.objectives.items()}
    cfg = common(cfg, args, work / "pretrain" / recipe, args.pretrain_steps,
                 model_overrides={**cfg.model_overrides, "dropout": args.dropout},
                 tokenizer={"path": str(tokenizer_dir)}, objectives=objectives, data=pretrain_data(recipe, args),
                 max_seconds=args.pretrain_cpu_seconds, budget_clock="cpu")
    run = train(cfg, path)
    print(f"{arm}: pre-trained {run['steps']} steps, {run['tokens']:,} tokens, {run['cpu_s']:.0f} CPU s, "
          f"losses {run['final_loss']}", flush=True)
    return run


def finetune(arm: str, tgt: str, init: Optional[str], args: argparse.Namespace, tokenizer_dir: Path,
             work: Path) -> dict[str, Any]:
    path = recipe_path(FINETUNE)
    cfg = load_recipe(path)
    pair = {"kind": "parallel", "src": str(multi30k_file(args.data_dir, "train", "en")),
            "tgt": str(multi30k_file(args.data_dir, "train", tgt)), "src_lang": "en", "tgt_lang": tgt}
    cfg = common(cfg, args, work / "finetune" / slug(arm) / f"en-{tgt}", args.finetune_steps,
                 model_overrides={**cfg.model_overrides, "dropout": args.dropout},
                 tokenizer={"path": str(tokenizer_dir)}, data={"translation": [pair]},
                 init={} if init is None else {"pretrained": init})
    return train(cfg, path)


def slug(arm: str) -> str:
    return arm.lower().replace(" ", "_")


def evaluate(run: dict[str, Any], tgt: str, args: argparse.Namespace) -> dict[str, Any]:
    test = multi30k_pairs(args.data_dir, "test_2016_flickr", "en", tgt).pairs[:args.limit]
    start = time.perf_counter()
    hypotheses = translate(run["model"], run["tokenizer"], [s for s, _ in test], "en", tgt, num_beams=args.beams,
                           batch_size=32)
    seconds = time.perf_counter() - start
    scores = corpus_scores(hypotheses, [t for _, t in test], tgt)
    return {**scores, "sentences": len(test), "decode_s": round(seconds, 1), "examples": hypotheses[:3]}


def finetuned(arm: str, tgt: str, work: Path) -> dict[str, Any]:
    """The model and tokenizer an earlier run fine-tuned for ``arm`` and en→``tgt``."""
    from babelzoo.datasets.tokenizer import load_tokenizer
    from babelzoo.zoo.pretrained import from_pretrained

    checkpoint = CheckpointManager(work / "finetune" / slug(arm) / f"en-{tgt}" / "checkpoints", 1, 0).latest()
    if checkpoint is None:
        raise SystemExit(f"no fine-tuned {arm} en→{tgt} checkpoint under {work}: run the benchmark first")
    return {"model": from_pretrained(checkpoint), "tokenizer": load_tokenizer(checkpoint), "arm": arm}


def generation_speed(run: dict[str, Any], tgt: str, args: argparse.Namespace) -> dict[str, Any]:
    """babelzoo's and transformers' ``generate`` on the same fine-tuned weights and sources."""
    import transformers

    from babelzoo.zoo.convert import export_hf

    ours, tokenizer = run["model"].eval(), run["tokenizer"]
    specials = tokenizer.specials
    with tempfile.TemporaryDirectory() as folder:
        export_hf(ours, folder)
        theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(folder).eval()
    test = multi30k_pairs(args.data_dir, "test_2016_flickr", "en", tgt).pairs[:32]
    tag = specials.language_tags
    layout = Translation(specials, ours.config)
    pieces = tokenizer.batch_encode([s for s, _ in test], langs=["en"] * len(test), padding=False, truncation=False,
                                    add_special_tokens=False, return_tensors=None)["input_ids"]
    rows = [layout.source(ids, "en")[0] for ids in pieces]  # the sources as translate() frames them
    src = pad(rows, specials.pad)
    mask = src.ne(specials.pad).long()
    out = {"model": MODEL, "arm": run["arm"], "direction": f"en-{tgt}", "batch": len(rows),
           "new_tokens": args.new_tokens}
    for name, beams in (("greedy", 1), ("beam 4", 4)):
        options = {"max_new_tokens": args.new_tokens, "num_beams": beams, "decoder_start_token_id": tag[tgt],
                   "eos_token_id": specials.sep, "pad_token_id": specials.pad, "early_stopping": beams > 1}
        out[name] = measure(ours, theirs, src, mask, options, args.speed_repeats, "cpu")
        print(f"generate {name}: babelzoo {out[name]['babelzoo_tokens_per_s']:.0f} new tokens/s, transformers "
              f"{out[name]['transformers_tokens_per_s']:.0f} ({out[name]['ratio']:.2f}x)", flush=True)
    return out


def markdown(report: dict[str, Any]) -> str:
    p, a = report["protocol"], report["settings"]
    lines = ["# Multi30k translation: random init vs mBART denoising vs XNLG XAE pre-training", "",
             f"`{p['model']}`, one shared tokenizer ({a['vocab_size']} pieces). Pre-training arms: "
             f"{a['pretrain_cpu_seconds']:.0f} process-CPU seconds each, batch {a['batch_size']}, lr {a['lr']} "
             f"(denoising: {p['pretraining_data']['mbart_denoising']}; XAE: {p['pretraining_data']['xae']}; "
             f"no Multi30k pair). Fine-tuning: `{p['finetuning']}`, {a['finetune_steps']} steps of "
             f"{a['batch_size']} pairs on {p['train']} per direction, the same for every arm; "
             f"model selection: {p['selection']}. Test: {p['test']}, {p['decoding']}, sacreBLEU BLEU and "
             f"chrF (signatures in the JSON).", "",
             "| arm | pre-training | " + " | ".join(f"en→{t} BLEU | en→{t} chrF" for t in TARGETS) + " |",
             "|---|---|" + "---:|" * (2 * len(TARGETS))]
    for arm, row in report["arms"].items():
        pre = row.get("pretrain")
        budget = "–" if pre is None else f"{pre['steps']} steps, {pre['tokens']:,} tokens, {pre['cpu_s']:.0f} CPU s"
        cells = []
        for tgt in TARGETS:
            score = row["finetune"].get(f"en-{tgt}")
            cells += ["–", "–"] if score is None else [f"{score['bleu']:.1f}", f"{score['chrf']:.1f}"]
        lines.append(f"| {arm} | {budget} | " + " | ".join(cells) + " |")
    speed = report.get("generation_speed")
    if speed:
        lines += ["", f"Generation speed ({speed['model']}, {speed['arm']} fine-tuned {speed['direction']}, batch "
                      f"{speed['batch']}, up to {speed['new_tokens']} new tokens, identical ids up to each end "
                      "token; new tokens/s counts every returned position, written tokens those up to the end "
                      "token):", "",
                  "| decoding | babelzoo new tok/s | transformers new tok/s | ratio | written tokens | "
                  "babelzoo written tok/s | transformers written tok/s |", "|---|---:|---:|---:|---:|---:|---:|"]
        for name in ("greedy", "beam 4"):
            m = speed[name]
            lines.append(f"| {name} | {m['babelzoo_tokens_per_s']:.0f} | {m['transformers_tokens_per_s']:.0f} | "
                         f"{m['ratio']:.2f}× | {m['written_tokens']} | "
                         f"{m['written_tokens'] / m['seconds']['babelzoo']:.0f} | "
                         f"{m['written_tokens'] / m['seconds']['transformers']:.0f} |")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("BABELZOO_DATA_DIR",
                                                                               REPO.parent / "shared" / "data")))
    parser.add_argument("--out", type=Path, help="write JSON here (and the table beside it as .md)")
    parser.add_argument("--arms", nargs="*", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--targets", nargs="*", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--pretrain-cpu-seconds", type=float, default=900.0,
                        help="each pre-training arm's compute, in process CPU seconds")
    parser.add_argument("--pretrain-steps", type=int, default=20000, help="at most this many pre-training steps")
    parser.add_argument("--finetune-steps", type=int, default=1200, help="fine-tuning steps of every arm and direction")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--doc-sentences", type=int, default=4, help="Multi30k captions per denoising document")
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--beams", type=int, default=4)
    parser.add_argument("--limit", type=int, default=None, help="translate only the first N test sentences")
    parser.add_argument("--new-tokens", type=int, default=32, help="generation speed: new tokens per row")
    parser.add_argument("--speed-repeats", type=int, default=3)
    parser.add_argument("--speed", action=argparse.BooleanOptionalAction, default=True,
                        help="time generate against transformers on a fine-tuned model")
    parser.add_argument("--speed-only", action="store_true",
                        help="only time generate, on the models an earlier run fine-tuned, into its --out report")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: 60 CPU s and 40 steps of pre-training, 40 fine-tuning steps, 64 sentences")
    parser.add_argument("--work-dir", type=Path, default=REPO / "runs" / "translation")
    args = parser.parse_args(argv)
    if args.quick:
        args.pretrain_cpu_seconds, args.pretrain_steps, args.finetune_steps = 60.0, 40, 40
        args.limit, args.warmup, args.speed_repeats, args.new_tokens = 64, 10, 1, 8
    start_cpu, start = time.process_time(), time.perf_counter()
    work = args.work_dir
    if args.speed_only:
        if args.out is None or not args.out.is_file():
            parser.error("--speed-only adds the speed section to the report an earlier run wrote to --out")
        report = read_run(args.out)["results"]
        arm = next((a for a in args.arms if ARMS[a] is not None), None)
        if arm is None:
            parser.error("--speed-only times a pre-trained arm's model; --arms names none")
        report["generation_speed"] = generation_speed(finetuned(arm, args.targets[0], work), args.targets[0], args)
        write_results(args.out, report, markdown, "translation")
        print(markdown(report))
        return 0
    tokenizer, tokenizer_dir = shared_tokenizer(args, work)
    print(f"tokenizer: {tokenizer.specials.vocab_size} pieces, tags {sorted(tokenizer.specials.language_tags)} "
          f"({time.perf_counter() - start:.0f}s)", flush=True)
    report: dict[str, Any] = {
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "protocol": {"model": MODEL, "finetuning": FINETUNE, "train": "Multi30k train (29,000 pairs)",
                     "test": "Multi30k test_2016_flickr", "selection": "none: the last fine-tuning step",
                     "decoding": f"beam {args.beams}, length penalty 1",
                     "pretraining_data": {"mbart_denoising": "Multi30k train sides en/de/fr/cs as documents + "
                                                             "gramps/django catalog documents de/fr/cs",
                                          "xae": "gramps/django catalog pairs en-de/fr/cs"}},
        "arms": {}}

    def save() -> None:
        report["wall_s"] = round(time.perf_counter() - start, 1)
        report["cpu_s"] = round(time.process_time() - start_cpu, 1)
        if args.out:
            write_results(args.out, report, markdown, "translation")

    speed_run = None
    for arm in args.arms:
        row: dict[str, Any] = {"finetune": {}}
        init = None
        if ARMS[arm] is not None:
            pre = pretrain(arm, args, tokenizer_dir, work)
            init = pre.pop("checkpoint")
            row["pretrain"] = {k: v for k, v in pre.items() if k not in ("model", "tokenizer")}
        for tgt in args.targets:
            run = finetune(arm, tgt, init, args, tokenizer_dir, work)
            score = evaluate(run, tgt, args)
            score["finetune"] = {k: run[k] for k in ("steps", "tokens", "final_loss", "cpu_s")}
            row["finetune"][f"en-{tgt}"] = score
            print(f"{arm} en→{tgt}: BLEU {score['bleu']:.2f} chrF {score['chrf']:.2f} (fine-tune loss "
                  f"{run['final_loss'].get('loss', float('nan')):.3f}, {run['cpu_s']:.0f} CPU s; decode "
                  f"{score['decode_s']:.0f} s) e.g. {score['examples'][0]!r}", flush=True)
            if speed_run is None and init is not None and args.speed:
                speed_run = ({**run, "arm": arm}, tgt)
            report["arms"][arm] = row
            save()
    if speed_run is not None:
        report["generation_speed"] = generation_speed(*speed_run, args)
    save()
    print()
    print(markdown(report))
    print(f"\ntotal CPU {report['cpu_s']:.0f}s, wall {report['wall_s']:.0f}s ({torch.get_num_threads()} threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
