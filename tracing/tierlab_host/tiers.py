"""Bring storage tiers up (emulated on loop devices, or real) and down again.

A tier spec (one JSON object per tier, from the Ansible tiers role):
  name, role (fast|capacity), path (mount point),
  emulation: "model"    (a sparse image served by tierlab-emu with a device
                         model, under a loop device),
             "throttle" (a sparse image on a loop device, with an optional
                         cgroup I/O throttle: v1 blkio or v2 io.max),
             "none"     (a real mount point, or a real device to format),
  image, size_bytes                              (model and throttle)
  profile_file, emulator, emulator_mountpoint,
  cache_profile_file (optional: the fast tier's profile, for a cache in front),
  dilation ("auto" or a number; the same on every model tier)   (model)
  throttle: {read_iops, write_iops, read_bps, write_bps}   (throttle)
  device, format               (none only: a device to format and mount)
  filesystem: "ext4" or "btrfs", what tierlab makes on what it formats; a
              mounted path's is checked against it, unless it is null
  read_ahead_kb                (optional)
"""

import json
import os
import threading
from pathlib import Path

from . import cgroups, emulator, record
from .system import (
    HostError,
    device_model,
    device_name,
    device_of_path,
    mount_facts,
    mounted,
    mounts,
    queue_dir,
    run,
    set_knob,
)

SYS_BLOCK = Path("/sys/block")
# how long a look at a loop device's file waits for a FUSE server that may be stopped
LOOK_WAIT_S = 2


def loop_for(backing: str) -> str | None:
    """The loop device backed by this file; read from sysfs, which still answers when the file's FUSE server is gone."""
    for backing_file in SYS_BLOCK.glob("loop*/loop/backing_file"):
        if backing_file.read_text().strip() == backing:
            return f"/dev/{backing_file.parent.parent.name}"
    return None


def _unreachable(path: str) -> str | None:
    """Why path cannot be looked at, or None. In a thread of its own: a look through a FUSE server that is stopped
    waits for it, and the thread is left to end with the process."""
    answer: list[str | None] = []

    def look() -> None:
        try:
            os.stat(path)
            answer.append(None)
        except OSError as exc:
            answer.append(exc.strerror)
    thread = threading.Thread(target=look, daemon=True)
    thread.start()
    thread.join(LOOK_WAIT_S)
    return answer[0] if answer else f"no answer within {LOOK_WAIT_S} s"


def loops_on_lost_files() -> dict[str, str]:
    """The loop devices whose backing file is gone (sysfs adds ` (deleted)` to its name) or cannot be reached (its
    FUSE server exited or does not answer), by device, left by whatever root or tool made them. mkfs.btrfs looks
    at every loop device's file and refuses beside such a one."""
    fuse = [mount.point.rstrip("/") + "/" for mount in mounts() if mount.fs.startswith("fuse")]
    lost = {}
    for path in sorted(SYS_BLOCK.glob("loop*/loop/backing_file")):
        name, device = path.read_text().strip(), f"/dev/{path.parent.parent.name}"
        if name.endswith(" (deleted)"):
            lost[device] = name
        elif name.startswith(tuple(fuse)) and (why := _unreachable(name)):
            lost[device] = f"{name} ({why})"
    return lost


def _diskseq(device: str) -> int | None:
    path = SYS_BLOCK / Path(device).name / "diskseq"
    return int(path.read_text()) if path.exists() else None


def attached_as_recorded(entry: dict) -> bool:
    """Whether a recorded loop device is still the one tierlab attached. The kernel changes a loop device's disk
    sequence number on every attach and detach, so an unchanged one names it even where its backing file can no
    longer be named: once its emulator is gone, sysfs calls it `.../device (deleted)`, then `/device (deleted)`.
    Entries recorded without one are matched by their backing file's name."""
    if entry.get("diskseq") is None:
        return loop_for(entry["image"]) == entry["device"]
    return _diskseq(entry["device"]) == entry["diskseq"]


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


