"""``make docs``: the site builds offline with ``mkdocs build --strict`` and no warning, and the
benchmarks page carries every committed results table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_docs_build_strict_without_warnings(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)}
    res = subprocess.run(
        # not -q: it hides the warnings of mkdocstrings' griffe, which --strict then ignores
        # although `make docs` (no -q) fails on them
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "WARNING" not in res.stderr, res.stderr[-3000:]
    page = (tmp_path / "site" / "benchmarks" / "index.html").read_text()
    for md in (ROOT / "benchmarks" / "results").glob("*.md"):
        assert f'id="{md.stem}"' in page, md.stem
    assert "ActiveEvaluator" in (tmp_path / "site" / "api" / "index.html").read_text()
