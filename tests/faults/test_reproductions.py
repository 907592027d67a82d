"""The reported reproductions, each a shell script run as a user would run it, from an empty
folder with a 2,000-line corpus made from SIB-200: each asserts the fixed behaviour (a refusal
that names what is wrong, the user's files untouched, the run's own folder resumed) and exits 0."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPTS = sorted(p for p in (Path(__file__).parent / "reproductions").glob("*.sh") if not p.name.startswith("_"))


@pytest.mark.slow
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_reproduction(script, shared_data, tmp_path):
    bin_dir = str(Path(sys.executable).parent)  # the babelzoo command of this environment
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "BABELZOO_DATA_DIR": str(shared_data),
           "BABELZOO_CACHE": str(tmp_path / "cache")}
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith(("ok: ", "skip: ")), done.stdout
