"""Scale: time and peak memory per step for 10^6-10^8 items, in memory and lazily on dask (issue 16).

For each pool size a Parquet file of a binary pool (~0.5% positives; columns ``pred`` int8, ``p``
float64 and the hidden label ``y`` int8; row groups of 2^20 rows) is written chunk by chunk, never
holding more than one chunk. Each (size, mode) then runs in its own subprocess, which times every
step and samples its resident set size (psutil, every 10 ms) to report the peak RSS *during* each
step, plus the process's overall peak (``resource.getrusage``):

- ``open``: in memory, read the columns and build ``Pool``; lazily, ``Pool.from_parquet`` (reads
  only the Parquet metadata; ``classes`` given so no pass over the predictions);
- ``proposal``: ``optimal_proposal(pool, "f1")`` (lazily: five passes of per-chunk sums, two of
  them for the scaled belief floor of ``belief_floor="auto"`` and one for the defensive floor;
  the committed results are from before the defensive floor, with four);
- ``draw``: ``proposal.draw(2000)`` (lazily: only the chunks receiving draws are read);
- ``label``: the oracle, reading ``y`` of the drawn items (not part of the package's cost);
- ``estimate``: ``estimate(pool, "f1", draws, labels)`` (reads only the drawn items);
- ``refresh``: the static proposal rebuilt at a new linearization point (``risk=``; lazily one
  pass over the chunks), 50 draws and an estimate;
- ``ae_init`` and ``stage``: ``ActiveEvaluator(pool, "f1")`` (plug-in oracle, AIS estimate; lazily one pass
  collecting per-chunk cell statistics), the first stage (lazily it fills the draw reservoirs:
  one pass) and a later adaptive stage, ``query(50)`` + ``update`` (lazily ``O(chunks × cells)``,
  no chunk read);
- ``chunk``: the measured cost of one chunk task of the proposal pass, on one thread, which with
  the task count gives the projection to 10^9-10^10 items on a cluster.

Usage::

    nice -n 5 python benchmarks/scale.py [--sizes 1e6,1e7,5e7,1e8] [--workdir /tmp/bae-scale]
    python benchmarks/scale.py --report   # rebuild the .md and the plot from the JSON

Writes ``benchmarks/results/scale.{json,md}`` and ``docs/img/scale.png``. The Parquet files are
deleted afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).parent
OUT = HERE / "results"
IMG = HERE.parent / "docs" / "img"
ROWS_PER_GROUP = 1 << 20
SEED = 16
N_DRAWS = 2_000
STAGE_DRAWS = 50
IN_MEMORY_MAX = 10**7  # 10^8 in memory needs ~4 GB: more than this shared machine should spend
TARGET_N = 5 * 10**7
TARGET_RSS_GB = 1.5
TARGET_S = 120.0
#: Passes over all chunks of a lazy optimal_proposal with belief_floor="auto": the unfloored
#: risk and the floor's sums, then the risk and the chunk masses.
PROPOSAL_PASSES = 4


# ------------------------------------------------------------------------------------------------
# data, chunk by chunk
def write_pool(path: Path, n: int) -> None:
    """A binary pool of ``n`` items written one row group at a time."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("pred", pa.int8()), ("p", pa.float64()), ("y", pa.int8())])
    tmp = path.with_suffix(".tmp")
    with pq.ParquetWriter(tmp, schema, compression="snappy") as w:
        for j, start in enumerate(range(0, n, ROWS_PER_GROUP)):
            m = min(ROWS_PER_GROUP, n - start)
            rng = np.random.default_rng([SEED, j])
            p1 = 1.0 / (1.0 + np.exp(-(rng.standard_normal(m) * 2.5 - 7.0)))
            y = (rng.random(m) < p1).astype(np.int8)
            pred = (p1 > 0.3).astype(np.int8)
            w.write_table(pa.table({"pred": pred, "p": p1, "y": y}, schema=schema))
    tmp.rename(path)


def read_labels(path: Path, indices: np.ndarray) -> np.ndarray:
    """The hidden labels of the drawn items, reading only their row groups."""
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    out = np.empty(indices.size, dtype=np.int8)
    group = indices // ROWS_PER_GROUP
    for g in np.unique(group):
        sel = group == g
        y = f.read_row_group(int(g), columns=["y"]).column("y").to_numpy()
        out[sel] = y[indices[sel] - g * ROWS_PER_GROUP]
    return out


