"""The disk under an observed instance's files: a partition's requests are traced on its disk, its sectors moved by
the partition's start; device-mapper and md devices are refused by name."""

import pytest

from tierlab_host import system
from tierlab_host.system import HostError, whole_disk


@pytest.fixture
def sysfs(tmp_path, monkeypatch):
    """A /sys/dev/block of links to device directories, as the kernel lays them out."""
    devices = tmp_path / "devices"
    by_number = tmp_path / "dev-block"
    by_number.mkdir()

    def add(number: str, relative: str, **files: str):
        directory = devices / relative
        directory.mkdir(parents=True)
        (directory / "dev").write_text(f"{number}\n")
        for name, text in files.items():
            path = directory / name.replace("__", "/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (by_number / number).symlink_to(directory)

    add("8:0", "sda")
    add("8:2", "sda/sda2", partition="2\n", start="6144\n")
    add("253:0", "dm-0", dm__name="vg0-data\n")
    add("9:0", "md0", md__level="raid1\n")
    add("259:1", "md0/md0p1", partition="1\n", start="2048\n")
    monkeypatch.setattr(system, "SYS_DEV_BLOCK", by_number)


def test_a_whole_disk_is_its_own_disk_at_offset_zero(sysfs):
    assert whole_disk("8:0") == ("8:0", 0)


def test_a_partition_is_traced_on_its_disk_its_start_in_bytes(sysfs):
    assert whole_disk("8:2") == ("8:0", 6144 * 512)


def test_a_device_mapper_device_is_refused_by_its_name(sysfs):
    with pytest.raises(HostError, match=r"dm-0 \(vg0-data\) is a device-mapper device"):
        whole_disk("253:0")


def test_a_partition_of_an_md_device_is_refused_as_md(sysfs):
    with pytest.raises(HostError, match=r"md0 \(md0\) is an md RAID device"):
        whole_disk("259:1")


def test_a_device_the_kernel_does_not_list_is_refused(sysfs):
    with pytest.raises(HostError, match="block device 8:9 is not in"):
        whole_disk("8:9")
