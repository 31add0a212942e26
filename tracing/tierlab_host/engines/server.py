"""Start and stop tierlab's private database servers, by their own record.

A server is started in its own session, as the engine's user, inside the
tiers' throttle and its memory bound where it has them (cgroups.py), and its
pid is recorded with the argument that names its instance (its
configuration file). Stop only ever acts on a recorded pid whose command line
still carries that argument, so a process tierlab did not start is never
touched.
"""

import pwd
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from .. import cgroups, record
from ..system import KILL_WAIT_S, HostError, cmdline, signal_process, stop_process, wait_gone

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 300


def _is_ours(entry: dict) -> bool:
    return entry["marker"] in cmdline(entry["pid"])


def recorded(instance: str) -> dict | None:
    for entry in record.entries("process"):
        if entry["instance"] == instance:
            return entry
    return None


def running(instance: str) -> bool:
    """Whether the recorded server of the instance runs."""
    entry = recorded(instance)
    return bool(entry and _is_ours(entry))


def require_free_port(instance: str, port: int) -> None:
    """Refuse a port another process listens on (the servers listen on 127.0.0.1): the server would exit at
    start-up with the reason only in its log, and the port most likely belongs to another tierlab root."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise HostError(f"{instance}: port {port} on 127.0.0.1 is taken by another process ({error.strerror}); "
                            "give this tierlab root ports of its own (mysql_port_base, postgresql_port)") from None


def start(instance: str, engine: str, argv: list[str], marker: str, log_file: str, ready: Callable[[], bool],
          port: int, stop_signals: list[str], user: str | None = None, memory_limit_bytes: int | None = None) -> dict:
    """Start argv (which holds `marker`) to listen on port, as `user` if given, unless the recorded instance
    runs; wait until `ready()`. stop_signals: the signals that shut it down, cleanly first (the engine's, as
    tierlab's catalog declares them), recorded with it for stop. memory_limit_bytes: the bound of its
    processes' memory, page cache included (None: none)."""
    entry = recorded(instance)
    if entry and _is_ours(entry):
        return {"changed": False, "pid": entry["pid"]}
    if entry:
        # a server that died: what it left in its groups (PostgreSQL's backends, on its shared memory) goes too
        stop_recorded(entry)
    require_free_port(instance, port)
    groups = cgroups.server_groups(instance, memory_limit_bytes)
    # as the user with its own group and no other (not root's)
    identity = {"user": user, "group": pwd.getpwnam(user).pw_gid, "extra_groups": []} if user else {}
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                                close_fds=True, **identity)
    cgroups.join(proc.pid, groups)
    # the groups of its own hold its children too: stop finds there what a killed server left running
    entry = {"kind": "process", "instance": instance, "engine": engine, "pid": proc.pid, "marker": marker,
             "groups": [str(group / "cgroup.procs") for group in groups], "stop_signals": list(stop_signals)}
    record.add(**entry)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ready():
        if proc.poll() is not None:
            record.remove(entry)
            raise HostError(f"{instance}: {argv[0]} exited with {proc.returncode} during start-up; see {log_file}")
        if time.monotonic() > deadline:
            raise HostError(f"{instance}: not ready after {START_TIMEOUT_S} s; see {log_file}")
        time.sleep(0.1)
    return {"changed": True, "pid": proc.pid}


# the time a server gets to act on each further signal
ESCALATE_TIMEOUT_S = 30


def _left_in_groups(entry: dict) -> list[int]:
    """The processes still in the server's groups of its own: its children, when it was killed before them."""
    pids = []
    # a record written before the groups were kept has none
    for procs in entry.get("groups", []):
        if Path(procs).exists():
            pids += [int(pid) for pid in Path(procs).read_text().split()]
    return pids


def stop_recorded(entry: dict) -> bool:
    """Stop one recorded server, and what of it is left in its groups; True if it was running. A server that
    does not end on its engine's signals is killed, and so are its children, which would otherwise run on
    (PostgreSQL's backends go on with their queries when the postmaster is killed)."""
    # a server recorded before its signals were is asked to stop with SIGTERM
    stop_signals = [signal.Signals[name] for name in entry.get("stop_signals", ["SIGTERM"])]
    steps = [(number, STOP_TIMEOUT_S if step == 0 else ESCALATE_TIMEOUT_S) for step, number in enumerate(stop_signals)]
    was_running = stop_process(entry["pid"], steps, lambda: _is_ours(entry))
    left = _left_in_groups(entry)
    for child in left:
        signal_process(child, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    for child in left:
        wait_gone(child, max(0.0, deadline - time.monotonic()))
    record.remove(entry)
    return was_running


def stop_others(instance: str) -> list[str]:
    """Stop every recorded server of the root but the instance's; the instances that were running. An earlier
    run's server works on after its run (a MySQL purges what its last test left, a page cleaner flushes), on the
    same tiers, so its requests would be traced and counted as this run's."""
    stopped = []
    for entry in record.entries("process"):
        if entry["instance"] != instance and stop_recorded(entry):
            stopped.append(entry["instance"])
    return stopped


def stop(instance: str) -> dict:
    entry = recorded(instance)
    if entry is None:
        return {"changed": False}
    return {"changed": stop_recorded(entry)}
