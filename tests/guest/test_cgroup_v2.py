"""tierlab's host agent on a host that boots with cgroup v2 only, under systemd, as Debian 12 and every current
distribution do: a Debian 12 guest (qemu, emulating the CPU: on this kind of host, itself a VM, a KVM guest's kernel
hangs before its first line) runs tests/guest/guest_check.py at boot and powers off; what it
saw is checked here. The guest's image is made once with debootstrap and kept in IMAGE_DIR (the tests boot it with
-snapshot, so it stays as made); `make test-guest` runs this, outside `make test`: the first run takes minutes."""

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
IMAGE_DIR = Path("/var/cache/tierlab-guest")
IMAGE = IMAGE_DIR / "debian12.img"
KERNEL, INITRD = IMAGE_DIR / "vmlinuz", IMAGE_DIR / "initrd.img"
MIRROR = "http://deb.debian.org/debian"
PACKAGES = ("linux-image-amd64", "systemd-sysv", "udev", "python3", "util-linux", "e2fsprogs", "kmod", "procps")
IMAGE_SIZE = "2G"
BOOT_TIMEOUT_S = 600
# the guest's one job: mount the share, run the check into it, power off
SERVICE = """[Unit]
Description=tierlab's cgroup v2 check
After=local-fs.target systemd-udevd.service

[Service]
Type=oneshot
Environment=PYTHONDONTWRITEBYTECODE=1
ExecStart=/bin/sh -c 'mkdir -p /mnt/tierlab && mount -t 9p -o trans=virtio,version=9p2000.L tierlab /mnt/tierlab \
&& python3 /mnt/tierlab/guest_check.py > /mnt/tierlab/out.json 2> /mnt/tierlab/err.txt; systemctl poweroff --no-block'

[Install]
WantedBy=multi-user.target
"""
MIB = 1 << 20


def build_image() -> None:
    """The guest's root file system, made by debootstrap into a directory, then written into an ext4 image (mkfs
    -d: no loop device or mount needed); its kernel and initrd kept beside it for qemu's direct boot."""
    if IMAGE.exists():
        return
    IMAGE_DIR.mkdir(parents=True, exist_ok=True)
    rootfs = IMAGE_DIR / "rootfs"
    shutil.rmtree(rootfs, ignore_errors=True)
    try:
        subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", "bookworm",
                        str(rootfs), MIRROR], check=True, capture_output=True, timeout=1800)
        (rootfs / "etc" / "hostname").write_text("tierlab-guest\n")
        (rootfs / "etc" / "fstab").write_text("/dev/vda / ext4 rw 0 1\n")
        unit = rootfs / "etc" / "systemd" / "system" / "tierlab-check.service"
        unit.write_text(SERVICE)
        wants = rootfs / "etc" / "systemd" / "system" / "multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        (wants / unit.name).symlink_to(f"/etc/systemd/system/{unit.name}")
        (kernel,) = sorted((rootfs / "boot").glob("vmlinuz-*"))
        (initrd,) = sorted((rootfs / "boot").glob("initrd.img-*"))
        shutil.copy(kernel, KERNEL)
        shutil.copy(initrd, INITRD)
        partial = IMAGE.with_suffix(".partial")
        subprocess.run(["mkfs.ext4", "-q", "-F", "-d", str(rootfs), str(partial), IMAGE_SIZE], check=True,
                       capture_output=True, timeout=600)
        partial.rename(IMAGE)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)


@pytest.fixture(scope="module")
def guest(tmp_path_factory) -> dict:
    """What the guest's check found, booted once."""
    build_image()
    share = tmp_path_factory.mktemp("share")
    shutil.copytree(REPO / "tracing" / "tierlab_host", share / "tierlab_host",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(Path(__file__).with_name("guest_check.py"), share)
    console = share.parent / "console.log"
    with open(console, "w") as log:
        booted = subprocess.run(
            ["qemu-system-x86_64", "-machine", "accel=tcg", "-cpu", "max", "-m", "1024", "-smp", "2", "-nographic",
             "-no-reboot", "-nic", "none", "-snapshot", "-kernel", str(KERNEL), "-initrd", str(INITRD),
             "-append", "root=/dev/vda rw console=ttyS0",
             "-drive", f"file={IMAGE},format=raw,if=virtio",
             "-virtfs", f"local,path={share},mount_tag=tierlab,security_model=none,id=tierlab"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=BOOT_TIMEOUT_S)
    out = share / "out.json"
    assert booted.returncode == 0 and out.exists() and out.stat().st_size, (
        f"the guest's check wrote no answer (qemu exit {booted.returncode}); its console: {console}; its errors: "
        f"{(share / 'err.txt').read_text() if (share / 'err.txt').exists() else 'none'}")
    return json.loads(out.read_text())


def test_the_guest_boots_with_cgroup_v2_only_under_systemd(guest):
    assert (guest["mode"], guest["systemd"]) == ("v2", True)


def test_tierlab_s_groups_live_in_its_own_delegated_systemd_service(guest):
    (leaf,) = guest["groups"]
    assert leaf.startswith("/sys/fs/cgroup/system.slice/tierlab-tierlab-guest.service/")
    assert leaf.endswith("/tierlab-tierlab-guest/reader")


def test_the_throttled_tier_s_reads_run_at_its_io_max_and_others_do_not(guest):
    assert "rbps=16777216 wbps=max riops=max wiops=max" in guest["io_max"]
    # 64 MiB at 16 MiB/s: 4 s
    assert guest["throttled_read_s"] >= 3.5, guest
    assert guest["unthrottled_read_s"] < 1.5, guest


def test_a_server_s_memory_max_bounds_its_page_cache(guest):
    assert guest["memory_max"] == str(64 * MIB)
    # a 256 MiB file read through the page cache: at most the bound stays cached in the group
    assert guest["reader_peak_bytes"] <= 64 * MIB
    assert guest["reader_file_bytes"] <= 64 * MIB


def test_teardown_removes_the_groups_the_service_and_the_tier_and_empties_the_record(guest):
    assert {"cgroup", "systemd_unit", "loop", "mount", "image"} <= set(guest["recorded"])
    assert guest["left"] == dict.fromkeys(guest["left"], False)
    assert guest["unit_after"] in ("inactive", "")
    assert guest["record_after"] == []
