"""Teardown: remove everything tierlab's record holds on this host, newest first."""

import json
import time
from pathlib import Path

from . import cgroups, emulator, record, runner, trace
from .engines import stop_recorded
from .system import HostError, mounted, run
from .tiers import attached_as_recorded

# a mount still busy this long after the processes recorded before it were stopped is reported, not waited for
UMOUNT_WAIT_S = 15.0


def umount(path: str) -> None:
    """Unmount path, waiting a while where it is busy: a server just stopped can hold a bind mount of its chroot for
    a moment after its process is gone (seen once in the suite's teardown: free again when teardown ran again)."""
    deadline = time.monotonic() + UMOUNT_WAIT_S
    while True:
        done = run(["umount", path], check=False)
        if done.returncode == 0:
            return
        if "busy" not in done.stderr or time.monotonic() > deadline:
            raise HostError(f"umount {path} failed (exit {done.returncode}): {done.stderr.strip()}")
        time.sleep(0.5)


def down() -> dict:
    """Remove everything the record holds, newest first; say what is left as it is, and why."""
    # a hung emulator would hold every unmount of its tier's file system
    emulator.abort_hung()
    removed = []
    left = []
    # a query loop a stopped playbook left running reads the tracing instance and uses the servers: it ends first
    for entry in record.entries("query_loop"):
        removed.append({**entry, **runner.stop_recorded(entry)})
    for entry in reversed(record.entries()):
        kind = entry["kind"]
        if kind == "process":
            stop_recorded(entry)
        elif kind == "tracing_instance":
            trace.remove_instance(entry)
        elif kind == "mount":
            if mounted(entry["path"]):
                umount(entry["path"])
        elif kind == "loop":
            if attached_as_recorded(entry):
                run(["losetup", "-d", entry["device"]])
        elif kind == "emulator":
            emulator.stop_recorded(entry)
        elif kind == "image":
            Path(entry["path"]).unlink(missing_ok=True)
        elif kind in cgroups.KINDS:
            note = cgroups.remove_recorded(entry)
            if note:
                left.append(note)
        elif kind == "knob":
            Path(entry["path"]).write_text(f"{entry['previous']}\n")
        elif kind == "dir":
            path = Path(entry["path"])
            if path.is_dir() and not any(path.iterdir()):
                path.rmdir()
        record.remove(entry)
        removed.append(entry)
    return {"changed": bool(removed), "removed": removed, "left": left}


def main() -> None:
    print(json.dumps(down()))
