"""`tierlab recommend` on one traced query of many requests, end to end, as users run it.

Synthesizes an analyzed run in a temporary directory: TPC-H Q3 traced with its three tables on the
emulated capacity tier (nand), as a raw ftrace window of N requests (lineitem scanned in 128 KiB reads,
orders and customer read at random in 16 KiB pages, a tenth of the requests writes to `other`), analyzed
by `tierlab analyze` and given its manifest by `tierlab manifest`, as the collect role does. Then times
`tierlab recommend RUN --fast-capacity 2G --json`: process start to its answer (every split of the three
tables replayed on both tiers' device models, both caches simulated at every capacity of the curve), with
its peak resident memory (see peak_memory.py) per request. There is no other tool that answers this
question to run beside it; the figures to hold it to are the issue's (10^7 requests: under 10 s, under 100
bytes per request).

    .venv/bin/python benchmarks/recommend.py --requests 1000000
    .venv/bin/python benchmarks/recommend.py                   # 10,000,000 requests
"""

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from analyze_ftrace import START_S, raw_pages
from peak_memory import run_measured

from tierlab.traces.formats import FTRACE_RAW_MAGIC
from tierlab.traces.ftrace_raw import KERNEL_LAYOUT

PROJECT = Path(__file__).resolve().parents[1]
TIERLAB = str(Path(sys.executable).with_name("tierlab"))
RUN_ID = "20261125T080000Z_mariadb_tpch-sf10_None"
CAPACITY_DEVICE, FAST_DEVICE = "7:1", "7:0"
# the tables' files, one after the other on the capacity tier's file system; Q3 reads the first three
TABLES = {"lineitem": 8 << 30, "orders": 2 << 30, "customer": 256 << 20, "part": 320 << 20, "partsupp": 1280 << 20,
          "supplier": 16 << 20, "nation": 64 << 10, "region": 64 << 10}
READ_SHARE = [0.6, 0.25, 0.15, 0, 0, 0, 0, 0]
PAGE_SECTORS = 32


