"""One lock per tierlab root, held for the whole of any playbook or study that changes it: two loads, two tier
bring-ups or a teardown under a run would otherwise interleave on the same servers, tiers and caches.

The lock is a file under the root's state directory naming its holder: the controller's process of the command the
user started (the outermost `tierlab study`, else ansible-playbook; tierlab/runs/lock_holder.py), with its machine,
pid, start time, command and run id. A second command on the root is refused with who holds it. A holder that no
longer runs (its pid gone, or taken by a process that started at another time) left a stale lock, which the next
command takes over, with a note: the host looks for the holder itself when the controller is the host, and is
told by the next command's controller when that is the holder's (the playbooks and studies running there). A
holder on a third machine cannot be checked for life and is refused, with how to remove its lock when that command
is known to have ended.
"""

import contextlib
import fcntl
import json
import socket
from datetime import UTC, datetime
from pathlib import Path

from . import record
from .system import HostError


def lock_path() -> Path:
    return record.STATE_DIR / "root-lock.json"


@contextlib.contextmanager
def _locked():
    record.STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(record.STATE_DIR / "root-lock.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield json.loads(lock_path().read_text()) if lock_path().exists() else None


def machine_id() -> str:
    """This machine's identity, as the controller's lock_holder.machine_id reads its own."""
    path = Path("/etc/machine-id")
    found = path.read_text().strip() if path.exists() else ""
    return found or socket.gethostname()


def _alive(holder: dict, asking: dict) -> bool | None:
    """Whether the holder still runs: looked at here when it runs on this machine, else known from the playbooks and
    studies that run on the asking command's controller when that is the holder's (`running`); None when it runs on
    a third machine, which cannot be looked at."""
    if holder["machine_id"] == machine_id():
        try:
            stat = Path("/proc", str(holder["pid"]), "stat").read_text()
        except FileNotFoundError:
            return False
        return int(stat.rpartition(")")[2].split()[19]) == holder["start_ticks"]
    if holder["machine_id"] == asking["machine_id"]:
        return [holder["pid"], holder["start_ticks"]] in asking["running"]
    return None


def _same(one: dict, other: dict) -> bool:
    return all(one[key] == other[key] for key in ("machine_id", "pid", "start_ticks"))


def _who(holder: dict) -> str:
    run = f", run {holder['run_id']}" if holder.get("run_id") else ""
    return f"`{holder['command']}` (pid {holder['pid']}{run}, since {holder['taken_at']})"


def take(holder: dict) -> dict:
    """Take the root's lock for holder, or find it held by holder already (a study's next point); refused while
    another command that runs holds it. {"changed", "note"}: the note says whose stale lock was taken over."""
    with _locked() as current:
        if current and _same(current, holder):
            return {"changed": False, "note": ""}
        note = ""
        if current:
            alive = _alive(current, holder)
            if alive is None:
                raise HostError(f"this tierlab root is locked by {_who(current)} from another controller "
                                f"({current['machine_id']}), which cannot be checked from here: wait for it to end; if "
                                f"it has ended without releasing the lock, remove {lock_path()}")
            if alive:
                raise HostError(f"this tierlab root is locked by {_who(current)}, which still runs: wait for it to "
                                f"end, or stop it (Ctrl-C, or kill {current['pid']}); one command at a time changes "
                                "a root, and another tierlab_root lets two run side by side")
            note = f"took over the root's lock from {_who(current)}, which no longer runs"
        kept = {key: value for key, value in holder.items() if key != "running"}
        lock_path().write_text(json.dumps({**kept, "taken_at": datetime.now(UTC).isoformat(timespec="seconds")},
                                          indent=1))
        return {"changed": True, "note": note}


def release(holder: dict) -> dict:
    """Release the root's lock if holder holds it."""
    with _locked() as current:
        if not (current and _same(current, holder)):
            return {"changed": False}
        lock_path().unlink()
        return {"changed": True}
