"""The knowledge tests run on tiny tensors, where intra-op threads only add synchronisation:
on a busy 2-core machine a backward pass on an [11, 12] matrix took 100 ms with two threads and
under 5 ms with one."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    yield
