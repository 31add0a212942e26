"""tierlab's own record of what it created on this host.

Every loop device, mount, cgroup, tracing instance and server process that
tierlab makes is appended here before it is used, and teardown removes
exactly these entries, newest first. Nothing that is not in the record is
ever removed or stopped.
"""

import contextlib
import fcntl
import json
import os
from pathlib import Path

STATE_DIR = Path(os.environ.get("TIERLAB_STATE_DIR", "/var/lib/tierlab/state"))
RECORD_PATH = STATE_DIR / "created.json"


@contextlib.contextmanager
def _locked():
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    with open(STATE_DIR / "created.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        entries = json.loads(RECORD_PATH.read_text()) if RECORD_PATH.exists() else []
        yield entries
        replace_json(RECORD_PATH, entries)


def replace_text(path: Path, text: str) -> None:
    """Writes text whole or not at all, and durably: a reader, or the host after a crash, finds the old file or
    the new one, never half of one."""
    partial = path.with_name(path.name + ".partial")
    with open(partial, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(partial, path)


def replace_json(path: Path, data) -> None:
    replace_text(path, json.dumps(data, indent=1))


def add(kind: str, **attrs) -> None:
    entry = {"kind": kind, **attrs}
    with _locked() as entries:
        if entry not in entries:
            entries.append(entry)


def remove(entry: dict) -> None:
    with _locked() as entries:
        if entry in entries:
            entries.remove(entry)


def entries(kind: str | None = None) -> list[dict]:
    with _locked() as current:
        return [dict(e) for e in current if kind is None or e["kind"] == kind]


def write_state(name: str, data) -> None:
    """Keeps data (JSON) in the root's state directory as `name`; nothing where the tierlab root does not exist
    yet, since a probe or a check must not make it."""
    if not STATE_DIR.parent.is_dir():
        return
    STATE_DIR.mkdir(exist_ok=True)
    replace_json(STATE_DIR / name, data)


def read_state(name: str):
    """What write_state kept as `name`, or None where nothing is kept."""
    try:
        return json.loads((STATE_DIR / name).read_text())
    except (FileNotFoundError, ValueError):
        return None
