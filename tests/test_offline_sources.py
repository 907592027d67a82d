"""The offline sources register what they provide through the same registries a plug-in uses,
and the layers below find them by name only (tests/test_layering.py checks the imports)."""

import importlib

import numpy as np
import pytest

from babelzoo.datasets.sources import BUILTIN_SOURCES, SOURCES
from babelzoo.errors import ConfigError
from babelzoo.evaluation.encoders import BUILTIN_PEERS, PEERS, register_peer
from babelzoo.evaluation.leaderboard import ModelSpec, build_encoder
from babelzoo.evaluation.tasks import BUILTIN_TASK_MODULES, TASKS, load_tasks
from babelzoo.zoo.factory import MODELS


def test_every_name_the_registries_hold_resolves_to_what_registers_it():
    for kind, module in BUILTIN_SOURCES.items():
        importlib.import_module(module)
        assert kind in SOURCES and SOURCES.get(kind).__module__ == module
    for name, module in BUILTIN_PEERS.items():
        importlib.import_module(module)
        assert name in PEERS
    load_tasks()
    by_module = {TASKS.get(name).__module__ for name in TASKS.list()}
    assert set(BUILTIN_TASK_MODULES) <= by_module
    assert {"gettext_retrieval", "image_text_retrieval", "speech_text_retrieval"} <= set(TASKS.list())
    loaders = [MODELS.get(n).pretrained.loader for n in MODELS.list() if MODELS.get(n).pretrained]
    for loader in (x for x in loaders if isinstance(x, str)):
        module, _, function = loader.partition(":")
        assert callable(getattr(importlib.import_module(module), function))


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
