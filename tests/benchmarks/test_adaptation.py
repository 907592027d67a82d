"""benchmarks/adaptation.py and its parts in benchmarks/_adaptation/: the arms derived from the
shipped recipe, the targets and the Markdown made from a results dict, the SIB-200 language match
(no model is trained here)."""

from __future__ import annotations

import json

import pytest

from babelzoo.evaluation.tasks import Result
from babelzoo.train.run import parse_data
from babelzoo.train.config import load_recipe, recipe_path
from benchmarks._adaptation.arms import (
    DISTILL,
    RECIPE,
    TLM,
    VOCAB_INIT,
    VOCAB_MARK,
    arm_overrides,
    base_overrides,
    read_shipped_recipe,
)
from benchmarks._adaptation.evaluation import by_language, mean_of, sib200_targets
from benchmarks._adaptation.report import markdown, pct, target_lines, targets
from benchmarks._adaptation.run import keep, saved
from benchmarks._adaptation.training import own_exclude, settings_guard, st_examples


def arm_config(arm, tmp_path):
    overrides = base_overrides(tmp_path / arm, 7, ["bre", "eus"]) + arm_overrides(arm, read_shipped_recipe())
    return load_recipe(recipe_path(RECIPE), overrides)


def test_recipe_arm_is_the_shipped_recipe_with_its_folder_steps_and_languages(tmp_path):
    shipped = load_recipe(recipe_path(RECIPE)).to_dict()
    got = arm_config("recipe", tmp_path).to_dict()
    changed = {k: got[k] for k in shipped if shipped[k] != got[k]}
    assert changed == {"output_dir": str(tmp_path / "recipe"), "max_steps": 7, "languages": ["bre", "eus"]}


@pytest.mark.parametrize("arm, objectives, mlm_head", [
    ("recipe", ["translation_ranking"], None),
    ("+distill", ["translation_ranking", "distill_sentence"], None),
    ("distill", ["distill_sentence"], None),
    ("+tlm", ["translation_ranking", "tlm"], True)])
def test_ablations_keep_or_add_objectives_on_the_recipes_pairs(tmp_path, arm, objectives, mlm_head):
    cfg = arm_config(arm, tmp_path)
    shipped = load_recipe(recipe_path(RECIPE))
    assert list(cfg.objectives) == objectives and cfg.mixture == "sum"
    for name in objectives:  # a kept objective has the recipe's options, an added one the arm's
        want = shipped.objectives.get(name) or {DISTILL[0]: DISTILL[1], TLM[0]: TLM[1]}[name]
        assert cfg.objectives[name] == want
    assert cfg.model_overrides.get("mlm_head") is mlm_head
    ours, theirs = cfg.to_dict(), shipped.to_dict()
    changed = sorted(k for k in theirs if ours[k] != theirs[k])
    assert changed == sorted({"output_dir", "max_steps", "languages"}  # init (what is frozen) is kept
                             | ({"objectives", "data"} if arm != "recipe" else set())
                             | ({"model_overrides"} if mlm_head else set()))
    data = parse_data(cfg)  # every source built and checked against its objective; nothing read
    sources = {name: items for name, (items, _) in data.items()}
    (pairs,) = next(iter(sources.values()))
    assert (pairs.kind, pairs.anchors, pairs.languages, pairs.prefix) == ("adaptation_pairs", [], ["bre", "eus"],
                                                                          "query: ")
    assert all(items == [pairs] and items[0] is pairs for items in sources.values())  # one source, read once
    assert {name: alpha for name, (_, alpha) in data.items()} == {name: 0.5 for name in objectives}


def test_the_short_arm_is_the_recipe_on_its_first_schedule(tmp_path):
    ours, theirs = arm_config("steps400", tmp_path).to_dict(), load_recipe(recipe_path(RECIPE)).to_dict()
    assert {k: ours[k] for k in theirs if ours[k] != theirs[k]} == {
        "output_dir": str(tmp_path / "steps400"), "max_steps": 400, "optim": {**theirs["optim"], "warmup_steps": 40},
        "languages": ["bre", "eus"]}


