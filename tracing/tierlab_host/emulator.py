"""The device emulators of `model` tiers: start, calibrate, watch and stop them.

Each one is a tierlab-emu process serving `<mountpoint>/device` through FUSE;
the tier's loop device sits on that file. It is recorded (pid, mount point,
log) before anything uses it, and stopped only while its command line still
names its own mount point.
"""

import json
import math
import os
import signal
import statistics
import subprocess
import time
from pathlib import Path

from . import fio, probe, record
from .system import HostError, cmdline, mount_device, mounted, run, set_knob, signal_process, stop_process

MOUNT_TIMEOUT_S = 20
STOP_TIMEOUT_S = 20
# A halted vCPU takes ~20 us to wake, and each emulated request wakes two of
# them; letting an idle vCPU poll first brings the pass-through cost from ~40 us
# to ~10 us. The poll outlasts the usual wait between one tier's requests while a
# query reads another tier (a dilated random nand read, ~0.5 ms; a GC pause is longer): with
# 200 us, an optane read right after a nand read took 165 us against 80 us back
# to back, with 2 ms 92 us; hybrid layouts paid that on every alternation. Only
# KVM guests have the knob.
HALT_POLL_KNOB = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
HALT_POLL_NS = 2_000_000
CALIBRATION_SPAN_BYTES = 256 << 20
CALIBRATION_RUNS, CALIBRATION_RUN_S = 7, 0.2
# the dilation keeps every model this much above the host's own cost and within its throughput
DILATION_MARGIN = 2.0
# the host's throughput is measured, and each model's peak taken, at the self-check's deepest job
THROUGHPUT_BLOCK_BYTES = 16384
THROUGHPUT_IODEPTH = 32
# with `auto`, each model must reach this share of its dilated IOPS in the deepest job with the model on, or
# the dilation grows (at most THROUGHPUT_GROWTHS times): a timed reply costs the host about twice the CPU of a
# pass-through one, so the pass-through throughput alone overstates what the host can carry when busy. With the
# other core of a 2-core host kept busy, the share went 0.70, 0.78, 0.85, 0.89 over three growths (11.2 to 24.4):
# six let such a host reach it.
THROUGHPUT_HELD = 0.9
THROUGHPUT_GROWTHS = 6
# FUSE over io_uring (Linux 6.14 and later): the kernel offers it to new connections while this is on. The
# emulators take it where the kernel has it, and fall back to /dev/fuse where it refuses; each tier's calibration
# says which path served it (`transport`). A spec's "transport": "dev" keeps the classic path (to compare the two).
ENABLE_URING_KNOB = Path("/sys/module/fuse/parameters/enable_uring")
# an emulator that does not answer a read of its stats file within this long is hung
ANSWER_TIMEOUT_S = 10
# the FUSE control file system, where a hung connection is aborted
FUSE_CONTROL = Path("/sys/fs/fuse/connections")


def runs(entry: dict) -> bool:
    """Whether the recorded emulator still runs (its pid's command line names its mount point)."""
    return entry["mountpoint"] in cmdline(entry["pid"])


def _recorded(mountpoint: Path) -> dict | None:
    for entry in record.entries("emulator"):
        if entry["mountpoint"] == str(mountpoint):
            return entry
    return None


