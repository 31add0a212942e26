"""Start and stop tierlab's private MariaDB/MySQL instances, by their own record.

An instance is started with `--defaults-file` first (the server insists), in
its own session, inside the tier throttle group, and its pid is recorded. Stop
only ever acts on a recorded pid whose command line still names the instance's
defaults file, so a process tierlab did not start is never touched.
"""

import json
import os
import signal
import subprocess
import time

from . import record
from .system import HostError, cmdline, run, wait_gone
from .tiers import join_cgroup

START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 300


def _is_ours(entry: dict) -> bool:
    return f"--defaults-file={entry['defaults_file']}" in cmdline(entry["pid"])


def _recorded(instance: str) -> dict | None:
    for entry in record.entries("process"):
        if entry["instance"] == instance:
            return entry
    return None


# `mysql` and `mysqladmin` are MySQL's clients and MariaDB's compatibility names for its own
def client_command(client_file: str, *args: str) -> list[str]:
    return ["mysql", f"--defaults-file={client_file}", *args]


def ping(client_file: str) -> bool:
    done = subprocess.run(
        ["mysqladmin", f"--defaults-file={client_file}", "--connect-timeout=2", "ping"],
        capture_output=True, text=True,
    )
    return done.returncode == 0


def start(instance: str, server: str, defaults_file: str, client_file: str, log_file: str) -> dict:
    entry = _recorded(instance)
    if entry and _is_ours(entry):
        return {"changed": False, "pid": entry["pid"]}
    if entry:
        record.remove(entry)
    with open(log_file, "ab") as log:
        proc = subprocess.Popen(
            [server, f"--defaults-file={defaults_file}"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True,
        )
    join_cgroup(proc.pid)
    entry = {"instance": instance, "pid": proc.pid, "defaults_file": defaults_file, "client_file": client_file}
    record.add("process", **entry)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not ping(client_file):
        if proc.poll() is not None:
            record.remove({"kind": "process", **entry})
            raise HostError(f"{instance}: {server} exited with {proc.returncode} during start-up; see {log_file}")
        if time.monotonic() > deadline:
            raise HostError(f"{instance}: not ready after {START_TIMEOUT_S} s; see {log_file}")
        time.sleep(0.1)
    return {"changed": True, "pid": proc.pid}


def stop_recorded(entry: dict) -> bool:
    """Stop one recorded instance; True if it was running."""
    pid = entry["pid"]
    was_running = _is_ours(entry)
    if was_running:
        run(["mysqladmin", f"--defaults-file={entry['client_file']}", "shutdown"], check=False, timeout_s=60)
        if not wait_gone(pid, STOP_TIMEOUT_S) and _is_ours(entry):
            os.kill(pid, signal.SIGKILL)
            wait_gone(pid, 10)
    record.remove(entry)
    return was_running


def stop(instance: str) -> dict:
    entry = _recorded(instance)
    if entry is None:
        return {"changed": False}
    return {"changed": stop_recorded(entry)}


def status(instance: str) -> dict:
    entry = _recorded(instance)
    return {"running": bool(entry and _is_ours(entry)), "pid": entry["pid"] if entry else None}


def query_scalar_rows(client_file: str, sql: str, timeout_s: float = 60) -> list[list[str]]:
    done = run(client_command(client_file, "--batch", "--skip-column-names", "-e", sql), timeout_s=timeout_s)
    return [line.split("\t") for line in done.stdout.splitlines()]


def status_counters(client_file: str, names: list[str]) -> dict[str, int]:
    quoted = ",".join(f"'{n}'" for n in names)
    rows = query_scalar_rows(
        client_file,
        f"SELECT variable_name, variable_value FROM information_schema.global_status WHERE variable_name IN ({quoted})",
    )
    values = {name.lower(): int(value) for name, value in rows}
    return {n: values[n.lower()] for n in names}


def settings(client_file: str, names: list[str]) -> dict[str, str]:
    quoted = ",".join(f"'{n}'" for n in names)
    rows = query_scalar_rows(
        client_file,
        f"SELECT variable_name, variable_value FROM information_schema.global_variables WHERE variable_name IN ({quoted})",
    )
    values = {name.lower(): value for name, value in rows}
    return {n: values.get(n.lower()) for n in names}


def main(action: str, args) -> None:
    if action == "start":
        result = start(args.instance, args.server, args.defaults_file, args.client_file, args.log_file)
    elif action == "stop":
        result = stop(args.instance)
    else:
        result = status(args.instance)
    print(json.dumps(result))