def test_the_margin_arm_is_the_recipe_ranking_with_labse_additive_margin(tmp_path):
    cfg, shipped = arm_config("margin0.3", tmp_path), load_recipe(recipe_path(RECIPE))
    ours, theirs = cfg.to_dict(), shipped.to_dict()
    assert sorted(k for k in theirs if ours[k] != theirs[k]) == ["languages", "max_steps", "objectives", "output_dir"]
    assert cfg.objectives == {"translation_ranking": {**shipped.objectives["translation_ranking"], "margin": 0.3}}
    assert shipped.objectives["translation_ranking"]["margin"] == 0.0  # the recipe: the plain in-batch softmax


def test_the_vocabulary_arm_starts_from_the_grown_model_and_trains_its_new_rows(tmp_path):
    grown = tmp_path / VOCAB_INIT
    grown.mkdir()
    (grown / "config.json").write_text(json.dumps({"text": {"vocab_size": 257067}}))
    (grown / VOCAB_MARK).write_text(json.dumps({"first_new_id": 250002}))
    overrides = base_overrides(tmp_path / "+vocab", 7, ["bre"]) + arm_overrides("+vocab", read_shipped_recipe(), grown)
    cfg, shipped = load_recipe(recipe_path(RECIPE), overrides), load_recipe(recipe_path(RECIPE))
    assert cfg.init == {"pretrained": str(grown), "train_rows_from": 250002}  # no frozen word embeddings
    assert cfg.tokenizer == {"path": str(grown)} and cfg.model_overrides["vocab_size"] == 257067
    assert cfg.objectives == shipped.objectives
    assert cfg.data == shipped.data and cfg.optim.lr == shipped.optim.lr and cfg.max_steps == 7
    with pytest.raises(ValueError, match="give its folder"):
        arm_overrides("+vocab", read_shipped_recipe())


def test_an_arm_the_recipe_does_not_train_is_refused():
    with pytest.raises(ValueError, match="'st' is not trained by the recipe"):
        arm_overrides("st", read_shipped_recipe())


def test_an_arm_folder_trained_with_other_settings_is_not_reused(tmp_path):
    settings_guard(tmp_path / "recipe", {"command": ["pretrain", "a"], "threads": 2})
    settings_guard(tmp_path / "recipe", {"command": ["pretrain", "a"], "threads": 2})  # the same: reused
    with pytest.raises(SystemExit) as refused:
        settings_guard(tmp_path / "recipe", {"command": ["pretrain", "b"], "threads": 2, "recipe_sha256": "0f"})
    assert str(refused.value) == (f"{tmp_path / 'recipe'} was trained with other settings ({tmp_path / 'recipe'}/"
                                  "settings.json differs in command, recipe_sha256); give another --work or remove "
                                  "that folder")
    assert json.loads((tmp_path / "recipe" / "settings.json").read_text()) == {"command": ["pretrain", "a"],
                                                                               "threads": 2}


def test_a_saved_result_is_reused_only_under_its_key(tmp_path):
    path = tmp_path / "arm" / "eval.json"
    assert saved(path, {"other_limit": 200}) is None
    assert keep(path, {"other_limit": 200}, {"adapted_mean": 0.5}) == {"adapted_mean": 0.5}
    assert saved(path, {"other_limit": 200}) == {"adapted_mean": 0.5}
    assert saved(path, {"other_limit": 0}) is None


def test_sib200_folders_of_the_adapted_languages():
    present = ["arb_Arab", "eng_Latn", "khm_Khmr", "swh_Latn", "zho_Hans"]
    assert sib200_targets(["khm", "bre", "ara"], present) == ["arb_Arab", "khm_Khmr"]
    assert sib200_targets(["bre"], present) == []


