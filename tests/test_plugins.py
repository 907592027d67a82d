"""An installed package plugs into babelzoo through its entry points alone: a family with its zoo
entry, an objective, a data source, a task, a knowledge base and an experiment tracker, each used
through the public API and the command line in a fresh interpreter, as a user who only ran
``pip install`` would.
(The registry's own discovery rules are tested in tests/test_registry.py.)"""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import babelzoo.zoo.family

REPO = Path(__file__).resolve().parents[1]

# the family's config module is the example of babelzoo.zoo.family's docstring, as written there
MINE_CONFIG = textwrap.dedent(babelzoo.zoo.family.__doc__.split("``my_package/mine_config.py``::\n", 1)[1])

MINE = '''
import torch
from torch import nn

from babelzoo.zoo.family import TextParts
from babelzoo.zoo.layers import MLMHead, TokenEmbeddings


class Doubler(nn.Module):
    """An encoder that doubles its input (so a test can compute what it returns)."""

    def forward(self, x, attention_mask=None, visible=None, causal=False, output_hidden_states=False,
                output_positions=None, unpad=False, position_ids=None):
        out = 2 * x
        return (out if output_positions is None else out[output_positions.bool()]), None


def encoder(config):
    return Doubler()


def build(config, knowledge=None):
    embeddings = TokenEmbeddings(config.vocab_size, config.hidden_size, config.hidden_size, config.pad_token_id,
                                 max_positions=config.max_positions, norm=None)
    head = MLMHead(config.hidden_size, config.hidden_size, config.vocab_size, config.activation, config.layer_norm_eps)
    return TextParts(embeddings, encoder(config), head)
'''

PARTS = '''
from dataclasses import dataclass
from typing import ClassVar

import torch

from babelzoo.datasets.sources import CorpusSource, register_source
from babelzoo.datasets.text import MonolingualCorpus, ReadReport
from babelzoo.evaluation.tasks import Result
from babelzoo.knowledge.graph import GraphKB
from babelzoo.objectives.base import Loss, Objective, register_objective
from babelzoo.train.trackers import Tracker, register_tracker


@register_objective
class TokenCount(Objective):
    """The number of real tokens in the batch, as a loss (a toy objective)."""

    name = "token_count"
    consumes = "sentence"

    def __init__(self, specials):
        super().__init__()
        self.pad = specials.pad

    def prepare(self, examples):
        width = max(map(len, examples))
        return {"input_ids": torch.tensor([list(e) + [self.pad] * (width - len(e)) for e in examples])}

    def forward(self, model, batch):
        real = batch["input_ids"].ne(self.pad)
        return Loss(real.sum().float(), tokens=real.sum())


@register_source
@dataclass
class Hellos(CorpusSource):
    """``{kind: hellos, lang: de}``: one greeting."""

    kind: ClassVar[str] = "hellos"
    provides: ClassVar[str] = "sentence"
    lang: str = "de"

    def read(self):
        sentences = [{"de": "Hallo!", "fr": "Salut !"}[self.lang]]
        return [MonolingualCorpus(self.lang, sentences, ReadReport(files=("hellos",), lines=1, kept=1))]


def vector_width(encoder, context):
    """The width of the encoder's sentence vectors (a toy task)."""
    return [Result("vector_width", encoder.name, "width", float(encoder.encode(["Hallo!"]).shape[-1]))]


@register_tracker("notebook")
class Notebook(Tracker):
    """Writes each logging window's loss to notebook.txt in the run's folder (a toy tracker)."""

    def __init__(self, output_dir, config):
        self.path = output_dir / "notebook.txt"
        self.path.write_text(f"lr {config['optim']['lr']}\\n", encoding="utf-8")

    def log_metrics(self, metrics, step):
        with self.path.open("a", encoding="utf-8") as out:
            out.write(f"{step} {metrics['loss']:.1f}\\n")

    def finish(self, summary):
        with self.path.open("a", encoding="utf-8") as out:
            out.write("finished\\n" if summary is not None else "failed\\n")


def tiny_graph():
    """Berlin is the capital of Germany (a toy knowledge base)."""
    kb = GraphKB("tiny")
    kb.add_triple("Q64", "capital_of", "Q183")
    kb.add_label("Q64", "de", "Berlin", preferred=True)
    return kb
'''

ENTRY_POINTS = """\
[babelzoo.families]
mine = my_package.mine_config

[babelzoo.objectives]
token_count = my_package.parts

[babelzoo.data_sources]
hellos = my_package.parts

[babelzoo.tasks]
vector_width = my_package.parts:vector_width

[babelzoo.knowledge_bases]
tiny-graph = my_package.parts:tiny_graph

[babelzoo.trackers]
notebook = my_package.parts
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """A folder holding ``my_package`` as pip would install it: its modules and a dist-info with its
    entry points."""
    site = tmp_path_factory.mktemp("site")
    package = site / "my_package"
    package.mkdir()
    for name, text in {"__init__": "", "mine_config": MINE_CONFIG, "mine": MINE, "parts": PARTS}.items():
        (package / f"{name}.py").write_text(text, encoding="utf-8")
    info = site / "my_package-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-package\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(ENTRY_POINTS, encoding="utf-8")
    return site


def run(site: Path, *args: str) -> str:
    """stdout of ``python ARGS`` in a fresh interpreter that has ``my_package`` installed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, *args], cwd=site, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def python(site: Path, script: str) -> dict:
    """What ``script`` prints as its last line, read as JSON."""
    return json.loads(run(site, "-c", textwrap.dedent(script)).strip().splitlines()[-1])


