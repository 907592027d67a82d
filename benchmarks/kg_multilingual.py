"""DBP-5L: link prediction in five DBpedia graphs (Greek, English, Spanish, French, Japanese) in
their own languages, alone and together, and cross-lingual entity alignment between them.

Link prediction, per language (the shipped ``kgc_e5_small`` recipe run as users run it, ``kg.path``
set to ``DBP5L/LANG``; every arm under the same CPU budget):

- ``structure``: ComplEx (reciprocal, N3) on the graph alone;
- ``text_only``: the recipe's scorer over the frozen e5 vectors of the entities' names (e = P·x);
- ``text_structure``: the recipe as shipped (e = P·x + s);
- ``together``: the five ``text_structure`` models combined through the seed alignments
  (:class:`babelzoo.knowledge.multilingual.AlignedEnsemble`, KEnS's ensemble inference): each
  graph's question is also asked of the others that know its entity; the weight is chosen on the
  first 2,000 triples of the asking graph's valid split. Each scorer scores every entity directly
  rather than through its memory search (the same ranks, ``tests/knowledge/test_text_kge.py``).
- ``joint``: one model over the five graphs, the shipped ``kgc_dbp5l_joint`` recipe (the
  ``text_structure`` scorer with the structure vector shared by the entities every seed alignment
  ties), under the five ``text_structure`` budgets together; each graph ranked among its own
  entities (``babelzoo kb eval --model runs/joint/model --kg DBP5L/LANG``).

``--reuse FILE`` carries the arms not run now from an earlier results file (each such row keeps
that run's commit and date, and the Markdown says so).

Two protocols, both on the test split: babelzoo's (filtered over every known triple, head and tail
prediction averaged, ties at the mean rank; as ``babelzoo kb eval``) and KEnS's (tail prediction
(h, r, ?) only, filtered by the training triples only, as its ``test.py`` does).

Entity alignment, per pair of graphs: the seed pairs split 30% / 70% (seeded shuffle); ``babelzoo
kb align`` with the 30% as ``--seeds`` and all pairs as ``--eval`` (so the 70% are scored), as
users run it.

    python -m benchmarks run kg_multilingual --data-dir ../shared/data/dbp5l
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from babelzoo._provenance import portable_text  # noqa: E402
from benchmarks._results import shown_path, write_results  # noqa: E402
from benchmarks.kg_completion import cli, train_recipe  # noqa: E402

LANGS = ("el", "en", "es", "fr", "ja")
TRAINED = {  # arm: recipe overrides
    "text_structure": [],
    "structure": ["scorer.model=complex", "scorer.dim=128", "scorer.options={reciprocal: true}",
                  "train.regularizer=n3", "train.regularization_weight=0.005"],
    "text_only": ["scorer.options={dropout: 0.1, structure: false}"],
}
ARMS = (*TRAINED, "together", "joint")
VALID_LIMIT = 2000  # valid triples the ensemble weight is chosen on
# Numbers from secondary sources, not yet checked against the papers' tables: marked as such
SECONDARY = {
    "KEnS (Chen et al., Findings of EMNLP 2020)": ({"el": 27.5, "en": 14.4, "es": 25.2, "fr": 25.2, "ja": 32.9},
                                                   "best Hits@1 per language as transcribed by Papers with Code's "
                                                   "DBP-5L leaderboards (mirrored at wizwand.com; where two rows "
                                                   "differ, el 26.4 or 27.5, es 25.2 or 22.3, the higher is shown); "
                                                   "tail prediction, filtered by the training triples (its test.py)"),
    "SS-AGA (Huang et al., ACL 2022)": ({"el": 30.8, "ja": 34.6, "es": 25.5, "fr": 27.1, "en": 16.3},
                                        "Hits@1 as transcribed in github.com/RishiiGamer2201/research_kg "
                                        "docs/RESULTS_AND_INFERENCE.md (another transcription swaps es and fr); "
                                        "raw ranking, tail only (the authors' code)"),
}


def overrides_for(arm: str, lang: str, runs: Path, data: Path, minutes: float, epochs: int) -> list[str]:
    """The recipe's overrides for ``arm`` on graph ``lang``, within ``minutes`` of CPU time."""
    return [f"kg.path={data / lang}", f"kg.lang={lang}", f"output_dir={runs / f'{arm}_{lang}'}",
            f"cache_dir={runs / f'cache_{lang}'}", f"train.max_seconds={minutes * 60:g}", f"train.epochs={epochs}",
            *TRAINED[arm]]