def test_rows_of_both_directions_make_one_language():
    def row(direction, value):
        return Result("tatoeba", "m", f"acc@1 {direction}", value, {"direction": direction})

    rows = [row("eng->bre", 0.25), row("bre->eng", 0.35),
            row("eng_Latn->khm_Khmr", 0.5), row("khm_Khmr->eng_Latn", 0.7)]
    assert by_language(rows) == {"bre": {"en2x": 0.25, "x2en": 0.35, "mean": 0.3},
                                 "khm_Khmr": {"en2x": 0.5, "x2en": 0.7, "mean": 0.6}}


def arm(tatoeba, other, tokens_per_s=None):
    tatoeba = {lang: {"mean": v} for lang, v in tatoeba.items()}
    other = {lang: {"mean": v} for lang, v in other.items()}
    ev = {"tatoeba": tatoeba, "other": other, "adapted_mean": mean_of(tatoeba), "other_mean": mean_of(other),
          "eval_wall_s": 61.0}
    train = {"steps": 600, "tokens_per_s": tokens_per_s, "wall_s": 2000.0, "cpu_s": 3900.0} if tokens_per_s else None
    return {"eval": ev, **({"train": train} if train else {})}


def report():
    return {"command": "python benchmarks/adaptation.py --arms e5,recipe,st", "commit": "abc",
            "machine": {"threads": 2, "cpu": "a CPU"},
            "settings": {"max_steps": 600, "batch_size": 32, "lr": 1e-4, "warmup_steps": 50, "max_length": 64,
                         "other_limit": 200},
            "languages": ["bre", "eus"], "reference": {"bre": 0.0915, "eus": 0.598}, "notes": ["a note"],
            "arms": {"e5": arm({"bre": 0.10, "eus": 0.60}, {"deu": 0.97, "fra": 0.93}),
                     "recipe": arm({"bre": 0.33, "eus": 0.61}, {"deu": 0.962, "fra": 0.93}, tokens_per_s=2700.0),
                     "st": arm({"bre": 0.26, "eus": 0.58}, {"deu": 0.95, "fra": 0.92}, tokens_per_s=2000.0)}}


def test_targets_of_a_results_dict():
    got = {t["target"]: {a: (round(v, 4), ok) for a, (v, ok) in t["values"].items()} for t in targets(report())}
    assert got == {"adapted mean − e5": {"recipe": (0.12, True), "st": (0.07, True)},
                   "worst adapted language − e5": {"recipe": (0.01, True), "st": (-0.02, False)},
                   "other languages' mean − e5": {"recipe": (-0.004, True), "st": (-0.015, False)},
                   "recipe − st on the adapted mean": {"recipe": (0.05, True)},
                   "training tokens/s ÷ st's": {"recipe": (1.35, True)}}


def test_markdown_of_a_results_dict():
    text = markdown(report())
    for line in ["| target | wanted | recipe | st |",
                 "| adapted mean − e5 | ≥ +5.0 | +12.0 pass | +7.0 pass |",
                 "| worst adapted language − e5 | ≥ -1.0 | +1.0 pass | -2.0 miss |",
                 "| other languages' mean − e5 | ≥ -0.5 | -0.4 pass | -1.5 miss |",
                 "| recipe − st on the adapted mean | ≥ +0.0 | +5.0 pass |  |",
                 "| training tokens/s ÷ st's | ≥ 1.3× | 1.35× pass |  |",
                 "| recipe | 47.0 | 94.6 | 600 | 2,700 | 2,000 | 3,900 | 61 |",
                 "| e5 | 35.0 | 95.0 |  |  |  |  | 61 |",
                 "| bre | 9.2 | 10.0 | 33.0 | 26.0 |",
                 "- a note"]:
        assert line in text.splitlines(), line
    assert "Other languages: the first 200 sentence pairs of each of the other Tatoeba languages (--other-limit 200)." \
        in text


