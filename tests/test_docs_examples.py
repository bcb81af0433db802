"""Every ```python block of README.md and docs/*.md runs (blocks of a page share a namespace).

A page can opt a block out with a first line ``# not run`` (for fragments that need user data).
"""

import re
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


def _blocks(page: Path) -> list[str]:
    return [b for b in BLOCK.findall(page.read_text()) if not b.lstrip().startswith("# not run")]


@pytest.mark.parametrize("page", [p for p in PAGES if _blocks(p)], ids=lambda p: p.name)
def test_page_examples_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__docs__"}
    for i, block in enumerate(_blocks(page)):
        try:
            exec(compile(block, f"{page.name}[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message is the point
            raise AssertionError(f"{page.name}, python block {i} failed: {exc!r}") from exc
