"""The device emulators of `model` tiers: start, calibrate, watch and stop them.

Each one is a tierlab-emu process serving `<mountpoint>/device` through FUSE;
the tier's loop device sits on that file. It is recorded (pid, mount point,
log) before anything uses it, and stopped only while its command line still
names its own mount point.
"""

import json
import os
import signal
import subprocess
import time
from pathlib import Path

from . import fio, record
from .system import HostError, cmdline, mount_device, mounted, run, set_knob, wait_gone

MOUNT_TIMEOUT_S = 20
STOP_TIMEOUT_S = 20
# A halted vCPU takes ~20 us to wake, and each emulated request wakes two of
# them; letting an idle vCPU poll first brings the pass-through cost from ~40 us
# to ~10 us. Only KVM guests have the knob.
HALT_POLL_KNOB = Path("/sys/module/haltpoll/parameters/guest_halt_poll_ns")
HALT_POLL_NS = 200_000
CALIBRATION_SPAN_BYTES = 256 << 20
# an emulator that does not answer a read of its stats file within this long is hung
ANSWER_TIMEOUT_S = 10
# the FUSE control file system, where a hung connection is aborted
FUSE_CONTROL = Path("/sys/fs/fuse/connections")


def _is_ours(entry: dict) -> bool:
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
    """Abort a hung emulator's FUSE connection: its requests then fail at once instead of waiting forever."""
    device = mount_device(entry["mountpoint"])
    if device is None:
        return
    if not mounted(FUSE_CONTROL):
        run(["mount", "-t", "fusectl", "none", str(FUSE_CONTROL)])
        record.add("mount", path=str(FUSE_CONTROL))
    (FUSE_CONTROL / device.split(":")[1] / "abort").write_text("1\n")


def abort_hung() -> None:
    """Abort the connections of recorded emulators that are alive but do not answer (teardown's first step)."""
    for entry in record.entries("emulator"):
        if _is_ours(entry) and _answer(entry) is None:
            _abort(entry)


def allow_fast_wakeups(changes: list[str]) -> None:
    if HALT_POLL_KNOB.exists() and int(HALT_POLL_KNOB.read_text()) < HALT_POLL_NS:
        set_knob(HALT_POLL_KNOB, HALT_POLL_NS, changes)


def up(spec: dict, image: Path, changes: list[str]) -> tuple[Path, bool]:
    """Serve image through an emulator at spec's mount point; (device file, started now)."""
    mountpoint = Path(spec["emulator_mountpoint"])
    entry = _recorded(mountpoint)
    if entry:
        if not _is_ours(entry):
            raise HostError(_exited(entry))
        if os.readlink(f"/proc/{entry['pid']}/exe").endswith(" (deleted)"):
            # a rebuild replaced the binary: the running emulator has the old model
            raise HostError(_failed(entry, "runs an older build of tierlab-emu than the one just built; "
                                           "its tier must be brought up again to use the new one"))
        return mountpoint / "device", False
    log = mountpoint.with_suffix(".log")
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [spec["emulator"], "--profile", spec["profile_file"], "--backing", str(image), str(mountpoint)],
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
    return mountpoint / "device", True


def calibrate(spec: dict, block_device: str) -> dict:
    """Measure the host's own cost per request and have the emulator subtract it.

    First with the model off: the 4 KiB and 64 KiB pass-through latencies give
    a fixed and a per-KiB cost. Then with the model on: whatever a modelled
    4 KiB random read still misses its modelled latency by (a timed wake-up is
    later than a busy one) is added to the fixed cost.
    """
    mountpoint = spec["emulator_mountpoint"]
    control = Path(mountpoint) / "control"
    control.write_text("model off\n")
    try:
        small = fio.job(block_device, "randread", 4096, 1, 1, CALIBRATION_SPAN_BYTES)
        large = fio.job(block_device, "randread", 65536, 1, 1, CALIBRATION_SPAN_BYTES)
    finally:
        control.write_text("model on\n")
    per_kib_us = max(0.0, (large["lat_us"]["p50"] - small["lat_us"]["p50"]) / 60)
    fixed_us = max(0.0, small["lat_us"]["p50"] - 4 * per_kib_us)
    control.write_text(f"overhead {fixed_us:.3f} {per_kib_us:.4f}\n")
    before = stats(mountpoint)["classes"]["read_random"]
    modelled = fio.job(block_device, "randread", 4096, 1, 1, CALIBRATION_SPAN_BYTES)
    after = stats(mountpoint)["classes"]["read_random"]
    modelled_us = (after["modelled_us"] - before["modelled_us"]) / max(1, after["requests"] - before["requests"])
    missed_us = 0.0
    if modelled_us > small["lat_us"]["p50"]:
        # only a model slower than the host sleeps, so only then is there a wake-up to correct
        missed_us = modelled["lat_us"]["p50"] - modelled_us
        fixed_us = max(0.0, fixed_us + missed_us)
        control.write_text(f"overhead {fixed_us:.3f} {per_kib_us:.4f}\n")
    calibration = {
        "fixed_us": round(fixed_us, 3), "per_kib_us": round(per_kib_us, 4),
        "passthrough_p50_us": {"4096": small["lat_us"]["p50"], "65536": large["lat_us"]["p50"]},
        "modelled_4k_random_us": round(modelled_us, 2), "wake_up_correction_us": round(missed_us, 2),
        "guest_halt_poll_ns": int(HALT_POLL_KNOB.read_text()) if HALT_POLL_KNOB.exists() else None,
    }
    _calibration_file(mountpoint).write_text(json.dumps(calibration, indent=1))
    return calibration


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
        if not _is_ours(entry):
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
    return delta


def stop_recorded(entry: dict) -> None:
    """Stop one recorded emulator (it unmounts itself), and clear a mount a dead one left behind."""
    if _is_ours(entry):
        os.kill(entry["pid"], signal.SIGTERM)
        # a stopped emulator must run to handle its SIGTERM
        os.kill(entry["pid"], signal.SIGCONT)
        if not wait_gone(entry["pid"], STOP_TIMEOUT_S) and _is_ours(entry):
            os.kill(entry["pid"], signal.SIGKILL)
            wait_gone(entry["pid"], 10)
    if mounted(entry["mountpoint"]):
        run(["umount", "-l", entry["mountpoint"]])
    Path(entry["log"]).unlink(missing_ok=True)
    _calibration_file(entry["mountpoint"]).unlink(missing_ok=True)
    record.remove(entry)