# btrfs would discard freed blocks in the background where the device can (loop devices can)
MOUNT_OPTIONS = {"ext4": "noatime", "btrfs": "noatime,nodiscard"}
# lazy init would make ext4lazyinit write in the background and pollute traces
MKFS = {"ext4": ["mkfs.ext4", "-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"],
        "btrfs": ["mkfs.btrfs", "-q", "-f"]}


def _ensure_fs(spec: dict, block_device: str, changes: list[str]) -> None:
    fs = run(["blkid", "-o", "value", "-s", "TYPE", block_device], check=False).stdout.strip()
    if not fs:
        run([*MKFS[spec["filesystem"]], block_device])
        changes.append(f"formatted {block_device} as {spec['filesystem']}")
    elif fs != spec["filesystem"]:
        raise HostError(
            f"tier {spec['name']}: {block_device} holds {fs}, but the inventory asks for {spec['filesystem']}; "
            "tear the tiers down first (ansible-playbook playbooks/teardown.yml -e purge=true), "
            "or give this study a tierlab_root of its own")


def _check_mounted_fs(spec: dict) -> None:
    fs = mount_facts(spec["path"])[0]
    if spec.get("filesystem") and fs != spec["filesystem"]:
        raise HostError(f"tier {spec['name']}: {spec['path']} is on {fs}, but the inventory says filesystem: "
                        f"{spec['filesystem']}; mount a {spec['filesystem']} file system there, or correct the inventory")


def _ensure_mount(spec: dict, block_device: str, path: Path, changes: list[str]) -> None:
    _ensure_dir(path, changes)
    if mounted(path):
        return
    # a device of a file system the inventory does not name is mounted with noatime only
    run(["mount", "-o", MOUNT_OPTIONS.get(spec["filesystem"], "noatime"), block_device, str(path)])
    record.add("mount", path=str(path))
    changes.append(f"mounted {block_device} on {path}")


def _attach(spec: dict, changes: list[str]) -> tuple[str, bool]:
    """An emulated tier's loop device (a model tier's emulator started first); (device, calibration needed)."""
    image = Path(spec["image"])
    if not image.exists():
        _ensure_dir(image.parent, changes)
        with open(image, "wb") as f:
            f.truncate(int(spec["size_bytes"]))
        record.add("image", path=str(image))
        changes.append(f"created image {image}")
    backing, started = image, False
    if spec["emulation"] == "model":
        # a recorded emulator is checked before its mount point is looked at: a dead one's mount does not answer
        backing = emulator.serving(spec)
        if backing is None:
            _ensure_dir(Path(spec["emulator_mountpoint"]), changes)
            backing, started = emulator.start(spec, image, changes), True
    loop = loop_for(str(backing))
    if loop is None:
        loop = run(["losetup", "--find", "--show", "--direct-io=on", str(backing)]).stdout.strip()
        record.add("loop", device=loop, image=str(backing), diskseq=_diskseq(loop))
        changes.append(f"attached {backing} to {loop}")
    uncalibrated = spec["emulation"] == "model" and (started or emulator.calibration(spec["emulator_mountpoint"]) is None)
    return loop, uncalibrated


def _up_real(spec: dict, changes: list[str]) -> str | None:
    path = Path(spec["path"])
    device = spec.get("device")
    if device:
        if not Path(device).exists():
            raise HostError(f"tier {spec['name']}: device {device} does not exist on this host")
        if spec.get("format"):
            _ensure_fs(spec, device, changes)
        _ensure_mount(spec, device, path, changes)
    elif not path.is_dir():
        raise HostError(
            f"tier {spec['name']}: path {path} does not exist on this host; "
            "mount the tier's file system there, or give 'device' (and 'format: true') to let tierlab mount it"
        )
    _check_mounted_fs(spec)
    return device


def _throttle(spec: dict) -> dict:
    return (spec.get("throttle") or {}) if spec["emulation"] == "throttle" else {}


