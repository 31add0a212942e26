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
        tmp = RECORD_PATH.with_suffix(".tmp")
        tmp.write_text(json.dumps(entries, indent=1))
        os.replace(tmp, RECORD_PATH)


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