def _log_tail(log: str, lines: int = 5) -> str:
    try:
        return " | ".join(Path(log).read_text(errors="replace").strip().splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def _failed(entry: dict, what: str) -> str:
    return (f"the emulator of tier {entry['tier']} (pid {entry['pid']}) {what}; its log {entry['log']} ends: "
            f"{_log_tail(entry['log'])}. Run `make teardown`, then `make tiers` to bring the tiers back")


def _exited(entry: dict) -> str:
    return _failed(entry, "has exited, so the tier's device no longer answers")


def _answer(entry: dict) -> dict | None:
    """The emulator's stats, or None when it does not answer in time."""
    # a reader the emulator never answers may not die even when killed, so it is not waited for
    reader = subprocess.Popen(["cat", str(Path(entry["mountpoint"]) / "stats")],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        out, _ = reader.communicate(timeout=ANSWER_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        reader.kill()
        return None
    return json.loads(out) if reader.returncode == 0 else None


def _abort(entry: dict) -> None:
    """Abort a hung emulator's FUSE connection and end the emulator: its requests then fail at once instead of
    waiting forever. Through io_uring, the requests already handed to its threads wait for them even on an aborted
    connection, until its process is gone."""
    device = mount_device(entry["mountpoint"])
    if device is None:
        return
    if not mounted(FUSE_CONTROL):
        run(["mount", "-t", "fusectl", "none", str(FUSE_CONTROL)])
        record.add("mount", path=str(FUSE_CONTROL))
    (FUSE_CONTROL / device.split(":")[1] / "abort").write_text("1\n")
    if runs(entry):
        signal_process(entry["pid"], signal.SIGKILL)


def abort_hung() -> None:
    """Abort the connections of recorded emulators that are alive but do not answer (teardown's first step)."""
    for entry in record.entries("emulator"):
        if runs(entry) and _answer(entry) is None:
            _abort(entry)


def allow_fast_wakeups(changes: list[str]) -> None:
    if HALT_POLL_KNOB.exists() and int(HALT_POLL_KNOB.read_text()) < HALT_POLL_NS:
        set_knob(HALT_POLL_KNOB, HALT_POLL_NS, changes)


def offer_uring(changes: list[str]) -> bool:
    """Turn FUSE over io_uring on for the emulators about to start (recorded, restored at teardown); whether the
    kernel has it."""
    if not ENABLE_URING_KNOB.exists():
        return False
    set_knob(ENABLE_URING_KNOB, "Y", changes)
    return True


def serving(spec: dict) -> Path | None:
    """The device file of the emulator recorded at spec's mount point; None where none is recorded. Raises where
    it has exited or runs an older build."""
    mountpoint = Path(spec["emulator_mountpoint"])
    entry = _recorded(mountpoint)
    if entry is None:
        return None
    if not runs(entry):
        raise HostError(_exited(entry))
    if os.readlink(f"/proc/{entry['pid']}/exe").endswith(" (deleted)"):
        # a rebuild replaced the binary: the running emulator has the old model
        raise HostError(_failed(entry, "runs an older build of tierlab-emu than the one just built; "
                                       "its tier must be brought up again to use the new one"))
    return mountpoint / "device"


def start(spec: dict, image: Path, changes: list[str]) -> Path:
    """Serve image through a new emulator at spec's mount point (a directory); its device file."""
    mountpoint = Path(spec["emulator_mountpoint"])
    log = mountpoint.with_suffix(".log")
    cache = ["--cache-profile", spec["cache_profile_file"]] if spec.get("cache_profile_file") else []
    transport = "io_uring" if spec.get("transport", "auto") == "auto" and offer_uring(changes) else "dev"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [spec["emulator"], "--profile", spec["profile_file"], *cache, "--transport", transport,
             "--backing", str(image), str(mountpoint)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, close_fds=True,
        )
    entry = {"tier": spec["name"], "pid": proc.pid, "mountpoint": str(mountpoint), "log": str(log)}
    record.add("emulator", **entry)
    deadline = time.monotonic() + MOUNT_TIMEOUT_S
    while not (mounted(mountpoint) and (mountpoint / "device").exists()):
        if proc.poll() is not None:
            record.remove({"kind": "emulator", **entry})
            raise HostError(f"tier {spec['name']}: the emulator exited with {proc.returncode} before serving its device; "
                            f"its log {log} ends: {_log_tail(str(log))}")
        if time.monotonic() > deadline:
            raise HostError(f"tier {spec['name']}: the emulator did not mount {mountpoint} within {MOUNT_TIMEOUT_S} s; "
                            f"see {log}")
        time.sleep(0.05)
    changes.append(f"started the emulator of tier {spec['name']} (pid {proc.pid})")
    return mountpoint / "device"


def model_job(spec: dict, rw: str, block_bytes: int, iodepth: int) -> dict:
    """What the tier's device model alone gives for one fio-like job (IOPS, latency percentiles), undilated."""
    cmd = [spec["emulator"], "--profile", spec["profile_file"], "--job", rw, str(block_bytes), str(iodepth)]
    return json.loads(run(cmd).stdout)


def _needed_dilation(spec: dict, host: dict) -> dict:
    """The least dilation at which this tier's model stays above the host: its fastest request at queue
    depth 1 must take DILATION_MARGIN times the host's own cost, and its peak IOPS at most 1/DILATION_MARGIN
    of what the host carries. A model that adds no latency (passthrough) needs none."""
    floor = 1.0
    for block_bytes in (4096, 16384, 65536):
        fastest_us = min(model_job(spec, rw, block_bytes, 1)["lat_us"]["p50"] for rw in ("read", "randread"))
        cost_us = host["fixed_us"] + host["per_kib_us"] * block_bytes / 1024
        if fastest_us > 0:
            floor = max(floor, DILATION_MARGIN * cost_us / fastest_us)
    peak = model_job(spec, "randread", THROUGHPUT_BLOCK_BYTES, THROUGHPUT_IODEPTH)["iops"]
    throughput = DILATION_MARGIN * peak / host["iops_16k_qd32"]
    return {"floor": round(floor, 2), "throughput": round(throughput, 2)}


def control(spec: dict, command: str) -> None:
    """One command to the tier's emulator (see tierlab-emu's `control`)."""
    (Path(spec["emulator_mountpoint"]) / "control").write_text(command + "\n")


def _model(specs: list[dict], state: str) -> None:
    for spec in specs:
        control(spec, f"model {state}")


def _passthrough(specs: list[dict], block_devices: dict[str, str]) -> dict[str, dict]:
    """Each tier's host cost with the model off: a fixed and a per-KiB cost at queue depth 1 (from 4 KiB
    and 64 KiB random reads), and the IOPS it can carry at depth."""
    _model(specs, "off")
    try:
        for spec in specs:
            fio.touch(block_devices[spec["name"]], CALIBRATION_SPAN_BYTES)
        p50s = _medians([(spec["probe"], block_devices[spec["name"]], "randread", block_bytes, 1)
                         for spec in specs for block_bytes in (4096, 65536)], "p50")
        deep = dict(zip([spec["name"] for spec in specs], _deep_iops(specs, block_devices), strict=True))
    finally:
        _model(specs, "on")
    host = {}
    for i, spec in enumerate(specs):
        small, large = p50s[2 * i], p50s[2 * i + 1]
        per_kib_us = max(0.0, (large - small) / 60)
        host[spec["name"]] = {"fixed_us": max(0.0, small - 4 * per_kib_us), "per_kib_us": per_kib_us,
                              "passthrough_p50_us": {"4096": small, "65536": large},
                              "iops_16k_qd32": deep[spec["name"]]}
    return host


def _medians(jobs: list[tuple[str, str, str, int, int]], figure: str) -> list[float]:
    """The median of one figure of each (probe, device, rw, block bytes, queue depth) over CALIBRATION_RUNS short
    runs, the jobs interleaved: the host's cost shifts by tens of percent from one second to the next, and
    jobs measured apart would each take whatever moment they fell on. figure: "p50" (latency) or "iops"."""
    values: list[list[float]] = [[] for _ in jobs]
    for _ in range(CALIBRATION_RUNS):
        for i, (probe_binary, block_device, rw, block_bytes, iodepth) in enumerate(jobs):
            found = probe.job(probe_binary, block_device, rw, block_bytes, iodepth, CALIBRATION_RUN_S,
                              CALIBRATION_SPAN_BYTES)
            values[i].append(found["iops"] if figure == "iops" else found["lat_us"][figure])
    return [statistics.median(v) for v in values]


def _deep_iops(specs: list[dict], block_devices: dict[str, str]) -> list[float]:
    """Each tier's median IOPS in the deepest job (see _medians)."""
    return _medians([(spec["probe"], block_devices[spec["name"]], "randread", THROUGHPUT_BLOCK_BYTES, THROUGHPUT_IODEPTH)
                     for spec in specs], "iops")


def _set_dilation(specs: list[dict], host: dict[str, dict], k: float) -> None:
    """Every tier's model on a clock k times slower, less the host's own cost, with no miss correction yet."""
    for spec in specs:
        own = host[spec["name"]]
        control(spec, f"dilation {k:g}")
        control(spec, f"overhead {own['fixed_us']:.3f} {own['per_kib_us']:.4f}")
        control(spec, "miss 0 0 0 0")


def _held_dilation(specs: list[dict], block_devices: dict[str, str], host: dict[str, dict], k: float) -> tuple[float, list]:
    """The least dilation from k up at which every model, on, reaches THROUGHPUT_HELD of its dilated IOPS in
    the deepest job; with each try's dilation and the share each tier reached."""
    peaks = {spec["name"]: model_job(spec, "randread", THROUGHPUT_BLOCK_BYTES, THROUGHPUT_IODEPTH)["iops"]
             for spec in specs}
    # passthrough replies at once: it has no modelled throughput to hold
    timed = [spec for spec in specs if peaks[spec["name"]] > 0]
    tries = []
    while True:
        _set_dilation(specs, host, k)
        if not timed:
            return k, tries
        shares = [iops * k / peaks[spec["name"]] for spec, iops in zip(timed, _deep_iops(timed, block_devices), strict=True)]
        tries.append([k, {spec["name"]: round(share, 3) for spec, share in zip(timed, shares, strict=True)}])
        if min(shares) >= THROUGHPUT_HELD or len(tries) > THROUGHPUT_GROWTHS:
            return k, tries
        k = math.ceil(k / min(shares) * 10) / 10


def _misses(specs: list[dict], block_devices: dict[str, str], dilation: float) -> dict[str, list[list[float]]]:
    """What each tier's replies still miss their dilated modelled latency by, at the model's shortest and
    longest 4 KiB reads at queue depth 1: [[latency us, miss us], ...]. A long wait lets the host's CPUs
    halt, and waking them costs more than the pass-through cost measured back to back."""
    modelled = {spec["name"]: {rw: dilation * model_job(spec, rw, 4096, 1)["lat_us"]["p50"] for rw in ("read", "randread")}
                for spec in specs}
    # passthrough: every reply leaves at once, so there is nothing to correct
    timed = [spec for spec in specs if min(modelled[spec["name"]].values()) > 0]
    keys = [(spec["name"], rw) for spec in timed for rw in ("read", "randread")]
    jobs = [(spec["probe"], block_devices[spec["name"]], rw, 4096, 1) for spec in timed for rw in ("read", "randread")]
    measured = dict(zip(keys, _medians(jobs, "p50"), strict=True))
    misses = {spec["name"]: [[0.0, 0.0], [0.0, 0.0]] for spec in specs}
    for spec in timed:
        points = sorted([round(modelled_us, 2), round(measured[(spec["name"], rw)] - modelled_us, 2)]
                        for rw, modelled_us in modelled[spec["name"]].items())
        if points[0][0] == points[1][0]:
            # a flat model: one latency, so one miss
            points = [[points[0][0], round((points[0][1] + points[1][1]) / 2, 2)]] * 2
        misses[spec["name"]] = points
    return misses


def calibrate(specs: list[dict], block_devices: dict[str, str], dilation: str | float) -> float:
    """Calibrate every model tier of this host together and return the dilation they share.

    Each emulator learns the host's own cost per request, to subtract it. All
    modelled time is then stretched by one factor k, the same for every tier so
    that ratios between tiers hold too: `auto` picks the least k at which every
    model stays above the host (DILATION_MARGIN over its floor and its
    pass-through throughput) and then grows it until every model, on, carries
    its deepest job (THROUGHPUT_HELD), or the given number is used as it is. Last, what replies
    still miss by at a short and a long modelled latency is measured and added
    to the host's cost. Every tier is measured in the same rounds, so that all
    of them are calibrated against the same moments of the host.
    """
    host = _passthrough(specs, block_devices)
    needed = {spec["name"]: _needed_dilation(spec, host[spec["name"]]) for spec in specs}
    least = max([1.0] + [max(n.values()) for n in needed.values()])
    if dilation == "auto":
        k, held = _held_dilation(specs, block_devices, host, math.ceil(least * 10) / 10)
    else:
        k, held = float(dilation), []
        _set_dilation(specs, host, k)
    misses = _misses(specs, block_devices, k)
    for spec in specs:
        own, points = host[spec["name"]], misses[spec["name"]]
        control(spec, f"miss {points[0][0]} {points[0][1]} {points[1][0]} {points[1][1]}")
        calibration = {
            "dilation": k, "dilation_setting": dilation, "dilation_needed": needed[spec["name"]],
            "dilation_needed_by_host": round(least, 2), "throughput_held": held,
            "fixed_us": round(own["fixed_us"], 3), "per_kib_us": round(own["per_kib_us"], 4),
            "passthrough_p50_us": own["passthrough_p50_us"], "passthrough_iops_16k_qd32": own["iops_16k_qd32"],
            "miss_us": points, "transport": stats(spec["emulator_mountpoint"])["transport"],
            "guest_halt_poll_ns": int(HALT_POLL_KNOB.read_text()) if HALT_POLL_KNOB.exists() else None,
        }
        _calibration_file(spec["emulator_mountpoint"]).write_text(json.dumps(calibration, indent=1))
    return k


def _calibration_file(mountpoint: str) -> Path:
    return Path(mountpoint).with_suffix(".calibration.json")


def calibration(mountpoint: str) -> dict | None:
    """The calibration taken when the emulator at mountpoint started."""
    path = _calibration_file(mountpoint)
    return json.loads(path.read_text()) if path.exists() else None


def stats(mountpoint: str) -> dict:
    return json.loads((Path(mountpoint) / "stats").read_text())


def require_running() -> dict[str, dict]:
    """Each recorded emulator's stats, by tier; raises, naming the tier and the emulator's
    last words, if one has exited or hangs."""
    live = {}
    for entry in record.entries("emulator"):
        if not runs(entry):
            raise HostError(_exited(entry))
        answer = _answer(entry)
        if answer is None:
            _abort(entry)
            raise HostError(_failed(entry, f"did not answer within {ANSWER_TIMEOUT_S} s; its FUSE connection was "
                                           "aborted, so the tier's requests fail instead of waiting"))
        live[entry["tier"]] = answer
    return live


def counter_delta(before: dict[str, dict], after: dict[str, dict]) -> dict[str, dict]:
    """What each tier's emulator counted between two require_running() answers: requests per class, and more."""
    delta = {}
    for tier in sorted(after.keys() & before.keys()):
        now, then = after[tier], before[tier]
        counts = {f"{cls}_requests": now["classes"][cls]["requests"] - then["classes"][cls]["requests"]
                  for cls in now["classes"]}
        delta[tier] = {**counts, **{key: now[key] - then[key] for key in ("interfered_reads", "late")}}
        if now.get("cache") and then.get("cache"):
            delta[tier].update({f"cache_{key}": now["cache"][key] - then["cache"][key]
                                for key in ("read_hits", "read_misses")})
    return delta


def cache_tier(tiers: list[dict]) -> dict | None:
    """The tier (its facts) whose emulator can put a cache of the fast tier's device in front of its own."""
    return next((t for t in tiers if t.get("cache_capable")), None)


def cache(tier: dict, command: str) -> None:
    """One cache command to the tier's emulator: CAPACITY_BYTES PAGE_BYTES POLICY, reset or off."""
    try:
        control(tier, f"cache {command}")
    except OSError as exc:
        log = _recorded(Path(tier["emulator_mountpoint"]))["log"]
        raise HostError(f"tier {tier['name']}: its emulator refused `cache {command}` ({exc.strerror}); its log {log} "
                        f"ends: {_log_tail(log)}") from None


def stop_recorded(entry: dict) -> None:
    """Stop one recorded emulator (it unmounts itself), and clear a mount a dead one left behind."""
    # a stopped emulator must run to handle its SIGTERM
    stop_process(entry["pid"], [(signal.SIGTERM, 0), (signal.SIGCONT, STOP_TIMEOUT_S)], lambda: runs(entry))
    if mounted(entry["mountpoint"]):
        run(["umount", "-l", entry["mountpoint"]])
    Path(entry["log"]).unlink(missing_ok=True)
    _calibration_file(entry["mountpoint"]).unlink(missing_ok=True)
    record.remove(entry)
