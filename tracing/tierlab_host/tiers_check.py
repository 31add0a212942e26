"""The tiers' self-check: read-only fio on each tier, and how faithful each modelled tier is.

Each tier is measured twice: on its block device (4 KiB and 16 KiB requests,
sequential and random, at queue depths 1 and 32, over the first GiB, read
once before so that an emulator serves it from touched pages) and
through its file system as a database reads it (a scratch file written for
the check and removed after it, read with O_DIRECT). For a modelled tier every
job has a target: what its device model alone gives for the same job (the
emulator's `--job`), stretched by the host's dilation. The contrasts the study
rests on (random against sequential, the capacity tier against the fast one,
deep queues against queue depth 1) are compared with the model's own ratios,
which dilation leaves as they are, and judged faithful, degraded or not
faithful, with the reason.
"""

import json
import os
from datetime import UTC, datetime
from pathlib import Path

from . import emulator, fio
from .system import device_name, device_of_path, run

BLOCK_BYTES = (4096, 16384)
PATTERNS = ("read", "randread")
IODEPTHS = (1, 32)
DEVICE_SPAN_BYTES = 1 << 30
FILE_SPAN_BYTES = 128 << 20
SCRATCH_NAME = ".tierlab-check"
# a contrast within this share of the model's ratio is faithful; within the second, degraded
FAITHFUL_WITHIN = 0.2
DEGRADED_WITHIN = 0.5
VERDICTS = ("faithful", "degraded", "not faithful")
# a job where more of the emulator's replies than this were late measured the host, not the model
LATE_SHARE_LIMIT = 0.05
DEEP_BLOCK_BYTES, DEEP_IODEPTH = 16384, 32


def _jobs(medium: str) -> list[tuple[str, int, int]]:
    """(rw, block bytes, queue depth) of each job; through the file system only those the contrasts need."""
    if medium == "device":
        return [(rw, block_bytes, iodepth) for block_bytes in BLOCK_BYTES for rw in PATTERNS for iodepth in IODEPTHS]
    return [(rw, block_bytes, 1) for block_bytes in BLOCK_BYTES for rw in PATTERNS] + \
        [("randread", DEEP_BLOCK_BYTES, DEEP_IODEPTH)]


def _late_and_requests(spec: dict) -> tuple[int, int]:
    live = emulator.stats(spec["emulator_mountpoint"])
    return live["late"], sum(c["requests"] for c in live["classes"].values())


def _measure(spec: dict, target: str, span_bytes: int, runtime_s: float, medium: str, dilation: float) -> list[dict]:
    modelled = spec["emulation"] == "model"
    jobs = []
    for rw, block_bytes, iodepth in _jobs(medium):
        before = _late_and_requests(spec) if modelled else None
        job = fio.job(target, rw, block_bytes, iodepth, runtime_s, span_bytes)
        job["medium"] = medium
        if modelled:
            after = _late_and_requests(spec)
            job["late_share"] = round((after[0] - before[0]) / max(1, after[1] - before[1]), 4)
            model = emulator.model_job(spec, rw, block_bytes, iodepth)
            job["target"] = {"iops": round(model["iops"] / dilation, 1),
                             "p50_us": round(model["lat_us"]["p50"] * dilation, 2),
                             "model_iops": model["iops"], "model_p50_us": model["lat_us"]["p50"]}
        jobs.append(job)
    return jobs


def _scratch_file(path: str) -> Path:
    """A file on the tier for the check, written through to the device so that reading it reads the device."""
    scratch = Path(path) / SCRATCH_NAME
    run(["dd", "if=/dev/zero", f"of={scratch}", "bs=1M", f"count={FILE_SPAN_BYTES >> 20}", "oflag=direct", "conv=fsync",
         "status=none"])
    return scratch


def _job(tier: dict, medium: str, rw: str, block_bytes: int, iodepth: int) -> dict:
    (job,) = [j for j in tier["jobs"] if (j["medium"], j["rw"], j["block_bytes"], j["iodepth"]) ==
              (medium, rw, block_bytes, iodepth)]
    return job


def _verdict(measured: float, target: float) -> str:
    off = abs(measured / target - 1)
    return VERDICTS[0] if off <= FAITHFUL_WITHIN else VERDICTS[1] if off <= DEGRADED_WITHIN else VERDICTS[2]


def _reason(jobs: list[dict]) -> str:
    """Why the jobs behind a contrast missed their targets."""
    late = [j for j in jobs if j["late_share"] > LATE_SHARE_LIMIT]
    if late:
        j = max(late, key=lambda j: j["late_share"])
        return (f"host floor: {j['late_share']:.0%} of the emulator's replies in {j['rw']} {j['block_bytes'] // 1024} KiB "
                f"QD{j['iodepth']} were due before the host could send them (a larger dilation would hold them)")
    short = [j for j in jobs if j["iodepth"] > 1 and j["iops"] < (1 - FAITHFUL_WITHIN) * j["target"]["iops"]]
    if short:
        j = short[0]
        return (f"host throughput: {j['iops']:.0f} IOPS at QD{j['iodepth']} against the dilated model's "
                f"{j['target']['iops']:.0f} (the emulator ran out of CPU)")
    worst = max(jobs, key=lambda j: abs(j["lat_us"]["p50"] / j["target"]["p50_us"] - 1))
    return (f"host noise: {worst['rw']} {worst['block_bytes'] // 1024} KiB QD{worst['iodepth']} p50 "
            f"{worst['lat_us']['p50']} us against {worst['target']['p50_us']} us")


