"""The extents of files on btrfs, checked against the device itself: a small btrfs on a loop device of its own."""

import os

import pytest

from tierlab_host.extents import file_extents
from tierlab_host.system import device_of_path, run

ZSTD_MAGIC = bytes.fromhex("28b52ffd")
RANDOM = os.urandom(1 << 20)
TEXT = b"".join(b"%08d|Customer#%09d|IVhzIApeRb ot,c,E|15|25-989-741-2988|711.56|BUILDING|\n" % (i, i)
                for i in range(40000))[:2 << 20]


@pytest.fixture
def btrfs(tmp_path):
    image = tmp_path / "btrfs.img"
    with open(image, "wb") as f:
        f.truncate(512 << 20)
    # run() names the command and what it said on stderr where it fails
    loop = run(["losetup", "--find", "--show", str(image)], timeout_s=120).stdout.strip()
    mount = tmp_path / "mnt"
    mount.mkdir()
    try:
        run(["mkfs.btrfs", "-q", "-f", loop], timeout_s=120)
        run(["mount", "-o", "noatime,nodiscard", loop, str(mount)], timeout_s=120)
        yield loop, mount
    finally:
        run(["umount", str(mount)], timeout_s=120, check=False)
        run(["losetup", "-d", loop], timeout_s=120)


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)


def test_an_uncompressed_file_s_extents_hold_its_bytes_where_they_say_on_the_device(btrfs):
    loop, mount = btrfs
    write(mount / "table", TEXT)
    extents = file_extents(str(mount / "table"))
    assert sum(length for _, _, length, _ in extents) == len(TEXT)
    with open(loop, "rb") as device:
        for logical, physical, length, stored in extents:
            assert stored == length
            device.seek(physical)
            assert device.read(length) == TEXT[logical:logical + length]
    rdev = os.stat(loop).st_rdev
    assert device_of_path(mount / "table") == f"{os.major(rdev)}:{os.minor(rdev)}"


def test_a_compressed_file_s_extents_are_zstd_frames_of_their_stored_bytes(btrfs):
    loop, mount = btrfs
    (mount / "db").mkdir()
    run(["btrfs", "property", "set", str(mount / "db"), "compression", "zstd"], timeout_s=120)
    write(mount / "db" / "table", TEXT)
    write(mount / "db" / "random", RANDOM)
    extents = file_extents(str(mount / "db" / "table"))
    # btrfs compresses 128 KiB at a time
    assert [length for _, _, length, _ in extents] == [128 << 10] * 16
    assert sum(stored for *_, stored in extents) < len(TEXT) / 4
    with open(loop, "rb") as device:
        for _, physical, _, _ in extents:
            device.seek(physical)
            assert device.read(4) == ZSTD_MAGIC
    # what does not compress is stored as it is
    stored_as_is = file_extents(str(mount / "db" / "random"))
    assert all(stored == length for _, _, length, stored in stored_as_is)
    assert sum(stored for *_, stored in stored_as_is) == len(RANDOM)
