"""The tiers' self-check: read-only fio on each tier's block device.

4 KiB and 16 KiB requests, sequential and random, at queue depths 1 and 32,
over the first GiB of the device; IOPS and latency percentiles per job, and
for a modelled tier the emulator's own counters.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

from . import emulator, fio
from .system import device_name, device_of_path

BLOCK_BYTES = (4096, 16384)
PATTERNS = ("read", "randread")
IODEPTHS = (1, 32)
SPAN_BYTES = 1 << 30


def check(specs: list[dict], runtime_s: float) -> dict:
    emulator.require_running()
    tiers = []
    for spec in specs:
        block_device = f"/dev/{device_name(device_of_path(spec['path']))}"
        jobs = [fio.job(block_device, rw, block_bytes, iodepth, runtime_s, SPAN_BYTES)
                for block_bytes in BLOCK_BYTES for rw in PATTERNS for iodepth in IODEPTHS]
        tier = {"name": spec["name"], "role": spec["role"], "emulation": spec["emulation"],
                "block_device": block_device, "jobs": jobs}
        if spec["emulation"] == "model":
            tier["emulator"] = emulator.stats(spec["emulator_mountpoint"])
        tiers.append(tier)
    return {"checked_at": datetime.now(UTC).isoformat(timespec="seconds"), "runtime_s": runtime_s,
            "span_bytes": SPAN_BYTES, "tiers": tiers}


def main(spec_file: str, runtime_s: float, output: str | None) -> None:
    result = check(json.loads(Path(spec_file).read_text()), runtime_s)
    if output:
        Path(output).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
