"""The query loop: for each step (a query, or a driver's test for a timed window) and try, cold start,
warm-up (a driver's), trace on, execute (with the run's co-runner beside it, if any: a query, or a writer), trace
off, record.

The root's other servers are stopped before the first window, so that only the run's own works on the tiers;
the run's server is left running at the end, as the engine role started it.
Everything measured is written as soon as it exists: one JSON line per try in
raw/queries.jsonl, so a run that stops half-way keeps its rows and a resumed
run starts at the first (query, try) without one. Progress goes to
raw/run.log as each try ends (`LABEL STATUS SECONDS`), and `failed: WHY` if the
loop stops, for the playbook to show while the loop runs in the background.
"""

import contextlib
import fcntl
import json
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from . import emulator, page_cache, record, replay, subqueries, sysbench, trace
from .clients import STOP, execute, watched
from .corun import corunner_of, prepare_writer
from .engines import engine, stop_others
from .extents import map_files
from .system import KILL_WAIT_S, HostError, cmdline, device_of_path, signal_process, wait_gone, wait_while_working

# the progress log the playbook follows
PROGRESS_LOG = "run.log"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _pending(spec: dict, rows: list[dict]) -> list[tuple[str, int]]:
    """The tries that have no row; and with retry_failed, for each query some of whose tries ended in an error (the
    server died under it, its client failed), as many new tries as it lacks of tries that ended otherwise, numbered
    on from its last."""
    done = {(row["query"], row["try"]) for row in rows}
    pending = [(query, attempt) for query in spec["queries"] for attempt in range(1, spec["tries"] + 1)
               if (query, attempt) not in done]
    if spec.get("retry_failed"):
        for query in spec["queries"]:
            mine = [row for row in rows if row["query"] == query]
            lacking = (spec["tries"] - sum(row["status"] != "error" for row in mine)
                       - sum(waiting == query for waiting, _ in pending))
            last = max([spec["tries"], *(row["try"] for row in mine)])
            pending += [(query, last + n) for n in range(1, lacking + 1)]
    return pending


def plan(spec: dict) -> dict:
    """The tries a run of this spec will make (those without a row), with a fresh progress log for them."""
    raw = Path(spec["run_dir"]) / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / PROGRESS_LOG).write_text("")
    return {"changed": False, "pending": [f"{query}_try{attempt}" for query, attempt in
                                          _pending(spec, _rows(raw / "queries.jsonl"))]}


def _progress(raw: Path, line: str) -> None:
    with open(raw / PROGRESS_LOG, "a") as f:
        f.write(line + "\n")


def _lock(raw: Path):
    """One query loop per run: a second one (e.g. a resume while an earlier loop still runs) is refused."""
    lock = open(raw / "run.lock", "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise HostError(f"another query loop of this run is running (it holds {raw / 'run.lock'}); wait for it to "
                        "end, then resume") from None
    return lock


def _torn_tail(text: str) -> str:
    """The end of the rows' text after its last newline when it is not a row: an append cut short (the host stopped
    in the middle of the write, which ends each row with its newline), whose try counts as not run. The
    controller's query_rows (tierlab/runs/manifest.py) reads the rows by the same rule."""
    tail = text.rpartition("\n")[2]
    if not tail.strip():
        return ""
    try:
        json.loads(tail)
    except json.JSONDecodeError:
        return tail
    return ""


def _rows(rows_file: Path) -> list[dict]:
    if not rows_file.exists():
        return []
    text = rows_file.read_text()
    text = text[:len(text) - len(_torn_tail(text))]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _cut_torn_row(raw: Path) -> None:
    """Cut a torn last row off raw/queries.jsonl, so that the rows appended after it start on a line of their own;
    what was cut is kept in raw/torn_rows.txt and said in the progress log. A whole last row whose newline was not
    written gets it, for the same reason."""
    rows_file = raw / "queries.jsonl"
    if not rows_file.exists():
        return
    text = rows_file.read_text()
    tail = _torn_tail(text)
    if not tail:
        if text and not text.endswith("\n"):
            _append_text(rows_file, "\n")
        return
    with open(raw / "torn_rows.txt", "a") as f:
        f.write(f"{_now()} cut from the end of queries.jsonl: {tail}\n")
    with open(rows_file, "r+b") as f:
        f.truncate(len(text.encode()) - len(tail.encode()))
        os.fsync(f.fileno())
    _progress(raw, f"cut a row torn in its write from the end of queries.jsonl ({len(tail.encode())} bytes, kept in "
                   "torn_rows.txt): its try runs again")