def train_arm(arm: str, lang: str, runs: Path, data: Path, minutes: float, epochs: int) -> dict:
    return train_recipe(overrides_for(arm, lang, runs, data, minutes, epochs), f"{arm} {lang}")


def both_protocols(ranker, graph) -> dict[str, dict[str, float]]:
    """Test metrics under babelzoo's protocol and KEnS's (module docstring)."""
    from babelzoo.knowledge import evaluate
    from babelzoo.knowledge.link_prediction import KnownTriples

    empty = graph.test[:0]
    ours = evaluate(ranker, graph, "test", filters=KnownTriples(graph))
    kens = evaluate(ranker, graph, "test", filters=KnownTriples(dataclasses.replace(graph, valid=empty, test=empty)))
    return {"babelzoo": {k: round(ours[k], 6) for k in ("mrr", "hits@1", "hits@10")},
            "kens": {k: round(kens[f"tail_{k}"], 6) for k in ("mrr", "hits@1", "hits@10")}}


def link_prediction(args, arms: Sequence[str]) -> dict:
    from babelzoo.knowledge import LinkPredictionData, load_kb
    from babelzoo.knowledge.dbp5l import dbp5l_seeds
    from babelzoo.knowledge.multilingual import Counterpart, fit_aligned_ensemble
    from babelzoo.knowledge.text_kge import GraphRanker

    rows: dict[str, dict[str, Any]] = {lang: {} for lang in LANGS}
    kbs = {lang: load_kb(args.data_dir / lang) for lang in LANGS}
    graphs = {lang: LinkPredictionData.from_kb(kb) for lang, kb in kbs.items()}
    rankers: dict[tuple[str, str], Any] = {}
    for arm in TRAINED:
        if arm not in arms and not (arm == "text_structure" and "together" in arms):
            continue
        for lang in LANGS:
            minutes = args.minutes if arm == "text_structure" else args.ablation_minutes
            row = train_arm(arm, lang, args.runs, args.data_dir, minutes, args.epochs)
            start = time.process_time()
            rankers[arm, lang] = GraphRanker.from_folder(row["model"], kbs[lang], graphs[lang])
            row["test"] = both_protocols(rankers[arm, lang], graphs[lang])
            row["eval_cpu_seconds"] = round(time.process_time() - start, 1)
            rows[lang][arm] = row
            print(f"{arm} {lang}: {json.dumps(row['test'])}", flush=True)
    if "together" in arms:
        for lang in LANGS:  # the scorers score every entity directly: the memory's exact ranks, 8× faster here
            rankers["text_structure", lang].searches = False
        for lang in LANGS:
            start = time.process_time()
            counterparts = [Counterpart(rankers["text_structure", other], graphs[lang], graphs[other],
                                        dbp5l_seeds(args.data_dir, lang, other), other)
                            for other in LANGS if other != lang]
            sample = dataclasses.replace(graphs[lang], valid=graphs[lang].valid[:VALID_LIMIT])
            _, weight, tried = fit_aligned_ensemble(rankers["text_structure", lang], sample, counterparts)
            from babelzoo.knowledge.multilingual import AlignedEnsemble

            ensemble = AlignedEnsemble(rankers["text_structure", lang], graphs[lang], counterparts, weight)
            rows[lang]["together"] = {"weight": weight, "valid_mrr_by_weight": {f"{w:g}": round(m, 4) for w, m in tried},
                                      "aligned_entities": {c.name: int((c.entity >= 0).sum()) for c in counterparts},
                                      "test": both_protocols(ensemble, graphs[lang]),
                                      "eval_cpu_seconds": round(time.process_time() - start, 1)}
            print(f"together {lang}: weight {weight:g}, {json.dumps(rows[lang]['together']['test'])}", flush=True)
    if "joint" in arms:
        overrides = [f"kg.path={args.data_dir}", f"output_dir={args.runs / 'joint'}",
                     f"cache_dir={args.runs / 'cache_joint'}", f"train.max_seconds={args.joint_minutes * 60:g}"]
        row = train_recipe(overrides, "joint", "kgc_dbp5l_joint")
        seen = facts_elsewhere(args.data_dir, graphs)
        for lang in LANGS:
            start = time.process_time()
            ranker = GraphRanker.from_folder(row["model"], kbs[lang], graphs[lang])
            known = seen[lang]
            parts = {name: dataclasses.replace(graphs[lang], test=graphs[lang].test[mask])
                     for name, mask in (("known_elsewhere", known), ("new", ~known))}
            rows[lang]["joint"] = {"test": both_protocols(ranker, graphs[lang]),
                                   "test_known_elsewhere": round(float(known.float().mean()), 4),
                                   "by_part": {name: both_protocols(ranker, part) for name, part in parts.items()},
                                   "eval_cpu_seconds": round(time.process_time() - start, 1)}
            if ("text_structure", lang) in rankers:
                rows[lang]["text_structure"]["by_part"] = {name: both_protocols(rankers["text_structure", lang], part)
                                                           for name, part in parts.items()}
            print(f"joint {lang}: {json.dumps(rows[lang]['joint']['test'])}; "
                  f"{100 * float(known.float().mean()):.1f}% of the test facts are known elsewhere", flush=True)
        args.joint_row = row
    return rows


