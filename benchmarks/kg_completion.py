"""WN18RR link prediction: what text and structure each bring, beside the published numbers.

Every trained arm is a shipped recipe run as users run it (``babelzoo pretrain --config
kgc_e5_small`` or ``kgc_complex`` with ``--set`` overrides) and scored by ``babelzoo kb eval`` on the test split;
the combinations are fitted on the valid split only:

- ``e5_zero_shot``: multilingual-e5-small as it ships, ranking "query: {h}, {r}" against
  "passage: {t}" by cosine (no training);
- ``structure``: ComplEx (reciprocal, N3) on the graph alone: the shipped ``kgc_complex``;
- ``text_only``: the recipe's scorer over the frozen e5 vectors without structure vectors (e = P·x);
- ``text_structure``: the recipe as shipped (e = P·x + s);
- ``ensemble``: ``text_structure`` + ``structure``, a score ensemble weighted on valid MRR;
- ``rerank``: the best of the above with SimKGC's graph-neighbourhood re-ranking (2 hops, the
  bonus chosen on valid MRR);
- ``names``: the best by valid MRR of ``structure``, ``text_structure`` and ``ensemble`` re-ranked by
  the words of the entities' texts, as users run it: ``babelzoo kb eval --model DIR [--ensemble
  DIR] --names`` (a candidate whose name the question entity's description holds, or whose
  description holds the question entity's name, gains a weight per relation and side chosen on
  valid MRR: :mod:`babelzoo.knowledge.name_match`).

Knowledge injection: does pre-training the encoder on the graph's training facts first pay?
Each ``inject_*`` arm pre-trains multilingual-e5-small with a shipped knowledge objective on the
training split's facts (``babelzoo pretrain --config <objective's recipe>`` with ``--set``
overrides; word embeddings and the tied LM head frozen, the same CPU budget for every arm), then
trains the text-only scorer over the vectors of the pre-trained encoder; ``inject_none`` is the
same scorer at the same budget over the frozen e5 vectors:

- ``inject_entity_mlm``: ERNIE 1.0's entity-level masked LM over the verbalised facts (``kb_facts``);
- ``inject_dea``: ERNIE's fusion layers, the entity table initialised from ComplEx vectors of the
  graph (``babelzoo kb train-kge``, counted in the arm's pre-training time), trained with the
  denoising entity auto-encoder on facts aligned to their entities (``kb_aligned_facts``) and
  entity-level masked LM;
- ``inject_kbert``: K-BERT's masked LM over sentence trees: every entity's text (``kb_texts``) as the
  trunk, with up to two training facts ("relation + object name") hung after each mention the
  linker finds (``kb_trees``), read through the visible matrix and soft positions;
- ``inject_kbert_warm``: the same, but the masked-LM prediction head (e5 ships none, so it starts
  random) first trains alone for 5 of the 15 CPU minutes, the encoder frozen, so that its early
  gradients do not reach e5; then everything but the word embeddings trains from there;
- ``inject_entity_mlm_warm``, ``inject_dea_warm``: the same warm-up before the other two objectives
  (the dEA arm's ComplEx vectors are trained first, inside the same budget).

    python -m benchmarks run kg_completion --data-dir ../shared/data/wn18rr

``--reuse FILE`` carries the arms not run now from an earlier results file (each such row keeps
that file's commit and date, said under the table).

Training times are process CPU time over every thread (the recipe's budget clock); a rerun
reuses an arm whose model folder was trained under the same settings.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from babelzoo._provenance import portable_text  # noqa: E402
from benchmarks._kg_completion.report import LABELS, markdown, markdown_table, plot  # noqa: E402,F401 (render reads them here)
from benchmarks._results import shown_path, write_results  # noqa: E402

# Published WN18RR test numbers (filtered MRR, Hits@1/3/10); None: not reported
PUBLISHED = {
    "SimKGC (BERT-base bi-encoder, GPU)": ({"mrr": 0.666, "hits@1": 0.587, "hits@3": 0.717, "hits@10": 0.800},
                                           "Wang et al., ACL 2022, Table 2 (IB+PB+SN)"),
    "RotatE": ({"mrr": 0.476, "hits@1": 0.428, "hits@3": 0.492, "hits@10": 0.571}, "Sun et al., ICLR 2019, Table 5"),
    "StAR": ({"mrr": 0.401, "hits@1": 0.243, "hits@3": 0.491, "hits@10": 0.709}, "Wang et al., WWW 2021, Table 2"),
    "KG-BERT": ({"mrr": None, "hits@1": None, "hits@3": None, "hits@10": 0.524}, "Yao et al., 2019, Table 3"),
}
TRAINED = {  # arm: (output folder under --runs, recipe, its overrides)
    "structure": ("structure", "kgc_complex", []),
    "text_only": ("text_only", "kgc_e5_small", ["scorer.options={dropout: 0.1, structure: false}"]),
    "text_structure": ("kgc_e5_small", "kgc_e5_small", []),
}
E5_FOR_PRETRAINING = [  # multilingual-e5-small as the start of a pre-training recipe
    "model=multilingual_e5_small", "init={pretrained: true, freeze: [embeddings.word.*]}",
    "tokenizer={from_model: multilingual_e5_small}", "model_overrides={mlm_head: true}", "precision=fp32",
    "optim.lr=3e-5", "optim.schedule=constant", "optim.warmup_steps=20", "max_steps=1000000", "budget_clock=cpu",
    "checkpoints.every=1000000", "keep_cpu_buffers=false", "model_dir=model"]
FACTS = "[{kind: %s, kb: {data}, langs: [en]}]"  # the training split's facts
INJECTION = {  # arm: (recipe, overrides; {data}: the graph, {kge}: the arm's ComplEx folder)
    "inject_entity_mlm": ("entity_mlm_tiny", [
        "data.entity_mlm=" + FACTS % "kb_facts",
        "objectives.entity_mlm={max_length: 64, use_language_ids: false}"]),
    "inject_dea": ("dea_tiny", [
        "knowledge={kb: {data}, entity_embeddings: {kge}, fusion_layers: [10, 11]}",
        "data.dea=" + FACTS % "kb_aligned_facts",
        "data.entity_mlm=" + FACTS % "kb_facts",
        "objectives={dea: {}, entity_mlm: {max_length: 64, use_language_ids: false}}"]),
    "inject_kbert": ("kbert_mlm_tiny", [
        "data.kbert_mlm=[{kind: kb_trees, kb: {data}, sentences: {kind: kb_texts, kb: {data}}, linked_only: true}]",
        "objectives.kbert_mlm={max_length: 128, use_language_ids: false}"]),
}
INJECTION_KGE_MINUTES = 5.0  # the dea arm's ComplEx entity vectors, within its pre-training budget
# arm: the injection arm it repeats after a warm-up of the prediction head alone (e5 ships none: the
# head starts random), within the same pre-training budget
HEAD_WARMUP = {"inject_kbert_warm": "inject_kbert", "inject_entity_mlm_warm": "inject_entity_mlm",
               "inject_dea_warm": "inject_dea"}
HEAD_WARMUP_MINUTES = 5.0
# every weight e5 brings stays fixed; what the arm adds (the prediction head, ERNIE's entity parts) trains
E5_WEIGHTS = ["embeddings.*", "encoder.layers.*.attention.*", "encoder.layers.*.attention_norm.*",
              "encoder.layers.*.ffn.up.*", "encoder.layers.*.ffn.down.*", "encoder.layers.*.ffn_norm.*"]
HEAD_WARMUP_SETTINGS = ["init={pretrained: true, freeze: [%s]}" % ", ".join(f"'{p}'" for p in E5_WEIGHTS), "optim.lr=1e-3"]
ARMS = ("e5_zero_shot", *TRAINED, "ensemble", "rerank", "names", "inject_none", *INJECTION, *HEAD_WARMUP)
COMBINED = ("ensemble", "rerank", "names")  # fitted on valid over the structure and text_structure arms


def cli(argv: Sequence[str]) -> None:
    from babelzoo.cli import main as babelzoo

    print("$ babelzoo " + " ".join(argv), flush=True)
    code = babelzoo(list(argv))
    if code:
        raise SystemExit(f"babelzoo {argv[0]} exited with status {code}")


def overrides_for(arm: str, runs: Path, data: Path, minutes: float) -> list[str]:
    folder, _, extra = TRAINED[arm]
    return [f"kg.path={data}", f"output_dir={runs / folder}", f"cache_dir={runs / 'cache'}",
            f"train.max_seconds={minutes * 60:g}", *extra]


def trained_under(model: Path, recipe) -> bool:
    """Whether ``model`` holds a scorer trained by ``recipe``: the same graph (its path, and the
    digest of its entity and relation texts, which a changed file changes), the
    same encoder (its settings, and the weights of an encoder folder, which an injection arm may
    have pre-trained again), scorer and training."""
    from dataclasses import asdict

    from babelzoo.knowledge.text_kge import weights_digest

    record_file = model / "link_prediction.json"
    if not record_file.is_file():
        return False
    record = json.loads(record_file.read_text(encoding="utf-8"))
    encoder = asdict(recipe.encoder) if recipe.uses_text else None
    return (record["scorer"] == {"model": recipe.scorer.model, "dim": recipe.scorer.dim, "options": recipe.scorer.options}
            and all(record["train"].get(k) == v for k, v in asdict(recipe.train).items())
            and record.get("encoder") == encoder
            and record.get("encoder_sha256") == (weights_digest(recipe.encoder.model) if encoder else None)
            and record.get("kg") == recipe.kg.path
            and record.get("graph_sha256") == graph_sha256(recipe.kg.path, recipe.kg.lang))


@functools.lru_cache(maxsize=None)
def graph_sha256(path: str, lang: str) -> str:
    """The digest of a graph's entities, relations and texts, as a link-prediction run records it."""
    from babelzoo._files import expand_path
    from babelzoo.knowledge import load_kb
    from babelzoo.knowledge.kge import LinkPredictionData
    from babelzoo.knowledge.text_link import graph_digest, graph_texts

    kb = load_kb(expand_path(path, "kg.path") if "$" in path else path)
    data = LinkPredictionData.from_kb(kb)
    texts, words = graph_texts(kb, data, lang)
    return graph_digest(data.entities, texts, data.relations, words)


