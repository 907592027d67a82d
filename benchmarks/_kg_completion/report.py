"""The kg_completion benchmark's report: its table, the notes under it, and its chart, rendered
from the results alone (``python -m benchmarks render``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Optional

LABELS = {"e5_zero_shot": "e5-small zero-shot (text, no training)", "structure": "structure only: ComplEx",
          "text_only": "text only: frozen e5 + trained projection", "text_structure": "text + structure (kgc_e5_small)",
          "ensemble": "text + structure + ComplEx, score ensemble", "rerank": "… + neighbourhood re-ranking",
          "names": "… + names in the entity texts (re-ranking)",
          "inject_none": "text only, short scorer budget (no injection)",
          "inject_entity_mlm": "… after entity-level MLM on the facts (ERNIE 1.0)",
          "inject_dea": "… after ERNIE fusion + dEA on the facts",
          "inject_kbert": "… after K-BERT sentence trees over the entity texts",
          "inject_kbert_warm": "… the same, its prediction head trained alone first (5 of the 15 CPU min)",
          "inject_entity_mlm_warm": "… entity-level MLM, its prediction head trained alone first",
          "inject_dea_warm": "… fusion + dEA, its prediction heads trained alone first"}


def _cell(value: Optional[float]) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown_table(report: Mapping[str, Any]) -> str:
    lines = ["| arm | MRR | Hits@1 | Hits@3 | Hits@10 | train CPU | eval CPU |", "|---|---|---|---|---|---|---|"]
    carried = set((report.get("carried") or {}).get("arms", ()))
    for arm, row in report["arms"].items():
        t = row["test"]
        train = row.get("train_cpu_seconds")
        if "pretraining" in row:  # the encoder's pre-training counts in the arm's training time
            train += row["pretraining"]["pretrain_cpu_seconds"]
        label = LABELS.get(arm, arm) + (" †" if arm in carried else "")
        lines.append(f"| {label} | {_cell(t['mrr'])} | {_cell(t['hits@1'])} | {_cell(t['hits@3'])} | "
                     f"{_cell(t['hits@10'])} | {'–' if train is None else f'{train / 60:.1f} min'} | "
                     f"{row['eval_cpu_seconds'] / 60:.1f} min |")
    for name, entry in report["published"].items():
        t = entry["test"]
        lines.append(f"| *{name}* (published: {entry['source']}) | {_cell(t['mrr'])} | {_cell(t['hits@1'])} | "
                     f"{_cell(t['hits@3'])} | {_cell(t['hits@10'])} | – | – |")
    return "\n".join(lines)


# the issue's targets: test MRR at least 0.55, Hits@10 above KG-BERT's, and each arm's training
# and evaluation within these minutes of the machine (its CPU minutes over its cores)
TARGET_MRR, TARGET_HITS10 = 0.55, 0.524
TRAIN_MINUTES, EVAL_MINUTES = 60.0, 10.0


def trained_from(arms: Mapping[str, Any], arm: str) -> list[str]:
    """The trained arms a combination is built from (an arm with no ``of`` is its own)."""
    of = arms[arm].get("of")
    if of is None:
        return [arm]
    return [x for part in ([of] if isinstance(of, str) else of) for x in trained_from(arms, part)]


def targets(report: Mapping[str, Any]) -> str:
    """The targets, judged on the arm a user would pick without looking at test: the best valid
    MRR. A combination's training is the sum of its models'; its evaluation includes the fit of the
    combination it re-ranks, except ``names``, whose ``kb eval`` fits everything itself."""
    arms, cores = report["arms"], report["machine"]["cpus"]
    chosen = [a for a, row in arms.items() if "mrr" in row.get("valid", {})]
    if not chosen:
        return "No arm of this run has a valid MRR to choose by."
    best = max(chosen, key=lambda a: arms[a]["valid"]["mrr"])
    row, parts = arms[best], trained_from(arms, best)
    train = {part: (arms[part].get("train_cpu_seconds") or 0.0) + (arms[part].get("pretraining") or {}).get(
        "pretrain_cpu_seconds", 0.0) for part in parts}
    evaluation = row["eval_cpu_seconds"]
    if best != "names" and isinstance(row.get("of"), str) and row["of"] in arms and "of" in arms[row["of"]]:
        evaluation += arms[row["of"]]["eval_cpu_seconds"]
    train_minutes, eval_minutes = sum(train.values()) / 60 / cores, evaluation / 60 / cores

    def verdict(ok: bool) -> str:
        return "pass" if ok else "miss"

    spent = " + ".join(f"{part} {seconds / 60 / cores:.1f}" for part, seconds in train.items())
    return ("| target | wanted | " + f"{best} (best valid MRR, {row['valid']['mrr']:.3f}) |\n|---|---|---|\n"
            f"| test MRR | ≥ {TARGET_MRR} | {row['test']['mrr']:.3f} {verdict(row['test']['mrr'] >= TARGET_MRR)} |\n"
            f"| test Hits@10 | > {TARGET_HITS10} (KG-BERT) | {row['test']['hits@10']:.3f} "
            f"{verdict(row['test']['hits@10'] > TARGET_HITS10)} |\n"
            f"| training, minutes of the {cores}-core machine | ≤ {TRAIN_MINUTES:g} | {train_minutes:.1f}"
            + (f" ({spent})" if len(train) > 1 else "") + f" {verdict(train_minutes <= TRAIN_MINUTES)} |\n"
            f"| evaluation, minutes of the machine | ≤ {EVAL_MINUTES:g} | {eval_minutes:.1f} "
            f"{verdict(eval_minutes <= EVAL_MINUTES)} |")


def markdown(report: Mapping[str, Any]) -> str:
    arms = report["arms"]
    notes = []
    for arm, row in arms.items():
        if arm == "names":
            weights = ", ".join(f"{key} {'/'.join(f'{w:g}' for w in ws)}" for key, ws in row["weights"].items())
            by_relation = ", ".join(f"{relation} ({r['questions']}) {r['before']:.3f} → {r['after']:.3f}"
                                    for relation, r in row["test_mrr_by_relation"].items())
            command = f"`{row['command']}`: " if "command" in row else ""
            notes.append(f"- names of {row['of']}: {command}{row['matches']:,} (entity, named entity) pairs; weights "
                         f"{'/'.join(row['features'])} by side and relation, on valid: {weights}; test MRR by relation (questions), "
                         f"before → after: {by_relation}")
        elif "pretraining" in row:
            pre = row["pretraining"]
            warmup = f"the head alone `{pre['warmup_command']}`, then " if pre.get("warmup_command") else ""
            notes.append(f"- {arm}: pre-training {warmup}`{pre['command']}` ({pre['steps']} steps, {pre['tokens']:,} "
                         f"tokens, {pre['pretrain_cpu_seconds'] / 60:.1f} CPU min"
                         + (f", of which ComplEx {pre['kge_cpu_seconds'] / 60:.1f}" if pre["kge_cpu_seconds"] else "")
                         + (f", of which the head alone {pre['warmup_cpu_seconds'] / 60:.1f}"
                            if pre.get("warmup_cpu_seconds") else "")
                         + f"); then `{row['command']}`; best epoch {row['best_epoch']} of {row['epochs']}, valid MRR "
                         f"{row['valid']['mrr']:.4f}")
        elif "command" in row:
            notes.append(f"- {arm}: `{row['command']}`; best epoch {row['best_epoch']} of {row['epochs']}, valid MRR "
                         f"{row['valid']['mrr']:.4f}")
        elif arm == "ensemble":
            notes.append(f"- ensemble: text weight {row['text_weight']:g} (valid MRR by weight: "
                         f"{json.dumps(row['valid_mrr_by_weight'])})")
        elif arm == "rerank":
            notes.append(f"- rerank of {row['of']}: bonus {row['bonus']:g} on standardised scores, {row['hops']} hops "
                         f"(valid MRR by bonus: {json.dumps(row['valid_mrr_by_bonus'])})")
        else:
            notes.append(f"- {arm}: `{row['eval_command']}`")
    budgets = ", ".join(f"{k} {v:g}" for k, v in report["budgets_cpu_minutes"].items())
    c = report.get("carried")
    carried = ""
    if c and c["arms"]:
        ran = c.get("ran") or {arm: {k: c.get(k) for k in ("machine", "commit", "date")} for arm in c["arms"]}
        groups: dict[tuple, list[str]] = {}
        for arm in c["arms"]:
            groups.setdefault((ran[arm]["machine"] or "unrecorded", ran[arm]["commit"], ran[arm]["date"]), []).append(arm)
        carried = (f"\n† Carried over from `{c['file']}`, not run again: " + "; ".join(
            f"{', '.join(arms)} (machine {machine}, commit {commit}, {date})"
            for (machine, commit, date), arms in groups.items()) + ".\n")
    return ("# WN18RR link prediction\n\n"
            f"Test split (3,134 triples), {report['protocol']}. CPU time is process time over every thread of a "
            f"{report['machine']['cpus']}-core CPU; training budgets in CPU minutes: {budgets}. Entity vectors "
            "(40,943 texts through the frozen e5-small encoder) are encoded once and shared by the text arms; an "
            "injection arm encodes them again through its pre-trained encoder (not counted, like the shared ones). "
            "Published numbers are from the papers named, on GPUs.\n\n"
            + markdown_table(report) + "\n\nTargets:\n\n" + targets(report) + "\n\nArms:\n\n" + "\n".join(notes) + "\n" + carried)


def plot(report: Mapping[str, Any], path: Path) -> None:
    """Test MRR and Hits@10 of every arm beside the published numbers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [LABELS.get(a, a) for a in report["arms"]] + [f"{n} (published)" for n in report["published"]]
    tests = [row["test"] for row in report["arms"].values()] + [e["test"] for e in report["published"].values()]
    fig, ax = plt.subplots(figsize=(9.0, 0.45 * len(names) + 1.2))
    y = range(len(names))
    ax.barh([i + 0.2 for i in y], [t["mrr"] or 0.0 for t in tests], 0.4, label="MRR")
    ax.barh([i - 0.2 for i in y], [t["hits@10"] or 0.0 for t in tests], 0.4, label="Hits@10")
    ax.set_yticks(list(y), names, fontsize="small")
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel("WN18RR test, filtered")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
