"""Decoding binary blktrace: tierlab's parse_blktrace_binary against `blkparse`, on one synthetic trace.

Synthesizes N requests (a dispatch and a completion each) on one NVMe device as per-CPU files
`trace.blktrace.N` in a temporary directory (process notes included), then times, in the same run:

* parse_blktrace_binary(prefix), in a fresh Python process, whose peak resident memory above
  what it held before the call is reported per request (VmHWM of /proc/self/status);
* `blkparse -i prefix -o /dev/null` (text output thrown away).

Each is run --repeat times, alternating; the best and the median are reported.

    .venv/bin/python benchmarks/decode_blktrace.py --requests 1000000
    .venv/bin/python benchmarks/decode_blktrace.py            # 10,000,000 requests
"""

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from tierlab.parse_blktrace import blk_action, dev_t, record_dtype, write_blktrace

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


def decode_in_child(prefix: Path) -> dict:
    """parse_blktrace_binary in a fresh interpreter: seconds, rows, resident memory before the call
    and at its peak (VmHWM, reset before the call; ru_maxrss would count the parent's memory, which a
    child inherits at exec)."""
    code = f"""
import json, resource, time
from tierlab.parse_blktrace import parse_blktrace_binary
def status():
    with open("/proc/self/status") as f:
        return f.read()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before, cpu = status(), resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
trace = parse_blktrace_binary({str(prefix)!r})
seconds = time.perf_counter() - start
used = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"seconds": seconds, "rows": len(trace.requests), "before": before, "after": status(),
                   "user": used.ru_utime - cpu.ru_utime, "sys": used.ru_stime - cpu.ru_stime,
                   "frame_bytes": int(trace.requests.memory_usage(deep=True).sum()), "counts": trace.counts}}))
"""
    result = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    ours = json.loads(result.stdout)
    ours["rss_before"] = status_bytes(ours.pop("before"), "VmRSS")
    ours["peak"] = status_bytes(ours.pop("after"), "VmHWM")
    return ours


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
    parser.add_argument("--repeat", type=int, default=3, help="runs of each decoder, alternating (default 3)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory and say where it is")
    args = parser.parse_args()
    if shutil.which("blkparse") is None:
        sys.exit("blkparse is not installed (Debian/Ubuntu: apt-get install blktrace)")
    tmp = Path(tempfile.mkdtemp(prefix="decode_blktrace."))
    try:
        prefix = tmp / "trace"
        start = time.perf_counter()
        size = synthesize(prefix, args.requests, args.cpus)
        print(f"synthesized {args.requests:,} requests in {args.cpus} per-CPU files, {size / 1e6:,.1f} MB, "
              f"in {time.perf_counter() - start:.1f} s", flush=True)
        ours, theirs = [], []
        for _ in range(args.repeat):
            ours.append(decode_in_child(prefix))
            theirs.append(blkparse(prefix))
            print(f"  parse_blktrace_binary {ours[-1]['seconds']:.3f} s (CPU: user {ours[-1]['user']:.2f} s, "
                  f"system {ours[-1]['sys']:.2f} s), blkparse {theirs[-1][0]:.3f} s", flush=True)
        if any(run["rows"] != args.requests for run in ours):
            sys.exit(f"decoded {ours[0]['rows']:,} requests, expected {args.requests:,}: {ours[0]['counts']}")
        ours_s = [run["seconds"] for run in ours]
        theirs_s = [seconds for seconds, _ in theirs]
        for name, times in (("parse_blktrace_binary", ours_s), ("blkparse -i", theirs_s)):
            print(f"{name + ':':23s} best {min(times):8.3f} s {args.requests / min(times):13,.0f} requests/s   "
                  f"median {statistics.median(times):8.3f} s {args.requests / statistics.median(times):13,.0f} requests/s")
        best, median = min(theirs_s) / min(ours_s), statistics.median(theirs_s) / statistics.median(ours_s)
        print(f"{'ratio:':23s} best {best:8.2f}x {'':24s} median {median:8.2f}x")
        growth, held = max(run["peak"] - run["rss_before"] for run in ours), ours[0]["rss_before"]
        print(f"peak memory of the decode: {growth / 1e6:,.1f} MB above the {held / 1e6:,.1f} MB held before it, "
              f"{growth / args.requests:.1f} bytes/request (the frame it returns: {ours[0]['frame_bytes'] / args.requests:.1f})")
        print(f"blkparse peak memory: {max(peak for _, peak in theirs) / 1e6:,.1f} MB (sampled)")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
