"""Emulator throughput, added latency and fidelity, against a bare loop device, in one run.

Brings up, under a tierlab root of its own, one emulated device per profile
(passthrough, optane, nand) the way the tiers role does (tierlab-emu, loop
device, calibration with the host's dilation), plus a bare loop device on a
file in /dev/shm (RAM, as the emulator's data is once touched). Runs fio 4 KiB
random reads at queue depths 1 and 32 on each and prints IOPS, p50 and p99;
the emulator's added latency is passthrough minus bare. Then the host floor,
the dilation k the calibration chose, and the self-check of optane and nand
with each contrast's verdict. Targets (issue 4): added p50 <= 30 us at QD1,
>= 50k IOPS at QD32; (issue 8) every contrast faithful.

The floor: a pass-through request's time split into its parts, each measured
on its own path (tierlab-probe, 4 and 64 KiB random reads at queue depth 1, the
median of interleaved rounds): the RAM file read directly (the system call and
the copy), a loop device on it (the loop device's part), the emulator's file
read directly with its model off (the FUSE round trip and the emulator's
threads, serving from its mapped backing file), and a loop device on that (the
path the tiers take). Where the host has the haltpoll knob, the wake-ups: a
read after 0.5 ms of idling (another tier's read, in a hybrid layout) against
one back to back, with the vCPUs' halt polling at the host's own value and at
tierlab's. Needs root, fio and liburing-dev; removes everything it made.

All of it once per FUSE transport, the emulators serving through /dev/fuse
and, where the kernel has it, through io_uring, bring-ups taking turns
(`--rounds` each); last, the two side by side: the floor, the pass-through
IOPS at 16 KiB and queue depth 32, the dilation each needed and got, and the
self-check's verdicts.

    .venv/bin/python benchmarks/emulator.py --runtime-s 5 --rounds 2
"""

import argparse
import json
import mmap
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tracing"))
from tierlab_host import fio, probe  # noqa: E402  (the agent is a directory, not an installed package)
from tierlab_host.emulator import ENABLE_URING_KNOB, HALT_POLL_KNOB, control  # noqa: E402

BENCH_ROOT = Path("/var/lib/tierlab-bench")
DEVICE_BYTES = 1 << 30
SPAN_BYTES = 512 << 20
PROFILES = ("passthrough", "optane", "nand")
PROBE = ROOT / "emulator" / "tierlab-probe"
FLOOR_SIZES = (4096, 65536)
FLOOR_ROUNDS = 7
FLOOR_JOB_S = 0.3
# a read after this long idle, as a hybrid layout's fast-tier read after a dilated capacity-tier read
IDLE_GAP_S = 0.0005
IDLE_READS = 1000


def agent(*args: str) -> str:
    env = {**os.environ, "TIERLAB_STATE_DIR": str(BENCH_ROOT / "state")}
    done = subprocess.run(["/usr/bin/python3", "-m", "tierlab_host", *args], cwd=ROOT / "tracing",
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"tierlab_host {args[0]} failed: {done.stderr.strip()}")
    return done.stdout


def tier_specs() -> list[dict]:
    """One modelled tier per profile: optane the fast one, the others capacity tiers."""
    return [{"name": name, "role": "fast" if name == "optane" else "capacity", "emulation": "model",
             "filesystem": "ext4", "path": str(BENCH_ROOT / "tiers" / name), "image": str(BENCH_ROOT / "images" / f"{name}.img"),
             "size_bytes": DEVICE_BYTES, "profile_file": str(ROOT / "emulator" / "profiles" / f"{name}.toml"),
             "emulator": str(ROOT / "emulator" / "tierlab-emu"), "emulator_mountpoint": str(BENCH_ROOT / "mnt" / name),
             "probe": str(PROBE),
             "dilation": "auto", "read_ahead_kb": None, "throttle": {}}
            for name in PROFILES]


def agent_on(command: str, specs: list[dict], *args: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as spec_file:
        json.dump(specs, spec_file)
        spec_file.flush()
        return json.loads(agent(command, spec_file.name, *args))


def direct_io_on(path: Path) -> bool:
    """Whether path's file system takes O_DIRECT (tmpfs does from Linux 6.6)."""
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_DIRECT))
    except OSError:
        return False
    return True


def floor_p50s(targets: dict[str, str]) -> dict[tuple[str, int], float]:
    """Each target's QD1 random-read p50 at each size, the median over interleaved rounds."""
    rounds: dict[tuple[str, int], list[float]] = {}
    for _ in range(FLOOR_ROUNDS):
        for name, target in targets.items():
            for size in FLOOR_SIZES:
                found = probe.job(str(PROBE), target, "randread", size, 1, FLOOR_JOB_S, SPAN_BYTES)
                rounds.setdefault((name, size), []).append(found["lat_us"]["p50"])
    return {key: statistics.median(p50s) for key, p50s in rounds.items()}