def test_mteb_protocol_targets_and_table():
    r = report()
    for name, (bre, eus, other) in {"e5": (0.08, 0.58, 0.90), "recipe": (0.30, 0.60, 0.897),
                                    "st": (0.20, 0.55, 0.88)}.items():
        table = {"bre": {"f1": bre, "accuracy": bre + 0.02}, "eus": {"f1": eus, "accuracy": eus + 0.02}}
        r["arms"][name]["eval"].update(mteb=table, mteb_f1=mean_of(table, "f1"),
                                       mteb_accuracy=mean_of(table, "accuracy"), mteb_other_f1=other)
    got = {t["target"]: {a: (round(v, 4), ok) for a, (v, ok) in t["values"].items()} for t in targets(r)}
    assert got["MTEB F1, adapted mean − e5"] == {"recipe": (0.12, True), "st": (0.045, False)}
    assert got["MTEB F1, other languages' mean − e5"] == {"recipe": (-0.003, True), "st": (-0.02, False)}
    lines = markdown(r).splitlines()
    for line in ["| language | e5 | recipe | st |", "| bre | 8.0 | 30.0 | 20.0 |",
                 "| adapted mean F1 | 33.0 | 45.0 | 37.5 |", "| adapted mean accuracy | 35.0 | 47.0 | 39.5 |",
                 "| other languages' mean F1 | 90.0 | 89.7 | 88.0 |",
                 "| MTEB F1, adapted mean − e5 | ≥ +10.0 | +12.0 pass | +4.5 miss |"]:
        assert line in lines, line
    assert not any(line.startswith("Published rows") for line in lines)  # only for the recipe's 17 languages


def test_int8_targets_and_table():
    r = report()
    tables = {"fp32": {"bre": 0.300, "eus": 0.600}, "int8": {"bre": 0.296, "eus": 0.590},
              "int8-ffn-fp32": {"bre": 0.299, "eus": 0.598}}
    r["int8"] = {"arm": "recipe", "speed_sentences": 200, "threads": 2,
                 "tatoeba": {v: {lang: {"mean": x} for lang, x in t.items()} for v, t in tables.items()},
                 "sentences_per_s": {"fp32": 50.0, "int8": 75.0, "int8-ffn-fp32": 65.0},
                 "exports": {v: {"command": f"babelzoo convert --to-onnx {v}"} for v in tables}}
    got = {t["target"]: {a: (round(v, 4), ok) for a, (v, ok) in t["values"].items()} for t in targets(r)}
    assert got["int8 − fp32 ONNX, worst adapted language"] == {"recipe": (-0.01, False)}
    assert got["int8 sentences/s ÷ fp32 ONNX's"] == {"recipe": (1.5, True)}
    assert got["int8-ffn-fp32 − fp32 ONNX, worst adapted language"] == {"recipe": (-0.002, True)}
    assert got["int8-ffn-fp32 sentences/s ÷ fp32 ONNX's"] == {"recipe": (1.3, False)}
    lines = markdown(r).splitlines()
    for line in ["| language | fp32 | int8 | int8-ffn-fp32 | int8 − fp32 | int8-ffn-fp32 − fp32 |",
                 "| bre | 30.0 | 29.6 | 29.9 | -0.4 | -0.1 |", "| eus | 60.0 | 59.0 | 59.8 | -1.0 | -0.2 |",
                 "| mean | 45.0 | 44.3 | 44.9 | -0.7 | -0.1 |", "- int8: `babelzoo convert --to-onnx int8`"]:
        assert line in lines, line


def test_the_bare_arm_reads_the_pairs_with_and_without_the_prefix(tmp_path):
    cfg = arm_config("+bare", tmp_path)
    data = parse_data(cfg)["translation_ranking"][0]
    assert [source.prefix for source in data] == ["query: ", ""]
    assert all(source.languages == ["bre", "eus"] for source in data)


