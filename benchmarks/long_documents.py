"""Does Transformer-XL's segment memory help on long documents? One tiny transformer_xl model,
one tokenizer, one seed, the same batches and the same number of steps, trained with
``segment_mlm`` and ``segment_clm`` twice: WITH memory (``mem_len`` > 0: every segment attends
over the stop-gradient states of the positions before it) and WITHOUT (``mem_len=0``: every
segment alone). Both settings read exactly the same tokens; only what a segment may attend to
differs.

Data (``--source ud``, the default): the English Web Treebank of Universal Dependencies
(``ud/UD_English-EWT``, documents from its ``# newdoc`` marks): its ``dev`` file's documents
train (the mirror has no train file), its ``test`` file's documents are held out and never
trained on. ``--source catalogs``: Django's .po catalogs (German, French, Spanish) as
documents, the messages of one source file in order, training split vs. the held-out messages
(:func:`babelzoo.offline.embedded.is_heldout`). ``--extra-train multi30k`` adds training text
(the English Multi30k train captions, runs of consecutive captions as documents) so that the
model learns more than the few next-token statistics EWT's 41k training tokens support; the
held-out documents stay the same.

Evaluation: every held-out document longer than two segments, whole or (when longer than
``--eval-max-segments`` segments) a window of that many, the same prepared batches (the same
windows and masks) for every setting;
the token-weighted held-out loss, its exponential (perplexity; for masked LM over the masked
tokens), and the loss of the first segments (which no setting gives a memory) apart from the
later ones (where the memory can help). The memory-trained model is also scored with a longer
memory (``--eval-mem-len``), as the paper evaluates.

    python -m benchmarks run long_documents --data-dir ../shared/data
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from a checkout
    sys.path.insert(0, str(REPO))

from babelzoo.datasets.sources import DocumentsSource  # noqa: E402
from babelzoo.datasets.spm import SentencePieceTokenizer  # noqa: E402
from babelzoo.objectives import Sentence, build_objective  # noqa: E402
from babelzoo.train.data import seeded  # noqa: E402
from babelzoo.zoo.factory import create_model  # noqa: E402
from benchmarks._results import default_out, write_results  # noqa: E402

UD = "ud/UD_English-EWT/en_ewt-ud-{split}.conllu"
CATALOG_LANGS = ["de", "fr", "es"]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default=os.environ.get("BABELZOO_DATA_DIR", str(REPO.parent / "shared" / "data")))
    p.add_argument("--source", choices=("ud", "catalogs"), default="ud")
    p.add_argument("--packages", nargs="+", default=["django"], help="the catalogs' packages (--source catalogs)")
    p.add_argument("--langs", nargs="+", default=CATALOG_LANGS, help="the catalogs' languages (--source catalogs)")
    p.add_argument("--extra-train", choices=("none", "multi30k"), default="none",
                   help="more training text besides the source's training documents (never the held-out "
                        "ones): multi30k adds the English Multi30k train captions, --extra-doc-sentences "
                        "consecutive captions a document")
    p.add_argument("--extra-doc-sentences", type=int, default=8)
    p.add_argument("--objectives", nargs="+", default=["segment_mlm", "segment_clm"],
                   choices=("segment_mlm", "segment_clm"))
    p.add_argument("--steps", type=int, default=240, help="optimizer steps per setting")
    p.add_argument("--batch-size", type=int, default=8, help="documents per step")
    p.add_argument("--segment-length", type=int, default=16)
    p.add_argument("--mem-len", type=int, default=32, help="the memory of the WITH setting (WITHOUT: 0)")
    p.add_argument("--max-segments", type=int, default=8, help="segments read from a training document")
    p.add_argument("--eval-max-segments", type=int, default=32)
    p.add_argument("--eval-mem-len", type=int, default=64, help="a longer memory to score the WITH model with")
    p.add_argument("--vocab-size", type=int, default=2000)
    p.add_argument("--hidden-size", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--dropout", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=0, help="the tokenizer's and the held-out masks' seed; the first "
                                                         "training seed")
    p.add_argument("--seeds", type=int, default=3, help="training seeds (initialisation and batches): seed .. "
                                                         "seed + seeds - 1")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=str(default_out("long_documents")))
    return p


def read_documents(args) -> tuple[dict[str, list[list[str]]], dict[str, list[list[str]]], str]:
    """(training documents, held-out documents, a description), by language."""
    if args.source == "ud":
        def read(split: str):
            path = Path(args.data_dir) / UD.format(split=split)
            if not path.is_file():
                raise SystemExit(f"{path}: not found (give --data-dir, the standard data with ud/)")
            source = DocumentsSource(path=str(path), lang="en", format="conllu")
            return source.read_documents()

        return (with_extra(read("dev"), args), read("test"),
                "UD English-EWT: dev documents train, test documents held out" + extra_description(args))
    from babelzoo.offline.embedded import CatalogDocuments

    def catalog(split: str):
        return CatalogDocuments(langs=args.langs, packages=args.packages, split=split,
                                max_sentences=10_000).read_documents()

    return (with_extra(catalog("train"), args), catalog("heldout"),
            f"{'+'.join(args.packages)} .po catalogs ({', '.join(args.langs)}): training vs held-out messages"
            + extra_description(args))


def with_extra(documents: dict[str, list[list[str]]], args) -> dict[str, list[list[str]]]:
    """The training documents, and ``--extra-train``'s beside them."""
    if args.extra_train == "none":
        return documents
    from babelzoo.datasets.text import multi30k_pairs

    captions = [en for en, _ in multi30k_pairs(args.data_dir, "train", "en", "de").pairs]
    n = args.extra_doc_sentences
    extra = [captions[i:i + n] for i in range(0, len(captions), n)]
    return {**documents, "en": documents.get("en", []) + extra}