def facts_elsewhere(root: Path, graphs: Mapping[str, Any]) -> dict[str, "torch.Tensor"]:
    """Per graph, [test triples] bool: whether another graph's training split holds the same fact
    between the seed-aligned counterparts (what a model of the five graphs can carry over)."""
    from babelzoo.knowledge.dbp5l import dbp5l_seeds
    from babelzoo.knowledge.multilingual import JointGraphs

    joint = JointGraphs.build(graphs, {(a, b): dbp5l_seeds(root, a, b) for a, b in itertools.combinations(LANGS, 2)})
    cluster, triples, offset = joint.cluster, joint.data.train, 0
    graph_of = torch.repeat_interleave(torch.arange(len(LANGS)), torch.tensor(joint.graph_sizes))
    facts = {}  # (cluster h, relation, cluster t) -> the graphs whose training split holds it
    for h, r, t in triples.tolist():
        facts.setdefault((int(cluster[h]), r, int(cluster[t])), set()).add(int(graph_of[h]))
    out = {}
    for i, lang in enumerate(LANGS):
        rows = []
        for h, r, t in graphs[lang].test.tolist():
            key = (int(cluster[offset + h]), int(joint.relation_maps[i][r]), int(cluster[offset + t]))
            rows.append(bool(facts.get(key, set()) - {i}))
        out[lang] = torch.tensor(rows, dtype=torch.bool)
        offset += graphs[lang].num_entities
    return out