def _done_tries(rows_file: Path) -> set[tuple[str, int]]:
    return {(row["query"], row["try"]) for row in _rows(rows_file)}


def _append_text(path: Path, text: str) -> None:
    with open(path, "a") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def _append(path: Path, row: dict) -> None:
    _append_text(path, json.dumps(row) + "\n")


def drop_os_caches() -> None:
    os.sync()
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def _cold_restart(db) -> None:
    db.stop()
    drop_os_caches()
    db.start()


# a query loop stopped by teardown is waited for as long as its clean-up works; one that does nothing for this long
# (hung), or works for longer than the other, is killed
STALL_S = 60
CLEAN_UP_LIMIT_S = 900


class QueryStep:
    """A step of a query workload: one query file, run by the engine's client under the query timeout; or, split
    into subqueries (range_starts: per table and column it is split by, the first value of each range), each
    subquery on a client of its own, all at once, the step ending when the last one does."""

    def __init__(self, spec: dict, query: str, range_starts: dict[tuple[str, str], list[str]]):
        self.spec = spec
        self.sql = (Path(spec["queries_dir"]) / f"{query}.sql").read_text()
        keys = spec["subquery_keys"].get(query)
        self.parts = subqueries.split(self.sql, *keys, range_starts[tuple(keys)]) if keys else [self.sql]

    def warm_up(self, db, raw: Path, label: str) -> None:
        """A query runs as it comes (cold or warm as the run says)."""

    def run(self, db, raw: Path, label: str) -> dict:
        if len(self.parts) == 1:
            return execute(db, self.spec["database"], self.sql, self.spec["query_timeout_s"],
                           raw / "output" / f"{label}.tsv")
        started = time.monotonic()
        with ThreadPoolExecutor(len(self.parts)) as pool:
            results = list(pool.map(
                lambda part: execute(db, self.spec["database"], self.parts[part], self.spec["query_timeout_s"],
                                     raw / "output" / f"{label}.part{part + 1}.tsv"), range(len(self.parts))))
        elapsed = time.monotonic() - started
        failed = [(part, result) for part, result in enumerate(results, 1) if result["status"] != "ok"]
        times = [result["elapsed_s"] for result in results]
        return {"status": failed[0][1]["status"] if failed else "ok",
                "error": "; ".join(f"subquery {part}: {result['error']}" for part, result in failed),
                "elapsed_s": elapsed, "rows": None if failed else sum(result["rows"] for result in results),
                "subqueries": len(self.parts), "subquery_min_s": min(times), "subquery_max_s": max(times)}

    def plan(self, db, log_from: int) -> str | None:
        """The plan of the query, or of its first subquery when it is split."""
        return db.plan(self.spec["database"], self.parts[0], log_from)


class SysbenchStep:
    """A step of sysbench: one of its tests, warmed up untraced for warmup_s, then run for duration_s (the
    step's window), its reports as JSON lines in raw/driver/."""

    def __init__(self, spec: dict, test: str):
        self.spec = spec
        self.test = test
        self.driver = spec["driver"]

    def _sysbench(self, db, seconds: int, output: Path) -> dict:
        cmd, env = sysbench.command(db, self.spec["database"], self.test, self.driver, seconds)
        result = watched(cmd, None, env, output, seconds)
        if result["status"] == "ok" and not any(r["kind"] == "total" for r in sysbench.reports(output)):
            result["status"] = "error"
        if result["status"] == "error":
            # sysbench says why it stopped on its standard output, among its reports
            said = [line for line in output.read_text(errors="replace").splitlines() if line and line[0] != "{"]
            result["error"] = " ".join([result["error"], *said[-5:]]).strip() or "sysbench wrote no final report"
        return {**result, "rows": None}

    def warm_up(self, db, raw: Path, label: str) -> None:
        if self.driver["warmup_s"]:
            warmed = self._sysbench(db, self.driver["warmup_s"], raw / "driver" / f"{label}.warmup.jsonl")
            if warmed["status"] != "ok":
                raise HostError(f"the warm-up of {self.test} failed: {warmed['error']}")

    def run(self, db, raw: Path, label: str) -> dict:
        result = self._sysbench(db, self.driver["duration_s"], raw / "driver" / f"{label}.jsonl")
        return {**result, "error": result["error"] if result["status"] != "ok" else ""}

    def plan(self, db, log_from: int) -> None:
        """A timed window runs many statements: no one plan."""