def test_the_own_pairs_arm_adds_the_pairs_folder(tmp_path):
    overrides = base_overrides(tmp_path / "+own", 7, ["bre"]) + arm_overrides(
        "+own", read_shipped_recipe(), own=tmp_path / "own")
    cfg = load_recipe(recipe_path(RECIPE), overrides)
    assert cfg.pairs_dir == str(tmp_path / "own") and cfg.objectives == load_recipe(recipe_path(RECIPE)).objectives
    with pytest.raises(ValueError, match="give it"):
        arm_overrides("+own", read_shipped_recipe())
    overrides = base_overrides(tmp_path / "+own", 7, ["bre"]) + arm_overrides(
        "+own", read_shipped_recipe(), own=tmp_path / "own", exclude=tmp_path / "exclude")
    (source,) = parse_data(load_recipe(recipe_path(RECIPE), overrides))["translation_ranking"][0]
    assert source.exclude == str(tmp_path / "exclude") and source.prefix == "query: "


def test_the_own_pairs_filter_reads_every_file_but_sib200s_training_sentences(tmp_path):
    data = tmp_path / "data"
    for name in ("sib200/yor_Latn/train.tsv", "sib200/yor_Latn/dev.tsv", "sib200/eng_Latn/train.tsv",
                 "tatoeba/tatoeba.yor-eng.yor", "sib200/README.md"):
        (data / name).parent.mkdir(parents=True, exist_ok=True)
        (data / name).write_text(name, encoding="utf-8")
    mirror = own_exclude(data, tmp_path / "mirror")
    files = sorted(str(p.relative_to(mirror)) for p in mirror.rglob("*") if p.is_file())
    assert files == ["sib200/README.md", "sib200/yor_Latn/dev.tsv", "tatoeba/tatoeba.yor-eng.yor"]
    assert (mirror / "sib200/yor_Latn/dev.tsv").read_text(encoding="utf-8") == "sib200/yor_Latn/dev.tsv"


def test_own_pairs_target_and_table():
    r = report()
    for name, (yor, hau) in {"e5": (0.20, 0.30), "recipe": (0.22, 0.31), "+own": (0.35, 0.39)}.items():
        table = {"yor_Latn": {"mean": yor, "n": 303}, "hau_Latn": {"mean": hau, "n": 303}}
        r["arms"].setdefault(name, {"eval": r["arms"]["e5"]["eval"]})["own"] = {"languages": table,
                                                                               "mean": mean_of(table)}
    got = {t["target"]: {a: (round(v, 4), ok) for a, (v, ok) in t["values"].items()} for t in targets(r)}
    assert got["own pairs: held-out retrieval − e5 (yor_Latn, e5's weakest)"] == {"+own": (0.15, True)}
    lines = markdown(r).splitlines()
    for line in ["| language | sentences | e5 | recipe | +own |", "| yor_Latn | 303 | 20.0 | 22.0 | 35.0 |",
                 "| mean | | 25.0 | 26.5 | 37.0 |"]:
        assert line in lines, line


def test_markdown_of_the_heldout_pairs():
    r = report()
    for name, values in (("e5", {"bre": 0.40, "eus": 0.80}), ("recipe", {"bre": 0.60, "eus": 0.90})):
        table = {lang: {"en2x": v, "x2en": v, "mean": v, "n": 100 + i} for i, (lang, v) in enumerate(values.items())}
        r["arms"][name]["heldout"] = {"pairs": table, "mean": mean_of(table)}
    lines = markdown(r).splitlines()
    for line in ["| language | pairs | e5 | recipe |", "| bre | 100 | 40.0 | 60.0 |", "| eus | 101 | 80.0 | 90.0 |",
                 "| mean | | 60.0 | 75.0 |"]:
        assert line in lines, line


def test_arms_that_trained_different_steps_are_pointed_out():
    r = report()
    assert "Not every arm" not in markdown(r)
    r["arms"]["recipe"]["train"]["steps"] = 312
    assert "Not every arm trained the same number of steps: recipe 312, st 600." in markdown(r).splitlines()


def test_no_targets_without_the_e5_arm():
    r = report()
    del r["arms"]["e5"]
    assert [t["target"] for t in targets(r)] == ["recipe − st on the adapted mean", "training tokens/s ÷ st's"]
    r["arms"] = {"recipe": r["arms"]["recipe"]}
    assert target_lines(r) == ["No targets: they need the e5 arm and at least one trained arm."]


