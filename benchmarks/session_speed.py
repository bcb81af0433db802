"""Latency of labeling-session operations on large pool files (issue 6).

For pools of 10^5 and 10^6 items (0.5% positives), written as CSV and as Parquet, times each
session operation as a `bae` command would run it (pool file read and SHA-256 check included):
create (read, check, static optimal proposal, write), open, next(100), record(100), status
(estimates and the contingency-table posterior), and the HTML report; plus the adaptive design's
next/record round (evaluator restored from its snapshot). Also the session file size.

Usage: python benchmarks/session_speed.py [--sizes 100000,1000000]
Writes benchmarks/results/session_speed.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_activeeval.io import PoolSpec
from bayes_activeeval.report import write_report
from bayes_activeeval.session import Design, Session

OUT = Path(__file__).parent / "results"


def pool_frame(n: int, rng: np.random.Generator) -> tuple[pd.DataFrame, np.ndarray]:
    z = rng.standard_normal(n)
    p1 = 1.0 / (1.0 + np.exp(-(z * 2.5 - 7.0)))
    y = (rng.random(n) < p1).astype(int)
    frame = pd.DataFrame(
        {"id": [f"i{k}" for k in range(n)], "pred": (p1 > 0.3).astype(int), "p": p1, "score": z}
    )
    return frame, y


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def run(n: int, fmt: str, kind: str, tmp: Path, rng) -> dict:
    frame, y = pool_frame(n, rng)
    path = tmp / f"pool{n}.{fmt}"
    if fmt == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path)
    truth = dict(zip(frame["id"], y, strict=True))
    spec = PoolSpec(pred="pred", prob="p", score="score", id_col="id")
    sess = tmp / f"s{n}{fmt}{kind}.bae"
    row = {"items": n, "format": fmt, "design": kind}
    s, row["create_s"] = timed(lambda: Session.create(sess, path, spec, Design("f1", kind=kind)))
    s.close()
    for _ in range(2):  # the second round runs with labels and a completed stage behind it
        s, row["open_s"] = timed(lambda: Session.open(sess))
        items, row["next_s"] = timed(lambda s=s: s.next(100))
        ids = s.pool_file.ids[items]
        _, row["record_s"] = timed(lambda s=s, ids=ids: s.record(ids, [truth[i] for i in ids]))
        s.close()
    s = Session.open(sess)
    _, row["status_s"] = timed(s.status)
    _, row["posterior_s"] = timed(s.posterior)
    _, row["report_s"] = timed(lambda: write_report(s, tmp / "r.html"))
    s.close()
    row["session_mb"] = os.path.getsize(sess) / 1e6
    row["pool_file_mb"] = os.path.getsize(path) / 1e6
    return row


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,1000000")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for n in (int(s) for s in args.sizes.split(",")):
            for fmt in ("csv", "parquet"):
                for kind in ("static", "adaptive") if fmt == "parquet" else ("static",):
                    rows.append(run(n, fmt, kind, Path(d), rng))
                    print(rows[-1], flush=True)
    OUT.mkdir(exist_ok=True)
    meta = {
        "machine": f"{os.cpu_count()} cores ({platform.machine()})",
        "python": platform.python_version(),
    }
    (OUT / "session_speed.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    cols = ["create_s", "open_s", "next_s", "record_s", "status_s", "posterior_s", "report_s"]
    lines = [
        "# Labeling-session latency (seconds per operation; pool file read and checksum included)",
        "",
        f"Machine: {meta['machine']}, Python {meta['python']}; one run each (second round of "
        "next/record, after a completed stage); status = the estimates; posterior = the "
        "contingency-table posterior that `bae status` adds.",
        "",
        "| items | pool file | design | create | open | next(100) | record(100) | status | "
        "posterior | report | session file (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = " | ".join(f"{r[c]:.2f}" for c in cols)
        lines.append(
            f"| {r['items']:,} | {r['format']} ({r['pool_file_mb']:.0f} MB) | {r['design']} | "
            f"{cells} | {r['session_mb']:.1f} |"
        )
    (OUT / "session_speed.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
