"""``babelzoo pretrain``: a recipe on real multilingual text (CLDR territory and language names
from the installed ``babel`` package) trains a tokenizer, a model and a mixture of objectives,
and leaves a checkpoint that loads with its tokenizer; bad recipes exit with a clear message."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny_objectives import one_thread  # noqa: F401

import babelzoo
from babelzoo.train.cli import pretrain_main

pytestmark = pytest.mark.usefixtures("one_thread")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    babel = pytest.importorskip("babel")
    folder = tmp_path_factory.mktemp("cldr")
    locales = {lang: babel.Locale.parse(lang) for lang in ("en", "de", "fr")}
    # the same codes in every language, so that line i of each file names the same thing
    territories = sorted(set.intersection(*(set(loc.territories) for loc in locales.values())))
    languages = sorted(set.intersection(*(set(loc.languages) for loc in locales.values())))
    for lang, locale in locales.items():
        lines = [locale.territories[k] for k in territories] + [locale.languages[k] for k in languages]
        (folder / f"{lang}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def recipe(tmp_path, corpus, **changes):
    spec = {
        "model": "xlm_tiny",
        "model_overrides": {"hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "max_positions": 64},
        "tokenizer": {"vocab_size": 400, "model_type": "unigram"},
        "objectives": {"mlm": {"max_length": 24}, "tlm": {"weight": 0.5, "max_length": 48}},
        "data": {
            "mlm": {"alpha": 0.5, "sources": [{"kind": "text", "path": str(corpus / f"{lang}.txt"), "lang": lang}
                                              for lang in ("de", "fr")]},
            "tlm": [{"kind": "parallel", "src": str(corpus / "en.txt"), "tgt": str(corpus / "de.txt"),
                     "src_lang": "en", "tgt_lang": "de"}],
        },
        "output_dir": str(tmp_path / "run"), "max_steps": 3, "batch_size": 8, "checkpoint_every": 2,
        "progress": False, "tensorboard": False, "peak_flops": 1e11,
    }
    spec.update(changes)
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def test_pretrain_a_mixture_from_a_recipe(tmp_path, corpus):
    path = recipe(tmp_path, corpus)
    assert pretrain_main(["--config", str(path), "--set", "lr=2e-3"]) == 0
    run = tmp_path / "run"
    log = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3] and log[0]["lr"] < 2e-3
    assert {"mlm/accuracy", "tlm/accuracy", "mlm/loss", "tlm/loss", "mfu"} <= set(log[0])
    summary = json.loads((run / "summary.json").read_text())
    assert summary["flops_per_token"] > 0 and 0 < summary["mfu"] < 1
    model = babelzoo.from_pretrained(run / "checkpoints/step-00000003")
    assert model.tokenizer.languages == ("de", "en", "fr") and model.config.text.vocab_size == 400
    assert model.tokenizer.decode(model.tokenizer.encode("Frankreich", lang="de")) == "Frankreich"
    # a second call resumes (and reuses the saved tokenizer): nothing left to do at max_steps
    assert pretrain_main(["--config", str(path), "--set", "max_steps=4"]) == 0
    assert [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()] == [1, 2, 3, 4]


def test_resume_takes_the_tokenizer_from_the_checkpoint(tmp_path, corpus, monkeypatch):
    from babelzoo.datasets.spm import SentencePieceTokenizer

    path = recipe(tmp_path, corpus)
    assert pretrain_main(["--config", str(path)]) == 0
    run = tmp_path / "run"
    saved = (run / "checkpoints/step-00000003/babelzoo_tokenizer.json").read_bytes()
    for item in (run / "tokenizer").iterdir():
        item.unlink()
    (run / "tokenizer").rmdir()

    def no_training(*args, **kwargs):
        raise AssertionError("a new tokenizer was trained for the old weights")

    monkeypatch.setattr(SentencePieceTokenizer, "train", no_training)
    assert pretrain_main(["--config", str(path), "--set", "max_steps=4"]) == 0
    assert (run / "tokenizer/babelzoo_tokenizer.json").read_bytes() == saved
    assert (run / "checkpoints/step-00000004/babelzoo_tokenizer.json").read_bytes() == saved


@pytest.mark.parametrize("change, message", [
    (["--set", "learning_rate=1"], "unknown TrainConfig key 'learning_rate'"),
    (["--set", "data.mlm=[{kind: text, path: /no/such/file.txt, lang: de}]"], "/no/such/file.txt"),
    (["--set", "data.mlm=[{kind: txt, path: a}]"], "data.mlm[0].kind: unknown data source 'txt'; did you mean 'text'"),
    (["--set", "data.mlm=[{kind: text, path: a}]"], "data.mlm[0]: source kind 'text' needs lang"),
    (["--set", "data.mlm=[{kind: text, path: a, lang: de, langs: [fr]}]"],
     "data.mlm[0].langs: unknown source kind 'text' key 'langs'; did you mean 'lang'?"),
    (["--set", "data.mlm=[{kind: parallel, src: a, tgt: b, src_lang: en, tgt_lang: de}]"],
     "data.mlm[0]: objective 'mlm' consumes 'sentence' examples (one tokenised sentence and its language); "
     "source kind 'parallel' provides 'pair'"),
    (["--set", "objectives.clm={}"], "no data for ['clm']"),
    (["--set", "tokenizer={}"], "tokenizer: give {path: DIR} or sentencepiece options with vocab_size"),
])
def test_bad_recipes_exit_with_a_clear_message(tmp_path, corpus, capsys, change, message):
    assert pretrain_main(["--config", str(recipe(tmp_path, corpus)), *change]) == 2
    assert message in capsys.readouterr().err


def test_building_a_run_seeds_its_weights_and_leaves_the_global_rng_alone(tmp_path, corpus):
    import torch

    from babelzoo.train.run import build_run
    from babelzoo.train.config import load_recipe

    cfg = load_recipe(recipe(tmp_path, corpus))
    torch.manual_seed(123)
    before = torch.get_rng_state()
    built = build_run(cfg)
    first = built.model
    assert torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(7)  # another caller state: the run's weights do not depend on it
    second = build_run(cfg).model
    third = build_run(cfg.replace(seed=cfg.seed + 1, output_dir=str(tmp_path / "seed-1"))).model  # another run
    for (name, a), b, c in zip(first.state_dict().items(), second.state_dict().values(), third.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(first.embeddings.word.weight, third.embeddings.word.weight)


def test_pretrain_with_a_memory_layer_as_the_memorizing_recipe_does(tmp_path, corpus):
    """The shipped memorizing recipe's model: a kNN-augmented top layer whose memory fills as
    training reads batches, whose gate trains, and which checkpoints without its memory."""
    from babelzoo.train.config import load_recipe
    from babelzoo.zoo.layers.knn_attention import KNNAttention

    shipped = load_recipe(Path(babelzoo.__file__).parent / "recipes" / "memorizing_mlm_tiny.yaml")
    memory = {k: v for k, v in shipped.model_overrides.items() if k.startswith("memory_")}
    assert memory["memory_layers"] == [1]
    overrides = {"hidden_size": 32, "num_heads": 2, "intermediate_size": 64, "max_positions": 64,
                 **memory, "memory_top_k": 4}
    path = recipe(tmp_path, corpus, model="xlmr_tiny", model_overrides=overrides,
                  objectives={"mlm": {"max_length": 24}}, data={"mlm": recipe_data(corpus)})
    assert pretrain_main(["--config", str(path)]) == 0
    model = babelzoo.from_pretrained(tmp_path / "run" / "checkpoints/step-00000003")
    layer = model.encoder.layers[1].attention
    assert isinstance(layer, KNNAttention) and layer.memory_size() == 0  # run state is not saved
    assert layer.gate.abs().sum() > 0  # the gate trained: the memory was read from step 2 on
    assert type(model.encoder.layers[0].attention) is not KNNAttention


def recipe_data(corpus):
    return {"alpha": 0.5, "sources": [{"kind": "text", "path": str(corpus / f"{lang}.txt"), "lang": lang}
                                      for lang in ("de", "fr")]}


def test_torchrun_on_two_ranks_trains_the_tokenizer_once(tmp_path, corpus):
    """The documented launch, ``torchrun --nproc-per-node 2 -m babelzoo pretrain``, on a fresh
    run whose recipe trains its tokenizer: rank 0 trains and saves it, rank 1 loads it, and
    both ranks train (gloo on CPU)."""
    path = recipe(tmp_path, corpus, objectives={"mlm": {"max_length": 24}}, data={"mlm": recipe_data(corpus)},
                  max_steps=2, batch_size=4, device="cpu")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                             "-m", "babelzoo", "pretrain", "--config", str(path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert (summary["world_size"], summary["strategy"], summary["final_step"]) == (2, "ddp", 2)
    model = babelzoo.from_pretrained(tmp_path / "run" / "checkpoints/step-00000002")
    assert model.tokenizer.languages == ("de", "fr") and model.config.text.vocab_size == 400


@pytest.mark.parametrize("flag", ["", "-q", "-v"])
def test_quiet_and_verbose_decide_what_pretrain_shows(tmp_path, corpus, capsys, flag):
    """``babelzoo -q pretrain`` prints only its result (where the checkpoint is): no progress
    bar, no summary; ``-v`` adds debug records (where the tokenizer came from) to the default."""
    from babelzoo.cli import main

    path = recipe(tmp_path, corpus, objectives={"mlm": {"max_length": 24}}, data={"mlm": recipe_data(corpus)},
                  max_steps=2, progress=True)
    assert main([flag, "pretrain", "--config", str(path)] if flag else ["pretrain", "--config", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == f"checkpoint in {tmp_path / 'run' / 'checkpoints' / 'step-00000002'}\n"
    sentences = sum(len((corpus / f"{lang}.txt").read_text(encoding="utf-8").splitlines()) for lang in ("de", "fr"))
    shown = ("train:" in err or "step 2/2" in err, "training summary" in err,
             f"tokenizer: 400 pieces, trained on {sentences:,} sentences (de, fr)" in err)
    assert shown == {"": (True, True, False), "-q": (False, False, False), "-v": (True, True, True)}[flag]
    if flag == "-q":
        assert err == ""
    assert (tmp_path / "run" / "summary.json").is_file()  # written whatever is shown


def test_quiet_may_follow_the_command(tmp_path, corpus, capsys):
    """``babelzoo pretrain --config R -q`` is ``babelzoo -q pretrain --config R``; -q with -v is
    refused, and a -q after ``--`` is not taken as the flag."""
    from babelzoo.cli import main

    path = recipe(tmp_path, corpus, objectives={"mlm": {"max_length": 24}}, data={"mlm": recipe_data(corpus)},
                  max_steps=2, progress=True)
    assert main(["pretrain", "--config", str(path), "-q"]) == 0
    out, err = capsys.readouterr()
    assert out == f"checkpoint in {tmp_path / 'run' / 'checkpoints' / 'step-00000002'}\n" and err == ""
    assert main(["-v", "pretrain", "--config", str(path), "-q"]) == 2
    assert capsys.readouterr().err == "babelzoo: -q/--quiet and -v/--verbose exclude each other; give one\n"
    assert main(["info", "--", "-q"]) == 2  # a word after --, not the flag
    assert capsys.readouterr().err.startswith("babelzoo info: unknown model '-q'")
