"""What the host agent reads from mountinfo: every mount, the file system holding a path, what is mounted where.
The paths are under a directory no host has, so that no symbolic link of the host's changes them."""

from tierlab_host import system

MOUNTINFO = ("22 1 259:1 / / rw,relatime - ext4 /dev/vda rw\n"
             "61 22 7:1 / /no-such-root/tiers/nand rw,noatime - ext4 /dev/loop1 rw\n"
             "62 22 7:2 / /no-such-root/tiers/my\\040optane rw,noatime - btrfs /dev/loop2 rw,nodiscard\n"
             "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n")


def test_mounts_are_read_with_their_device_type_source_and_own_options(tmp_path, monkeypatch):
    monkeypatch.setattr(system, "MOUNTINFO", tmp_path / "mountinfo")
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    assert system.mounts()[2:] == [
        system.Mount("/no-such-root/tiers/my optane", "7:2", "btrfs", "/dev/loop2", ("rw", "nodiscard")),
        system.Mount("/sys/fs/cgroup/memory", "0:32", "cgroup", "cgroup", ("rw", "memory"))]


def test_a_path_s_file_system_is_the_longest_mount_above_it(tmp_path, monkeypatch):
    monkeypatch.setattr(system, "MOUNTINFO", tmp_path / "mountinfo")
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    assert system.mount_facts("/no-such-root/tiers/nand/db/lineitem.ibd") == ("ext4", "/dev/loop1")
    assert system.mount_facts("/no-such-root/tiers/nandx") == ("ext4", "/dev/vda")


def test_what_is_mounted_at_a_path_is_its_device_number(tmp_path, monkeypatch):
    monkeypatch.setattr(system, "MOUNTINFO", tmp_path / "mountinfo")
    (tmp_path / "mountinfo").write_text(MOUNTINFO)
    assert system.mount_device("/no-such-root/tiers/my optane") == "7:2"
    assert system.mount_device("/no-such-root/tiers") is None
