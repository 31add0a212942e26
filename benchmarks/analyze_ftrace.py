"""`tierlab analyze` of a run traced through ftrace, end to end: its raw windows (what runs capture) beside
the same requests as ftrace text (what runs captured before), and reading the text once with wc.

Synthesizes two run directories of the same requests (22 queries by default, each window with its start
and end markers, over one 16 GiB table file) in a temporary directory: one of raw ftrace windows (ring-buffer
pages), one of ftrace text. Then times, in the same run:

* `tierlab analyze RUN` of each, what a user (and the collect role) runs: process start to its tables and
  report, with its peak resident memory (see peak_memory.py);
* `wc -l` over the text traces: the cost of reading the text once, the floor of any text parser.

    .venv/bin/python benchmarks/analyze_ftrace.py --requests 1000000
    .venv/bin/python benchmarks/analyze_ftrace.py            # 5,000,000 requests, about a SF 1 run's traces
    .venv/bin/python benchmarks/analyze_ftrace.py --requests 100000000 --queries 220   # windows as large as
                                                             # at 10^7 requests: the peak memory stays the same
"""

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from peak_memory import run_measured

from tierlab.traces.formats import FTRACE_RAW_MAGIC
from tierlab.traces.ftrace_raw import KERNEL_LAYOUT, write_ftrace_raw

QUERIES = 22
START_S = 1000.0
DEVICE = "7,1"
FILE_BYTES = 16 << 30