def train_arm(arm: str, runs: Path, data: Path, minutes: float) -> dict:
    return train_recipe(overrides_for(arm, runs, data, minutes), arm, TRAINED[arm][1])


def train_recipe(overrides: list[str], label: str, name: str = "kgc_e5_small") -> dict:
    """``babelzoo pretrain --config NAME`` with ``overrides``, or the model it trained before
    under the same settings; what the run records."""
    from babelzoo.knowledge.text_kge import read_link_recipe
    from babelzoo.train.config import recipe_path

    recipe = read_link_recipe(recipe_path(name), overrides)
    model = Path(recipe.output_dir) / recipe.model_dir
    if trained_under(model, recipe):
        print(f"{label}: reusing {model}, trained under the same settings", flush=True)
    else:
        argv = ["pretrain", "--config", name]
        for item in overrides:
            argv += ["--set", item]
        cli(argv)
    record = json.loads((model / "link_prediction.json").read_text(encoding="utf-8"))
    command = f"babelzoo pretrain --config {name} " + " ".join(f"--set '{o}'" for o in overrides)
    return {"model": str(model), "command": portable_text(command), "train_cpu_seconds": round(record["train"]["seconds"], 1),
            "recipe_cpu_seconds": round(record["cpu_seconds"], 1), "best_epoch": record["train"]["best_epoch"],
            "epochs": record["train"]["epochs_run"], "valid": record["valid"], "scorer": record["scorer"]}


