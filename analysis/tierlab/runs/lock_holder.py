"""Who holds a tierlab root's lock for a playbook: the command the user started, found among the playbook's
ancestors on the controller (the outermost `tierlab study`, else the outermost ansible-playbook), so that a
study's points share their study's lock, and a dead holder is told from a live one by its start time."""

import re
import socket
from pathlib import Path

PROC = Path("/proc")
# an extra-vars value that may hold a secret (a conninfo's password, say): the lock file and refusals leave it out
SECRET = re.compile(r"pass|secret|token|://[^/@\s]*:[^/@\s]*@", re.I)
HIDDEN = "(a value not shown: it may hold a password)"


def _cmdline(pid: int) -> list[str]:
    return (PROC / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]


def _parent_and_start(pid: int) -> tuple[int, int]:
    # the command's name (field 2) may hold spaces and parentheses: the fields after its closing one are plain
    fields = (PROC / str(pid) / "stat").read_text().rpartition(")")[2].split()
    return int(fields[1]), int(fields[19])


def machine_id() -> str:
    """This machine's identity (/etc/machine-id, else its host name): a holder on another machine cannot be
    checked for life."""
    path = Path("/etc/machine-id")
    found = path.read_text().strip() if path.exists() else ""
    return found or socket.gethostname()


def _kind(argv: list[str]) -> str | None:
    names = [Path(arg).name for arg in argv[:3]]
    if "tierlab" in names and "study" in argv[1:3]:
        return "study"
    if any(name.startswith("ansible-playbook") for name in names):
        return "playbook"
    return None


def shown(argv: list[str]) -> str:
    """The command line as the lock file and its refusals show it: an -e value that may hold a secret left out."""
    out: list[str] = []
    for arg in argv:
        if SECRET.search(arg):
            if out[-1:] in (["-e"], ["--extra-vars"]):
                arg = HIDDEN
            elif arg.startswith("--extra-vars="):
                arg = f"--extra-vars={HIDDEN}"
            elif arg.startswith("-e"):
                arg = f"-e{HIDDEN}"
        out.append(arg)
    return " ".join(out)


def running() -> list[list[int]]:
    """[pid, start ticks] of every playbook and study that runs on this machine: a host that is not the controller
    learns from it whether a holder of its lock from this controller still runs."""
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if _kind(_cmdline(int(entry.name))):
                found.append([int(entry.name), _parent_and_start(int(entry.name))[1]])
        except (FileNotFoundError, ProcessLookupError):
            continue
    return found


def holder(pid: int) -> dict:
    """The outermost study, else the outermost playbook, among pid and its ancestors: its pid, start time (clock
    ticks after boot, as /proc/PID/stat gives it), command line and kind, with this machine's identity and the
    playbooks and studies that run on it (running)."""
    found: dict[str, tuple[int, int, list[str]]] = {}
    while pid > 1:
        parent, start = _parent_and_start(pid)
        argv = _cmdline(pid)
        kind = _kind(argv)
        if kind:
            found[kind] = (pid, start, argv)
        pid = parent
    kind = "study" if "study" in found else "playbook"
    if kind not in found:
        raise RuntimeError("no ansible-playbook or tierlab study among this process's ancestors")
    pid, start, argv = found[kind]
    return {"machine_id": machine_id(), "pid": pid, "start_ticks": start, "kind": kind, "command": shown(argv),
            "running": running()}