def _body(requests: int, rng: np.random.Generator) -> tuple[str, list[list[tuple]], float]:
    """The block events of one query window (its requests' dispatches and completions, in time order) as
    ftrace text and as the raw records of two CPUs (dispatches on one, completions on the other), and the
    time of the last."""
    dispatch = START_S + np.cumsum(rng.integers(1, 20, requests)) / 1e6
    complete = dispatch + (5 + rng.lognormal(np.log(150), 0.8, requests)) / 1e6
    # half the reads continue the last one (a scan), half land anywhere
    sectors = rng.integers(0, FILE_BYTES // 512 // 32, requests) * 32
    scan = rng.random(requests) < 0.5
    sectors[1:][scan[1:]] = sectors[:-1][scan[1:]] + 32
    rwbs = rng.choice(["R", "RA", "WS"], requests, p=[0.6, 0.3, 0.1])
    # whole microseconds, as the text shows them
    dispatch, complete = np.round(dispatch, 6), np.round(complete, 6)
    times = np.concatenate([dispatch, complete])
    lines = []
    for event in np.argsort(times, kind="stable"):
        i, at = event % requests, times[event]
        if event < requests:
            lines.append(f"        mariadbd-12033   [000] .....  {at:.6f}: block_rq_issue: {DEVICE} {rwbs[i]} 16384 () "
                         f"{sectors[i]} + 32 be,0,4 [mariadbd]\n")
        else:
            lines.append(f"          <idle>-0       [001] ..s1.  {at:.6f}: block_rq_complete: {DEVICE} {rwbs[i]} () "
                         f"{sectors[i]} + 32 be,0,4 [0]\n")
    device = DEVICE.replace(",", ":")
    cpus = [[("issue", round(at * 1e9), 12033, device, int(sector), 32, str(kind), "mariadbd")
             for at, sector, kind in zip(dispatch, sectors, rwbs, strict=True)],
            sorted((("complete", round(at * 1e9), 0, device, int(sector), 32, str(kind))
                    for at, sector, kind in zip(complete, sectors, rwbs, strict=True)), key=lambda event: event[1])]
    return "".join(lines), cpus, float(times.max())


def raw_pages(path: Path, cpus: list[list[tuple]]) -> bytes:
    """The ring-buffer pages of a raw window of these events (without the file's first two lines)."""
    data = write_ftrace_raw(path, cpus).read_bytes()
    return data[data.index(b"\n", len(FTRACE_RAW_MAGIC)) + 1:]


def synthesize(run: Path, requests: int, queries: int, raw: bool) -> int:
    """A run directory with `queries` traced queries sharing the requests, each window the same events
    between its own markers (one window is synthesized, then written for every query), as raw windows or
    as text; returns the traces' bytes."""
    for sub in ("config", "raw/traces"):
        (run / sub).mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"schema_version": 3, "run_id": run.name}))
    names = [f"q{number:02d}" for number in range(1, queries + 1)]
    settings = {"engine": "mariadb", "workload": "tpch", "scale_factor": 1, "queries": names, "tries": 1, "cold": True,
             "query_timeout_s": 3600, "layout": "None", "placement": {"lineitem": "capacity"}, "page_size_bytes": 16384}
    (run / "config" / "run.json").write_text(json.dumps({
        "run_id": run.name, "started_at": "2026-11-23T09:28:37Z", "host": "localhost", "versions": {},
        "tiers": [], "settings": settings}))
    (run / "raw" / "tiers.json").write_text(json.dumps([{"name": "nand", "role": "capacity", "emulated": False,
                                                             "device": DEVICE.replace(",", ":")}]))
    (run / "raw" / "extents.json").write_text(json.dumps({"files": [
        {"object": "lineitem", "kind": "table", "table": "lineitem", "path": "/t/lineitem.ibd", "offset_bytes": 0,
         "tier": "nand", "device": DEVICE.replace(",", ":"), "size_bytes": FILE_BYTES,
         "extents": [[0, 0, FILE_BYTES]]}]}))
    per_window = requests // queries
    body, cpus, last_s = _body(per_window, np.random.default_rng(1))
    scratch = run.parent / "scratch.ftrace-raw"
    pages = raw_pages(scratch, cpus) if raw else b""
    rows, total = [], 0
    for name in names:
        label = f"{name}_try1"
        if raw:
            path = run / "raw" / "traces" / f"{label}.ftrace-raw"
            start = raw_pages(scratch, [[("print", round((START_S - 0.001) * 1e9), f"tierlab start {label}")]])
            end = raw_pages(scratch, [[("print", round((last_s + 0.001) * 1e9), f"tierlab end {label}")]])
            path.write_bytes(FTRACE_RAW_MAGIC + json.dumps(KERNEL_LAYOUT).encode() + b"\n" + start + pages + end)
        else:
            path = run / "raw" / "traces" / f"{label}.ftrace"
            with open(path, "w") as out:
                out.write(f"# tracer: nop\n#\n# entries-in-buffer/entries-written: {2 * per_window + 2}/"
                          f"{2 * per_window + 2}   #P:2\n")
                out.write(f"         python3-11974   [000] ...1.  {START_S - 0.001:.6f}: tracing_mark_write: "
                          f"tierlab start {label}\n")
                out.write(body)
                out.write(f"         python3-11974   [000] ...1.  {last_s + 0.001:.6f}: tracing_mark_write: "
                          f"tierlab end {label}\n")
        total += path.stat().st_size
        rows.append({"query": name, "try": 1, "status": "ok", "error": "", "elapsed_s": 1.0, "rows": 1,
                     "cache": "cold", "started_at": "2026-11-23T09:28:40Z", "trace_files": [path.name], "events_lost": 0})
    (run / "raw" / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return total


def timed(cmd: list[str]) -> tuple[float, int]:
    """Seconds and peak resident bytes of a command, run to its end."""
    seconds, peak, status, _ = run_measured(cmd)
    if status:
        sys.exit(f"{' '.join(cmd[:2])} failed with wait status {status}")
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5_000_000, help="requests over all queries (default 5,000,000)")
    parser.add_argument("--queries", type=int, default=QUERIES, help=f"query windows (default {QUERIES})")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, alternating (default 2)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="analyze_ftrace."))
    try:
        runs, sizes = {}, {}
        for kind in ("raw", "text"):
            runs[kind] = tmp / kind / "20261123T092837Z_mariadb_tpch-sf1_C+O"
            start = time.perf_counter()
            sizes[kind] = synthesize(runs[kind], args.requests, args.queries, raw=kind == "raw")
            print(f"synthesized {args.requests:,} requests in {args.queries} {kind} ftrace windows, "
                  f"{sizes[kind] / 1e6:,.1f} MB, in {time.perf_counter() - start:.1f} s", flush=True)
        tierlab = str(Path(sys.executable).with_name("tierlab"))
        text_traces = sorted(str(p) for p in (runs["text"] / "raw" / "traces").iterdir())
        timings = {"raw": [], "text": [], "wc": []}
        for _ in range(args.repeat):
            for kind in ("raw", "text"):
                timings[kind].append(timed([tierlab, "analyze", str(runs[kind])]))
            timings["wc"].append(timed(["wc", "-l", *text_traces]))
            print("  " + ", ".join(f"{name} {measured[-1][0]:.2f} s" for name, measured in timings.items()), flush=True)
        for kind in ("raw", "text"):
            best, peak = min(s for s, _ in timings[kind]), max(p for _, p in timings[kind])
            print(f"tierlab analyze, {kind:4}:  best {best:7.2f} s  {sizes[kind] / best / 1e6:7.1f} MB/s  "
                  f"{args.requests / best:12,.0f} requests/s  peak {peak / 1e6:,.1f} MB, "
                  f"{peak / args.requests:.1f} bytes/request (the interpreter and its libraries included)")
        floor_s = min(s for s, _ in timings["wc"])
        print(f"wc -l of the text:       best {floor_s:7.2f} s  {sizes['text'] / floor_s / 1e6:7.1f} MB/s")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