def eval_arm(model: str, runs: Path, data: Path, name: str) -> dict:
    """``babelzoo kb eval`` of ``model`` on the test split, or the evaluation it wrote before
    (same model and graph, written after the model was)."""
    out = runs / f"{name}.eval.json"
    earlier = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None
    fresh = earlier is not None and earlier.get("model") == model and earlier.get("kg") == str(data) and (
        not Path(model).is_dir() or out.stat().st_mtime > (Path(model) / "kge.json").stat().st_mtime)
    if fresh:
        print(f"{name}: reusing {out}", flush=True)
    else:
        cli(["kb", "eval", "--model", model, "--kg", str(data), "--split", "test", "--out", str(out)])
    result = json.loads(out.read_text(encoding="utf-8"))
    return {"test": result["metrics"], "eval_cpu_seconds": round(result["cpu_seconds"], 1),
            "eval_command": portable_text(f"babelzoo kb eval --model {model} --kg {data} --split test")}


def injection_arm(arm: str, runs: Path, data: Path, pretrain_minutes: float, scorer_minutes: float) -> dict:
    """Pre-train e5-small on the graph's training facts with ``arm``'s objective (none for
    ``inject_none``), then the text-only scorer over its entity vectors; what both runs record."""
    folder = runs / arm
    scorer = [f"kg.path={data}", f"output_dir={folder}", f"train.max_seconds={scorer_minutes * 60:g}",
              "scorer.options={dropout: 0.1, structure: false}"]
    if arm == "inject_none":
        return train_recipe([*scorer, f"cache_dir={runs / 'cache'}"], arm)
    recipe, extra = INJECTION[HEAD_WARMUP.get(arm, arm)]
    encoder = folder / "encoder"
    kge = folder / "complex"
    overrides = [*E5_FOR_PRETRAINING, f"output_dir={encoder}",
                 *(o.replace("{data}", str(data)).replace("{kge}", str(kge)) for o in extra)]
    stages = []  # (what, overrides) of each pre-training run before the arm's own
    if arm in HEAD_WARMUP:
        warm = folder / "warmup"
        stages.append(("warmup", [*overrides, f"output_dir={warm}", *HEAD_WARMUP_SETTINGS,
                                  f"max_seconds={HEAD_WARMUP_MINUTES * 60:g}"]))
        overrides = [*overrides, f"init={{pretrained: {warm / 'model'}, freeze: [embeddings.word.*]}}"]
    budget = pretrain_minutes * 60
    record_file = encoder / "injection.json"
    record = json.loads(record_file.read_text(encoding="utf-8")) if record_file.is_file() else None
    if record is not None and spelt_now(record["overrides"]) == spelt_now(overrides) \
            and record["budget_cpu_seconds"] == budget \
            and (encoder / "model").is_dir():
        print(f"{arm}: reusing {encoder / 'model'}, pre-trained under the same settings", flush=True)
    else:
        for stage in (encoder, *(folder / what for what, _ in stages)):  # not resumed: trained afresh
            shutil.rmtree(stage, ignore_errors=True)
        start = time.process_time()
        kge_seconds = 0.0
        if "{kge}" in " ".join(extra):
            cli(["kb", "train-kge", "--data", str(data), "--model", "complex", "--dim", "64", "--reciprocal",
                 "--loss", "1vsall", "--regularizer", "n3", "--regularization-weight", "0.005",
                 "--max-minutes", f"{INJECTION_KGE_MINUTES:g}", "--out", str(kge)])
            kge_seconds = time.process_time() - start
        record = {"overrides": overrides, "budget_cpu_seconds": budget, "kge_cpu_seconds": round(kge_seconds, 1)}
        for what, stage in stages:
            cli(["pretrain", "--config", recipe, *[a for o in stage for a in ("--set", o)]])
            record[f"{what}_command"] = _command(recipe, stage)
        record["warmup_cpu_seconds"] = round(time.process_time() - start - kge_seconds, 1) if stages else 0.0
        left = budget - (time.process_time() - start)
        cli(["pretrain", "--config", recipe, *[a for o in [*overrides, f"max_seconds={left:.0f}"]
                                                 for a in ("--set", o)]])
        summary = json.loads((encoder / "summary.json").read_text(encoding="utf-8"))
        record.update(pretrain_cpu_seconds=round(time.process_time() - start, 1), steps=summary.get("steps"),
                      tokens=summary.get("tokens"), command=_command(recipe, [*overrides, f"max_seconds={left:.0f}"]))
        record_file.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    row = train_recipe([*scorer, f"encoder.model={encoder / 'model'}", f"cache_dir={folder / 'cache'}"], arm)
    row["pretraining"] = {k: record[k] for k in ("command", "pretrain_cpu_seconds", "kge_cpu_seconds", "steps",
                                                 "tokens", "warmup_command", "warmup_cpu_seconds") if k in record}
    return row


