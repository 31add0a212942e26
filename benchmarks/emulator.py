"""Emulator throughput, added latency and fidelity, against a bare loop device, in one run.

Brings up, under a tierlab root of its own, one emulated device per profile
(passthrough, optane, nand) the way the tiers role does (tierlab-emu, loop
device, calibration with the host's dilation), plus a bare loop device on a
file in /dev/shm (RAM, as the emulator's data is once touched). Runs fio 4 KiB
random reads at queue depths 1 and 32 on each and prints IOPS, p50 and p99;
the emulator's added latency is passthrough minus bare. Then the host floor,
the dilation k the calibration chose, and the self-check of optane and nand
with each contrast's verdict. Targets (issue 4): added p50 <= 30 us at QD1,
>= 50k IOPS at QD32; (issue 8) every contrast faithful. Needs root, fio and
libfuse3-dev; removes everything it made.

    .venv/bin/python benchmarks/emulator.py --runtime-s 5
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tracing"))
from tierlab_host import fio  # noqa: E402  (the agent is a directory, not an installed package)

BENCH_ROOT = Path("/var/lib/tierlab-bench")
DEVICE_BYTES = 1 << 30
SPAN_BYTES = 512 << 20
PROFILES = ("passthrough", "optane", "nand")


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
             "probe": str(ROOT / "emulator" / "tierlab-probe"),
             "dilation": "auto", "read_ahead_kb": None, "throttle": {}}
            for name in PROFILES]


def agent_on(command: str, specs: list[dict], *args: str) -> dict:
    with tempfile.NamedTemporaryFile("w", suffix=".json") as spec_file:
        json.dump(specs, spec_file)
        spec_file.flush()
        return json.loads(agent(command, spec_file.name, *args))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-s", type=float, default=5.0)
    args = parser.parse_args()
    subprocess.run(["make", "-s", "-C", str(ROOT / "emulator")], check=True)
    bare_image = Path("/dev/shm/tierlab-bench-bare.img")
    bare_image.write_bytes(b"")
    os.truncate(bare_image, DEVICE_BYTES)
    bare = subprocess.run(["losetup", "--find", "--show", bare_image], check=True, capture_output=True,
                          text=True).stdout.strip()
    specs = tier_specs()
    try:
        facts = agent_on("tiers-up", specs)["tiers"]
        devices = {"bare loop (RAM)": bare, **{t["name"]: t["block_device"] for t in facts}}
        results = {}
        for name, device in devices.items():
            fio.touch(device, SPAN_BYTES)
            results[name] = [fio.run_job(device, "randread", 4096, depth, args.runtime_s, SPAN_BYTES, ("--readonly",))["read"]
                             for depth in (1, 32)]
        check = agent_on("tiers-check", [s for s in specs if s["name"] != "passthrough"], "--runtime-s", "2")
    finally:
        agent("teardown")
        subprocess.run(["losetup", "-d", bare], check=False)
        bare_image.unlink(missing_ok=True)
    print(f"\n4 KiB random reads, {args.runtime_s:g} s per job, fio libaio O_DIRECT")
    print(f"{'device':<18} {'QD1 IOPS':>9} {'p50 us':>7} {'p99 us':>7} {'QD32 IOPS':>10} {'p50 us':>8} {'p99 us':>8}")
    for name, (qd1, qd32) in results.items():
        print(f"{name:<18} {qd1['iops']:>9.0f} {qd1['lat_us']['p50']:>7.1f} {qd1['lat_us']['p99']:>7.1f} "
              f"{qd32['iops']:>10.0f} {qd32['lat_us']['p50']:>8.1f} {qd32['lat_us']['p99']:>8.1f}")
    added = results["passthrough"][0]["lat_us"]["p50"] - results["bare loop (RAM)"][0]["lat_us"]["p50"]
    print(f"\nadded p50 at QD1 (passthrough - bare): {added:.1f} us (target <= 30)")
    print(f"passthrough IOPS at QD32: {results['passthrough'][1]['iops']:.0f} (target >= 50000)")
    (calibration,) = [t["calibration"] for t in facts if t["name"] == "nand"]
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


if __name__ == "__main__":
    main()
