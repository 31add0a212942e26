"""fio jobs on a block device or a file: IOPS, bandwidth and latency percentiles."""

import json
import statistics
from pathlib import Path

from .system import run

PERCENTILES = ("50", "90", "99", "99.9")


def _side(side: dict, percentiles: tuple[str, ...]) -> dict:
    found = side["lat_ns"].get("percentile", {})
    return {"iops": round(side["iops"], 1), "bw_bytes": side["bw_bytes"],
            "lat_us": {f"p{p}": round(found[f"{float(p):f}"] / 1000, 2) for p in percentiles},
            "mean_us": round(side["lat_ns"]["mean"] / 1000, 2)}


def run_job(target: str, rw: str, block_bytes: int, iodepth: int, runtime_s: float, span_bytes: int,
            options: tuple[str, ...] = (), percentiles: tuple[str, ...] = PERCENTILES) -> dict:
    """One time-based job over the first span_bytes of target, with O_DIRECT and libaio; its read and write
    sides (those that did any I/O) as {"read": ..., "write": ...}."""
    cmd = [
        "fio", "--name=tierlab", f"--filename={target}", f"--rw={rw}", f"--bs={block_bytes}",
        f"--iodepth={iodepth}", "--ioengine=libaio", "--direct=1",
        f"--size={span_bytes}", f"--runtime={round(runtime_s * 1000)}ms", "--time_based",
        "--lat_percentiles=1", f"--percentile_list={':'.join(percentiles)}", "--output-format=json", *options,
    ]
    done = json.loads(run(cmd, timeout_s=runtime_s + 60).stdout)["jobs"][0]
    return {side: _side(done[side], percentiles) for side in ("read", "write") if done[side]["total_ios"] > 0}


def median_of_rounds(rounds: list[dict]) -> dict:
    """One job's side measured in rounds (each as _side gives it), summarised by the median over its rounds
    of each figure and each latency percentile."""
    summary = {key: statistics.median([r[key] for r in rounds]) for key in rounds[0] if key != "lat_us"}
    summary["lat_us"] = {p: statistics.median([r["lat_us"][p] for r in rounds]) for p in rounds[0]["lat_us"]}
    return summary


def least_disturbed_round(rounds: list[dict]) -> dict:
    """One job's side measured in rounds (each as _side gives it): the round whose median latency is least.
    What the host does beside a job (another process on its CPUs, the emulator's threads moved) only adds to
    its requests' latency, so that round shows the device's own most nearly."""
    return min(rounds, key=lambda side: side["lat_us"]["p50"])


def bandwidth_log(prefix: Path) -> list[tuple[float, float]]:
    """(seconds, bytes/s) of each interval of the bandwidth log fio wrote for --write_bw_log=prefix (KiB/s)."""
    path = prefix.with_name(f"{prefix.name}_bw.1.log")
    rows = [line.split(",") for line in path.read_text().splitlines() if line.strip()]
    return [(int(r[0]) / 1000, int(r[1]) * 1024.0) for r in rows]


def write_scratch(path: Path, span_bytes: int) -> None:
    """A file of span_bytes on a tier for fio, written through to the device, so that reading it reads the
    device."""
    run(["dd", "if=/dev/zero", f"of={path}", "bs=1M", f"count={span_bytes >> 20}", "oflag=direct", "conv=fsync",
         "status=none"])


def touch(target: str, span_bytes: int) -> None:
    """Read the first span_bytes of target once. An emulated device serves its data from a mapping of a
    sparse image, and the first read of a page never written costs the emulator a page fault that data a
    database wrote never does; measurements are taken over pages touched this way."""
    run(["dd", f"if={target}", "of=/dev/null", "bs=1M", f"count={span_bytes >> 20}", "iflag=direct", "status=none"])
