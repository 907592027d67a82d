"""``babelzoo kb``: inspect knowledge bases, link text, train KG embeddings.

    babelzoo kb info cldr                              # counts, entity types, relations, languages
    babelzoo kb info path/to/folder --top 10
    babelzoo kb link --kb cldr --lang fr "Le Japon utilise le yen."
    babelzoo kb link --kb cldr --lang ja --tokens 日本 の 通貨 は 円
    babelzoo kb train-kge --data ../shared/data/codex-s --model complex --dim 256 --out kge/
    babelzoo kb eval --model multilingual_e5_small --kg ../shared/data/wn18rr --split test --out runs/kg/e5.json
    babelzoo kb eval --model runs/kgc/model --ensemble runs/complex/model --names --kg ../shared/data/wn18rr
    babelzoo kb predict --model runs/kgc/model --kg ../shared/data/wn18rr 06845599 _hypernym
    babelzoo kb predict --model runs/kgc/model --ensemble runs/complex/model --names --kg wn18rr/ 06845599 _hypernym
    babelzoo kb align --kb ../shared/data/dbp5l/el --kb ../shared/data/dbp5l/en --seeds seeds.tsv --out pairs.tsv

A knowledge base is a registered name (``cldr``, ``codex-s``, an installed plug-in: see
``babelzoo.knowledge.base``) or a file or folder in one of the layouts of
:mod:`babelzoo.knowledge.kb_layouts`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from typing import Annotated, Optional, Sequence

from ..errors import ArgumentParser, UsageError, command
from ..options import option
from ..typed import Range, Seed
from .link_cli import _load

# the numbers the options take, refused by the parser otherwise (before a knowledge base is read)
COUNT = option(Annotated[int, Range(1)])
NON_NEGATIVE_INT = option(Annotated[int, Range(0)])
POSITIVE = option(Annotated[float, Range(0, low_open=True)])
NON_NEGATIVE = option(Annotated[float, Range(0)])
FRACTION = option(Annotated[float, Range(0, 1, high_open=True)])


def language_counts(kb) -> Optional[dict[str, tuple[int, int]]]:
    """Language → (entities with a name in it, names in it); None when the backend cannot list
    its languages."""
    if hasattr(kb, "label_counts"):
        return kb.label_counts()
    if not hasattr(kb, "languages"):
        return None
    out = {}
    entities = kb.entities()
    for lang in kb.languages():
        named = [len(kb.labels(e, lang)) for e in entities]
        out[lang] = (sum(1 for n in named if n), sum(named))
    return out


def info(kb, top: int = 25, out=None) -> None:
    """Print counts of entities, relations and triples; entity types; triples per relation;
    splits; languages with their numbers of named entities and names (the ``top`` largest,
    0 = all)."""
    out = out or sys.stdout
    entities, relations, triples = kb.entities(), kb.relations(), kb.triples()
    name = getattr(kb, "name", type(kb).__name__)
    print(f"{name}: {len(entities):,} entities, {len(relations):,} relations, {len(triples):,} triples", file=out)
    if hasattr(kb, "entity_type"):
        types = Counter(kb.entity_type(e) or "(untyped)" for e in entities)
        print("entity types: " + ", ".join(f"{t} {n:,}" for t, n in types.most_common()), file=out)
    per_relation = Counter(t.relation for t in triples)
    print("triples per relation: " + ", ".join(f"{r} {per_relation[r]:,}" for r in relations), file=out)
    splits = getattr(kb, "splits", None)
    if splits:
        print("splits: " + ", ".join(f"{s} {len(v):,}" for s, v in splits.items()), file=out)
    counts = language_counts(kb)
    if counts is None:
        print("languages: not listed by this backend", file=out)
        return
    ranked = sorted(counts.items(), key=lambda item: (-item[1][0], item[0]))
    shown = ranked if top <= 0 else ranked[:top]
    more = f" ({len(ranked) - len(shown)} more: --top 0 lists all)" if len(shown) < len(ranked) else ""
    print(f"languages: {len(ranked)}{more}", file=out)
    print(f"  {'language':10s} {'entities':>9s} {'names':>9s}", file=out)
    for lang, (named, names) in shown:
        print(f"  {lang:10s} {named:9,d} {names:9,d}", file=out)


def link(kb, texts: Sequence[str], lang: Optional[str], tokens: bool = False, as_json: bool = False,
         out=None) -> int:
    """Link ``texts`` (or, with ``tokens``, the one tokenised sentence ``texts``) and print each
    mention: span, text, entity id, its label in ``lang`` and in English, other candidates.
    Returns the number of mentions."""
    from .linker import EntityLinker

    out = out or sys.stdout
    linker = EntityLinker.from_kb(kb, None if lang is None else [lang])
    batch = [list(texts)] if tokens else list(texts)
    found = 0
    for item, mentions in zip(batch, linker(batch, lang)):
        found += len(mentions)
        text = " ".join(item) if tokens else item
        if as_json:
            print(json.dumps({"text": text, "mentions": [
                {"start": m.start, "end": m.end, "text": m.text, "entity": m.entity,
                 "label": _label(kb, m.entity, lang), "candidates": list(m.candidates)} for m in mentions]},
                ensure_ascii=False), file=out)
            continue
        print(text, file=out)
        if not mentions:
            print("  (no mention)", file=out)
        for m in mentions:
            labels = _label(kb, m.entity, lang)
            english = _label(kb, m.entity, "en")
            shown = labels if english == labels else f"{labels} / {english}"
            others = ""
            if len(m.candidates) > 1:
                more = ", ..." if len(m.candidates) > 4 else ""
                others = f"  (+{len(m.candidates) - 1}: {', '.join(m.candidates[1:4])}{more})"
            print(f"  {m.start}-{m.end}\t{m.text}\t{m.entity}\t{shown}{others}", file=out)
    return found


def _label(kb, entity: str, lang: Optional[str]) -> str:
    if hasattr(kb, "label"):
        return kb.label(entity, lang or "en")
    names = kb.labels(entity, lang) or kb.labels(entity, "en") or kb.labels(entity)
    return names[0] if names else entity


def train_kge_main(args: argparse.Namespace, out=None) -> dict:
    """Train a KG embedding model on a knowledge base with train/valid/test splits, report
    filtered test metrics and (``--out``) save it with :func:`babelzoo.knowledge.kge.save_kge`."""
    import time

    import torch

    from .._files import check_replaceable
    from .kge import LinkPredictionData, create_kge, save_kge
    from .link_prediction import KGETrainConfig, evaluate, train_kge

    out = out or sys.stdout
    if args.model == "text_complex":
        raise UsageError("train-kge: text_complex reads every entity's text with a sentence encoder; train it with "
                         "a link-prediction recipe: babelzoo pretrain --config kgc_e5_small --set kg.path=DIR")
    if args.out:  # refused now, not after training
        check_replaceable(args.out, "KG embedding")
    kb = _load(args.data)
    data = LinkPredictionData.from_kb(kb)
    if not len(data.valid) or not len(data.test):
        raise UsageError(f"train-kge: {args.data} has no valid/test split (train.*, valid.*, test.* "
                         f"files, CoDEx or OpenKE layouts): link prediction needs them for model selection and "
                         f"evaluation")
    print(f"{args.data}: {data.num_entities:,} entities, {data.num_relations} relations, "
          f"{len(data.train):,}/{len(data.valid):,}/{len(data.test):,} train/valid/test triples", file=out)
    kwargs = {"reciprocal": args.reciprocal}
    if args.gamma is not None:
        kwargs["gamma"] = args.gamma
    try:
        config = KGETrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, loss=args.loss,
                                negatives=args.negatives, label_smoothing=args.label_smoothing,
                                regularizer=args.regularizer, regularization_weight=args.regularization_weight,
                                eval_every=args.eval_every, patience=args.patience, seed=args.seed,
                                max_seconds=None if args.max_minutes is None else args.max_minutes * 60, clock="cpu")
        torch.manual_seed(args.seed)
        model = create_kge(args.model, data.num_entities, data.num_relations, args.dim, **kwargs)
    except TypeError as err:  # an option the chosen model does not take
        raise UsageError(f"train-kge: {err}") from None

    def log(row: dict) -> None:
        print(f"  epoch {row['epoch']:4g}  loss {row['loss']:.4f}  valid MRR {row['mrr']:.4f}  "
              f"Hits@10 {row['hits@10']:.4f}  {row['seconds']:.0f} CPU s", file=out, flush=True)

    start = time.process_time()
    summary = train_kge(model, data, config, log=log)
    test = evaluate(model, data, "test")
    print(f"{args.model}: best epoch {summary['best_epoch']} (valid MRR {summary['valid']['mrr']:.4f}); test "
          f"filtered MRR {test['mrr']:.4f}, Hits@1 {test['hits@1']:.4f}, Hits@3 {test['hits@3']:.4f}, "
          f"Hits@10 {test['hits@10']:.4f}; {time.process_time() - start:.0f} CPU s", file=out)
    if args.out:
        save_kge(model, data.entities, data.relations, args.out, data=str(args.data), train=vars(config),
                 best_epoch=summary["best_epoch"], valid={k: round(v, 4) for k, v in summary["valid"].items()},
                 test={k: round(v, 4) for k, v in test.items()})
        print(f"saved to {args.out}", file=out)
    return {"summary": summary, "test": test}


# the names the registries hold (checked against them by tests/test_cli.py), listed here so that
# --help does not import torch
KGE_NAMES = ("transe", "distmult", "complex", "text_complex", "aligned_text_complex", "rotate")
LOSS_NAMES = ("self_adversarial", "uniform", "softmax", "1vsall")


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(prog="babelzoo kb", description="Inspect knowledge bases, link text to their "
                                                            "entities, train KG embeddings.")
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    p = sub.add_parser("info", help="counts, entity types, relations and languages of a knowledge base")
    p.add_argument("kb", metavar="PATH_OR_NAME", help="a registered knowledge base (babelzoo list kbs) or a KB file")
    p.add_argument("--top", type=NON_NEGATIVE_INT, default=25, help="languages to list, largest first (0 = all)")
    p = sub.add_parser("link", help="link mentions in text to entities")
    p.add_argument("--kb", required=True, metavar="PATH_OR_NAME",
                   help="a registered knowledge base (babelzoo list kbs) or a KB file")
    p.add_argument("--lang", default=None, help="language of the text (default: names of every language)")
    p.add_argument("--tokens", action="store_true", help="the arguments are the tokens of one sentence")
    p.add_argument("--json", action="store_true", help="one JSON object per text")
    p.add_argument("text", nargs="+", help="texts to link (or, with --tokens, the tokens of one sentence)")
    p = sub.add_parser("train-kge", help="train a KG embedding model and report filtered link prediction")
    p.add_argument("--data", required=True, metavar="PATH_OR_NAME", help="a KB with train/valid/test splits")
    p.add_argument("--model", required=True, choices=KGE_NAMES, help="KG embedding model")
    p.add_argument("--dim", type=COUNT, default=128, help="embedding size (complex models: complex dimensions)")
    p.add_argument("--epochs", type=COUNT, default=100, help="passes over the training triples (default 100)")
    p.add_argument("--batch-size", type=COUNT, default=512, help="triples per batch (default 512)")
    p.add_argument("--lr", type=POSITIVE, default=3e-3, help="Adam learning rate (default 3e-3)")
    p.add_argument("--loss", choices=LOSS_NAMES, default="1vsall",
                   help="1vsall: every entity scored (default); the others sample --negatives")
    p.add_argument("--negatives", type=COUNT, default=64, help="negatives per triple (sampling losses)")
    p.add_argument("--label-smoothing", type=FRACTION, default=0.0, help="label smoothing of the 1vsall loss")
    p.add_argument("--regularizer", choices=("l2", "n3"), default=None,
                   help="embedding regularizer (N3: Lacroix et al., 2018)")
    p.add_argument("--regularization-weight", type=NON_NEGATIVE, default=0.0, help="weight of the regularizer")
    p.add_argument("--reciprocal", action=argparse.BooleanOptionalAction, default=True,
                   help="inverse relations for head prediction (Lacroix et al., 2018)")
    p.add_argument("--gamma", type=option(float), default=None, help="margin of TransE/RotatE scores")
    p.add_argument("--eval-every", type=COUNT, default=5, help="epochs between validation rankings (default 5)")
    p.add_argument("--patience", type=NON_NEGATIVE_INT, default=4,
                   help="stop after N validations without a better MRR (default 4)")
    p.add_argument("--max-minutes", type=POSITIVE, default=None, help="training budget in CPU minutes")
    p.add_argument("--seed", type=option(Seed), default=0, help="random seed (default 0)")
    p.add_argument("--out", default=None, help="folder for kge.safetensors + kge.json")
    for action, text in (("eval", "filtered link prediction of a text model on a graph's split"),
                         ("predict", "the best answers to a question (head, relation, ?) by a text model")):
        p = sub.add_parser(action, help=text)
        p.add_argument("--model", required=True, help="a model folder, or a zoo name with pretrained weights")
        p.add_argument("--kg", required=True, metavar="PATH_OR_NAME", help="a knowledge graph with entity text")
        p.add_argument("--batch-size", type=COUNT, default=128, help="texts per encoder batch (default 128)")
        if action == "eval":
            p.add_argument("--split", choices=("train", "valid", "test"), default="test")
            p.add_argument("--out", default=None, help="JSON file for the metrics and their protocol")
            p.add_argument("--ranks", default=None, metavar="TSV",
                           help="TSV file of every triple's filtered ranks: head, relation, tail, the tail's rank "
                                "among the answers to (head, relation, ?), the head's among those to (?, relation, tail)")
        else:
            p.add_argument("entity", help="the known entity: an id or its exact text")
            p.add_argument("relation", help="the relation: an id or its words")
            p.add_argument("--k", type=COUNT, default=10, help="answers to print (default 10)")
            p.add_argument("--inverse", action="store_true", help="ask (?, relation, entity) instead")
        p.add_argument("--ensemble", default=None, metavar="DIR",
                       help="add the ranker saved in DIR (train-kge --out, a recipe's model) to --model's, "
                            "the weight of each chosen on the valid split")
        p.add_argument("--names", action="store_true",
                       help="re-rank by the entity names each entity's text holds, and the words two texts "
                            "share, weights per relation chosen on the valid split")
    p = sub.add_parser("align", help="align the entities of two graphs in two languages; write the pairs")
    p.add_argument("--kb", required=True, action="append", metavar="PATH_OR_NAME",
                   help="a graph; given twice: the graph aligned (A) and the graph aligned to (B)")
    p.add_argument("--seeds", default=None, help="known pairs, 'id in A<TAB>id in B' a line")
    p.add_argument("--out", required=True, help="TSV file for the pairs: id in A, id in B, score, texts")
    p.add_argument("--model", default="multilingual_e5_small",
                   help="the multilingual encoder of entity names: a zoo name or a model folder")
    p.add_argument("--eval", default=None, metavar="GOLD",
                   help="gold pairs: print Hits@1/Hits@10/MRR of the pairs that are not seeds")
    p.add_argument("--one-to-one", action=argparse.BooleanOptionalAction, default=True,
                   help="each entity of B matched at most once (default: yes)")
    p.add_argument("--batch-size", type=COUNT, default=256, help="names per encoder batch (default 256)")
    p.add_argument("--metrics", default=None, help="JSON file for --eval's metrics and the settings chosen")
    p.add_argument("--cache-dir", default=None, help="keep the name vectors here and reuse them (same model, texts)")
    return parser


def name_vectors(model_source: str, kbs, batch_size: int, cache_dir=None) -> list:
    """Each graph's entity-name vectors (:func:`~babelzoo.knowledge.align.encode_entities`),
    read from ``cache_dir`` when it holds those of the same model (its name or folder and its
    weights) and texts, else encoded (the model loaded only then) and kept there."""
    import hashlib
    from pathlib import Path

    import numpy as np

    from .align import encode_entities

    from .text_kge import text_model, weights_digest

    model, out = None, []
    weights = weights_digest(model_source) or ""  # a folder trained again under the same path is encoded again
    for kb in kbs:
        digest = hashlib.sha256(model_source.encode("utf-8") + b"\0" + weights.encode("ascii"))
        for entity in kb.entities():
            digest.update(b"\0" + entity.encode("utf-8") + b"\t" + kb.entity_text(entity).encode("utf-8"))
        path = Path(cache_dir) / f"names-{digest.hexdigest()[:24]}.npy" if cache_dir else None
        if path is not None and path.is_file():
            out.append(np.load(path, allow_pickle=False))
            continue
        model = model or text_model(model_source)
        out.append(encode_entities(model, kb, batch_size=batch_size))
        if path is not None:
            from .._files import atomic_write

            def save(tmp: str, vectors=out[-1]) -> None:
                with open(tmp, "wb") as handle:
                    np.save(handle, vectors, allow_pickle=False)

            atomic_write(path, save)
    return out


def align_main(args: argparse.Namespace, out=None) -> dict:
    """``babelzoo kb align``: names through the encoder, structure through the graphs and seeds,
    settings chosen on held-out seeds (:mod:`babelzoo.knowledge.align`); write the pairs."""
    import time
    from pathlib import Path

    from .._files import owned_file, write_owned_file
    from .align import EntityAligner, read_pairs

    out = out or sys.stdout
    if len(args.kb) != 2:
        raise UsageError(f"--kb: give exactly two graphs (A, then B), got {len(args.kb)}")
    for path, what in ((args.out, "entity alignment"), (args.metrics, "entity alignment metrics")):
        if path and os.path.exists(path) and not owned_file(path, what):
            raise UsageError(f"{path}: a file babelzoo did not write; nothing was changed: choose another name")
    start = time.process_time()
    kb_a, kb_b = _load(args.kb[0]), _load(args.kb[1])
    seeds = read_pairs(args.seeds, kb_a, kb_b) if args.seeds else []
    gold = read_pairs(args.eval, kb_a, kb_b) if args.eval else []
    vectors = name_vectors(args.model, (kb_a, kb_b), args.batch_size, args.cache_dir)
    print(f"{len(kb_a.entities()):,} and {len(kb_b.entities()):,} entities, {len(seeds):,} seed pairs; names "
          f"encoded with {args.model}", file=out)
    aligner = EntityAligner(kb_a, kb_b, *vectors, seeds, log=lambda line: print(line, file=out)).fit()
    pairs = aligner.align(one_to_one=args.one_to_one)
    lines = "".join(f"{a}\t{b}\t{score:.6f}\t{kb_a.entity_text(a)}\t{kb_b.entity_text(b)}\n" for a, b, score in pairs)
    write_owned_file(args.out, lambda tmp: Path(tmp).write_text(lines, encoding="utf-8"), "entity alignment")
    print(f"wrote {len(pairs):,} pairs to {args.out}", file=out)
    result = {"kb": args.kb, "seeds": len(seeds), "model": args.model, "settings": aligner.choice,
              "one_to_one": args.one_to_one, "pairs_written": len(pairs)}
    if gold:
        seeded = set(seeds)
        test = [p for p in gold if p not in seeded]
        metrics = aligner.evaluate(test)
        print(f"against {args.eval} ({len(test):,} pairs that are not seeds, each ranked among their "
              f"{len(test):,} targets): Hits@1 {metrics['hits@1']:.4f}, Hits@10 {metrics['hits@10']:.4f}, MRR "
              f"{metrics['mrr']:.4f}; one-to-one Hits@1 {metrics['assigned_hits@1']:.4f}", file=out)
        result["metrics"] = metrics
    result["cpu_seconds"] = time.process_time() - start
    if args.metrics:
        text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"
        write_owned_file(args.metrics, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"),
                         "entity alignment metrics")
    return result


@command("kb")
def kb_main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.action == "info":
        info(_load(args.kb), args.top)
        return 0
    if args.action == "link":
        link(_load(args.kb), args.text, args.lang, args.tokens, args.json)
        return 0
    if args.action in ("eval", "predict"):
        from .link_cli import eval_main, predict_main

        (eval_main if args.action == "eval" else predict_main)(args)
        return 0
    if args.action == "align":
        align_main(args)
        return 0
    train_kge_main(args)
    return 0


if __name__ == "__main__":
    from ..errors import cli_logging
    from .cli import kb_main  # this module under its package name, whose logger cli_logging shows

    with cli_logging():
        sys.exit(kb_main())