def spelt_now(overrides: Sequence[str]) -> list[str]:
    """``--set`` overrides with each key as TrainConfig spells it now (``lr=`` is ``optim.lr=``):
    a record written before the settings were grouped still names the same run."""
    from babelzoo.config_files import moved_key
    from babelzoo.train.config import TrainConfig

    return [moved_key(TrainConfig, o.split("=", 1)[0]) + "=" + o.split("=", 1)[1] for o in overrides]


def _command(recipe: str, overrides: Sequence[str]) -> str:
    return portable_text(f"babelzoo pretrain --config {recipe} " + " ".join(f"--set '{o}'" for o in overrides))


def combinations(rows: dict, runs: Path, data: Path, arms: Sequence[str]) -> None:
    """The ensemble and the re-rankings, fitted on valid, scored on test by the one evaluator."""
    from babelzoo.knowledge import LinkPredictionData, load_kb
    from babelzoo.knowledge.link_prediction import KnownTriples, split_metrics, split_ranks
    from babelzoo.knowledge.text_kge import GraphRanker, fit_ensemble, fit_neighbourhood

    kb = load_kb(str(data))
    graph = LinkPredictionData.from_kb(kb)
    filters = KnownTriples(graph)
    rankers = {arm: GraphRanker.from_folder(rows[arm]["model"], kb, graph) for arm in ("structure", "text_structure")
               if arm in rows}
    best = max((a for a in rankers), key=lambda a: rows[a]["valid"]["mrr"]) if rankers else None
    ranks = {}  # test ranks of the combinations, for the names arm's before and after
    if "ensemble" in arms and len(rankers) == 2:
        start = time.process_time()
        ensemble, weight, tried = fit_ensemble(rankers["text_structure"], rankers["structure"], graph)
        valid = dict(tried)[weight]
        ranks["ensemble"] = split_ranks(ensemble, graph, "test", filters=filters)
        rows["ensemble"] = {"of": ["text_structure", "structure"], "text_weight": weight,
                            "valid_mrr_by_weight": {f"{w:g}": round(m, 4) for w, m in tried},
                            "valid": {"mrr": round(valid, 6)},
                            "test": {k: round(v, 6) for k, v in split_metrics(*ranks["ensemble"]).items()},
                            "eval_cpu_seconds": round(time.process_time() - start, 1)}
        rankers["ensemble"] = ensemble
        if valid > rows[best]["valid"]["mrr"]:
            best = "ensemble"
    if "rerank" in arms and best is not None:
        start = time.process_time()
        reranker, bonus, tried = fit_neighbourhood(rankers[best], graph)
        rows["rerank"] = {"of": best, "hops": 2, "bonus": bonus,
                          "valid_mrr_by_bonus": {f"{b:g}": round(m, 4) for b, m in tried},
                          "valid": {"mrr": round(dict(tried)[bonus], 6)},
                          "test": {k: round(v, 6) for k, v in split_metrics(*split_ranks(
                              reranker, graph, "test", filters=filters)).items()},
                          "eval_cpu_seconds": round(time.process_time() - start, 1)}
    if "names" in arms and best is not None:  # kb eval builds the models and their ensemble, not a re-ranking
        if best not in ranks:
            ranks[best] = split_ranks(rankers[best], graph, "test", filters=filters)
        rows["names"] = name_matches(rows, best, runs, data, graph, ranks[best])


