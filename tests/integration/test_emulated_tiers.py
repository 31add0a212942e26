"""The default emulated tiers, as fio sees them through `tierlab tiers check`, and an emulator that dies."""

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def p50_us(check: dict, tier: str, rw: str, block_bytes: int, iodepth: int) -> float:
    (tier_check,) = [t for t in check["tiers"] if t["name"] == tier]
    (job,) = [j for j in tier_check["jobs"] if (j["rw"], j["block_bytes"], j["iodepth"]) == (rw, block_bytes, iodepth)]
    return job["lat_us"]["p50"]


@pytest.fixture(scope="module")
def check(study):
    study.playbook("tpch.yml", "--tags", "tiers")
    done = subprocess.run([str(ROOT / ".venv/bin/tierlab"), "tiers", "check", "--json", "--root", study.root],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_nand_random_16k_reads_at_qd1_take_at_least_5x_its_sequential_ones(check):
    random_us = p50_us(check, "nand", "randread", 16384, 1)
    sequential_us = p50_us(check, "nand", "read", 16384, 1)
    assert random_us >= 5 * sequential_us, (random_us, sequential_us)


def test_optane_random_and_sequential_16k_reads_at_qd1_are_within_20_percent(check):
    random_us = p50_us(check, "optane", "randread", 16384, 1)
    sequential_us = p50_us(check, "optane", "read", 16384, 1)
    assert abs(random_us - sequential_us) <= 0.2 * min(random_us, sequential_us), (random_us, sequential_us)


def test_the_check_reports_each_tier_s_emulator_counters(check):
    emulators = {t["name"]: t["emulator"]["model"] for t in check["tiers"]}
    assert emulators == {"optane": "optane", "nand": "nand"}


@pytest.mark.parametrize(("sent", "said"), [(signal.SIGKILL, "has exited"), (signal.SIGSTOP, "did not answer within 10 s")])
def test_a_dead_or_hung_emulator_fails_the_check_with_its_tier_named_and_teardown_still_cleans_up(tmp_path, sent, said):
    """A tier of its own under its own root: kill or stop its emulator, check, tear down."""
    root = tmp_path / "root"
    subprocess.run(["make", "-s", "-C", str(ROOT / "emulator")], check=True)
    spec = [{"name": "doomed", "role": "capacity", "emulation": "model", "path": str(root / "tiers" / "doomed"),
             "image": str(root / "images" / "doomed.img"), "size_bytes": 256 << 20,
             "profile_file": str(ROOT / "emulator" / "profiles" / "passthrough.toml"),
             "emulator": str(ROOT / "emulator" / "tierlab-emu"), "emulator_mountpoint": str(root / "mnt" / "doomed"),
             "read_ahead_kb": None, "throttle": {}}]
    spec_file = tmp_path / "tiers.json"
    spec_file.write_text(json.dumps(spec))
    env = {**os.environ, "TIERLAB_STATE_DIR": str(root / "state")}

    def agent(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["/usr/bin/python3", "-m", "tierlab_host", *args], cwd=ROOT / "tracing",
                              capture_output=True, text=True, env=env)

    up = agent("tiers-up", str(spec_file))
    assert up.returncode == 0, up.stderr
    (emulator,) = [e for e in json.loads((root / "state" / "created.json").read_text()) if e["kind"] == "emulator"]
    os.kill(emulator["pid"], sent)

    check = agent("tiers-check", str(spec_file), "--runtime-s", "0.2")
    assert check.returncode == 1
    assert f"the emulator of tier doomed (pid {emulator['pid']}) {said}" in check.stderr

    down = agent("teardown")
    assert down.returncode == 0, down.stderr
    assert json.loads((root / "state" / "created.json").read_text()) == []
    assert str(root) not in Path("/proc/mounts").read_text()
    assert str(root) not in subprocess.run(["losetup", "-a"], capture_output=True, text=True).stdout