# ------------------------------------------------------------------------------------------------
# one run (in a subprocess)
class RSSSampler:
    """Peak resident set size during a step, sampled every 10 ms."""

    def __init__(self):
        import psutil

        self.proc = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, self.proc.memory_info().rss)
            time.sleep(0.01)

    def reset(self) -> None:
        self.peak = self.proc.memory_info().rss

    def stop(self) -> None:
        self._stop.set()
        self._t.join()


def run_one(path: Path, n: int, mode: str) -> dict:
    import bayes_activeeval as bae
    from bayes_activeeval import lazy as lz

    sampler = RSSSampler()
    base_rss = sampler.proc.memory_info().rss
    steps: dict[str, dict] = {}

    def step(name, fn):
        sampler.reset()
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        steps[name] = {
            "s": dt,
            "peak_rss_mb": max(sampler.peak, sampler.proc.memory_info().rss) / 2**20,
        }
        print(
            f"  {mode} n={n:.0e} {name}: {dt:.2f} s, {steps[name]['peak_rss_mb']:.0f} MB",
            flush=True,
        )
        return out

    if mode == "memory":

        def open_():
            import pyarrow.parquet as pq

            t = pq.read_table(path, columns=["pred", "p"])
            return bae.Pool(
                predictions=t.column("pred").to_numpy(),
                probs=t.column("p").to_numpy(),
                classes=[0, 1],
            )

    else:

        def open_():
            return bae.Pool.from_parquet(path, classes=[0, 1], chunk_size=ROWS_PER_GROUP)

    pool = step("open", open_)
    prop = step("proposal", lambda: bae.optimal_proposal(pool, "f1"))
    draws = step("draw", lambda: prop.draw(N_DRAWS, rng=0))
    labels = step("label", lambda: read_labels(path, draws.indices))
    est = step("estimate", lambda: bae.estimate(pool, "f1", draws, labels))

    def refresh():
        R = np.asarray(prop.info["risk"]) * 1.01  # a new linearization point
        p2 = bae.optimal_proposal(pool, "f1", risk=R)
        d2 = p2.draw(STAGE_DRAWS, rng=1)
        labels2 = np.concatenate([labels, read_labels(path, d2.indices)])
        return bae.estimate(pool, "f1", draws + d2, labels2)

    step("refresh", refresh)
    ev = step(
        "ae_init",
        lambda: bae.ActiveEvaluator(pool, "f1", oracle="model", estimator="ipw", rng=0),
    )

    def stage():
        idx = ev.query(STAGE_DRAWS)
        ev.update(idx, read_labels(path, idx))
        return ev.estimate()

    step("stage1", stage)  # the first stage (lazily: fills the draw reservoirs, one pass)
    step("stage", stage)
    chunk = {}
    if mode == "lazy":
        prm = prop.params
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            pool.compute([pool.chunk_task(0, lz.chunks.mass_chunk, prm, False)])
            times.append(time.perf_counter() - t0)
        chunk = {"items": int(pool.chunk_sizes[0]), "pass_s": min(times), "n_chunks": pool.n_chunks}
    sampler.stop()
    return {
        "n_items": n,
        "mode": mode,
        "steps": steps,
        "target_s": steps["proposal"]["s"] + steps["draw"]["s"] + steps["estimate"]["s"],
        "base_rss_mb": base_rss / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "estimate": float(est.value),
        "stderr": float(est.stderr),
        "chunk": chunk,
    }