def test_the_peer_gets_the_pairs_in_the_order_babelzoo_trains_on_them():
    from types import SimpleNamespace

    from babelzoo.train.run import combine
    from babelzoo.train.data import DataStream

    corpora = [SimpleNamespace(pairs=[(f"en {i}", f"br {i}") for i in range(40)]),
               SimpleNamespace(pairs=[(f"en {i}", f"de {i}") for i in range(8)])]
    cfg = SimpleNamespace(batch_size=8, seed=3, max_steps=6)
    run = SimpleNamespace(pairs=lambda: (None, corpora, 0.5, cfg))
    pairs, steps = st_examples(run)
    flat = [p for c in corpora for p in c.pairs]
    stream = DataStream(combine({"distill_sentence": [flat]}, {"distill_sentence": 0.5}, 3)["distill_sentence"],
                        lambda examples: examples, batch_size=8, grad_accum=1, rank=0, world_size=1, seed=3)
    assert steps == 6 and pairs == [tuple(p) for _ in range(6) for p in stream.next_step()[0]]
    # α samples over the recipe's sources: with one source, an epoch draws every pair once
    assert sorted(pairs) == sorted(flat) and pairs != flat


def test_markdown_of_a_train_only_run_has_no_accuracy_tables():
    r = report()
    for entry in r["arms"].values():
        entry.pop("eval")
    lines = markdown(r).splitlines()
    assert "| recipe |  |  | 600 | 2,700 | 2,000 | 3,900 |  |" in lines
    assert not any(line.startswith(("## Tatoeba", "| bre")) for line in lines)


