"""``babelzoo kb eval`` and ``babelzoo kb predict``: a link-prediction model (or a text encoder)
ranking a graph's entities, and the combinations ``kb eval`` fits on the valid split.

    babelzoo kb eval --model runs/kgc/model --kg ../shared/data/wn18rr --split test --out runs/kg/kgc.json
    babelzoo kb eval --model runs/kgc/model --ensemble runs/complex/model --names --kg ../shared/data/wn18rr

``--ensemble DIR`` adds the ranker saved in ``DIR`` (a ComplEx or RotatE of ``babelzoo kb train-kge
--out``, another recipe's model) to ``--model``'s, the two standardised scores weighed by the weight
with the best valid MRR (:func:`~babelzoo.knowledge.text_kge.fit_ensemble`); ``--names``
re-ranks by the words of the entity texts, its weights per relation fitted on valid
(:func:`~babelzoo.knowledge.name_match.fit_name_matches`). Both are chosen on the valid split and
never see the split they are judged on. ``kb predict`` takes both options too, and answers with
the combination fitted the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..errors import UsageError
from ..registry import choices_hint, close_matches

RANKS = "link prediction ranks"


def _load(name: str):
    from .base import load_kb

    return load_kb(name)


def text_ranker(model_source: str, kg: str, batch_size: int = 128, kb=None):
    """A ranker of the graph ``kg``'s entities: the scorer a link-prediction recipe or
    ``train-kge --out`` saved in the folder ``model_source`` (it holds ``kge.json``:
    :class:`~babelzoo.knowledge.text_kge.GraphRanker`), else a
    :class:`~babelzoo.knowledge.text_link.TextLinkPredictor` of the text model ``model_source`` (a
    model folder, or a zoo name loaded with its pretrained weights). A model trained for link
    prediction reads the graph in the text format it learnt, and only the graph it learnt."""
    from pathlib import Path

    from .._files import read_json_object
    from .kge import LinkPredictionData
    from .text_link import TextFormat, TextLinkPredictor

    kb = kb if kb is not None else _load(kg)
    data = LinkPredictionData.from_kb(kb)
    if (Path(model_source) / "kge.json").is_file():  # a scorer over the graph's entities (text_kge)
        from .base import KBError
        from .text_kge import GraphRanker

        try:
            return GraphRanker.from_folder(model_source, kb, data), kb, Path(model_source)
        except KBError as err:
            raise UsageError(f"--model {model_source}: {err}") from None
    record_file = Path(model_source) / "link_prediction.json"
    record = read_json_object(record_file, UsageError) if record_file.is_file() else None
    text = TextFormat(**record["text"]) if record else TextFormat()
    from .text_kge import text_model

    ranker = TextLinkPredictor(text_model(model_source), kb, data, text, batch_size=batch_size)
    if record and record.get("graph_sha256") != ranker.digest:
        raise UsageError(f"--model {model_source} was trained on the graph {record.get('kg')!r} "
                         f"({record.get('entities')} entities), and --kg {kg} is another ({data.num_entities} "
                         "entities, other texts or relations): rank a graph with a model trained on it")
    return ranker, kb, Path(model_source)


def resolve(kb, value: str, kind: str) -> str:
    """An entity or relation of ``kb`` named by its id or, failing that, by its exact text."""
    ids = kb.entities() if kind == "entity" else kb.relations()
    value = value.strip()  # a name copied from a file with CRLF line ends carries a '\r'
    if value in set(ids):
        return value
    label = kb.label if kind == "entity" else kb.relation_label
    found = [i for i in ids if label(i) == value]
    if len(found) == 1:
        return found[0]
    if found:
        raise UsageError(f"{kind} {value!r} names {len(found)} {kind}s ({', '.join(found[:5])}); give the id")
    names = list(dict.fromkeys([*ids, *(text for text in map(label, ids) if text)]))  # an id may be its own text
    if kind == "relation":
        hint = choices_hint(value, names, what="relation", listing="its relations", limit=20)
    else:  # too many to list: the close ones only
        close = close_matches(value, names)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
    raise UsageError(f"unknown {kind} {value!r}: no id or text of the graph matches it{hint}")


def fitted_flags(args: argparse.Namespace) -> list[str]:
    """The options given whose weights are fitted on the valid split."""
    return [flag for flag, given in (("--ensemble", args.ensemble), ("--names", args.names)) if given]


def require_valid(model, args: argparse.Namespace) -> None:
    """Refuse ``--ensemble``/``--names`` on a graph with no valid split to fit them on."""
    fitted = fitted_flags(args)
    if fitted and not len(model.data.split("valid")):
        raise UsageError(f"--kg {args.kg} has no 'valid' triples, on which {' and '.join(fitted)} choose their weights")


def combined(ranker, kb, args: argparse.Namespace, say=None):
    """``ranker`` with ``--ensemble``'s ranker added and re-ranked by ``--names``, each weight
    chosen on the valid split: (the ranker, what was chosen, for the record)."""
    from .text_kge import fit_ensemble

    data, chosen = ranker.data, {}
    if args.ensemble:
        other, _, _ = text_ranker(args.ensemble, args.kg, args.batch_size, kb)
        ranker, weight, tried = fit_ensemble(ranker, other, data)
        chosen["ensemble"] = {"with": str(args.ensemble), "model_weight": weight,
                              "valid_mrr_by_weight": {f"{w:g}": round(m, 6) for w, m in tried}}
        if say:
            say(f"ensemble: --model weighs {weight:g}, --ensemble {1 - weight:g} "
                f"(valid MRR {dict(tried)[weight]:.4f})")
    if args.names:
        from .name_match import FEATURES, TextFeatures, fit_name_matches

        features = TextFeatures.from_kb(kb, data)
        ranker, weights, valid = fit_name_matches(ranker, data, features)
        chosen["names"] = {"features": list(FEATURES), "matches": features.matches.num_matches,
                           "valid_mrr": round(valid, 6),
                           "weights": {f"{side} {'(others)' if r is None else data.relations[r]}": list(w)
                                       for (side, r), w in weights.items()}}
        if say:
            say(f"names: {features.matches.num_matches:,} name matches, weights for "
                f"{len(weights)} (side, relation) pairs (valid MRR {valid:.4f})")
    return ranker, chosen


def eval_main(args: argparse.Namespace, out=None) -> dict:
    """Filtered link prediction of a text model (with ``--ensemble`` and ``--names``, of the
    combination fitted on valid) on ``--kg``'s ``--split``: print the metrics and write them with
    the protocol to ``--out``."""
    from .._files import owned_file, write_owned_file
    from .link_prediction import split_metrics, split_ranks

    out = out or sys.stdout
    ranks_file = args.ranks
    fitted = fitted_flags(args)
    if fitted and args.split != "test":
        raise UsageError(f"{' and '.join(fitted)} choose their weights on the valid split: judge them on "
                         f"--split test, not {args.split}")
    for flag, path, what in (("--out", args.out, "link prediction metrics"), ("--ranks", ranks_file, RANKS)):
        if path and os.path.exists(path) and not owned_file(path, what):
            raise UsageError(f"{flag} {path}: a file babelzoo did not write; nothing was changed: choose another name")
    start = time.process_time()
    model, kb, _ = text_ranker(args.model, args.kg, args.batch_size)
    if not len(model.data.split(args.split)):
        raise UsageError(f"--kg {args.kg} has no {args.split!r} triples")
    require_valid(model, args)
    ranker, chosen = combined(model, kb, args, say=lambda line: print(line, file=out))
    tails, heads = split_ranks(ranker, model.data, args.split)
    metrics = split_metrics(tails, heads)
    seconds = time.process_time() - start
    what = " + ".join([str(args.model), *([str(args.ensemble)] if args.ensemble else [])])
    what += ", re-ranked by names" if args.names else ""
    print(f"{what} on {args.kg} ({args.split}, {len(model.data.split(args.split)):,} triples, "
          f"{model.data.num_entities:,} candidates): filtered MRR {metrics['mrr']:.4f}, Hits@1 "
          f"{metrics['hits@1']:.4f}, Hits@3 {metrics['hits@3']:.4f}, Hits@10 {metrics['hits@10']:.4f}; "
          f"{seconds:.0f} CPU s", file=out)
    result = {"model": str(args.model), "kg": str(args.kg), "split": args.split,
              "protocol": "filtered ranking over every entity, head and tail prediction averaged, ties at the "
                          "mean rank; entities and questions read as text (see text)"
                          + ("; the combination's weights chosen on the valid split" if chosen else ""),
              **model.settings(), **({"combined": chosen} if chosen else {}),
              "metrics": {k: round(v, 6) for k, v in metrics.items()}, "cpu_seconds": seconds}
    if args.out:
        text = json.dumps(result, indent=2, ensure_ascii=False) + "\n"

        def write(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(text)

        write_owned_file(args.out, write, "link prediction metrics")
        print(f"wrote {args.out}", file=out)
    if ranks_file:
        data = model.data
        rows = "".join(f"{data.entities[h]}\t{data.relations[r]}\t{data.entities[t]}\t{tail:g}\t{head:g}\n"
                       for (h, r, t), tail, head in zip(data.split(args.split).tolist(), tails.tolist(), heads.tolist()))

        def write_ranks(tmp: str) -> None:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write("head\trelation\ttail\ttail_rank\thead_rank\n" + rows)

        write_owned_file(ranks_file, write_ranks, RANKS)
        print(f"wrote {ranks_file}", file=out)
    return result


def predict_main(args: argparse.Namespace, out=None) -> list:
    """The ``--k`` best answers to (head, relation, ?), or (?, relation, tail) with ``--inverse``;
    with ``--ensemble`` or ``--names``, of the combination fitted on the valid split, as ``kb eval``
    fits it."""
    out = out or sys.stdout
    kb = _load(args.kg)
    entity, relation = resolve(kb, args.entity, "entity"), resolve(kb, args.relation, "relation")
    model, _, _ = text_ranker(args.model, args.kg, args.batch_size, kb)
    if fitted_flags(args):
        require_valid(model, args)
        ranker, _ = combined(model, kb, args, say=lambda line: print(line, file=out))
        from .text_link import top_answers

        best = top_answers(ranker, model.data, model.entity_texts, entity, relation, args.k, inverse=args.inverse)
    else:
        best = model.predict(entity, relation, args.k, inverse=args.inverse)
    question = f"(?, {relation}, {entity})" if args.inverse else f"({entity}, {relation}, ?)"
    print(f"{question}  {model.entity_texts[model.data.entities.index(entity)]}", file=out)
    for rank, (ident, text, score) in enumerate(best, 1):
        print(f"{rank:3d}  {score:.4f}  {ident}  {text}", file=out)
    return best
