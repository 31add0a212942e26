"""A host rebooted under a root: its servers, emulators, loop devices and mounts are gone while the root's record
still holds them. The next run lets go of what is gone, brings the tiers up again from their images (which hold
the data), starts the server on them and runs, with the answers it had (make test-long: a root of its own)."""

import json
import os
import signal
import time
from pathlib import Path

import pytest
from answers import read_answer
from lab import Lab, command, read_csv, remove_torn_down_root

ROOT = "/var/lib/tierlab-test-reboot"

pytestmark = pytest.mark.mariadb


def entries(kind: str) -> list[dict]:
    return [e for e in json.loads(Path(ROOT, "state", "created.json").read_text()) if e["kind"] == kind]


def kill(pid: int) -> None:
    """SIGKILL, and wait until the process has ended (gone, or a zombie its parent has not reaped yet)."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} did not end within 30 s of SIGKILL")


def reboot() -> None:
    """What a reboot does to what the record holds, and nothing to the record: every server and emulator killed
    without a chance to clean up, the tiers' file systems unmounted, their loop devices detached."""
    for entry in entries("process"):
        kill(entry["pid"])
    for entry in entries("mount"):
        assert command(["umount", "-l", entry["path"]], "umount", 60).returncode == 0
    for entry in entries("loop"):
        assert command(["losetup", "-d", entry["device"]], "losetup", 60).returncode == 0
    for entry in entries("emulator"):
        kill(entry["pid"])
        assert command(["umount", "-l", entry["mountpoint"]], "umount", 60).returncode == 0
    for entry in entries("tracing_instance"):
        Path(entry["path"]).rmdir()


@pytest.fixture(scope="module")
def rebooted(tmp_path_factory):
    """A run, the host rebooted, and the same run again: both run directories, and the record before and after."""
    lab = Lab(tmp_path_factory.mktemp("reboot-results"), root=ROOT, mysql_port_base={"mariadb": 3900, "mysql": 4000},
              postgresql_port=5518)
    try:
        before = lab.run("C+O", queries="1")
        kept = json.loads(Path(ROOT, "state", "created.json").read_text())
        reboot()
        assert json.loads(Path(ROOT, "state", "created.json").read_text()) == kept
        after = lab.run("C+O", queries="1")
        yield {"before": before, "after": after, "kept": kept,
               "record": json.loads(Path(ROOT, "state", "created.json").read_text())}
    finally:
        lab.playbook("teardown.yml", purge=True)
        remove_torn_down_root(ROOT)


def test_the_run_after_a_reboot_answers_as_the_run_before_it(rebooted):
    rows = read_csv(rebooted["after"] / "tables" / "queries.csv")
    assert list(zip(rows["query"], rows["status"], strict=True)) == [("q01", "ok")]
    answer = read_answer(rebooted["after"] / "raw" / "output" / "q01_try1.tsv")
    # Q1 groups lineitem by return flag and line status: four groups at any scale factor
    assert [row[:2] for row in answer] == [["A", "F"], ["N", "F"], ["N", "O"], ["R", "F"]]
    assert answer == read_answer(rebooted["before"] / "raw" / "output" / "q01_try1.tsv")


def test_the_record_holds_the_tiers_brought_up_again_and_nothing_of_what_the_reboot_took(rebooted):
    def by_kind(record: list[dict], kind: str) -> list[dict]:
        return [e for e in record if e["kind"] == kind]

    killed = {e["pid"] for e in by_kind(rebooted["kept"], "emulator")}
    now = by_kind(rebooted["record"], "emulator")
    assert sorted(e["tier"] for e in now) == ["nand", "optane"]
    assert not killed & {e["pid"] for e in now}
    attached = command(["losetup", "-a"], "losetup", 60).stdout
    assert all(e["device"] in attached for e in by_kind(rebooted["record"], "loop"))
    assert len(by_kind(rebooted["record"], "loop")) == 2
    mounts = Path("/proc/mounts").read_text()
    assert all(f" {e['path']} " in mounts for e in by_kind(rebooted["record"], "mount"))
    # the servers the reboot killed are let go of; the one the next run started is recorded, and runs
    servers = by_kind(rebooted["record"], "process")
    assert not {e["pid"] for e in by_kind(rebooted["kept"], "process")} & {e["pid"] for e in servers}
    assert servers and all(Path("/proc", str(e["pid"])).exists() for e in servers)
