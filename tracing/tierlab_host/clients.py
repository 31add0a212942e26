"""The clients the query loop runs (an engine's client, sysbench), each watched to its end under a time limit,
and the stop a signal asks of the loop: the clients under way killed, the loop unwinding cleanly."""

import contextlib
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from . import emulator
from .system import HostError

# the client is given this long beyond the server-side limit before it is killed
CLIENT_GRACE_S = 60
# how often the emulators are checked while a statement runs
WATCH_INTERVAL_S = 15

class Stopped(HostError):
    """The loop was asked to stop by a signal."""


class StopRequest:
    """A SIGTERM or SIGINT (a user, or the playbook's job being stopped) stops the query loop at once but
    cleanly: the clients under way are killed, the try they ran is not recorded (a resume runs it again), and
    the loop's own clean-up (the tracing instance, the emulated cache) runs as it unwinds. Python's default
    would end the process without that clean-up, and an Ansible job inherits SIGINT ignored."""

    def __init__(self):
        self.signal_name = ""
        self.clients: set[subprocess.Popen] = set()

    def install(self) -> None:
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, self._ask)

    def _ask(self, number: int, frame) -> None:
        self.signal_name = signal.Signals(number).name
        for client in list(self.clients):
            client.kill()

    def watch(self, client: subprocess.Popen) -> None:
        """client killed by a stop from now on, and at once if the stop came before it was started."""
        self.clients.add(client)
        if self.signal_name:
            client.kill()

    def check(self) -> None:
        if self.signal_name:
            raise Stopped(f"stopped by {self.signal_name}; the try under way, if any, has no row: resume the run to "
                          "run it and the rest")


STOP = StopRequest()


def watched(cmd: list[str], stdin: bytes | None, env: dict | None, output: Path, limit_s: float) -> dict:
    """Run a client to its end, its output to `output`, the tiers' emulators watched while it runs: one that
    hangs has its connection aborted, so the client fails instead of waiting forever. Killed (status timeout)
    `CLIENT_GRACE_S` after `limit_s`; else its exit code and standard error. Raises Stopped if the loop is
    asked to stop while the client runs (it is killed)."""
    started = time.monotonic()
    with open(output, "wb") as out, tempfile.TemporaryFile() as err:
        STOP.check()
        client = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=out, stderr=err, env=env)
        STOP.watch(client)
        try:
            if stdin:
                # a client killed at once by a stop has closed its end
                with contextlib.suppress(BrokenPipeError):
                    client.stdin.write(stdin)
            client.stdin.close()
            while True:
                try:
                    client.wait(timeout=WATCH_INTERVAL_S)
                    break
                except subprocess.TimeoutExpired:
                    emulator.abort_hung()
                    if time.monotonic() - started > limit_s + CLIENT_GRACE_S:
                        client.kill()
                        client.wait()
                        elapsed = time.monotonic() - started
                        return {"status": "timeout", "error": f"client killed after {elapsed:.1f} s",
                                "elapsed_s": elapsed}
        finally:
            STOP.clients.discard(client)
        STOP.check()
        err.seek(0)
        error = err.read().decode(errors="replace").strip()
    if client.returncode != 0 and not error:
        # a client that says nothing on its way out (killed, or a driver that reports on its standard output)
        error = (f"killed by signal {-client.returncode}" if client.returncode < 0
                 else f"exited with {client.returncode}")
    return {"status": "ok" if client.returncode == 0 else "error", "error": error,
            "elapsed_s": time.monotonic() - started}


def execute(db, database: str, sql: str, limit_s: int, output: Path) -> dict:
    """Run one statement through the engine's client under a server-side time limit; status ok,
    error or timeout."""
    result = watched(db.client_command(database), db.script(sql, limit_s).encode(), None, output, limit_s)
    if result["status"] == "error" and db.is_timeout(result["error"]):
        result["status"] = "timeout"
    if result["status"] != "ok":
        return {**result, "rows": None}
    with open(output, "rb") as f:
        rows = sum(1 for _ in f)
    return {**result, "error": "", "rows": rows}
