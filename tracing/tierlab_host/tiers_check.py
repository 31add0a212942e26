"""The tiers' self-check: read-only jobs on each tier, and how faithful each modelled tier is.

The jobs are fio's (time-based, O_DIRECT, native AIO, a fixed queue depth), run by tierlab-probe, which
starts in a millisecond where fio takes 0.3 s: the check runs ten jobs per tier in eight rounds each.

Each tier is measured twice: on its block device (4 KiB and 16 KiB requests,
sequential and random, at queue depths 1 and 32, over the first 256 MiB, read
once before so that an emulator serves it from touched pages) and
through its file system as a database reads it (a scratch file written for
the check and removed after it, read with O_DIRECT), each job in rounds
interleaved with the others'. For a modelled tier every
job has a target: what its device model alone gives for the same job (the
emulator's `--job`), stretched by the host's dilation. The contrasts the study
rests on (random against sequential, the capacity tier against the fast one,
deep queues against queue depth 1) are compared with the model's own ratios,
which dilation leaves as they are, and judged faithful, degraded or not
faithful, with the reason.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

from . import emulator, fio, probe
from .system import HostError, device_name, device_of_path

BLOCK_BYTES = (4096, 16384)
PATTERNS = ("read", "randread")
# the calibration's span (emulator.CALIBRATION_SPAN_BYTES), whose pages are touched already; a sequential job
# that reaches its end starts again at its first block, as fio's time-based jobs do
DEVICE_SPAN_BYTES = 256 << 20
FILE_SPAN_BYTES = 128 << 20
SCRATCH_NAME = ".tierlab-check"
# a contrast within this share of the model's ratio is faithful; within the second, degraded
FAITHFUL_WITHIN = 0.2
DEGRADED_WITHIN = 0.5
VERDICTS = ("faithful", "degraded", "not faithful")
# a job where more of the emulator's replies than this were late measured the host, not the model
LATE_SHARE_LIMIT = 0.05
DEEP_BLOCK_BYTES, DEEP_IODEPTH = 16384, 32
# each job's runtime is split into up to this many rounds, interleaved with the other jobs', each at least
# MIN_ROUND_S long (some thousands of requests at the fast tier's latency, some hundreds at the capacity tier's)
ROUNDS = 8
MIN_ROUND_S = 0.1


# (rw, block bytes, queue depth) of each job, on the device and through the file system: those the contrasts need
JOBS = [(rw, block_bytes, 1) for block_bytes in BLOCK_BYTES for rw in PATTERNS] + \
    [("randread", DEEP_BLOCK_BYTES, DEEP_IODEPTH)]


def _late_and_requests(spec: dict) -> tuple[int, int]:
    live = emulator.stats(spec["emulator_mountpoint"])
    return live["late"], sum(c["requests"] for c in live["classes"].values())


def round_count(runtime_s: float) -> int:
    """How many rounds a job of runtime_s is measured in."""
    return max(1, min(ROUNDS, int(runtime_s / MIN_ROUND_S)))


def _measure(plan: list[dict], runtime_s: float) -> list[dict]:
    """Every job of the plan, in interleaved rounds (ROUNDS, fewer for a short check), summarised per job by
    the median over its rounds. The host's cost per request shifts by tens of percent from one second to
    the next (which CPUs the loop worker, the emulator and fio land on), so two jobs measured a minute
    apart would compare two moments of the host rather than two access patterns or two tiers; interleaved
    rounds give every job the same moments."""
    runs: list[list[dict]] = [[] for _ in plan]
    late = [[0, 0] for _ in plan]
    count = round_count(runtime_s)
    for _ in range(count):
        for i, entry in enumerate(plan):
            spec = entry["spec"]
            modelled = spec["emulation"] == "model"
            before = _late_and_requests(spec) if modelled else None
            runs[i].append(probe.job(spec["probe"], entry["target"], *entry["job"], runtime_s / count,
                                     entry["span_bytes"]))
            if modelled:
                after = _late_and_requests(spec)
                late[i] = [late[i][0] + after[0] - before[0], late[i][1] + after[1] - before[1]]
    return [_summary(entry, rounds, shares) for entry, rounds, shares in zip(plan, runs, late, strict=True)]


def _summary(entry: dict, rounds: list[dict], late: list[int]) -> dict:
    rw, block_bytes, iodepth = entry["job"]
    job = {"rw": rw, "block_bytes": block_bytes, "iodepth": iodepth, "medium": entry["medium"], "rounds": len(rounds),
           **fio.median_of_rounds([{k: r[k] for k in ("iops", "lat_us", "mean_us")} for r in rounds]),
           "p50_us_by_round": [r["lat_us"]["p50"] for r in rounds]}
    spec = entry["spec"]
    if spec["emulation"] == "model":
        job["late_share"] = round(late[0] / max(1, late[1]), 4)
        model = emulator.model_job(spec, rw, block_bytes, iodepth)
        job["target"] = {"iops": round(model["iops"] / entry["dilation"], 1),
                         "p50_us": round(model["lat_us"]["p50"] * entry["dilation"], 2),
                         "model_iops": model["iops"], "model_p50_us": model["lat_us"]["p50"]}
    return job


def _scratch_file(path: str) -> Path:
    """A file on the tier for the check, read through its file system."""
    scratch = Path(path) / SCRATCH_NAME
    fio.write_scratch(scratch, FILE_SPAN_BYTES)
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


def _tier(spec: dict) -> dict:
    tier = {"name": spec["name"], "role": spec["role"], "emulation": spec["emulation"],
            "block_device": f"/dev/{device_name(device_of_path(spec['path']))}"}
    if spec["emulation"] == "model":
        calibration = emulator.calibration(spec["emulator_mountpoint"]) or {}
        # tiers calibrated before dilation existed ran the model as it is
        tier["dilation"] = calibration.get("dilation", 1.0)
        tier["host_floor_p50_us"] = calibration.get("passthrough_p50_us")
    return tier


def check(specs: list[dict], runtime_s: float) -> dict:
    unbuilt = [spec["name"] for spec in specs if not Path(spec.get("probe", "")).is_file()]
    if unbuilt:
        raise HostError(f"tiers {', '.join(unbuilt)}: tierlab-probe, which measures them, is not built under this "
                        "root (tiers brought up by an older tierlab); run `make tiers` (or any playbook) on it first")
    emulator.require_running()
    tiers = [_tier(spec) for spec in specs]
    plan, scratch = [], []
    try:
        for spec, tier in zip(specs, tiers, strict=True):
            fio.touch(tier["block_device"], DEVICE_SPAN_BYTES)
            scratch.append(_scratch_file(spec["path"]))
            for medium, target, span_bytes in (("device", tier["block_device"], DEVICE_SPAN_BYTES),
                                               ("file", str(scratch[-1]), FILE_SPAN_BYTES)):
                plan += [{"spec": spec, "tier": tier, "medium": medium, "target": target, "span_bytes": span_bytes,
                          "job": job, "dilation": tier.get("dilation", 1.0)} for job in JOBS]
        measured = _measure(plan, runtime_s)
    finally:
        for path in scratch:
            path.unlink()
    for spec, tier in zip(specs, tiers, strict=True):
        tier["jobs"] = [job for entry, job in zip(plan, measured, strict=True) if entry["tier"] is tier]
        if spec["emulation"] == "model":
            tier["emulator"] = emulator.stats(spec["emulator_mountpoint"])
    found = contrasts(tiers)
    # one dilation for all modelled tiers of a host
    dilations = [t["dilation"] for t in tiers if "dilation" in t]
    return {"checked_at": datetime.now(UTC).isoformat(timespec="seconds"), "runtime_s": runtime_s,
            "rounds": round_count(runtime_s), "span_bytes": DEVICE_SPAN_BYTES, "file_span_bytes": FILE_SPAN_BYTES,
            "dilation": dilations[0] if dilations else None,
            "tiers": tiers, "contrasts": found, "fidelity": fidelity(tiers, found)}


def main(spec_file: str, runtime_s: float, output: str | None) -> None:
    result = check(json.loads(Path(spec_file).read_text()), runtime_s)
    if output:
        Path(output).write_text(json.dumps(result, indent=1))
    print(json.dumps(result))