def read_p50_us(device: str, gap_s: float) -> float:
    """The p50 of 16 KiB reads at random offsets, one at a time, gap_s apart (0: back to back)."""
    fd = os.open(device, os.O_RDONLY | os.O_DIRECT)
    buffer = mmap.mmap(-1, 16384)
    rng = random.Random(7)
    took = []
    try:
        for _ in range(IDLE_READS):
            if gap_s:
                time.sleep(gap_s)
            start = time.perf_counter_ns()
            os.preadv(fd, [buffer], rng.randrange(SPAN_BYTES // 16384) * 16384)
            took.append((time.perf_counter_ns() - start) / 1000)
    finally:
        os.close(fd)
    return statistics.median(took)


def wakeups(device: str, poll_ns: dict[str, int]) -> dict[tuple[str, str], float]:
    """A read back to back and after an idle gap, with the vCPUs' halt polling at each value (interleaved)."""
    found: dict[tuple[str, str], list[float]] = {}
    for _ in range(3):
        for setting, value in poll_ns.items():
            HALT_POLL_KNOB.write_text(f"{value}\n")
            for gap, gap_s in (("back to back", 0.0), ("after 0.5 ms idle", IDLE_GAP_S)):
                found.setdefault((setting, gap), []).append(read_p50_us(device, gap_s))
    return {key: statistics.median(p50s) for key, p50s in found.items()}


def print_floor(p50: dict[tuple[str, int], float], woken: dict[tuple[str, str], float]) -> None:
    print(f"\nThe floor: pass-through p50 at QD1 (tierlab-probe randread, median of {FLOOR_ROUNDS} rounds of "
          f"{FLOOR_JOB_S:g} s), us")
    print(f"{'path':<34} {'4 KiB':>7} {'64 KiB':>7}")
    for name in dict.fromkeys(name for name, _ in p50):
        print(f"{name:<34} {p50[name, 4096]:>7.1f} {p50[name, 65536]:>7.1f}")
    loop, fuse, both = (p50[name, 4096] for name in ("loop on RAM file", "FUSE file", "loop on FUSE file"))
    print("\nits parts at 4 KiB, us")
    if ("RAM file", 4096) in p50:
        ram = p50["RAM file", 4096]
        print(f"{'the system call and the copy from RAM':<52} {ram:>6.1f}")
        print(f"{'the loop device (loop on RAM - RAM)':<52} {loop - ram:>6.1f}")
        print(f"{'FUSE and the emulator (FUSE file - RAM)':<52} {fuse - ram:>6.1f}")
        print(f"{'the two stacked, beyond their parts':<52} {both - loop - fuse + ram:>6.1f}")
    else:
        print("(this kernel's tmpfs takes no O_DIRECT, so the RAM file is not read directly: Linux 6.6 or later)")
        print(f"{'the loop device and the system call (loop on RAM)':<52} {loop:>6.1f}")
        print(f"{'FUSE, the emulator and the system call (FUSE file)':<52} {fuse:>6.1f}")
    per_kib = (p50["loop on FUSE file", 65536] - both) / 60
    print(f"{'the data, per KiB (loop on FUSE, 64 KiB - 4 KiB) / 60':<52} {per_kib:>6.2f}")
    if woken:
        print("\nwake-ups: loop on FUSE (passthrough), 16 KiB reads one at a time (Python, so a few us above the "
              "probe), p50 us")
        for (setting, gap), value in woken.items():
            print(f"  halt polling {setting:<22} {gap:<18} {value:>7.1f}")


def measure(transport: str, runtime_s: float) -> dict:
    """Everything above, with the emulators serving through one transport (dev or io_uring)."""
    bare_image = Path("/dev/shm/tierlab-bench-bare.img")
    bare_image.write_bytes(b"")
    os.truncate(bare_image, DEVICE_BYTES)
    bare = subprocess.run(["losetup", "--find", "--show", bare_image], check=True, capture_output=True,
                          text=True).stdout.strip()
    specs = [{**spec, "transport": "auto" if transport == "io_uring" else "dev"} for spec in tier_specs()]
    host_poll_ns = int(HALT_POLL_KNOB.read_text()) if HALT_POLL_KNOB.exists() else None
    try:
        facts = agent_on("tiers-up", specs)["tiers"]
        served = {t["calibration"]["transport"] for t in facts}
        if served != {transport}:
            raise SystemExit(f"asked for {transport}, the emulators served through {', '.join(sorted(served))}")
        devices = {"bare loop (RAM)": bare, **{t["name"]: t["block_device"] for t in facts}}
        (passthrough,) = [spec for spec in specs if spec["name"] == "passthrough"]
        control(passthrough, "model off")
        for device in (bare, devices["passthrough"]):
            fio.touch(device, SPAN_BYTES)
        p50 = floor_p50s({**({"RAM file": str(bare_image)} if direct_io_on(bare_image) else {}),
                          "loop on RAM file": bare,
                          "FUSE file": str(Path(passthrough["emulator_mountpoint"]) / "device"),
                          "loop on FUSE file": devices["passthrough"]})
        woken = {}
        if host_poll_ns is not None:
            tierlab_poll_ns = int(HALT_POLL_KNOB.read_text())
            woken = wakeups(devices["passthrough"], {f"{host_poll_ns / 1000:g} us (the host's)": host_poll_ns,
                                                     f"{tierlab_poll_ns / 1000:g} us (tierlab's)": tierlab_poll_ns})
            HALT_POLL_KNOB.write_text(f"{tierlab_poll_ns}\n")
        control(passthrough, "model on")
        results = {}
        for name, device in devices.items():
            fio.touch(device, SPAN_BYTES)
            results[name] = [fio.run_job(device, "randread", 4096, depth, runtime_s, SPAN_BYTES, ("--readonly",))["read"]
                             for depth in (1, 32)]
        check = agent_on("tiers-check", [s for s in specs if s["name"] != "passthrough"], "--runtime-s", "2")
    finally:
        agent("teardown")
        # its record is empty now: the root goes too
        shutil.rmtree(BENCH_ROOT, ignore_errors=True)
        subprocess.run(["losetup", "-d", bare], check=False)
        bare_image.unlink(missing_ok=True)
    (calibration,) = [t["calibration"] for t in facts if t["name"] == "nand"]
    return {"results": results, "calibration": calibration, "check": check, "p50": p50, "woken": woken}


def print_measured(transport: str, measured: dict, runtime_s: float) -> None:
    results, calibration, check = measured["results"], measured["calibration"], measured["check"]
    print(f"\n=== the emulators serving through {transport}")
    print(f"\n4 KiB random reads, {runtime_s:g} s per job, fio libaio O_DIRECT")
    print(f"{'device':<18} {'QD1 IOPS':>9} {'p50 us':>7} {'p99 us':>7} {'QD32 IOPS':>10} {'p50 us':>8} {'p99 us':>8}")
    for name, (qd1, qd32) in results.items():
        print(f"{name:<18} {qd1['iops']:>9.0f} {qd1['lat_us']['p50']:>7.1f} {qd1['lat_us']['p99']:>7.1f} "
              f"{qd32['iops']:>10.0f} {qd32['lat_us']['p50']:>8.1f} {qd32['lat_us']['p99']:>8.1f}")
    added = results["passthrough"][0]["lat_us"]["p50"] - results["bare loop (RAM)"][0]["lat_us"]["p50"]
    print(f"\nadded p50 at QD1 (passthrough - bare): {added:.1f} us (target <= 30)")
    print(f"passthrough IOPS at QD32: {results['passthrough'][1]['iops']:.0f} (target >= 50000)")
    print(f"host floor (pass-through p50 at QD1): {calibration['passthrough_p50_us']['4096']} us at 4 KiB, "
          f"{calibration['passthrough_p50_us']['65536']} us at 64 KiB; {calibration['passthrough_iops_16k_qd32']:.0f} IOPS "
          "at 16 KiB QD32")
    print(f"dilation k = {check['dilation']:g} (needed by this host: {calibration['dilation_needed_by_host']:g})")
    print(f"\n{'contrast':<56} {'medium':<7} {'model':>7} {'measured':>9}  verdict")
    for c in check["contrasts"]:
        print(f"{c['name']:<56} {c['medium']:<7} {c['target']:>7.2f} {c['measured']:>9.2f}  {c['verdict']}")
    print(f"\nfidelity: {check['fidelity']['verdict']} (target: faithful)")
    for reason in check["fidelity"]["reasons"]:
        print(f"  {reason}")
    print_floor(measured["p50"], measured["woken"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-s", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=1,
                        help="bring-ups per transport, taking turns (the host drifts from minute to minute)")
    args = parser.parse_args()
    subprocess.run(["make", "-s", "-C", str(ROOT / "emulator")], check=True)
    # each bring-up's teardown restores fuse's enable_uring (the agent records it)
    transports = ["dev", "io_uring"] if ENABLE_URING_KNOB.exists() else ["dev"]
    measured: dict[str, list[dict]] = {t: [] for t in transports}
    for _ in range(args.rounds):
        for transport in transports:
            measured[transport].append(measure(transport, args.runtime_s))
    for transport, rounds in measured.items():
        for one in rounds:
            print_measured(transport, one, args.runtime_s)
    print(f"\nthe two paths side by side (median of {args.rounds} bring-up(s) each, taking turns)")
    figures = {"floor 4 KiB": lambda m: m["calibration"]["passthrough_p50_us"]["4096"],
               "floor 64 KiB": lambda m: m["calibration"]["passthrough_p50_us"]["65536"],
               "loop on FUSE 4 KiB": lambda m: m["p50"]["loop on FUSE file", 4096],
               "IOPS 16K QD32": lambda m: m["calibration"]["passthrough_iops_16k_qd32"],
               "k needed": lambda m: m["calibration"]["dilation_needed_by_host"],
               "k": lambda m: m["check"]["dilation"]}
    print(f"{'transport':<10}" + "".join(f" {name:>18}" for name in figures) + "  fidelity")
    for transport, rounds in measured.items():
        medians = [statistics.median(figure(one) for one in rounds) for figure in figures.values()]
        print(f"{transport:<10}" + "".join(f" {value:>18.2f}" for value in medians) + "  "
              + ", ".join(one["check"]["fidelity"]["verdict"] for one in rounds))


if __name__ == "__main__":
    main()