def alignment(args) -> dict:
    from babelzoo.knowledge.align import split_pairs
    from babelzoo.knowledge.dbp5l import dbp5l_seeds

    rows = {}
    folder = args.runs / "alignment"
    folder.mkdir(parents=True, exist_ok=True)
    for a, b in itertools.combinations(LANGS, 2):
        pairs = dbp5l_seeds(args.data_dir, a, b)
        train, test = split_pairs(pairs, 0.3, seed=0)
        files = {name: folder / f"{a}-{b}.{name}.tsv" for name in ("seeds", "gold")}
        texts = {name: "".join(f"{x}\t{y}\n" for x, y in chosen) for name, chosen in (("seeds", train), ("gold", pairs))}
        metrics_file = folder / f"{a}-{b}.metrics.json"
        argv = ["kb", "align", "--kb", str(args.data_dir / a), "--kb", str(args.data_dir / b), "--seeds",
                str(files["seeds"]), "--eval", str(files["gold"]), "--out", str(folder / f"{a}-{b}.pairs.tsv"),
                "--metrics", str(metrics_file), "--cache-dir", str(folder / "cache")]
        same = metrics_file.is_file() and all(files[n].is_file() and files[n].read_text(encoding="utf-8") == texts[n]
                                              for n in files)
        if same:  # an earlier run aligned this pair from the same files: delete the folder to align again
            print(f"{a}-{b}: reusing {metrics_file}", flush=True)
        else:
            for name, text in texts.items():
                files[name].write_text(text, encoding="utf-8")
            cli(argv)
        result = json.loads(metrics_file.read_text(encoding="utf-8"))
        rows[f"{a}-{b}"] = {"seeds": len(train), "test_pairs": len(test), "cpu_seconds": round(result["cpu_seconds"], 1),
                            "settings": result["settings"], "test": {k: round(v, 6) for k, v in result["metrics"].items()},
                            "command": portable_text("babelzoo " + " ".join(argv))}
    return rows


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None, help="the DBP-5L folder (default: $BABELZOO_DATA_DIR/dbp5l)")
    parser.add_argument("--runs", type=Path, default=Path("runs/kg_multilingual"), help="where the arms train")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--no-alignment", action="store_true", help="skip the entity alignment table")
    parser.add_argument("--minutes", type=float, default=8.0,
                        help="the text + structure arm's budget in CPU minutes, per graph (default 8)")
    parser.add_argument("--ablation-minutes", type=float, default=4.0,
                        help="the structure and text_only arms' budget in CPU minutes, per graph (default 4)")
    parser.add_argument("--epochs", type=int, default=60, help="each arm's most epochs (default 60)")
    parser.add_argument("--joint-minutes", type=float, default=40.0,
                        help="the joint arm's budget in CPU minutes (default 40: five text + structure budgets)")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="an earlier results file of this suite: its arms not run now are carried over")
    parser.add_argument("--out", default=None, help="results JSON; Markdown beside it")
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir or Path(os.environ.get("BABELZOO_DATA_DIR", "../shared/data")) / "dbp5l"
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arm(s) {unknown}; known: {', '.join(ARMS)}")
    args.runs.mkdir(parents=True, exist_ok=True)
    args.joint_row = None
    report = {"benchmark": "DBP-5L multilingual link prediction and entity alignment", "data": str(args.data_dir),
              "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()},
              "budget_cpu_minutes": {"text_structure": args.minutes, "structure": args.ablation_minutes,
                                     "text_only": args.ablation_minutes}, "epochs": args.epochs,
              "link_prediction": link_prediction(args, arms),
              "alignment": {} if args.no_alignment else alignment(args),
              "secondary": {k: {"hits@1": v[0], "source": v[1]} for k, v in SECONDARY.items()}}
    if args.joint_row:
        report["budget_cpu_minutes"]["joint"] = args.joint_minutes
        report["joint"] = {k: v for k, v in args.joint_row.items() if k != "valid"}
    if args.reuse:
        carry_over(report, args.reuse, arms)
    print("\n" + markdown(report))
    if args.out:
        write_results(args.out, report, markdown, "kg_multilingual")


def carry_over(report: dict, earlier: Path, arms: Sequence[str]) -> None:
    """The arms of the results file ``earlier`` that this run did not run, copied into ``report``
    with that file's commit and date (``carried``); its alignment table too when none ran now."""
    old = json.loads(earlier.read_text(encoding="utf-8"))
    source = {"file": shown_path(earlier), "commit": old.get("commit"), "date": old.get("date")}
    results = old["results"]
    carried = sorted({arm for lang in LANGS for arm in results["link_prediction"].get(lang, {}) if arm not in arms})
    for lang in LANGS:
        for arm in carried:
            if arm in results["link_prediction"].get(lang, {}):
                report["link_prediction"][lang][arm] = results["link_prediction"][lang][arm]
    for arm in carried:
        if arm in results.get("budget_cpu_minutes", {}):
            report["budget_cpu_minutes"][arm] = results["budget_cpu_minutes"][arm]
    if "joint" in carried and "joint" in results:
        report["joint"] = results["joint"]
    if not report["alignment"] and results.get("alignment"):
        report["alignment"] = results["alignment"]
        carried.append("alignment")
    report["carried"] = {"arms": carried, **source}


LABELS = {"structure": "structure only: ComplEx", "text_only": "text only: frozen e5 + trained projection",
          "text_structure": "text + structure (kgc_e5_small), each graph alone",
          "together": "all five together through the seed alignments",
          "joint": "one model over the five graphs (kgc_dbp5l_joint), structure shared through the seeds"}


