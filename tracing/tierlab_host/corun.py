"""A step's co-runner (corun): the interference of a second workload beside each step of the query loop, a query
of the workload run over and over, or a concurrent writer (sysbench's write-only test on tables of its own)."""

import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import sysbench
from .clients import STOP, Stopped, execute
from .system import KILL_WAIT_S, HostError

# how long the writer (corun=writer) may take to connect and report its first interval
WRITER_START_LIMIT_S = 60

class CoRunner:
    """The run's corun query, run over and over on a connection of its own beside a step, each time to its end,
    from just before the step starts until the step ends: the interference of a second workload. The run that
    is under way when the step ends is waited for (it may outlast the step's window), so that nothing of it
    runs into the next step; only the runs that ended within the window are counted. Each run's start and end are
    marked in the window's trace (`tierlab corun start|end <label> <n>`), on the trace's clock."""

    def __init__(self, db, spec: dict, raw: Path, label: str, mark):
        self.db = db
        self.label = label
        self.mark = mark
        self.spec = spec
        self.query = spec["corun"]
        self.sql = (Path(spec["queries_dir"]) / f"{self.query}.sql").read_text()
        self.output = raw / "output" / f"{label}.corun.tsv"
        self.runs: list[dict] = []
        self.window_end: float | None = None
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, name=f"corun {self.query}", daemon=True)

    def _loop(self) -> None:
        while not self.stopping.is_set():
            number = len(self.runs) + 1
            self.mark(f"tierlab corun start {self.label} {number}")
            try:
                result = execute(self.db, self.spec["database"], self.sql, self.spec["query_timeout_s"], self.output)
            except Stopped:
                # the step beside it stops too, and says why
                return
            self.mark(f"tierlab corun end {self.label} {number}")
            self.runs.append({**result, "ended": time.monotonic()})
            if result["status"] != "ok":
                return

    def begin(self) -> None:
        """Nothing before the window: the query's first run starts in it."""

    def start(self) -> None:
        self.thread.start()

    def end_window(self) -> None:
        """The step's window has ended: no run starts after this."""
        self.window_end = time.monotonic()
        self.stopping.set()

    def result(self) -> dict:
        """Once the run under way has ended, the row's corun fields: the query, how many of its runs ended
        within the step's window, their mean seconds, and the error of a run that failed (the co-runner stops at
        its first failure)."""
        self.thread.join()
        within = [run for run in self.runs if run["ended"] <= self.window_end and run["status"] == "ok"]
        failed = [run for run in self.runs if run["status"] != "ok"]
        return {"corun": self.query, "corun_runs": len(within),
                "corun_elapsed_s": sum(run["elapsed_s"] for run in within) / len(within) if within else None,
                "corun_error": f"{failed[0]['status']}: {failed[0]['error']}" if failed else ""}


def prepare_writer(db, writer: dict) -> None:
    """corun=writer's database made afresh (what a run before wrote to it is dropped) and its tables filled by
    sysbench's prepare in the writer's target (the capacity tier's directory or tablespace)."""
    db.rows(f"DROP DATABASE IF EXISTS {writer['database']}")
    db.rows(f"CREATE DATABASE {writer['database']}")
    sysbench.prepare(db, {**writer, "table_options": ""})


class WriterCoRunner:
    """corun=writer: a concurrent writer beside a step, sysbench's write-only test on its own tables (prepare_writer),
    its reports of each interval in raw/driver/<label>.corun.jsonl. It starts before the step's window opens and
    the window waits for its first report, so that the step meets a writer already writing; it is stopped when the
    window ends. The window's opening and the writer's stop are marked in the window's trace (`tierlab corun
    start|end <label> 1`), on the trace's clock."""

    def __init__(self, db, spec: dict, raw: Path, label: str, mark):
        self.writer = spec["writer"]
        self.label = label
        self.mark = mark
        self.output = raw / "driver" / f"{label}.corun.jsonl"
        self.command, self.env = sysbench.command(db, self.writer["database"], self.writer["test"], self.writer,
                                                  spec["query_timeout_s"])
        self.errors = tempfile.TemporaryFile()
        self.process: subprocess.Popen | None = None
        self.reported_before = 0
        self.ended_early: int | None = None
        self.said = ""

    def _reports(self) -> list[dict]:
        return [r for r in sysbench.reports(self.output) if r["kind"] == "interval"]

    def begin(self) -> None:
        """The writer started, and writing: its first report of an interval is in."""
        with open(self.output, "wb") as out:
            self.process = subprocess.Popen(self.command, stdout=out, stderr=self.errors, env=self.env)
        try:
            STOP.watch(self.process)
            waited = time.monotonic()
            while not self._reports():
                STOP.check()
                if self.process.poll() is not None or time.monotonic() - waited > WRITER_START_LIMIT_S:
                    raise HostError(f"the writer (sysbench {self.writer['test']}) did not start writing within "
                                    f"{WRITER_START_LIMIT_S} s: {self._said() or 'no report'}")
                time.sleep(0.1)
        except BaseException:
            self.end_window()
            raise

    def start(self) -> None:
        self.reported_before = len(self._reports())
        self.mark(f"tierlab corun start {self.label} 1")

    def end_window(self) -> None:
        """The step's window ends: the writer is stopped (a writer that ended before it failed), and what it said
        on its standard error kept."""
        self.ended_early = self.process.poll()
        self.mark(f"tierlab corun end {self.label} 1")
        self.process.terminate()
        try:
            self.process.wait(timeout=KILL_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        STOP.clients.discard(self.process)
        self.said = self._said()
        self.errors.close()

    def _said(self) -> str:
        self.errors.seek(0)
        return self.errors.read().decode(errors="replace").strip()

    def result(self) -> dict:
        """The row's corun fields: the writer, its transactions in the report intervals that ended within the
        window, and why it stopped if it stopped before the window ended."""
        error = f"error: the writer stopped before the window ended (exit {self.ended_early}): {self.said}" \
            if self.ended_early is not None else ""
        within = self._reports()[self.reported_before:]
        return {"corun": "writer", "corun_runs": sum(r["events"] for r in within), "corun_elapsed_s": None,
                "corun_error": error}


def corunner_of(db, spec: dict, raw: Path, label: str, mark):
    """The run's co-runner beside one step: the writer, a query of the workload, or none."""
    if not spec.get("corun"):
        return None
    return (WriterCoRunner if spec["corun"] == "writer" else CoRunner)(db, spec, raw, label, mark)
