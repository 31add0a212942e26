"""`tierlab trace-stats` on binary blktrace against `blkparse`, end to end, on one synthetic trace.

Synthesizes N requests (a dispatch and a completion each) on one NVMe device as per-CPU files
`trace.blktrace.N` in a temporary directory (process notes included), then times, in the same run:

* `tierlab trace-stats --json prefix`, what a user runs: process start to its JSON (decoding,
  matching, every metric), with its peak resident memory (see peak_memory.py) per request;
* `blkparse -i prefix -o /dev/null` (text output thrown away), which only decodes.

Each is run --repeat times, alternating; the best and the median are reported.

    .venv/bin/python benchmarks/trace_stats.py --requests 1000000
    .venv/bin/python benchmarks/trace_stats.py            # 10,000,000 requests
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from peak_memory import run_measured

from tierlab.traces.blk import blk_action, dev_t, record_dtype
from tierlab.traces.blktrace import write_blktrace

DEVICE = "259:0"
PIDS = 64
START_NS = 1_000_000_000_000


def synthesize(prefix: Path, requests: int, cpus: int, seed: int = 1) -> int:
    """Write the per-CPU files; returns their total size in bytes."""
    rng = np.random.default_rng(seed)
    dispatch = START_NS + np.cumsum(rng.integers(1_000, 20_000, requests))
    complete = dispatch + 5_000 + rng.lognormal(np.log(150_000), 0.8, requests).astype(np.int64)
    pid_index = rng.integers(0, PIDS, requests)
    write = rng.random(requests) < 0.3
    sync = rng.random(requests) < 0.5
    flavour = write * 2 + sync
    rwbs = ["R", "RS", "W", "WS"]
    d_action = np.array([blk_action("D", r) for r in rwbs], dtype=np.uint32)[flavour]
    c_action = np.array([blk_action("C", r) for r in rwbs], dtype=np.uint32)[flavour]
    nbytes = (rng.choice([8, 16, 32, 64, 128, 256], requests) * 512).astype(np.uint32)
    sector = rng.integers(0, (1 << 31) // 8, requests).astype(np.uint64) * 8
    d_cpu = pid_index % cpus
    c_cpu = rng.integers(0, cpus, requests)
    fields = record_dtype("<", names=("sequence", "time", "sector", "bytes", "action", "pid", "device", "cpu"))
    total = 0
    for cpu in range(cpus):
        path = Path(f"{prefix}.blktrace.{cpu}")
        notes = [("process", START_NS - 1_000, DEVICE, 5_000 + i, f"mariadbd-w{i}", cpu) for i in range(PIDS)] if cpu == 0 else []
        write_blktrace(path, notes, cpu=cpu)
        d, c = np.flatnonzero(d_cpu == cpu), np.flatnonzero(c_cpu == cpu)
        times = np.concatenate([dispatch[d], complete[c]])
        order = np.argsort(times, kind="stable")
        records = np.zeros(len(times), dtype=fields)
        records["sequence"] = np.arange(1, len(times) + 1)
        records["time"] = times[order]
        records["sector"] = np.concatenate([sector[d], sector[c]])[order]
        records["bytes"] = np.concatenate([nbytes[d], nbytes[c]])[order]
        records["action"] = np.concatenate([d_action[d], c_action[c]])[order]
        records["pid"] = np.concatenate([5_000 + pid_index[d], np.zeros(len(c), np.int64)])[order]
        records["device"] = dev_t(DEVICE)
        records["cpu"] = cpu
        write_blktrace(path, records, cpu=cpu, append=True)
        total += path.stat().st_size
    return total


def status_bytes(status: str, key: str) -> int:
    """A memory figure of /proc/PID/status ("VmRSS", "VmHWM"), in bytes."""
    return int(status.split(key + ":")[1].split()[0]) * 1024


def trace_stats(prefix: Path) -> dict:
    """`tierlab trace-stats --json prefix` in a fresh process: seconds, peak resident bytes, its JSON."""
    seconds, peak, status, out = run_measured([str(Path(sys.executable).with_name("tierlab")), "trace-stats", "--json",
                                               str(prefix)], capture=True)
    if status:
        sys.exit(f"tierlab trace-stats failed with wait status {status}")
    return {"seconds": seconds, "peak": peak, "stats": json.loads(out)}


def blkparse(prefix: Path) -> tuple[float, int]:
    """Seconds and peak resident bytes (VmHWM, sampled while it runs) of `blkparse -i prefix -o /dev/null`."""
    start = time.perf_counter()
    child = subprocess.Popen(["blkparse", "-i", str(prefix), "-o", "/dev/null"], stdout=subprocess.DEVNULL)
    peak = 0
    while child.poll() is None:
        try:
            peak = max(peak, status_bytes(Path(f"/proc/{child.pid}/status").read_text(), "VmHWM"))
        except (OSError, IndexError):
            pass
        time.sleep(0.01)
    seconds = time.perf_counter() - start
    if child.returncode:
        sys.exit(f"blkparse failed with exit status {child.returncode}")
    return seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=10_000_000, help="D+C pairs (default 10,000,000)")
    parser.add_argument("--cpus", type=int, default=2, help="per-CPU files (default 2)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each decoder, alternating (default 5)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and say where it is")
    args = parser.parse_args()
    if shutil.which("blkparse") is None:
        sys.exit("blkparse is not installed (Debian/Ubuntu: apt-get install blktrace)")
    tmp = Path(tempfile.mkdtemp(prefix="trace_stats."))
    try:
        prefix = tmp / "trace"
        start = time.perf_counter()
        size = synthesize(prefix, args.requests, args.cpus)
        os.sync()   # neither tool runs beside the kernel writing the files back
        print(f"synthesized {args.requests:,} requests in {args.cpus} per-CPU files, {size / 1e6:,.1f} MB, "
              f"in {time.perf_counter() - start:.1f} s", flush=True)
        ours, theirs = [], []
        for _ in range(args.repeat):
            ours.append(trace_stats(prefix))
            theirs.append(blkparse(prefix))
            print(f"  tierlab trace-stats {ours[-1]['seconds']:.3f} s, blkparse {theirs[-1][0]:.3f} s", flush=True)
        if any(run["stats"]["requests"] != args.requests for run in ours):
            sys.exit(f"counted {ours[0]['stats']['requests']:,} requests, expected {args.requests:,}: "
                     f"{ours[0]['stats']['counts']}")
        ours_s = [run["seconds"] for run in ours]
        theirs_s = [seconds for seconds, _ in theirs]
        for name, times in (("tierlab trace-stats", ours_s), ("blkparse -i", theirs_s)):
            print(f"{name + ':':23s} best {min(times):8.3f} s {args.requests / min(times):13,.0f} requests/s   "
                  f"median {statistics.median(times):8.3f} s {args.requests / statistics.median(times):13,.0f} requests/s")
        best, median = min(theirs_s) / min(ours_s), statistics.median(theirs_s) / statistics.median(ours_s)
        print(f"{'ratio:':23s} best {best:8.2f}x {'':24s} median {median:8.2f}x")
        peak = max(run["peak"] for run in ours)
        print(f"tierlab trace-stats peak memory: {peak / 1e6:,.1f} MB, {peak / args.requests:.1f} bytes/request "
              "(the interpreter and its libraries included)")
        print(f"blkparse peak memory: {max(peak for _, peak in theirs) / 1e6:,.1f} MB (sampled)")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
