"""Resume continues a checkpoint only when this run would have written it: a different seed,
objective, model or data (same size, other text) is refused with the differences listed; the
fields meant to change (lr, logging, max_steps upward) may."""

import pytest
import torch

from babelzoo.datasets.loader import TokenizedCorpus
from babelzoo.datasets.specials import SpecialIds
from babelzoo.datasets.text import MonolingualCorpus, ReadReport
from babelzoo.objectives.mixture import Mixture
from babelzoo.train.config import TrainConfig
from babelzoo.train.settings import CheckpointConfig, LoggingConfig, OptimConfig
from babelzoo.train.identity import ResumeMismatch
from babelzoo.train.trainer import Trainer
from babelzoo.zoo.factory import create_model

SPECIALS = SpecialIds(pad=1, cls=0, sep=2, unk=3, mask=4, vocab_size=64)


class Characters:
    """One id per lower-case letter (5..30), enough for real tokenised corpora."""

    fingerprint = "characters-v1"
    specials = SPECIALS

    def encode(self, text, lang=None, add_special_tokens=False):
        return [5 + (ord(c) - 97) % 26 for c in text if c.isalpha()]


def corpus(tmp_path, sentences):
    mono = MonolingualCorpus("en", sentences, ReadReport(("test",), len(sentences), len(sentences)))
    return TokenizedCorpus.from_corpus(mono, Characters(), cache_dir=tmp_path / "cache")


SENTENCES = [f"the {w} sat on the mat number {n}" for n in range(12) for w in ("cat", "dog")]
OTHER = [f"a {w} ran past the gate again {n}" for n in range(12) for w in ("fox", "owl")]


def run(tmp_path, data=None, num_layers=1, objectives=None, **changes):
    torch.manual_seed(0)
    model = create_model("xlmr_tiny", vocab_size=64, num_layers=num_layers, max_positions=32)
    spec = objectives or {"mlm": {"max_length": 32, "use_language_ids": False}}
    mixture = Mixture.from_spec(spec, SPECIALS, model.config)
    settings = dict(output_dir=str(tmp_path / "run"), max_steps=4, batch_size=4, lr=1e-3, checkpoint_every=2,
                    progress=False, tensorboard=False, measure_mfu=False, device="cpu", objectives=spec)
    settings.update(changes)
    data = data if data is not None else corpus(tmp_path, SENTENCES)
    return Trainer(model, mixture, {"mlm": data}, TrainConfig.from_dict(settings)).fit()


@pytest.mark.parametrize("change, line", [
    ({"seed": 1}, "seed: 0 (checkpoint) → 1 (now)"),
    ({"objectives": {"mlm": {"max_length": 24, "use_language_ids": False}}},
     "objectives.mlm.max_length: 32 (checkpoint) → 24 (now)"),
    ({"batch_size": 2}, "batch_size: 4 (checkpoint) → 2 (now)"),
    ({"num_layers": 2}, "model.text.num_layers: 1 (checkpoint) → 2 (now)"),
    ({"max_steps": 1}, "max_steps: 1 is below the checkpoint's step 4"),
])
def test_a_changed_run_is_refused_with_its_differences(tmp_path, change, line):
    run(tmp_path)
    with pytest.raises(ResumeMismatch, match="was written by a different run") as err:
        run(tmp_path, **change)
    assert line in str(err.value)


def test_other_data_of_the_same_size_is_refused(tmp_path):
    run(tmp_path)
    other = corpus(tmp_path, OTHER)
    assert len(other) == len(SENTENCES)
    with pytest.raises(ResumeMismatch, match=r"data\.mlm: '[0-9a-f]+' \(checkpoint\) → '[0-9a-f]+' \(now\)"):
        run(tmp_path, data=other)


def test_lr_logging_and_more_steps_may_change(tmp_path):
    run(tmp_path)
    summary = run(tmp_path, max_steps=6, lr=5e-4, log_every=1, checkpoint_every=3)
    assert summary["resumed_from"].endswith("step-00000004")
    assert summary["steps"] == 6 and summary["steps_this_run"] == 2


def test_objectives_built_in_python_are_compared_too(tmp_path):
    """A caller who builds the objectives directly (the config's ``objectives`` stays as it was)
    still cannot resume with other objective settings."""
    run(tmp_path)
    torch.manual_seed(0)
    model = create_model("xlmr_tiny", vocab_size=64, num_layers=1, max_positions=32)
    spec = {"mlm": {"max_length": 32, "use_language_ids": False}}
    other = Mixture.from_spec({"mlm": {"max_length": 32, "use_language_ids": False, "weight": 2.0}}, SPECIALS,
                              model.config)
    cfg = TrainConfig(output_dir=str(tmp_path / "run"), max_steps=4, batch_size=4, optim=OptimConfig(lr=1e-3),
                      checkpoints=CheckpointConfig(every=2),
                      logging=LoggingConfig(progress=False, tensorboard=False, measure_mfu=False), device="cpu",
                      objectives=spec)
    with pytest.raises(ResumeMismatch, match=r"objectives\.mixture\.weights\.mlm: 1\.0 \(checkpoint\) → 2\.0"):
        Trainer(model, other, {"mlm": corpus(tmp_path, SENTENCES)}, cfg).fit()


def test_a_checkpoint_from_before_a_setting_existed_resumes_with_its_default(tmp_path):
    """A checkpoint written before TrainConfig gained ``languages`` and ``model_dir`` has neither
    in its trainer.json; the new settings at their defaults are the same run."""
    import json

    from babelzoo.datasets.download import sha256_of

    run(tmp_path)
    state = tmp_path / "run" / "checkpoints" / "step-00000004" / "trainer.json"
    saved = json.loads(state.read_text(encoding="utf-8"))
    assert saved["config"].pop("languages") is None and saved["config"].pop("model_dir") is None
    state.write_text(json.dumps(saved), encoding="utf-8")
    manifest = state.with_name("manifest.json")
    record = json.loads(manifest.read_text(encoding="utf-8"))
    record["files"]["trainer.json"] = {"size": state.stat().st_size, "sha256": sha256_of(state)}
    manifest.write_text(json.dumps(record), encoding="utf-8")
    assert run(tmp_path, max_steps=6)["resumed_from"].endswith("step-00000004")
    with pytest.raises(ResumeMismatch, match=r"languages: None \(checkpoint\) → \['bre'\] \(now\)"):
        run(tmp_path, max_steps=8, languages=["bre"])