# ------------------------------------------------------------------------------------------------
# driver, report, projection
def projection(rows: list[dict]) -> list[dict]:
    """Time of proposal + draws + estimate at 10^9-10^10 items on W workers, from the measured
    per-chunk cost: PROPOSAL_PASSES passes over all chunks for the proposal (the scaled belief
    floor's two and the proposal's two), and the min(chunks, draws) chunks
    the draws land in twice (draw, then the estimate's gather; counted at the full chunk cost),
    split over W workers, plus ~1 ms of scheduler time per task (dask.distributed's per-task
    overhead)."""
    lazy = [r for r in rows if r["mode"] == "lazy" and r["chunk"]]
    if not lazy:
        return []
    big = max(lazy, key=lambda r: r["n_items"])
    t_chunk = big["chunk"]["pass_s"]
    items = big["chunk"]["items"]
    out = []
    for n in (10**9, 10**10):
        chunks = -(-n // items)
        tasks = PROPOSAL_PASSES * chunks + min(chunks, N_DRAWS) + min(chunks, N_DRAWS)
        for w in (16, 64, 256):
            touched = np.ceil(min(chunks, N_DRAWS) / w)  # the draws' and the estimate's chunks
            compute = (PROPOSAL_PASSES * np.ceil(chunks / w) + 2 * touched) * t_chunk
            sched = tasks * 1e-3
            out.append(
                {
                    "n_items": n,
                    "workers": w,
                    "chunks": chunks,
                    "s": compute + sched,
                    "per_worker_mb": None,
                }
            )
    return out


def report(data: dict) -> None:
    rows = data["rows"]
    proj = projection(rows)
    data["projection"] = proj
    (OUT / "scale.json").write_text(json.dumps(data, indent=1))
    meta = data["meta"]
    lines = [
        "# Scale: proposal, draws and estimate from 10^6 to 10^8 items",
        "",
        f"Machine: {meta['cores']} cores shared with other jobs (load average {meta['load']}), "
        f"Python {meta['python']}, dask {meta['dask']}; every run in its own process at `nice 5`. "
        "Binary pool, ~0.5% positives, measure F1, Parquet with 2^20-row row groups, chunks of "
        f"2^20 items, dask's threaded scheduler. Peak RSS is the process's resident memory "
        "(psutil, sampled every 10 ms), interpreter and libraries included "
        f"(~{np.median([r['base_rss_mb'] for r in rows]):.0f} MB after imports).",
        "",
        "| items | mode | open (s) | proposal (s) | 2,000 draws (s) | estimate (s) | "
        "proposal+draws+estimate (s) | refresh (s) | evaluator start (s) | first stage (s) "
        "| later stage (s) | peak RSS (MB) |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in sorted(rows, key=lambda r: (r["n_items"], r["mode"])):
        s = r["steps"]
        lines.append(
            f"| {r['n_items']:.0e} | {r['mode']} | {s['open']['s']:.2f} | {s['proposal']['s']:.2f} "
            f"| {s['draw']['s']:.2f} | {s['estimate']['s']:.2f} | {r['target_s']:.1f} "
            f"| {s['refresh']['s']:.2f} | {s['ae_init']['s']:.2f} | {s['stage1']['s']:.2f} "
            f"| {s['stage']['s']:.2f} "
            f"| {r['peak_rss_mb']:.0f} |"
        )
    lines += [
        "",
        "Peak RSS during each step (MB):",
        "",
        "| items | mode | open | proposal | draw | estimate | refresh | evaluator start | "
        "first stage | later stage |",
        "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in sorted(rows, key=lambda r: (r["n_items"], r["mode"])):
        s = r["steps"]
        lines.append(
            f"| {r['n_items']:.0e} | {r['mode']} | "
            + " | ".join(
                f"{s[k]['peak_rss_mb']:.0f}"
                for k in (
                    "open",
                    "proposal",
                    "draw",
                    "estimate",
                    "refresh",
                    "ae_init",
                    "stage1",
                    "stage",
                )
            )
            + " |"
        )
    tgt = [r for r in rows if r["mode"] == "lazy" and r["n_items"] == TARGET_N]
    if tgt:
        r = tgt[0]
        ok = r["target_s"] <= TARGET_S and r["peak_rss_mb"] / 1024 <= TARGET_RSS_GB
        lines += [
            "",
            f"Target (5x10^7 items lazily, <= {TARGET_RSS_GB} GB and <= {TARGET_S:.0f} s for proposal "
            f"+ 2,000 draws + estimate): {r['peak_rss_mb'] / 1024:.2f} GB, {r['target_s']:.1f} s — "
            + ("met." if ok else "NOT met."),
        ]
    big = [r for r in rows if r["mode"] == "lazy" and r["n_items"] == 10**8]
    if big:
        lines.append(
            f"10^8 items lazily: {big[0]['peak_rss_mb'] / 1024:.2f} GB peak RSS, "
            f"{big[0]['target_s']:.1f} s."
        )
    if proj:
        c = max((r for r in rows if r["chunk"]), key=lambda r: r["n_items"])["chunk"]
        lines += [
            "",
            "## Projection to a cluster",
            "",
            f"One chunk task of the proposal pass (read {c['items']:,} items from Parquet, compute "
            f"u(x) and the chunk sums) took {c['pass_s']:.3f} s on one thread. Proposal + 2,000 "
            f"draws + estimate is {PROPOSAL_PASSES} passes over all chunks (two of them for the "
            "scaled belief floor) plus one task per chunk that receives "
            "draws (drawn, then read again by the estimate); with W workers and ~1 ms of scheduler "
            "time per task:",
            "",
            "| items | chunks | workers | projected time (s) |",
            "| ---: | ---: | ---: | ---: |",
        ]
        for p in proj:
            lines.append(
                f"| {p['n_items']:.0e} | {p['chunks']:,} | {p['workers']} | {p['s']:.1f} |"
            )
        lines += [
            "",
            "Memory per worker stays that of a few chunks (the per-step peaks above, less the "
            "interpreter), whatever the pool size: nothing of size n is ever held. The client "
            "holds the chunk masses (8 bytes per chunk) and the draws.",
        ]
    (OUT / "scale.md").write_text("\n".join(lines) + "\n")
    plot(rows)


def plot(rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    IMG.mkdir(parents=True, exist_ok=True)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for mode, marker in (("memory", "o"), ("lazy", "s")):
        rs = sorted((r for r in rows if r["mode"] == mode), key=lambda r: r["n_items"])
        if not rs:
            continue
        n = [r["n_items"] for r in rs]
        axes[0].plot(n, [r["target_s"] for r in rs], marker=marker, label=mode)
        axes[1].plot(n, [r["peak_rss_mb"] / 1024 for r in rs], marker=marker, label=mode)
    axes[0].axhline(TARGET_S, color="grey", ls=":", lw=1)
    axes[1].axhline(TARGET_RSS_GB, color="grey", ls=":", lw=1)
    axes[0].set_ylabel("proposal + 2,000 draws + estimate (s)")
    axes[1].set_ylabel("peak RSS (GB)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("items in the pool")
        ax.legend()
    fig.tight_layout()
    fig.savefig(IMG / "scale.png", dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1e6,1e7,5e7,1e8")
    ap.add_argument("--workdir", default="/tmp/bae-scale")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--run", nargs=3, metavar=("PATH", "N", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run:
        path, n, mode = args.run
        print("RESULT " + json.dumps(run_one(Path(path), int(n), mode)), flush=True)
        return
    OUT.mkdir(exist_ok=True)
    if args.report:
        report(json.loads((OUT / "scale.json").read_text()))
        return
    import dask

    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    old = {}
    if (OUT / "scale.json").exists():
        old = {
            (r["n_items"], r["mode"]): r
            for r in json.loads((OUT / "scale.json").read_text())["rows"]
        }
    for n in (int(float(s)) for s in args.sizes.split(",")):
        path = work / f"pool_{n}.parquet"
        if not path.exists():
            t0 = time.perf_counter()
            write_pool(path, n)
            print(
                f"wrote {path} ({path.stat().st_size / 2**20:.0f} MB) in {time.perf_counter() - t0:.1f} s",
                flush=True,
            )
        for mode in ("memory", "lazy") if n <= IN_MEMORY_MAX else ("lazy",):
            res = subprocess.run(
                [sys.executable, __file__, "--run", str(path), str(n), mode],
                capture_output=True,
                text=True,
                check=False,
            )
            sys.stdout.write(res.stdout)
            if res.returncode:
                sys.stderr.write(res.stderr)
                raise SystemExit(f"run n={n} mode={mode} failed")
            line = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")][-1]
            old[(n, mode)] = json.loads(line[7:])
        if not args.keep:
            path.unlink()
    data = {
        "meta": {
            "cores": os.cpu_count(),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "python": platform.python_version(),
            "dask": dask.__version__,
            "date": time.strftime("%Y-%m-%d"),
        },
        "rows": list(old.values()),
    }
    report(data)


if __name__ == "__main__":
    main()