def test_an_installed_family_is_built_by_create_model_first_thing(site):
    found = python(site, f"""
        import json, runpy
        import torch
        import babelzoo

        model = babelzoo.create_model("mine_tiny")  # before anything has listed the zoo
        ids = torch.tensor([[5, 6, 7, 0]])
        out = model(ids)
        embedded = model.embeddings(ids)
        hub = runpy.run_path({str(REPO / "hubconf.py")!r})
        print(json.dumps({{
            "shape": list(out.last_hidden.shape),
            "doubled": torch.equal(out.last_hidden, 2 * embedded),
            "config": [type(model.config.text).__module__, model.config.text.window, model.config.architecture],
            "listed": babelzoo.list_models("mine*"),
            "xlmr": "xlmr_tiny" in babelzoo.list_models(),
            "hub": [name for name in hub if name.startswith("mine")],
            "hub_shape": list(hub["mine_tiny"]()(ids).last_hidden.shape),
        }}))
    """)
    assert found == {"shape": [1, 4, 64], "doubled": True, "config": ["my_package.mine_config", 64, "mine_tiny"],
                     "listed": ["mine_tiny"], "xlmr": True, "hub": ["mine_tiny"], "hub_shape": [1, 4, 64]}


def test_the_family_registry_finds_an_installed_family_by_its_name(site):
    found = python(site, """
        import json
        from babelzoo.zoo.family import FAMILIES

        mine = FAMILIES.get("mine")
        print(json.dumps({"build": mine.build, "config": mine.config.__name__, "families": FAMILIES.list()}))
    """)
    assert found == {"build": "my_package.mine:build", "config": "MyConfig",
                     "families": ["cove", "mine", "modernbert", "rnn", "seq2seq", "transformer", "transformer_xl",
                                  "xlnet"]}


def test_an_installed_objective_source_task_and_knowledge_base_are_found_by_name(site):
    found = python(site, """
        import json
        from babelzoo.datasets.sources import SOURCES, source_kinds
        from babelzoo.datasets.specials import SpecialIds
        from babelzoo.evaluation.tasks import TASKS, TaskContext, load_tasks
        from babelzoo.knowledge import list_kbs, load_kb
        from babelzoo.objectives.mixture import all_objectives, build_objective

        class Encoder:
            name = "three"

            def encode(self, sentences, lang=None):
                import numpy as np
                return np.zeros((len(sentences), 3))

        specials = SpecialIds(pad=1, cls=0, sep=2, unk=4, mask=3, vocab_size=50)
        objective = build_objective("token_count", specials)
        loss = objective(None, objective.prepare([[5, 6, 7], [8, 9]]))
        row = TASKS.get("vector_width")(Encoder(), TaskContext())[0]
        kb = load_kb("tiny-graph")
        print(json.dumps({
            "loss": [loss.value.item(), loss.tokens.item()],
            "texts": SOURCES.get("hellos")(lang="fr").texts(context=None),
            "task": [row.task, row.model, row.metric, row.value],
            "kb": [list(kb.triples()[0]), kb.labels("Q64", "de")],
            "listed": ["token_count" in all_objectives(), "mlm" in all_objectives(),
                       "hellos" in source_kinds(), "text" in source_kinds(),
                       "vector_width" in load_tasks().list(), "tatoeba" in load_tasks().list(),
                       "tiny-graph" in list_kbs(), "cldr" in list_kbs()],
        }))
    """)
    assert found == {"loss": [5.0, 5], "texts": {"fr": ["Salut !"]}, "task": ["vector_width", "three", "width", 3.0],
                     "kb": [["Q64", "capital_of", "Q183"], ["Berlin"]], "listed": [True] * 8}


@pytest.mark.parametrize("kind, name, summary", [
    ("models", "mine_tiny", "My family at tiny size."),
    ("objectives", "token_count", "[sentence] The number of real tokens in the batch, as a loss (a toy objective)."),
    ("sources", "hellos", "[sentence] {kind: hellos, lang: de}: one greeting."),
    ("tasks", "vector_width", "The width of the encoder's sentence vectors (a toy task)."),
    ("kbs", "tiny-graph", "Berlin is the capital of Germany (a toy knowledge base)."),  # the part's own docstring
])
def test_the_command_lists_an_installed_part(site, kind, name, summary):
    lines = run(site, "-m", "babelzoo.cli", "list", kind).splitlines()
    assert [line.split(None, 1)[1] for line in lines if line.split()[0] == name] == [summary]
    assert len(lines) > 1  # babelzoo's own are listed beside it


def test_an_installed_tracker_is_named_by_a_recipe_and_follows_the_run(site, tmp_path):
    found = python(site, f"""
        import json
        from babelzoo.train.config import TrainConfig
        from babelzoo.train.settings import LoggingConfig
        from babelzoo.train.trackers import build_trackers

        config = TrainConfig(logging=LoggingConfig(loggers=["notebook", "tensorboard"]))  # checked by name
        (tracker, _) = build_trackers(config.logging.loggers, __import__("pathlib").Path({str(tmp_path)!r}),
                                      config.to_dict())
        tracker.log_metrics({{"loss": 2.5}}, 10)
        tracker.finish({{"steps": 10}})
        print(json.dumps(tracker.path.read_text().splitlines()))
    """)
    assert found == ["lr 0.001", "10 2.5", "finished"]