def extra_description(args) -> str:
    if args.extra_train == "none":
        return ""
    return (f"; more training text: the English Multi30k train captions, {args.extra_doc_sentences} consecutive "
            f"captions a document")


def tokenize(documents: dict[str, list[list[str]]], tokenizer) -> list[list[Sentence]]:
    return [[Sentence(tokenizer.encode(text, add_special_tokens=False), lang) for text in document]
            for lang, docs in documents.items() for document in docs]


def stream_length(document: list[Sentence]) -> int:
    return 1 + sum(len(s.ids) + 1 for s in document)


def make_model(args, vocab_size: int, seed: int):
    torch.manual_seed(seed)
    return create_model("transformer_xl_tiny", vocab_size=vocab_size, hidden_size=args.hidden_size,
                        num_layers=args.layers, intermediate_size=2 * args.hidden_size, dropout=args.dropout,
                        attention_dropout=0.0)


def objective_for(name: str, specials, model, args, mem_len: int, max_segments: int):
    return build_objective(name, specials, model.config, segment_length=args.segment_length, mem_len=mem_len,
                           max_segments=max_segments, use_language_ids=False)


def train(name: str, mem_len: int, documents, specials, args, seed: int) -> tuple[Any, dict[str, Any]]:
    """``args.steps`` AdamW steps; batch ``s`` is drawn and prepared under seed (seed, s), so
    every setting sees the same documents, windows and masks."""
    model = make_model(args, specials.vocab_size, seed).train()
    objective = objective_for(name, specials, model, args, mem_len, args.max_segments)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 30) * (1 - s / args.steps))
    tokens, started = 0, time.perf_counter()
    for step in range(args.steps):
        with seeded(seed * 1_000_003 + step):
            picks = torch.randint(len(documents), (args.batch_size,)).tolist()
            batch = objective.prepare([documents[i] for i in picks])
        loss = objective(model, batch)
        optimizer.zero_grad()
        loss.value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        tokens += int(batch["attention_mask"].sum())
    return model, {"train_tokens": tokens, "train_seconds": round(time.perf_counter() - started, 1),
                   "final_train_loss": round(float(loss.value.detach()), 4)}


