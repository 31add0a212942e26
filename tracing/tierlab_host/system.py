"""Running commands and reading block-device facts on the host."""

import contextlib
import errno
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from . import record


class HostError(Exception):
    """A host-side step failed; the message says what, where and what to do."""


def run(cmd: list[str], timeout_s: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    except FileNotFoundError as exc:
        raise HostError(f"{cmd[0]} is not installed on this host: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise HostError(f"{' '.join(cmd)} did not finish within {timeout_s} s") from exc
    if check and done.returncode != 0:
        raise HostError(f"{' '.join(cmd)} failed (exit {done.returncode}): {done.stderr.strip()}")
    return done


def changed_at(path: Path) -> int | None:
    """When the file was last written (ns), or None where there is none: the key of what is kept until it
    changes."""
    return path.stat().st_mtime_ns if path.exists() else None


def copy_keeping_holes(src: Path, dst: Path) -> None:
    """Copy src's data to dst (made or emptied) and leave src's holes holes: InnoDB's page compression punches a
    hole in each page it writes, and a plain copy (shutil.copyfile's sendfile) fills them, so the table would
    take its uncompressed size on the tier it moves to and be read from there whole."""
    with open(src, "rb") as source, open(dst, "wb") as target:
        size = os.fstat(source.fileno()).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(source.fileno(), offset, os.SEEK_DATA)
            except OSError as exc:
                # ENXIO: no data after offset, the rest is a hole
                if exc.errno != errno.ENXIO:
                    raise
                break
            offset = os.lseek(source.fileno(), start, os.SEEK_HOLE)
            # sendfile writes at the target's position
            os.lseek(target.fileno(), start, os.SEEK_SET)
            while start < offset:
                sent = os.sendfile(target.fileno(), source.fileno(), start, offset - start)
                if sent == 0:
                    raise OSError(errno.EIO, f"{src} ended at byte {start} while it was copied")
                start += sent
        os.ftruncate(target.fileno(), size)


def no_room(path: Path) -> str:
    """What is free on the file system of path, for a message about a write it had no room for."""
    stat = os.statvfs(path)
    return (f"{stat.f_bavail * stat.f_frsize / 2**20:.1f} MiB free of {stat.f_blocks * stat.f_frsize / 2**20:.1f} MiB "
            f"on the file system of {path}")


class Mount(NamedTuple):
    """One line of mountinfo."""
    point: str
    # 'major:minor'
    device: str
    fs: str
    source: str
    # the file system's own options: a cgroup v1 mount's controllers are among them
    options: tuple[str, ...]


# read at each use (mounts come and go); tests give one of their own
MOUNTINFO = Path("/proc/self/mountinfo")
# block devices by 'major:minor'; tests give a tree of their own
SYS_DEV_BLOCK = Path("/sys/dev/block")


def mounts() -> list[Mount]:
    """Every mount of this process's namespace, in mount order."""
    found = []
    for line in MOUNTINFO.read_text().splitlines():
        fields = line.split()
        separator = fields.index("-")
        found.append(Mount(fields[4].replace("\\040", " "), fields[2], fields[separator + 1], fields[separator + 2],
                           tuple(fields[separator + 3].split(","))))
    return found


def mount_facts(path: str | Path) -> tuple[str, str]:
    """(file system type, mount source) of the file system holding path: the mountinfo entry of the
    longest mount point above it (by path, since btrfs gives each subvolume a device number of its own)."""
    target = os.path.realpath(path)
    found = None
    for mount in mounts():
        inside = target == mount.point or target.startswith(mount.point.rstrip("/") + "/")
        if inside and (found is None or len(mount.point) >= len(found.point)):
            found = mount
    if found is None:
        raise HostError(f"{path}: no mount above it in {MOUNTINFO}")
    return found.fs, found.source


def device_of_path(path: str | Path) -> str:
    """The block device number 'major:minor' of the file system holding path."""
    st = os.stat(path)
    if os.major(st.st_dev) != 0:
        return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    # btrfs gives its files an anonymous device number (0:N), which block traces never name: the device is
    # the mount's source
    source = mount_facts(path)[1]
    if not source.startswith("/dev/"):
        raise HostError(f"{path}: its file system ({source}) is not on a block device; tiers must be")
    rdev = os.stat(source).st_rdev
    return f"{os.major(rdev)}:{os.minor(rdev)}"


def queue_dir(device: str) -> Path:
    """The sysfs queue directory of a device; a partition uses its disk's queue."""
    sys_dir = SYS_DEV_BLOCK / device
    if (sys_dir / "queue").is_dir():
        return sys_dir / "queue"
    return sys_dir.resolve().parent / "queue"


def whole_disk(device: str) -> tuple[str, int]:
    """(the disk a block device is, or is a partition of, as 'major:minor'; the partition's first byte on it). Block
    traces name the disk and its sectors: a partition's requests are remapped to the disk before they are issued.
    Device-mapper and md devices are refused by name: a sector of theirs may be on any of the devices under them,
    which tierlab cannot map yet."""
    sys_dir = SYS_DEV_BLOCK / device
    if not sys_dir.exists():
        raise HostError(f"block device {device} is not in /sys/dev/block")
    disk = sys_dir.resolve().parent if (sys_dir / "partition").exists() else sys_dir.resolve()
    for stacked, what in (("dm", "a device-mapper device (LVM, dm-crypt, dm-cache)"), ("md", "an md RAID device")):
        if (disk / stacked).is_dir():
            name = (disk / stacked / "name").read_text().strip() if (disk / stacked / "name").exists() else disk.name
            raise HostError(f"{disk.name} ({name}) is {what}: its sectors map to the devices under it, which tierlab "
                            "cannot trace through yet; observe an instance whose files are on plain disks or "
                            "partitions")
    if disk == sys_dir.resolve():
        return device, 0
    return (disk / "dev").read_text().strip(), int((sys_dir / "start").read_text()) * 512


def device_name(device: str) -> str:
    return (SYS_DEV_BLOCK / device).resolve().name


def device_model(device: str) -> str:
    name = device_name(device)
    if name.startswith("loop"):
        return "loop"
    disk = (SYS_DEV_BLOCK / device).resolve()
    for candidate in (disk / "device" / "model", disk.parent / "device" / "model"):
        if candidate.exists():
            return candidate.read_text().strip()
    return "unknown"


def ftrace_dev(device: str) -> int:
    """The kernel's internal dev_t (major << 20 | minor), as tracepoint filters use it."""
    major, minor = (int(x) for x in device.split(":"))
    return major << 20 | minor


def cmdline(pid: int) -> list[str]:
    """A live process's arguments; [] for a process that is gone or a zombie."""
    try:
        arguments = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return []
    # a zombie's is empty
    return arguments.decode().split("\0") if arguments else []


def signal_process(pid: int, number: int) -> None:
    """Send a signal to a process that may have ended since it was looked at."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, number)


def wait_gone(pid: int, timeout_s: float) -> bool:
    """Wait for a process to end (reaping it when it is our child); False on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return True
        except ChildProcessError:
            pass
        if not cmdline(pid):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)


# the time a process gets to end after SIGKILL
KILL_WAIT_S = 10


def _work(pid: int) -> tuple | None:
    """What the process has done so far (its CPU ticks and its I/O counters); None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        io = Path(f"/proc/{pid}/io").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return fields[11], fields[12], io


def wait_while_working(pid: int, stall_s: float, limit_s: float, is_ours: Callable[[], bool]) -> tuple[float, bool]:
    """Wait for a process to end for as long as it works (its CPU time or its I/O moves, as a clean-up's does), but
    at most limit_s (a clean-up that polls for ever moves too): the seconds waited, and whether it ended (False once
    it has done nothing for stall_s, or worked for limit_s)."""
    started = time.monotonic()
    last, moved = _work(pid), started
    while not wait_gone(pid, 0.2) and is_ours():
        now, at = _work(pid), time.monotonic()
        if now != last:
            last, moved = now, at
        if at - moved > stall_s or at - started > limit_s:
            return round(at - started, 1), False
    return round(time.monotonic() - started, 1), True


def stop_process(pid: int, steps: list[tuple[int, float]], is_ours: Callable[[], bool]) -> bool:
    """Stop a process of tierlab's: each (signal, seconds to wait for it to end) in turn, then SIGKILL. It is let
    be once it is no longer ours (its pid taken by another program). True if it was running."""
    if not is_ours():
        return False
    for number, wait_s in steps:
        signal_process(pid, number)
        if wait_gone(pid, wait_s) or not is_ours():
            return True
    signal_process(pid, signal.SIGKILL)
    wait_gone(pid, KILL_WAIT_S)
    return True


def set_knob(path: Path, value: int | str, changes: list[str]) -> None:
    """Write a sysfs knob (a number, or a word such as a boolean's Y), recording its first value so teardown
    restores it."""
    current = path.read_text().strip()
    if current == str(value):
        return
    if not any(e["path"] == str(path) for e in record.entries("knob")):
        record.add("knob", path=str(path), previous=current)
    path.write_text(f"{value}\n")
    changes.append(f"set {path} to {value} (was {current})")


def mount_device(path: str | Path) -> str | None:
    """The 'major:minor' of what is mounted at path, or None; read from mountinfo, which
    still answers where stat does not (a FUSE mount whose server died or hangs)."""
    target = os.path.abspath(path)
    for mount in mounts():
        if mount.point == target:
            return mount.device
    return None


def mounted(path: str | Path) -> bool:
    return mount_device(path) is not None
