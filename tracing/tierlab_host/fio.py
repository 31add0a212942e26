"""Read-only fio jobs on a block device: IOPS and latency percentiles."""

import json

from .system import run

PERCENTILES = ("50", "90", "99", "99.9")


def job(target: str, rw: str, block_bytes: int, iodepth: int, runtime_s: float, span_bytes: int) -> dict:
    """One time-based job over the first span_bytes of target, with O_DIRECT and libaio."""
    cmd = [
        "fio", "--name=tierlab", f"--filename={target}", f"--rw={rw}", f"--bs={block_bytes}",
        f"--iodepth={iodepth}", "--ioengine=libaio", "--direct=1", "--readonly",
        f"--size={span_bytes}", f"--runtime={round(runtime_s * 1000)}ms", "--time_based",
        "--lat_percentiles=1", f"--percentile_list={':'.join(PERCENTILES)}", "--output-format=json",
    ]
    read = json.loads(run(cmd, timeout_s=runtime_s + 60).stdout)["jobs"][0]["read"]
    percentiles = read["lat_ns"]["percentile"]
    return {
        "rw": rw, "block_bytes": block_bytes, "iodepth": iodepth,
        "iops": round(read["iops"], 1),
        "lat_us": {f"p{p}": round(percentiles[f"{float(p):f}"] / 1000, 2) for p in PERCENTILES},
        "mean_us": round(read["lat_ns"]["mean"] / 1000, 2),
    }


def touch(target: str, span_bytes: int) -> None:
    """Read the first span_bytes of target once. An emulated device serves its data from a mapping of a
    sparse image, and the first read of a page never written costs the emulator a page fault that data a
    database wrote never does; measurements are taken over pages touched this way."""
    run(["dd", f"if={target}", "of=/dev/null", "bs=1M", f"count={span_bytes >> 20}", "iflag=direct", "status=none"])