def _percent(value: Optional[float]) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def markdown(report: Mapping[str, Any]) -> str:
    lp = report["link_prediction"]
    arms = [a for a in ARMS if any(a in lp[lang] for lang in LANGS)]
    lines = ["# DBP-5L: multilingual link prediction and entity alignment", "",
             "Training budgets per graph in CPU minutes: " + ", ".join(f"{arm} {m:g}" for arm, m in
                                                                      report["budget_cpu_minutes"].items())
             + f" (at most {report['epochs']} epochs), on a {report['machine']['cpus']}-core CPU; model selection and "
             "ensemble weights on valid splits only.", "",
             "## Link prediction, Hits@1 / Hits@10 / MRR (%), test split", "",
             "KEnS's protocol: tail prediction only, filtered by the training triples. babelzoo's: head and tail "
             "averaged, filtered by every known triple.", "",
             "| arm | protocol | " + " | ".join(LANGS) + " |", "|---|---|" + "---|" * len(LANGS)]
    for arm in arms:
        for protocol in ("kens", "babelzoo"):
            cells = []
            for lang in LANGS:
                t = lp[lang].get(arm, {}).get("test", {}).get(protocol)
                cells.append("–" if t is None else f"{_percent(t['hits@1'])} / {_percent(t['hits@10'])} / "
                                                   f"{_percent(t['mrr'])}")
            lines.append(f"| {LABELS[arm]} | {protocol} | " + " | ".join(cells) + " |")
    for name, entry in report["secondary"].items():
        lines.append(f"| *{name}* (secondary source, unverified: {entry['source']}) | Hits@1 | "
                     + " | ".join(f"{entry['hits@1'].get(lang, '–')}" for lang in LANGS) + " |")
    train = {arm: sum(lp[lang][arm].get("train_cpu_seconds", 0) for lang in LANGS if arm in lp[lang]) / 60
             for arm in TRAINED if arm in arms}
    if "joint" in report:
        train["joint"] = report["joint"]["train_cpu_seconds"] / 60
    lines += ["", "Training CPU minutes over the five graphs: "
              + ", ".join(f"{arm} {minutes:.1f}" for arm, minutes in train.items()) + "."]
    if "joint" in report:
        lines.append(f"The joint model: {report['joint']['epochs']} epochs (best {report['joint']['best_epoch']}), "
                     f"`{report['joint']['command']}`.")
    if report.get("carried"):
        c = report["carried"]
        lines.append(f"Carried over from `{c['file']}` (commit {c['commit']}, {c['date']}), not run again: "
                     + ", ".join(c["arms"]) + ".")
    if "together" in arms:
        lines.append("Ensemble weights (valid): " + ", ".join(f"{lang} {lp[lang]['together']['weight']:g}"
                                                              for lang in LANGS) + ".")
    if any("by_part" in lp[lang].get("joint", {}) for lang in LANGS):
        lines += ["", "## Facts another graph knows, and the rest (test split, Hits@1 %, KEnS's / babelzoo's protocol)",
                  "", "A test fact is *known elsewhere* when another graph's training split holds the same relation "
                  "between the seed-aligned counterparts of its entities: what a model of the five graphs can carry "
                  "over. *New*: no other graph holds it.", "",
                  "| graph | known elsewhere | alone, known | joint, known | alone, new | joint, new |",
                  "|---|---|---|---|---|---|"]
        for lang in LANGS:
            joint = lp[lang].get("joint", {})
            if "by_part" not in joint:
                continue
            alone = lp[lang].get("text_structure", {}).get("by_part", {})

            def cell(parts: Mapping[str, Any], part: str) -> str:
                t = parts.get(part)
                return "–" if t is None else f"{_percent(t['kens']['hits@1'])} / {_percent(t['babelzoo']['hits@1'])}"

            lines.append(f"| {lang} | {100 * joint['test_known_elsewhere']:.1f}% | {cell(alone, 'known_elsewhere')} | "
                         f"{cell(joint['by_part'], 'known_elsewhere')} | {cell(alone, 'new')} | "
                         f"{cell(joint['by_part'], 'new')} |")
    if report["alignment"]:
        lines += ["", "## Entity alignment (70% of the seed pairs held out; each ranked among the held-out targets)",
                  "", "| pair | seeds | test pairs | Hits@1 | Hits@10 | MRR | one-to-one Hits@1 | weight, rounds | CPU s |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for pair, row in report["alignment"].items():
            t, s = row["test"], row["settings"]
            lines.append(f"| {pair} | {row['seeds']} | {row['test_pairs']} | {_percent(t['hits@1'])} | "
                         f"{_percent(t['hits@10'])} | {_percent(t['mrr'])} | {_percent(t['assigned_hits@1'])} | "
                         f"{s['weight']:g}, {s['rounds']} | {row['cpu_seconds']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
