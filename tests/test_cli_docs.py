"""The walkthrough of ``docs/cli.md`` ("A session, step by step") runs as written: its first
```bash block, line by line, in an empty directory with ``bae`` on the PATH (review 4, defect 14:
it relabeled an item the session never drew and compared a session it never created)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASH = re.compile(r"```bash\n(.*?)```", re.S)


def walkthrough(page: Path = ROOT / "docs" / "cli.md") -> str:
    return BASH.findall(page.read_text())[0]


def run_block(block: str, cwd: Path) -> subprocess.CompletedProcess:
    bindir = str(Path(sys.executable).parent)  # bae and the python with pandas
    paths = [p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p]
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
           "PYTHONPATH": os.pathsep.join(paths), "NO_COLOR": "1"}  # fmt: skip
    return subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip


def test_cli_walkthrough_runs_as_written(tmp_path):
    block = walkthrough()
    # `bae serve` and `bae label` wait for a person: the page describes them, the block has none
    assert not re.search(r"^\s*bae (serve|label)\b", block, re.M)
    res = run_block(block, tmp_path)
    assert res.returncode == 0, (res.stdout[-2000:], res.stderr[-2000:])
    assert "item d51199: 0 -> 1 (correction" in res.stdout
    assert "report written to report.html" in res.stdout
    assert (tmp_path / "report.html").stat().st_size > 10_000