def name_matches(rows: dict, of: str, runs: Path, data: Path, graph, before) -> dict:
    """The ``names`` arm: ``babelzoo kb eval --model DIR [--ensemble DIR] --names`` on ``of`` (a
    model arm or the ensemble of the two), its weights per relation and side fitted on valid; test
    MRR per relation before (``before``: ``of``'s test ranks) and after, for the ablation."""
    import torch

    models = [rows[arm]["model"] for arm in (rows[of]["of"] if of == "ensemble" else [of])]
    argv = ["kb", "eval", "--model", models[0], *(["--ensemble", models[1]] if len(models) > 1 else []), "--names",
            "--kg", str(data), "--split", "test"]
    out, ranks_file = runs / "names.eval.json", runs / "names.ranks.tsv"
    cli([*argv, "--out", str(out), "--ranks", str(ranks_file)])
    result = json.loads(out.read_text(encoding="utf-8"))
    index = {entity: i for i, entity in enumerate(graph.entities)}
    lines = ranks_file.read_text(encoding="utf-8").splitlines()[1:]
    fields = [line.split("\t") for line in lines]
    if [[index[h], graph.relations.index(r), index[t]] for h, r, t, *_ in fields] != graph.test.tolist():
        raise SystemExit(f"{ranks_file}: its triples are not the test split's, in order")
    after = (torch.tensor([float(f[3]) for f in fields]), torch.tensor([float(f[4]) for f in fields]))
    relations = graph.test[:, 1]
    by_relation = {}
    for i, relation in enumerate(graph.relations):
        chosen = relations == i
        if chosen.any():
            by_relation[relation] = {"questions": 2 * int(chosen.sum()), **{
                name: round(float(torch.cat([1.0 / tails[chosen], 1.0 / heads[chosen]]).mean()), 4)
                for name, (tails, heads) in (("before", before), ("after", after))}}
    names = result["combined"]["names"]
    return {"of": of, "command": portable_text("babelzoo " + " ".join(argv)), "matches": names["matches"],
            "features": names["features"], "valid": {"mrr": names["valid_mrr"]}, "weights": names["weights"],
            "test": result["metrics"], "test_mrr_by_relation": by_relation,
            "eval_cpu_seconds": round(result["cpu_seconds"], 1)}


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="a graph folder in the KG-BERT layout (default: $BABELZOO_DATA_DIR/wn18rr)")
    parser.add_argument("--runs", type=Path, default=Path("runs/kg_completion"), help="where the arms train")
    parser.add_argument("--arms", default=",".join(ARMS), help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--max-minutes", type=float, default=100.0,
                        help="the shipped recipe's scorer budget in CPU minutes, summed over threads (default 100, "
                             "the recipe's: 50 minutes of both cores)")
    parser.add_argument("--structure-minutes", type=float, default=18.0,
                        help="the structure arm's budget in CPU minutes (default 18, kgc_complex's: with the shipped "
                             "recipe's 100, the ensemble trains within 60 minutes of both cores)")
    parser.add_argument("--ablation-minutes", type=float, default=25.0,
                        help="the budget of the text_only arm in CPU minutes (default 25)")
    parser.add_argument("--injection-minutes", type=float, default=15.0,
                        help="each knowledge-injection arm's pre-training budget in CPU minutes (default 15)")
    parser.add_argument("--injection-scorer-minutes", type=float, default=25.0,
                        help="the text-only scorer's budget after each injection arm, and of inject_none, in CPU "
                             "minutes (default 25, the text_only arm's)")
    parser.add_argument("--reuse", type=Path, default=None,
                        help="an earlier results file of this suite: its arms not run now are carried over")
    parser.add_argument("--out", default=None, help="results JSON; Markdown beside it")
    args = parser.parse_args(argv)
    data = args.data_dir or Path(os.environ.get("BABELZOO_DATA_DIR", "../shared/data")) / "wn18rr"
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    for arm in arms:
        if arm not in ARMS:
            raise SystemExit(f"unknown arm {arm!r}; known: {', '.join(ARMS)}")
    args.runs.mkdir(parents=True, exist_ok=True)
    rows: dict[str, dict[str, Any]] = {}
    if "e5_zero_shot" in arms:
        rows["e5_zero_shot"] = {"model": "multilingual_e5_small", "train_cpu_seconds": 0.0,
                                **eval_arm("multilingual_e5_small", args.runs, data, "e5_zero_shot")}
    for arm in TRAINED:
        if arm in arms or (arm in ("structure", "text_structure") and set(COMBINED) & set(arms)):
            minutes = {"text_structure": args.max_minutes, "structure": args.structure_minutes}.get(
                arm, args.ablation_minutes)
            rows[arm] = train_arm(arm, args.runs, data, minutes)
            rows[arm].update(eval_arm(rows[arm]["model"], args.runs, data, arm))
    combinations(rows, args.runs, data, arms)
    for arm in ("inject_none", *INJECTION, *HEAD_WARMUP):
        if arm in arms:
            rows[arm] = injection_arm(arm, args.runs, data, args.injection_minutes, args.injection_scorer_minutes)
            rows[arm].update(eval_arm(rows[arm]["model"], args.runs, data, arm))
    report = {"benchmark": "WN18RR link prediction", "data": str(data),
              "protocol": "filtered ranking over all 40,943 entities, head and tail prediction averaged, ties at the "
                          "mean rank; model selection and combination weights on the valid split only",
              "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count()},
              "budgets_cpu_minutes": {"text_structure": args.max_minutes, "structure": args.structure_minutes,
                                      "text_only": args.ablation_minutes,
                                      "injection pre-training": args.injection_minutes,
                                      "scorer after injection": args.injection_scorer_minutes},
              "arms": rows, "published": {k: {"test": v[0], "source": v[1]} for k, v in PUBLISHED.items()}}
    if args.reuse:
        carry_over(report, args.reuse)
    print("\n" + markdown_table(report))
    if args.out:
        write_results(args.out, report, markdown, "kg_completion")


