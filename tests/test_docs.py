"""The documentation site (``mkdocs.yml``, ``docs/``) builds with every warning an error: a broken
link, an anchor that is not there, a page missing from the navigation, an API page whose module
or docstring cannot be read."""

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_site_builds_with_warnings_as_errors(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, env=env, capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    assert "WARNING" not in run.stderr, run.stderr[-4000:]
    # every page of the navigation was written, and the API reference holds the docstrings
    pages = sorted(str(p.relative_to(REPO / "docs").with_suffix("")) for p in (REPO / "docs").rglob("*.md"))
    built = [page for page in pages if (tmp_path / "site" / page.removesuffix("index") / "index.html").exists()
             or (tmp_path / "site" / f"{page}.html").exists()]
    assert built == pages
    factory = (tmp_path / "site" / "reference" / "zoo" / "index.html").read_text(encoding="utf-8")
    assert "babelzoo.zoo.factory.create_model" in factory
