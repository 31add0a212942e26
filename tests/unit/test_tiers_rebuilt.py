"""After a reboot the record still holds tiers the host no longer has: the tiers' bring-up lets go of exactly
those entries (their processes ended, their mounts and loop devices gone), so that it builds the tiers again from
their images; what still stands is kept."""

import subprocess

import pytest

from tierlab_host import record, system, tiers
from tierlab_host.tiers import _let_go_of_gone


@pytest.fixture
def state(monkeypatch, tmp_path):
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "state" / "created.json")


def test_entries_of_tiers_gone_from_the_host_are_let_go_and_the_rest_kept(state, tmp_path):
    gone_mountpoint, live_mountpoint = str(tmp_path / "mnt" / "nand"), str(tmp_path / "mnt" / "optane")
    ended = subprocess.Popen(["true"])
    ended.wait(timeout=60)
    # a process whose command line names its mount point, as a running emulator's does
    running = subprocess.Popen(["sh", "-c", "sleep 30", live_mountpoint])
    try:
        entries = [
            {"kind": "dir", "path": str(tmp_path / "mnt")},
            {"kind": "image", "path": str(tmp_path / "nand.img")},
            {"kind": "emulator", "tier": "nand", "pid": ended.pid, "mountpoint": gone_mountpoint, "log": "nand.log"},
            {"kind": "emulator", "tier": "optane", "pid": running.pid, "mountpoint": live_mountpoint, "log": "o.log"},
            {"kind": "loop", "device": "/dev/loop99", "image": f"{gone_mountpoint}/device"},
            {"kind": "mount", "path": str(tmp_path / "tiers" / "nand")},
            {"kind": "mount", "path": "/"},
        ]
        for entry in entries:
            record.add(**entry)
        changes: list[str] = []
        _let_go_of_gone(changes)
        kept = record.entries()
    finally:
        running.kill()
        running.wait(timeout=60)
    assert kept == [entries[0], entries[1], entries[3], entries[6]]
    assert changes == [
        f"let go of the emulator of tier nand (pid {ended.pid}) and its mount, which the record held but the host no "
        "longer has",
        f"let go of loop device /dev/loop99 of {gone_mountpoint}/device, which the record held but the host no longer "
        "has",
        f"let go of the mount on {tmp_path / 'tiers' / 'nand'}, which the record held but the host no longer has"]


def sys_block_loop(sys_block, name: str, backing: str, diskseq: int) -> None:
    """A loop device as sysfs shows it: its backing file's name and its disk sequence number."""
    (sys_block / name / "loop").mkdir(parents=True)
    (sys_block / name / "loop" / "backing_file").write_text(f"{backing}\n")
    (sys_block / name / "diskseq").write_text(f"{diskseq}\n")


def test_a_loop_device_whose_emulator_died_is_kept_while_its_disk_sequence_number_is_the_recorded_one(
        state, tmp_path, monkeypatch):
    monkeypatch.setattr(tiers, "SYS_BLOCK", tmp_path / "sys" / "block")
    image = "/var/lib/tierlab/emulator/mnt/optane/device"
    # seen on a host whose emulators were killed: sysfs names the backing file relative to the gone FUSE mount
    sys_block_loop(tiers.SYS_BLOCK, "loop0", "/device (deleted)", 19)
    # detached and attached again since it was recorded (diskseq 36), to a file of the same name
    sys_block_loop(tiers.SYS_BLOCK, "loop1", "/var/lib/tierlab/emulator/mnt/nand/device", 38)
    dead = {"kind": "loop", "device": "/dev/loop0", "image": image, "diskseq": 19}
    reused = {"kind": "loop", "device": "/dev/loop1", "image": "/var/lib/tierlab/emulator/mnt/nand/device",
              "diskseq": 36}
    for entry in (dead, reused):
        record.add(**entry)
    changes: list[str] = []
    _let_go_of_gone(changes)
    assert record.entries() == [dead]
    assert changes == ["let go of loop device /dev/loop1 of /var/lib/tierlab/emulator/mnt/nand/device, which the "
                       "record held but the host no longer has"]


def test_the_loop_devices_whose_files_are_deleted_or_cannot_be_reached_on_a_fuse_mount_are_found(tmp_path,
                                                                                                   monkeypatch):
    monkeypatch.setattr(tiers, "SYS_BLOCK", tmp_path / "sys" / "block")
    fuse = tmp_path / "mnt" / "nand"
    fuse.mkdir(parents=True)
    (fuse / "device").write_bytes(b"")
    monkeypatch.setattr(system, "MOUNTINFO", tmp_path / "mountinfo")
    (tmp_path / "mountinfo").write_text(f"60 1 0:42 / {fuse} rw,nosuid,nodev - fuse.tierlab tierlab-emu rw\n"
                                        f"61 1 7:1 / {tmp_path / 'tiers'} rw,noatime - ext4 /dev/loop1 rw\n")
    sys_block_loop(tiers.SYS_BLOCK, "loop0", "/device (deleted)", 19)
    sys_block_loop(tiers.SYS_BLOCK, "loop1", str(fuse / "device"), 20)
    sys_block_loop(tiers.SYS_BLOCK, "loop2", f"{fuse}/other", 21)
    # a file off every FUSE mount is not looked at
    sys_block_loop(tiers.SYS_BLOCK, "loop3", f"{tmp_path}/images/optane.img", 22)
    # a loop device with nothing attached has no backing_file
    (tiers.SYS_BLOCK / "loop4").mkdir()
    assert tiers.loops_on_lost_files() == {"/dev/loop0": "/device (deleted)",
                                           "/dev/loop2": f"{fuse}/other (No such file or directory)"}