def carry_over(report: dict, earlier: Path) -> None:
    """The arms of the results file ``earlier`` that this run did not run, copied into ``report``
    (in the order of :data:`ARMS`) with their budgets and that file's machine, commit and date
    (``carried``): CPU budgets mean the same work only on the same machine, so the table says
    which rows ran where. An arm that file carried from another keeps where it ran."""
    old = json.loads(earlier.read_text(encoding="utf-8"))
    results = old["results"]
    carried = [arm for arm in results["arms"] if arm not in report["arms"]]
    ran = where_ran(old)
    merged = {**results["arms"], **report["arms"]}
    report["arms"] = {arm: merged[arm] for arm in sorted(merged, key=lambda a: ARMS.index(a) if a in ARMS else len(ARMS))}
    for arm in carried:  # a carried arm keeps the budget it was trained under
        if arm in results["budgets_cpu_minutes"]:
            report["budgets_cpu_minutes"][arm] = results["budgets_cpu_minutes"][arm]
    report["carried"] = {"arms": carried, "file": shown_path(earlier), "ran": {arm: ran[arm] for arm in carried}}


def where_ran(results_file: Mapping[str, Any]) -> dict[str, dict]:
    """The machine, commit and date of every arm of a results file: the file's own, or, for an
    arm it carried over, where that arm ran (a file of an earlier layout names one for all)."""
    results = results_file["results"]
    own = {"machine": (results_file.get("machine") or {}).get("tag"), "commit": results_file.get("commit"),
           "date": results_file.get("date")}
    carried = results.get("carried") or {}
    before = carried.get("ran") or {arm: {k: carried.get(k) for k in own} for arm in carried.get("arms", ())}
    return {arm: before.get(arm, own) for arm in results["arms"]}


if __name__ == "__main__":
    main()