class ReplayStep:
    """A step that replays a PostgreSQL log of a workload directory (raw/driver/ keeps pgreplay's report): the log,
    its sessions made the run's, is written once before the first window; the step ends when the replay does."""

    def __init__(self, spec: dict, name: str):
        self.spec = spec
        self.log = Path(spec["queries_dir"]) / f"{name}.csv"
        self.replayed = Path(spec["queries_dir"]) / f"{name}.replayed.csv"

    def warm_up(self, db, raw: Path, label: str) -> None:
        if not self.replayed.exists():
            replay.rewrite(self.log, self.replayed, self.spec["replay_database"], db.user, self.spec["database"])

    def run(self, db, raw: Path, label: str) -> dict:
        cmd, env = replay.command(db.spec, self.replayed, self.spec["replay_speed"])
        output = raw / "driver" / f"{label}.txt"
        result = watched(cmd, None, env, output, self.spec["query_timeout_s"])
        counts = replay.reported(output.read_text(errors="replace"))
        if result["status"] == "ok" and counts["statements"] is None:
            result = {**result, "status": "error", "error": f"pgreplay wrote no report: {result['error']}"}
        elif result["status"] == "ok" and counts["statements"] and counts["errors"] == counts["statements"]:
            # some statements of a captured day may fail anywhere; all of them, when the database is not the one
            result = {**result, "status": "error",
                      "error": f"all {counts['statements']} statements failed (raw/driver/{label}.txt)"}
        return {**result, "error": result["error"] if result["status"] != "ok" else "", "rows": None}

    def plan(self, db, log_from: int) -> None:
        """A replay runs many statements: no one plan."""


def step(spec: dict, query: str, range_starts: dict[tuple[str, str], list[str]]):
    """The step a run's query id stands for: a query of a query workload, a replay of a workload directory's log,
    or a test of a driver."""
    if spec.get("driver"):
        return SysbenchStep(spec, query)
    if query in spec.get("replays", []):
        return ReplayStep(spec, query)
    return QueryStep(spec, query, range_starts)


def subquery_range_starts(db, spec: dict) -> dict[tuple[str, str], list[str]]:
    """Per table and column the run's split queries are split by, the first value of each subquery's range."""
    splits = {tuple(keys) for keys in spec["subquery_keys"].values()}
    return {(table, column): subqueries.range_starts(db, spec["database"], table, column, spec["subqueries"])
            for table, column in sorted(splits)}


def object_files(db, spec: dict) -> list[dict]:
    """Every file of the workload's objects, with the tier whose device holds it."""
    tier_by_device = {tier["device"]: tier["name"] for tier in spec["tiers"]}
    return [{**item, "tier": tier_by_device.get(device_of_path(item["path"]), "unknown")}
            for item in db.object_files(spec["database"], spec["tables"])]


def locked_loop(spec: dict, subdirs: tuple[str, ...], loop) -> dict:
    """A run's loop (loop(spec, raw)) under the run's lock, its raw subdirectories made, its end (done, or why it
    failed) in the progress log."""
    raw = Path(spec["run_dir"]) / "raw"
    for sub in subdirs:
        (raw / sub).mkdir(parents=True, exist_ok=True)
    lock = _lock(raw)
    try:
        result = loop(spec, raw)
    except Exception as exc:
        _progress(raw, f"failed: {' '.join(str(exc).split())}")
        raise
    finally:
        lock.close()
    _progress(raw, "done")
    return result