def test_the_docs_quote_the_committed_adaptation_run():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    results = json.loads((root / "benchmarks/results/adaptation/epyc-avx512.json").read_text(encoding="utf-8"))["results"]
    text = " ".join((root / "docs" / "performance.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"On those (\d+) languages its Tatoeba mean goes from ([\d.]+) to ([\d.]+), on the (\d+) "
                       r"others from ([\d.]+) to ([\d.]+)", text)
    assert quoted, "the adaptation sentence of docs/performance.md"
    e5, recipe = results["arms"]["e5"]["eval"], results["arms"]["recipe"]["eval"]
    assert quoted.groups() == (str(len(results["languages"])), pct(e5["adapted_mean"]),
                               pct(recipe["adapted_mean"]), str(len(results["other_languages"])),
                               pct(e5["other_mean"]), pct(recipe["other_mean"]))


def test_the_vocabulary_decision_quotes_the_results_file():
    """The recipe's comment, the guide and the benchmark's notes say why the recipe keeps e5's
    pieces, with the figures of the run that decided it."""
    from pathlib import Path

    from benchmarks._adaptation.report import NOTES

    repo = Path(__file__).resolve().parents[2]
    arms = json.loads((repo / "benchmarks/results/adaptation/xeon.json").read_text(encoding="utf-8"))["results"]["arms"]
    figure = {arm: f"{100 * arms[arm]['eval']['adapted_mean']:.1f}" for arm in ("recipe", "+vocab")}
    khm = {arm: f"{100 * arms[arm]['eval']['tatoeba']['khm']['mean']:.1f}" for arm in ("ranking", "+vocab")}
    assert (figure, khm) == ({"recipe": "57.1", "+vocab": "55.1"}, {"ranking": "67.2", "+vocab": "65.8"})
    recipe = " ".join(line.lstrip("# ") for line in recipe_path("adapt_e5_small").read_text().splitlines())
    guide = " ".join((repo / "docs/guides/adaptation.md").read_text(encoding="utf-8").split())
    for text in (recipe, guide, NOTES[-1]):
        assert "55.1 against" in text and "57.1" in text and "65.8 against" in text and "67.2" in text


def test_the_margin_decision_quotes_the_results_file():
    """The guide says why the recipe ranks without LaBSE's margin, with the figures of the run that
    decided it: the recipe above the margin0.3 arm on each."""
    from pathlib import Path

    from benchmarks._adaptation.report import MTEB_LANGUAGES, mteb_mean

    repo = Path(__file__).resolve().parents[2]
    arms = json.loads((repo / "benchmarks/results/adaptation/epyc-avx512.json").read_text(encoding="utf-8"))
    arms = arms["results"]["arms"]
    pairs = []
    for arm in ("margin0.3", "recipe"):
        ev = arms[arm]["eval"]
        pairs.append([pct(ev["adapted_mean"]), pct(ev["other_mean"]), pct(mteb_mean(ev, sorted(MTEB_LANGUAGES))),
                      pct(arms[arm]["heldout"]["mean"])])
    assert all(float(ours) > float(theirs) for theirs, ours in zip(*pairs))
    guide = " ".join((repo / "docs/guides/adaptation.md").read_text(encoding="utf-8").split())
    sentence = "adapted mean {} against {}, other languages {} against {}, MTEB F1 on its 17 published languages " \
               "{} against {}, held-out catalog pairs {} against {}"
    assert sentence.format(*(x for pair in zip(*pairs) for x in pair)) in guide


def test_smoothquant_exports_read_the_calibration_file(tmp_path, monkeypatch):
    """The SmoothQuant variants give `babelzoo convert` the held-out calibration file; the others
    give the options as written."""
    from types import SimpleNamespace

    from benchmarks._adaptation import evaluation

    commands = []
    monkeypatch.setattr(evaluation, "calibration_file", lambda run, adapted: tmp_path / f"calibration-{len(adapted)}")
    monkeypatch.setattr(evaluation, "model_of", lambda run, arm: tmp_path / arm / "model")
    monkeypatch.setattr(evaluation, "timed_child", lambda command, log, env: commands.append(command) or {})
    run = SimpleNamespace(work=tmp_path, env={})
    for variant in ("int8", "int8-smooth-ffn-fp32"):
        evaluation.onnx_export(run, "recipe", variant, ["bre", "khm"])
    assert [c[c.index("--to-onnx") + 2:] for c in commands] == [
        ["--quantize", "int8"],
        ["--quantize", "int8", "--calibration", str(tmp_path / "calibration-2"), "--keep-fp32", "ffn_out"]]


def test_the_docs_quote_the_committed_int8_run():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    check = json.loads((root / "benchmarks/results/adaptation/epyc-avx512.json").read_text(encoding="utf-8")
                       )["results"]["int8"]
    fp32, speed = check["tatoeba"]["fp32"], check["sentences_per_s"]

    def worst(variant: str) -> str:
        return f"{-100 * min(row['mean'] - fp32[lang]['mean'] for lang, row in check['tatoeba'][variant].items()):.1f}"

    def ratio(variant: str) -> str:
        return f"{speed[variant] / speed['fp32']:.2f}"

    def mean_loss(variant: str) -> str:
        rows = check["tatoeba"][variant]
        return f"{-100 * sum(row['mean'] - fp32[lang]['mean'] for lang, row in rows.items()) / len(rows):.1f}"

    text = " ".join((root / "docs" / "performance.md").read_text(encoding="utf-8").split())
    quoted = re.search(r"loses ([\d.]+) points on average over the adapted languages and at most ([\d.]+) "
                       r"\([^)]+\) against the fp32 export, at ([\d.]+)× its sentences/s .*?; plain int8 runs "
                       r"([\d.]+)× as fast but loses up to ([\d.]+) points, SmoothQuant alone up to ([\d.]+)\.", text)
    assert quoted, "the int8 sentence of docs/performance.md"
    assert quoted.groups() == (mean_loss("int8-smooth-ffn-fp32"), worst("int8-smooth-ffn-fp32"),
                               ratio("int8-smooth-ffn-fp32"), ratio("int8"), worst("int8"), worst("int8-smooth"))