def _let_go_of_gone(changes: list[str]) -> None:
    """Let go of what the record holds of tiers that are gone from the host, as after a reboot: an emulator whose
    process ended with its mount gone too, a loop device detached, a file system no longer mounted. The tiers are
    then brought up again from their images, which hold their file systems and data. A tier half gone (an emulator
    dead under a mount that still stands) is left to its error, which says to tear down first."""
    for entry in record.entries():
        kind = entry["kind"]
        if kind == "emulator" and not emulator.runs(entry) and not mounted(entry["mountpoint"]):
            gone = f"the emulator of tier {entry['tier']} (pid {entry['pid']}) and its mount"
        elif kind == "loop" and not attached_as_recorded(entry):
            gone = f"loop device {entry['device']} of {entry['image']}"
        elif kind == "mount" and not mounted(entry["path"]):
            gone = f"the mount on {entry['path']}"
        else:
            continue
        record.remove(entry)
        changes.append(f"let go of {gone}, which the record held but the host no longer has")


def up(specs: list[dict]) -> dict:
    changes: list[str] = []
    _let_go_of_gone(changes)
    if any(_throttle(spec) for spec in specs):
        # refused before anything is made where the host cannot throttle
        cgroups.require("io")
    facts = []
    if any(spec["emulation"] == "model" for spec in specs):
        emulator.allow_fast_wakeups(changes)
    attached = {spec["name"]: _attach(spec, changes) for spec in specs if spec["emulation"] != "none"}
    modelled = [spec for spec in specs if spec["emulation"] == "model"]
    if any(attached[spec["name"]][1] for spec in modelled):
        # the dilation is one for the host, so every model tier is calibrated again with a new one
        dilation = emulator.calibrate(modelled, {name: loop for name, (loop, _) in attached.items()},
                                      modelled[0]["dilation"])
        changes.append(f"calibrated the emulators of tiers {', '.join(s['name'] for s in modelled)}: dilation {dilation:g}")
    for spec in specs:
        if spec["emulation"] == "none":
            block_device = _up_real(spec, changes)
        else:
            block_device = attached[spec["name"]][0]
            _ensure_fs(spec, block_device, changes)
            _ensure_mount(spec, block_device, Path(spec["path"]), changes)
        device = device_of_path(spec["path"])
        if spec.get("read_ahead_kb"):
            set_knob(queue_dir(device) / "read_ahead_kb", int(spec["read_ahead_kb"]), changes)
        throttle = _throttle(spec)
        if throttle:
            cgroups.throttle(device, throttle, changes)
        stat = os.statvfs(spec["path"])
        facts.append({
            "name": spec["name"],
            "role": spec["role"],
            "path": spec["path"],
            "device": device,
            "device_name": device_name(device),
            "block_device": block_device or f"/dev/{device_name(device)}",
            "model": device_model(device),
            "fs": mount_facts(spec["path"])[0],
            "emulated": spec["emulation"] != "none",
            "emulation": spec["emulation"],
            "backing_image": spec.get("image"),
            "profile": _profile_facts(spec) if spec["emulation"] == "model" else None,
            "calibration": emulator.calibration(spec["emulator_mountpoint"]) if spec["emulation"] == "model" else None,
            "emulator_mountpoint": spec.get("emulator_mountpoint"),
            # whether the emulator can put a cache of the fast tier's device in front of this one (fast_cache)
            "cache_capable": bool(spec.get("cache_profile_file")),
            "throttle": throttle,
            "read_ahead_kb": int((queue_dir(device) / "read_ahead_kb").read_text()),
            "scheduler": (queue_dir(device) / "scheduler").read_text().strip(),
            "size_bytes": stat.f_blocks * stat.f_frsize,
            "free_bytes": stat.f_bavail * stat.f_frsize,
        })
    return {"changed": bool(changes), "changes": changes, "tiers": facts}


def _profile_facts(spec: dict) -> dict:
    live = emulator.stats(spec["emulator_mountpoint"])
    return {"name": live["model"], "file": spec["profile_file"], "text": Path(spec["profile_file"]).read_text(),
            "overhead_fixed_us": live["overhead_fixed_us"], "overhead_per_kib_us": live["overhead_per_kib_us"],
            "timer_overshoot_us": live["timer_overshoot_us"]}


def main_up(spec_file: str) -> None:
    print(json.dumps(up(json.loads(Path(spec_file).read_text()))))