def _window(db, raw: Path, label: str, current, backend, corunner) -> tuple[dict, dict]:
    """One step's traced window, with its co-runner beside it: the step's result and the trace's files."""
    if corunner:
        corunner.begin()
    try:
        if backend:
            backend.start(label, raw / "traces")
        if corunner:
            corunner.start()
        result = current.run(db, raw, label)
    finally:
        if corunner:
            # inside the trace's window, so that its end is on the trace's clock; and whatever ended the step, so
            # that no co-runner outlives it
            corunner.end_window()
    return result, backend.stop(label, raw / "traces") if backend else {"files": [], "events_lost": 0}


def run_queries(spec: dict) -> dict:
    return locked_loop(spec, ("traces", "counters", "output", "plans", "driver"), _run_locked)


def _fast_cache(spec: dict) -> tuple[dict | None, dict | None]:
    """The run's fast_cache (the fast tier as a block cache of the capacity tier: empty when each traced try starts)
    and the capacity tier whose emulator has the fast tier's profile to keep it, if any."""
    cached = spec.get("fast_cache")
    cache_tier = emulator.cache_tier(spec["tiers"])
    if cached and not cache_tier:
        raise HostError("fast_cache needs the capacity tier's emulator to have the fast tier's profile for its cache: "
                        "both tiers modelled (emulation: model), brought up by this version of tierlab (tear the tiers "
                        "down and bring them up again if they are older)")
    return cached, cache_tier


def _run_locked(spec: dict, raw: Path) -> dict:
    rows_file = raw / "queries.jsonl"
    _cut_torn_row(raw)
    rows = _rows(rows_file)

    db = engine(spec["engine"])
    emulator.require_running()
    cached, cache_tier = _fast_cache(spec)
    # nothing but the run's own server works on the tiers while its windows are traced
    stopped = stop_others(spec["engine"]["instance"])
    if stopped:
        _progress(raw, f"stopped the root's other servers: {', '.join(stopped)}")
    db.start()
    (raw / "engine.json").write_text(json.dumps(db.facts(), indent=1))
    range_starts = subquery_range_starts(db, spec)
    if spec.get("corun") == "writer":
        prepare_writer(db, spec["writer"])
    extents_file = raw / "extents.json"
    if not extents_file.exists():
        extents_file.write_text(json.dumps({"taken_at": _now(), "files": map_files(object_files(db, spec))}, indent=1))

    backend = None
    if spec["trace"]["enabled"]:
        backend = trace.open_backend(spec["trace"]["backend"], spec["trace"]["instance"],
                                     spec["trace"]["devices"], spec["trace"]["buffer_size_kb"])
        (raw / "trace_backend.json").write_text(json.dumps({"backend": backend.name, "devices": spec["trace"]["devices"]}))
    failed_tries = 0
    hold = page_cache.held(spec["engine"])
    try:
        if hold:
            hold.start()
        if cache_tier:
            # what this run asks for, whatever a run that was killed left
            emulator.cache(cache_tier, f"{cached['capacity_bytes']} {cached['page_bytes']} {cached['policy']}"
                           if cached else "off")
        for query, attempt in _pending(spec, rows):
            STOP.check()
            current = step(spec, query, range_starts)
            label = f"{query}_try{attempt}"
            if not db.ping():
                db.start()
            settled = db.settle()
            if spec["cold"]:
                _cold_restart(db)
            current.warm_up(db, raw, label)
            if cached:
                # after any warm-up: the cost model simulates each traced window from an empty cache
                emulator.cache(cache_tier, "reset")
            before = db.counters(spec["database"])
            emulators_before = emulator.require_running()
            log_from = Path(spec["engine"]["log_file"]).stat().st_size
            started_at = _now()
            corunner = corunner_of(db, spec, raw, label, backend.mark if backend else lambda text: None)
            if hold:
                hold.start_window()
            result, trace_info = _window(db, raw, label, current, backend, corunner)
            row = {"query": query, "try": attempt, **result, **settled, "cache": "cold" if spec["cold"] else "warm",
                   "started_at": started_at, "trace_files": trace_info["files"], "events_lost": trace_info["events_lost"],
                   **(hold.window_figures() if hold else {})}
            try:
                emulators_after = emulator.require_running()
            except HostError as exc:
                # the try is kept as an error row, then the run stops: its tier no longer answers
                _append(rows_file, {**row, "status": "error", "error": str(exc)})
                raise
            if db.ping():
                after = db.counters(spec["database"])
                deltas = {name: after[name] - before[name] for name in after}
                plan = current.plan(db, log_from) if result["status"] == "ok" else None
                if plan:
                    (raw / "plans" / f"{label}.json").write_text(plan)
            else:
                # the server died in the query: its counters died with it
                after = deltas = None
                crashed = "server was not running after the query"
                row.update(status="error", error=f"{result['error']}; {crashed}" if result["error"] else crashed)
                db.start()
            counters = {"before": before, "after": after, "delta": deltas,
                        "device_model": emulator.counter_delta(emulators_before, emulators_after)}
            (raw / "counters" / f"{label}.json").write_text(json.dumps(counters, indent=1))
            if corunner:
                row.update(corunner.result())
            failed_tries += row["status"] != "ok"
            _append(rows_file, row)
            _progress(raw, f"{label} {row['status']} {row['elapsed_s']:.3f}")
    finally:
        if hold:
            hold.stop()
        if backend:
            backend.close()
        if cached:
            # an emulator that died took its cache with it (and is why the run stops); the next run sets its own
            with contextlib.suppress(HostError):
                emulator.cache(cache_tier, "off")
    return {"changed": True, "rows_file": str(rows_file), "failed_tries": failed_tries}