def held_batches(name: str, documents, specials, model, args) -> list[dict[str, torch.Tensor]]:
    objective = objective_for(name, specials, model, args, 0, args.eval_max_segments)
    with seeded(args.seed + 12345):
        return [objective.prepare(documents[i:i + args.batch_size]) for i in range(0, len(documents), args.batch_size)]


def evaluate(name: str, model, batches, specials, args, mem_len: int) -> dict[str, float]:
    """Token-weighted held-out loss over every segment, and over the first segments alone."""
    objective = objective_for(name, specials, model, args, mem_len, args.eval_max_segments)
    model.eval()
    sums = {"all": [0.0, 0], "first": [0.0, 0]}
    with torch.no_grad():
        for batch in batches:
            first = {key: (value[:, :1] if value.dim() == 3 else value) for key, value in batch.items()}
            for part, b in (("all", batch), ("first", first)):
                n = int(b["labels"].ne(-100).sum())
                if n:
                    sums[part][0] += float(objective(model, b).value) * n
                    sums[part][1] += n
    model.train()
    total, count = sums["all"]
    first, first_count = sums["first"]
    later = (total - first) / max(count - first_count, 1)
    loss = total / count
    return {"held_loss": round(loss, 4), "perplexity": round(math.exp(loss), 2),
            "first_segment_loss": round(first / first_count, 4), "later_segments_loss": round(later, 4),
            "predicted_tokens": count, "later_predicted_tokens": count - first_count}


