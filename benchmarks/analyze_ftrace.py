"""`tierlab analyze` of a run traced through ftrace, end to end, beside reading its traces once with wc.

Synthesizes a run directory (22 queries by default, each an ftrace text trace of its window with its start
and end markers, over one 16 GiB table file) in a temporary directory, then times, in the same run:

* `tierlab analyze RUN`, what a user (and the collect role) runs: process start to its tables and report,
  with its peak resident memory (the child's ru_maxrss);
* `wc -l` over the same traces: the cost of reading the text once, the floor.

    .venv/bin/python benchmarks/analyze_ftrace.py --requests 1000000
    .venv/bin/python benchmarks/analyze_ftrace.py            # 5,000,000 requests, about a SF 1 run's traces
    .venv/bin/python benchmarks/analyze_ftrace.py --requests 100000000 --queries 220   # windows as large as
                                                             # at 10^7 requests: the peak memory stays the same
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

QUERIES = 22
START_S = 1000.0
DEVICE = "7,1"
FILE_BYTES = 16 << 30


def _body(requests: int, rng: np.random.Generator) -> tuple[str, float]:
    """The block events of one query window (its requests' dispatches and completions, in time order),
    and the time of the last."""
    dispatch = START_S + np.cumsum(rng.integers(1, 20, requests)) / 1e6
    complete = dispatch + (5 + rng.lognormal(np.log(150), 0.8, requests)) / 1e6
    # half the reads continue the last one (a scan), half land anywhere
    sectors = rng.integers(0, FILE_BYTES // 512 // 32, requests) * 32
    scan = rng.random(requests) < 0.5
    sectors[1:][scan[1:]] = sectors[:-1][scan[1:]] + 32
    rwbs = rng.choice(["R", "RA", "WS"], requests, p=[0.6, 0.3, 0.1])
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
    return "".join(lines), float(times.max())


def synthesize(run: Path, requests: int, queries: int) -> int:
    """A run directory with `queries` traced queries sharing the requests, each window the same events
    between its own markers (one window is synthesized, then written for every query); returns the
    traces' bytes."""
    for sub in ("config", "raw/traces"):
        (run / sub).mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"schema_version": 1, "run_id": run.name}))
    names = [f"q{number:02d}" for number in range(1, queries + 1)]
    study = {"engine": "mariadb", "workload": "tpch", "scale_factor": 1, "queries": names, "tries": 1, "cold": True,
             "query_timeout_s": 3600, "layout": "None", "placement": {"lineitem": "capacity"}, "page_size_bytes": 16384}
    (run / "config" / "study.json").write_text(json.dumps({
        "run_id": run.name, "started_at": "2026-11-23T09:28:37Z", "host": "localhost", "versions": {},
        "tiers": [], "study": study}))
    (run / "raw" / "tiers.json").write_text(json.dumps([{"name": "nand", "role": "capacity", "emulated": False,
                                                             "device": DEVICE.replace(",", ":")}]))
    (run / "raw" / "extents.json").write_text(json.dumps({"files": [
        {"object": "lineitem", "path": "/t/lineitem.ibd", "device": DEVICE.replace(",", ":"),
         "extents": [[0, 0, FILE_BYTES]]}]}))
    per_window = requests // queries
    body, last_s = _body(per_window, np.random.default_rng(1))
    rows, total = [], 0
    for name in names:
        label = f"{name}_try1"
        path = run / "raw" / "traces" / f"{label}.ftrace"
        with open(path, "w") as out:
            out.write(f"# tracer: nop\n#\n# entries-in-buffer/entries-written: {2 * per_window + 2}/{2 * per_window + 2}"
                      "   #P:2\n")
            out.write(f"         python3-11974   [000] ...1.  {START_S - 0.001:.6f}: tracing_mark_write: tierlab start {label}\n")
            out.write(body)
            out.write(f"         python3-11974   [000] ...1.  {last_s + 0.001:.6f}: tracing_mark_write: tierlab end {label}\n")
        total += path.stat().st_size
        rows.append({"query": name, "try": 1, "status": "ok", "error": "", "elapsed_s": 1.0, "rows": 1,
                     "cache": "cold", "started_at": "2026-11-23T09:28:40Z", "trace_files": [path.name], "events_lost": 0})
    (run / "raw" / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return total


def timed(cmd: list[str]) -> tuple[float, int]:
    """Seconds and peak resident bytes of a command, run to its end."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)
    if status:
        sys.exit(f"{' '.join(cmd[:2])} failed with wait status {status}")
    return time.perf_counter() - start, usage.ru_maxrss * 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=5_000_000, help="requests over all queries (default 5,000,000)")
    parser.add_argument("--queries", type=int, default=QUERIES, help=f"query windows (default {QUERIES})")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each, alternating (default 2)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="analyze_ftrace."))
    try:
        run = tmp / "20261123T092837Z_mariadb_tpch-sf1_C+O"
        start = time.perf_counter()
        size = synthesize(run, args.requests, args.queries)
        print(f"synthesized {args.requests:,} requests in {args.queries} ftrace traces, {size / 1e6:,.1f} MB, "
              f"in {time.perf_counter() - start:.1f} s", flush=True)
        traces = sorted(str(p) for p in (run / "raw" / "traces").iterdir())
        analyze = [str(Path(sys.executable).with_name("tierlab")), "analyze", str(run)]
        ours, floor = [], []
        for _ in range(args.repeat):
            ours.append(timed(analyze))
            floor.append(timed(["wc", "-l", *traces]))
            print(f"  tierlab analyze {ours[-1][0]:.2f} s, wc -l {floor[-1][0]:.2f} s", flush=True)
        best, peak = min(seconds for seconds, _ in ours), max(peak for _, peak in ours)
        print(f"tierlab analyze:  best {best:7.2f} s  {size / best / 1e6:7.1f} MB/s  {args.requests / best:12,.0f} requests/s")
        floor_s = min(seconds for seconds, _ in floor)
        print(f"wc -l:            best {floor_s:7.2f} s  {size / floor_s / 1e6:7.1f} MB/s")
        print(f"tierlab analyze peak memory: {peak / 1e6:,.1f} MB, {peak / args.requests:.1f} bytes/request "
              "(the interpreter and its libraries included)")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