def run_recorded(spec_file: str, loop) -> None:
    """A run's loop (the query loop, or an observation's) on its spec, stopped cleanly by a signal, and recorded
    while it runs, so that teardown can stop a loop a stopped playbook left running."""
    STOP.install()
    spec = json.loads(Path(spec_file).read_text())
    entry = {"kind": "query_loop", "pid": os.getpid(), "marker": spec_file, "run_id": Path(spec["run_dir"]).name}
    record.add(**entry)
    try:
        print(json.dumps(loop(spec)))
    finally:
        record.remove(entry)


def main(spec_file: str) -> None:
    run_recorded(spec_file, run_queries)


def require_root_free(resuming: str = "") -> dict:
    """Refuse to go on while a query loop recorded on this root runs (a record of one that is gone is let go). The
    loop of the run being resumed (its playbook lost its host, say, and left it running) is that run's own: it is
    stopped, keeping its rows, and the resume runs what has no row."""
    gone, stopped = [], []
    for entry in record.entries("query_loop"):
        if entry["marker"] in cmdline(entry["pid"]):
            if entry["run_id"] == resuming:
                stopped.append({**entry, **stop_recorded(entry)})
                continue
            raise HostError(f"the query loop of run {entry['run_id']} (pid {entry['pid']}) still runs on this tierlab "
                            "root; another run here would restart its servers and empty its caches under it: wait for "
                            "it to end (it logs to its raw/run.log), or stop it with playbooks/teardown.yml")
        record.remove(entry)
        gone.append(entry)
    return {"changed": bool(gone or stopped), "let_go": gone, "stopped": stopped}


def stop_recorded(entry: dict) -> dict:
    """Stop a recorded query loop that still runs (its command line names its spec), as a user's SIGTERM does:
    its clients killed, its tracing instance removed. It is waited for as long as that clean-up works, and killed
    once it has done nothing for STALL_S (or worked for CLEAN_UP_LIMIT_S). What happened: {"waited_s", "killed"}."""
    def ours() -> bool:
        return entry["marker"] in cmdline(entry["pid"])

    outcome = {"waited_s": 0.0, "killed": False}
    if ours():
        signal_process(entry["pid"], signal.SIGTERM)
        waited_s, ended = wait_while_working(entry["pid"], STALL_S, CLEAN_UP_LIMIT_S, ours)
        if not ended:
            signal_process(entry["pid"], signal.SIGKILL)
            wait_gone(entry["pid"], KILL_WAIT_S)
        outcome = {"waited_s": waited_s, "killed": not ended}
    record.remove(entry)
    return outcome


def main_plan(spec_file: str) -> None:
    print(json.dumps(plan(json.loads(Path(spec_file).read_text()))))