def summarise(per_seed: list[dict[str, Any]]) -> dict[str, Any]:
    """Every seed's numbers, and the mean of each over the seeds."""
    keys = [k for k, v in per_seed[0].items() if isinstance(v, (int, float))
            and k not in ("seed", "mem_len", "trained_with_mem_len")]
    mean = {k: round(sum(r[k] for r in per_seed) / len(per_seed), 4) for k in keys}
    return {"mem_len": per_seed[0]["mem_len"], "mean": mean, "per_seed": per_seed}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Train and score every (objective, setting); returns the report :func:`main` writes."""
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    train_text, held_text, description = read_documents(args)
    tokenizer = SentencePieceTokenizer.train({lang: [s for d in docs for s in d] for lang, docs in train_text.items()},
                                             vocab_size=args.vocab_size, model_type="unigram", seed=args.seed)
    specials = tokenizer.specials
    train_docs = tokenize(train_text, tokenizer)
    held_docs = [d for d in tokenize(held_text, tokenizer) if stream_length(d) > 2 * args.segment_length]
    results: dict[str, Any] = {}
    seeds = list(range(args.seed, args.seed + args.seeds))
    for name in args.objectives:
        batches = None
        runs: dict[str, list[dict[str, Any]]] = {}
        for seed in seeds:
            for setting, mem_len in (("with_memory", args.mem_len), ("without_memory", 0)):
                model, info = train(name, mem_len, train_docs, specials, args, seed)
                batches = batches if batches is not None else held_batches(name, held_docs, specials, model, args)
                runs.setdefault(setting, []).append({"seed": seed, "mem_len": mem_len, **info,
                                                     **evaluate(name, model, batches, specials, args, mem_len)})
                print(f"{name} seed {seed} {setting}: held-out loss {runs[setting][-1]['held_loss']:.4f} "
                      f"({info['train_seconds']} s training)", file=sys.stderr, flush=True)
                if mem_len and args.eval_mem_len != mem_len:
                    runs.setdefault(f"with_memory_eval_mem_len_{args.eval_mem_len}", []).append({
                        "seed": seed, "mem_len": args.eval_mem_len, "trained_with_mem_len": mem_len,
                        **evaluate(name, model, batches, specials, args, args.eval_mem_len)})
        results[name] = {setting: summarise(per_seed) for setting, per_seed in runs.items()}
        gains = [b["held_loss"] - a["held_loss"] for a, b in zip(runs["with_memory"], runs["without_memory"])]
        results[name]["memory_gain"] = {"per_seed": [round(g, 4) for g in gains],
                                        "mean": round(sum(gains) / len(gains), 4),
                                        "seeds_with_lower_loss": sum(g > 0 for g in gains)}
    protocol = {
        "data": description, "train_documents": len(train_docs), "held_out_documents": len(held_docs),
        "train_document_tokens": sum(stream_length(d) for d in train_docs),
        "held_out_document_tokens": sum(stream_length(d) for d in held_docs),
        "held_out_rule": f"held-out documents longer than 2 segments, whole or a window of "
                         f"{args.eval_max_segments} segments",
        "model": "transformer_xl_tiny", "hidden_size": args.hidden_size, "layers": args.layers,
        "tokenizer": f"sentencepiece unigram, {args.vocab_size} pieces, trained on the training documents",
        "steps": args.steps, "batch_documents": args.batch_size, "segment_length": args.segment_length,
        "max_segments": args.max_segments, "lr": args.lr, "dropout": args.dropout, "seeds": seeds,
        "threads": args.threads, "torch": torch.__version__,
    }
    return {"protocol": protocol, "results": results, "seconds": round(time.perf_counter() - started, 1)}


def markdown(report: dict[str, Any]) -> str:
    p = report["protocol"]
    lines = ["# Long documents: Transformer-XL's memory vs. none, at equal tokens and steps", "",
             f"{p['data']}; {p['train_documents']} training documents ({p['train_document_tokens']} tokens), "
             f"{p['held_out_documents']} held-out documents ({p['held_out_document_tokens']} tokens, "
             f"{p['held_out_rule']}). {p['model']} (hidden {p['hidden_size']}, {p['layers']} layers), "
             f"{p['steps']} steps of {p['batch_documents']} documents, segments of {p['segment_length']}, "
             f"training seeds {p.get('seeds', [p.get('seed')])} (initialisation and batch order; both settings of a "
             f"seed see the same batches). Perplexity = exp(held-out loss) per sub-word (masked LM: over the masked "
             f"tokens). "
             f"Losses are means over the seeds; *per seed* lists each seed's held-out loss.", "",
             "| objective | setting | mem_len | train tokens | held-out loss | perplexity | first segment | "
             "later segments | held-out loss per seed |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for name, settings in report["results"].items():
        for setting, r in settings.items():
            if setting == "memory_gain":
                continue
            m = r.get("mean", r)  # a one-seed run (before --seeds) holds its figures at the top
            per_seed = ", ".join(f"{x['held_loss']:.4f}" for x in r.get("per_seed", [r]))
            tokens = f"{m['train_tokens']:.0f}" if "train_tokens" in m else "(same model)"
            lines.append(f"| {name} | {setting} | {r['mem_len']} | {tokens} | "
                         f"{m['held_loss']:.4f} | {m['perplexity']:.2f} | {m['first_segment_loss']:.4f} | "
                         f"{m['later_segments_loss']:.4f} | {per_seed} |")
    lines += ["", "Memory gain (held-out loss without memory − with memory; > 0: the memory helps):", ""]
    for name, settings in report["results"].items():
        if "memory_gain" not in settings:
            continue
        g = settings["memory_gain"]
        per_seed = ", ".join(f"{x:+.4f}" for x in g["per_seed"])
        lines.append(f"- {name}: mean {g['mean']:+.4f}; per seed {per_seed}; "
                     f"lower with memory on {g['seeds_with_lower_loss']} of {len(g['per_seed'])} seeds")
    lines += ["", f"Total time {report['seconds']} s on {p['threads']} threads."]
    return "\n".join(lines) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    args = parser().parse_args(argv)
    report = run(args)
    out = write_results(args.out, report, markdown, "long_documents")
    print(markdown(report))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