def _contrast(name: str, tiers: list[str], jobs: tuple[dict, dict], of: str) -> dict:
    """Measured and modelled ratio of jobs[0] to jobs[1]: by latency p50, or the IOPS of a deep queue
    (jobs[0]) against queue depth 1 (jobs[1])."""
    first, second = jobs
    if of == "latency":
        measured = first["lat_us"]["p50"] / second["lat_us"]["p50"]
        target = first["target"]["model_p50_us"] / second["target"]["model_p50_us"]
    else:
        # deep-queue IOPS against queue depth 1's, taken as one request per p50 latency: the mean that
        # fio's IOPS follow carries the host's tail, which the model has not
        measured = first["iops"] * second["lat_us"]["p50"] / 1e6
        target = first["target"]["model_iops"] * second["target"]["model_p50_us"] / 1e6
    verdict = _verdict(measured, target)
    return {"name": name, "medium": first["medium"], "tiers": tiers, "target": round(target, 3),
            "measured": round(measured, 3), "off": round(measured / target - 1, 3), "verdict": verdict,
            "reason": None if verdict == VERDICTS[0] else _reason([first, second])}


def contrasts(tiers: list[dict]) -> list[dict]:
    """The ratios the study rests on, for each modelled tier and between the capacity and the fast tier."""
    modelled = [t for t in tiers if t["emulation"] == "model"]
    found = []
    for medium in ("device", "file"):
        for tier in modelled:
            name = tier["name"]
            for block_bytes in BLOCK_BYTES:
                found.append(_contrast(f"{name} random/sequential read latency, {block_bytes // 1024} KiB QD1", [name],
                                       (_job(tier, medium, "randread", block_bytes, 1),
                                        _job(tier, medium, "read", block_bytes, 1)), "latency"))
            found.append(_contrast(f"{name} QD{DEEP_IODEPTH}/QD1 random read IOPS, {DEEP_BLOCK_BYTES // 1024} KiB", [name],
                                   (_job(tier, medium, "randread", DEEP_BLOCK_BYTES, DEEP_IODEPTH),
                                    _job(tier, medium, "randread", DEEP_BLOCK_BYTES, 1)), "iops"))
        by_role = {t["role"]: t for t in modelled}
        if set(by_role) == {"fast", "capacity"}:
            slow, fast = by_role["capacity"], by_role["fast"]
            for block_bytes in BLOCK_BYTES:
                found.append(_contrast(f"{slow['name']}/{fast['name']} random read latency, {block_bytes // 1024} KiB QD1",
                                       [slow["name"], fast["name"]],
                                       (_job(slow, medium, "randread", block_bytes, 1),
                                        _job(fast, medium, "randread", block_bytes, 1)), "latency"))
    return found


def _worst(verdicts: list[str]) -> str:
    return max(verdicts, key=VERDICTS.index) if verdicts else VERDICTS[0]


def fidelity(tiers: list[dict], found: list[dict]) -> dict:
    """Each modelled tier's verdict (the worst of the contrasts it takes part in) and the host's."""
    per_tier = {t["name"]: _worst([c["verdict"] for c in found if t["name"] in c["tiers"]])
                for t in tiers if t["emulation"] == "model"}
    reasons = [f"{c['name']} ({c['medium']}): {c['reason']}" for c in found if c["reason"]]
    return {"verdict": _worst(list(per_tier.values())), "tiers": per_tier, "reasons": reasons}


def check(specs: list[dict], runtime_s: float) -> dict:
    emulator.require_running()
    tiers = []
    dilation = None
    for spec in specs:
        block_device = f"/dev/{device_name(device_of_path(spec['path']))}"
        tier = {"name": spec["name"], "role": spec["role"], "emulation": spec["emulation"], "block_device": block_device}
        own = 1.0
        if spec["emulation"] == "model":
            calibration = emulator.calibration(spec["emulator_mountpoint"]) or {}
            # tiers calibrated before dilation existed ran the model as it is
            own = dilation = calibration.get("dilation", 1.0)
            tier["host_floor_p50_us"] = calibration.get("passthrough_p50_us")
        fio.touch(block_device, DEVICE_SPAN_BYTES)
        tier["jobs"] = _measure(spec, block_device, DEVICE_SPAN_BYTES, runtime_s, "device", own)
        scratch = _scratch_file(spec["path"])
        try:
            tier["jobs"] += _measure(spec, str(scratch), FILE_SPAN_BYTES, runtime_s, "file", own)
        finally:
            os.unlink(scratch)
        if spec["emulation"] == "model":
            tier["emulator"] = emulator.stats(spec["emulator_mountpoint"])
        tiers.append(tier)
    found = contrasts(tiers)
    return {"checked_at": datetime.now(UTC).isoformat(timespec="seconds"), "runtime_s": runtime_s,
            "span_bytes": DEVICE_SPAN_BYTES, "file_span_bytes": FILE_SPAN_BYTES, "dilation": dilation,
            "tiers": tiers, "contrasts": found, "fidelity": fidelity(tiers, found)}


def main(spec_file: str, runtime_s: float, output: str | None) -> None:
    result = check(json.loads(Path(spec_file).read_text()), runtime_s)
    if output:
        Path(output).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
