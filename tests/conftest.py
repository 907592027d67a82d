"""Shared fixtures. Tests that need the standard benchmark data skip, saying why, when it is
absent (a user's machine); set BABELZOO_DATA_DIR to point at a copy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]


def shared_data_dir() -> Path:
    return Path(os.environ.get("BABELZOO_DATA_DIR", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "tatoeba").is_dir():
        pytest.skip(f"standard benchmark data not found at {path} (set BABELZOO_DATA_DIR)")
    return path


@pytest.fixture(scope="session")
def shared_data_if_present() -> Path | None:
    """The standard benchmark data, or None for tests that fall back on embedded data."""
    path = shared_data_dir()
    return path if (path / "tatoeba").is_dir() else None


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """Tiny models train fastest on one thread on a shared 2-core machine; restored after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
