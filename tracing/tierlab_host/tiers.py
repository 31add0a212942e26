"""Bring storage tiers up (emulated on loop devices, or real) and down again.

A tier spec (one JSON object per tier, from the Ansible tiers role):
  name, role (fast|capacity), path (mount point),
  emulation: "loop" (a sparse image on a loop device, formatted ext4),
             "none" (a real mount point, or a real device to format),
  image, size_bytes            (loop only)
  device, format               (none only: a device to format and mount)
  read_ahead_kb                (optional)
  throttle: {read_iops, write_iops, read_bps, write_bps}   (optional, emulation)
"""

import json
import os
from pathlib import Path

from . import record
from .system import HostError, device_model, device_name, device_of_path, queue_dir, run

BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
# one throttle group per tierlab root (/var/lib/tierlab -> "tierlab"), so a test root never shares one
CGROUP_NAME = record.STATE_DIR.parent.name
THROTTLE_FILES = {
    "read_iops": "blkio.throttle.read_iops_device",
    "write_iops": "blkio.throttle.write_iops_device",
    "read_bps": "blkio.throttle.read_bps_device",
    "write_bps": "blkio.throttle.write_bps_device",
}


def cgroup_path() -> Path:
    return BLKIO_ROOT / CGROUP_NAME


def loop_for(image: str) -> str | None:
    out = run(["losetup", "-j", image]).stdout.strip()
    return out.split(":", 1)[0] if out else None


def _ensure_dir(path: Path, changes: list[str]) -> None:
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        directory.mkdir()
        record.add("dir", path=str(directory))
        changes.append(f"created {directory}")


def _ensure_fs(block_device: str, changes: list[str]) -> None:
    fs = run(["blkid", "-o", "value", "-s", "TYPE", block_device], check=False).stdout.strip()
    if fs:
        return
    # lazy init would make ext4lazyinit write in the background and pollute traces
    run(["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0", block_device])
    changes.append(f"formatted {block_device} as ext4")


def _ensure_mount(block_device: str, path: Path, changes: list[str]) -> None:
    _ensure_dir(path, changes)
    if os.path.ismount(path):
        return
    run(["mount", "-o", "noatime", block_device, str(path)])
    record.add("mount", path=str(path))
    changes.append(f"mounted {block_device} on {path}")


def _up_loop(spec: dict, changes: list[str]) -> str:
    image = Path(spec["image"])
    if not image.exists():
        _ensure_dir(image.parent, changes)
        with open(image, "wb") as f:
            f.truncate(int(spec["size_bytes"]))
        record.add("image", path=str(image))
        changes.append(f"created image {image}")
    loop = loop_for(str(image))
    if loop is None:
        loop = run(["losetup", "--find", "--show", "--direct-io=on", str(image)]).stdout.strip()
        record.add("loop", device=loop, image=str(image))
        changes.append(f"attached {image} to {loop}")
    _ensure_fs(loop, changes)
    _ensure_mount(loop, Path(spec["path"]), changes)
    return loop


def _up_real(spec: dict, changes: list[str]) -> str | None:
    path = Path(spec["path"])
    device = spec.get("device")
    if device:
        if not Path(device).exists():
            raise HostError(f"tier {spec['name']}: device {device} does not exist on this host")
        if spec.get("format"):
            _ensure_fs(device, changes)
        _ensure_mount(device, path, changes)
    elif not path.is_dir():
        raise HostError(
            f"tier {spec['name']}: path {path} does not exist on this host; "
            "mount the tier's file system there, or give 'device' (and 'format: true') to let tierlab mount it"
        )
    return device


def _set_read_ahead(device: str, read_ahead_kb: int, changes: list[str]) -> None:
    knob = queue_dir(device) / "read_ahead_kb"
    current = int(knob.read_text())
    if current == read_ahead_kb:
        return
    # kept once, so teardown restores the value the host had before tierlab
    if not any(e["path"] == str(knob) for e in record.entries("read_ahead")):
        record.add("read_ahead", path=str(knob), previous_kb=current)
    knob.write_text(f"{read_ahead_kb}\n")
    changes.append(f"set {knob} to {read_ahead_kb}")


def _set_throttle(device: str, throttle: dict, changes: list[str]) -> None:
    if not BLKIO_ROOT.is_dir():
        raise HostError(
            "a throttle profile needs the cgroup v1 blkio controller at /sys/fs/cgroup/blkio, "
            "which this host does not have; set the tier's throttle to {} or use real devices"
        )
    group = cgroup_path()
    if not group.is_dir():
        group.mkdir()
        record.add("cgroup", path=str(group))
        changes.append(f"created cgroup {group}")
    for key, value in throttle.items():
        if key not in THROTTLE_FILES:
            raise HostError(f"unknown throttle setting {key!r}; allowed: {', '.join(THROTTLE_FILES)}")
        knob = group / THROTTLE_FILES[key]
        line = f"{device} {int(value)}"
        if line not in knob.read_text().split("\n"):
            knob.write_text(line + "\n")
            changes.append(f"throttled {device} {key}={value}")


def up(specs: list[dict]) -> dict:
    changes: list[str] = []
    facts = []
    for spec in specs:
        block_device = _up_loop(spec, changes) if spec["emulation"] == "loop" else _up_real(spec, changes)
        device = device_of_path(spec["path"])
        if spec.get("read_ahead_kb"):
            _set_read_ahead(device, int(spec["read_ahead_kb"]), changes)
        throttle = spec.get("throttle") or {}
        if throttle:
            _set_throttle(device, throttle, changes)
        stat = os.statvfs(spec["path"])
        facts.append({
            "name": spec["name"],
            "role": spec["role"],
            "path": spec["path"],
            "device": device,
            "device_name": device_name(device),
            "block_device": block_device or f"/dev/{device_name(device)}",
            "model": device_model(device),
            "fs": run(["findmnt", "-n", "-o", "FSTYPE", "--target", spec["path"]]).stdout.strip(),
            "emulated": spec["emulation"] == "loop",
            "emulation": spec["emulation"],
            "backing_image": spec.get("image") if spec["emulation"] == "loop" else None,
            "throttle": throttle,
            "read_ahead_kb": int((queue_dir(device) / "read_ahead_kb").read_text()),
            "scheduler": (queue_dir(device) / "scheduler").read_text().strip(),
            "size_bytes": stat.f_blocks * stat.f_frsize,
            "free_bytes": stat.f_bavail * stat.f_frsize,
        })
    return {"changed": bool(changes), "changes": changes, "tiers": facts}


def join_cgroup(pid: int) -> None:
    """Put a process into the tier throttle group (when there is one)."""
    procs = cgroup_path() / "cgroup.procs"
    if procs.exists():
        procs.write_text(f"{pid}\n")


def main_up(spec_file: str) -> None:
    print(json.dumps(up(json.loads(Path(spec_file).read_text()))))
