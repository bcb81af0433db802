"""MkDocs hooks: build the benchmarks page from the committed results.

``docs/benchmarks.md`` contains the marker ``<!-- benchmark-results -->``; it is replaced by every
``benchmarks/results/*.md`` (sorted by name), each under a heading naming its script, so the page
always shows exactly what was last run and committed. Nothing is executed.
"""

from __future__ import annotations

from pathlib import Path

MARKER = "<!-- benchmark-results -->"
ROOT = Path(__file__).resolve().parents[1]


def results_markdown(root: Path = ROOT) -> str:
    """The concatenated result tables, with a heading and a source line per file."""
    parts = []
    for md in sorted((root / "benchmarks" / "results").glob("*.md")):
        text = md.read_text(encoding="utf-8").strip()
        # demote the file's own headings so they sit under the page's sections
        lines = [("##" + ln if ln.startswith("#") else ln) for ln in text.splitlines()]
        script = root / "benchmarks" / f"{md.stem}.py"
        source = f"`benchmarks/{md.stem}.py`" if script.exists() else "(no script)"
        parts.append(
            f"## {md.stem}\n\nScript: {source}; raw results: "
            f"`benchmarks/results/{md.stem}.json`.\n\n" + "\n".join(lines)
        )
    if not parts:
        return "_No benchmark results are committed yet._"
    return "\n\n".join(parts)


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Insert the results where the page has the marker."""
    if MARKER in markdown:
        return markdown.replace(MARKER, results_markdown())
    return markdown