def _requests(count: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Dispatch and completion times (s), sectors, lengths (sectors) and kinds of a Q3-like request stream."""
    starts = np.cumsum([0, *TABLES.values()])[:-1] // 512
    table = rng.choice(len(TABLES), count, p=READ_SHARE)
    other = rng.random(count) < 0.1
    length = np.where(table == 0, 8 * PAGE_SECTORS, PAGE_SECTORS)
    pages = np.array(list(TABLES.values())) // 512 // PAGE_SECTORS
    sector = starts[table] + rng.integers(0, pages[table]) * PAGE_SECTORS
    scan = np.flatnonzero(table == 0)
    sector[scan] = starts[0] + (np.arange(len(scan)) * 8 * PAGE_SECTORS) % (pages[0] * PAGE_SECTORS)
    # the redo log and temporary files: past the tables, on the same file system
    sector[other] = sum(TABLES.values()) // 512 + rng.integers(0, 1 << 20, other.sum()) * 8
    length[other] = 8
    kind = np.where(other, "WS", np.where(table == 0, "RA", "R"))
    dispatch = START_S + np.cumsum(rng.integers(2, 40, count)) / 1e6
    complete = dispatch + (20 + rng.lognormal(np.log(90), 0.7, count)) / 1e6
    return dispatch, complete, sector, length, kind


def synthesize(run: Path, count: int) -> tuple[float, int]:
    """The raw run directory; returns the query's traced seconds and the trace's bytes."""
    for sub in ("config", "raw/traces"):
        (run / sub).mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"schema_version": 3, "run_id": RUN_ID}))
    dispatch, complete, sector, length, kind = _requests(count, np.random.default_rng(1))
    cpus = [[("issue", round(at * 1e9), 12033, CAPACITY_DEVICE, int(s), int(n), str(k), "mariadbd")
             for at, s, n, k in zip(dispatch, sector, length, kind, strict=True)],
            sorted((("complete", round(at * 1e9), 0, CAPACITY_DEVICE, int(s), int(n), str(k))
                    for at, s, n, k in zip(complete, sector, length, kind, strict=True)),
                   key=lambda event: event[1])]
    scratch = run.parent / "scratch.ftrace-raw"
    first_s, last_s = START_S - 0.001, float(complete.max()) + 0.001
    path = run / "raw" / "traces" / "q03_try1.ftrace-raw"
    path.write_bytes(FTRACE_RAW_MAGIC + json.dumps(KERNEL_LAYOUT).encode() + b"\n"
                     + raw_pages(scratch, [[("print", round(first_s * 1e9), "tierlab start q03_try1")]])
                     + raw_pages(scratch, cpus)
                     + raw_pages(scratch, [[("print", round(last_s * 1e9), "tierlab end q03_try1")]]))
    profiles = {name: (PROJECT / "emulator" / "profiles" / f"{name}.toml").read_text() for name in ("optane", "nand")}
    tiers = [{"name": name, "role": role, "path": f"/t/{name}", "device": dev, "emulated": True, "emulation": "model",
              "profile": {"name": name, "text": profiles[name]}, "calibration": {"dilation": 1.0}}
             for name, role, dev in (("optane", "fast", FAST_DEVICE), ("nand", "capacity", CAPACITY_DEVICE))]
    (run / "raw" / "tiers.json").write_text(json.dumps(tiers))
    offsets = np.cumsum([0, *TABLES.values()])
    (run / "raw" / "extents.json").write_text(json.dumps({"files": [
        {"object": table, "kind": "table", "table": table, "path": f"/t/nand/{table}.ibd", "offset_bytes": 0,
         "tier": "nand", "device": CAPACITY_DEVICE, "size_bytes": size, "extents": [[0, int(start), size]]}
        for (table, size), start in zip(TABLES.items(), offsets, strict=False)]}))
    settings = {"engine": "mariadb", "workload": "tpch", "scale_factor": 10, "queries": ["q03"], "tries": 1, "cold": True,
             "trace": True, "query_timeout_s": 3600, "layout": "None", "page_size_bytes": 16384,
             "placement": {table: "capacity" for table in TABLES}}
    (run / "config" / "run.json").write_text(json.dumps({
        "run_id": RUN_ID, "started_at": "2026-11-25T08:00:00Z", "host": {"name": "localhost"}, "versions": {},
        "tiers": [], "settings": settings}))
    elapsed_s = round(last_s - first_s + 2.0, 3)
    (run / "raw" / "queries.jsonl").write_text(json.dumps({
        "query": "q03", "try": 1, "status": "ok", "error": "", "elapsed_s": elapsed_s, "rows": 10, "cache": "cold",
        "started_at": "2026-11-25T08:00:10Z", "trace_files": [path.name], "events_lost": 0}) + "\n")
    return elapsed_s, path.stat().st_size


def tierlab(*args: str) -> None:
    """A tierlab command run to its end; its error shown if it fails."""
    done = subprocess.run([TIERLAB, *args], capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"tierlab {args[0]} failed:\n{done.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000_000, help="traced requests (default 10,000,000)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of recommend (default 2)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="recommend."))
    try:
        run = tmp / RUN_ID
        start = time.perf_counter()
        elapsed_s, size = synthesize(run, args.requests)
        print(f"synthesized {args.requests:,} requests of Q3 ({elapsed_s:.1f} s traced), a {size / 1e6:,.1f} MB raw "
              f"ftrace window, in {time.perf_counter() - start:.1f} s", flush=True)
        start = time.perf_counter()
        tierlab("analyze", str(run))
        tierlab("manifest", str(run), "--status", "ok")
        print(f"analyzed in {time.perf_counter() - start:.1f} s", flush=True)
        recommend = ["recommend", str(run), "--fast-capacity", "2G", "--json"]
        timings = []
        for _ in range(args.repeat):
            seconds, peak, status, out = run_measured([TIERLAB, *recommend], capture=True)
            if status:
                tierlab(*recommend)     # again, for its error (the measured run's stderr is not kept)
                sys.exit(f"tierlab recommend failed with wait status {status}")
            timings.append((seconds, peak))
            print(f"  tierlab recommend {seconds:.2f} s, peak {peak / 1e6:,.1f} MB", flush=True)
        answer = json.loads(out)
        best, peak = min(s for s, _ in timings), max(p for _, p in timings)
        print(f"tierlab recommend: best {best:.2f} s  {args.requests / best:12,.0f} requests/s  peak {peak / 1e6:,.1f} MB, "
              f"{peak / args.requests:.1f} bytes/request (the interpreter and its libraries included)")
        print(f"answer at 2G: {answer['layout']}, predicted {answer['predicted_s']:.2f} s against {answer['traced_s']:.2f} s "
              f"traced; {len(answer['capacity_curve'])} capacities on the curve")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
