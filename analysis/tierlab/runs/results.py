"""A results directory read into frames (its manifest, rows, counters, traces a window at a time, tables), and its
tables/ written."""

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..devices import profiles
from ..errors import RunDirError
from ..metrics.attribute import attribute, extent_table
from ..metrics.plans import plan_accesses, plan_summary
from ..traces.blktrace import parse_blktrace_binary
from ..traces.frame import concat_requests
from ..traces.ftrace import parse_ftrace
from ..traces.ftrace_raw import parse_ftrace_raw
from ..traces.prefetch import prefetched
from .manifest import query_rows, read_run_config, tiers_dilation
from .settings import buffer_pool_bytes

# the formats this tierlab reads (results/README.md): 1 is 2 before engines other than MariaDB (one file per table, no
# offset_bytes in extents.json, InnoDB's counters only, no plans), which it reads as such; 2 is 3 with the run's
# settings under `study` (in the manifest, and in config/study.json for config/run.json)
READ_VERSIONS = (1, 2, 3)
# a step's co-runner (the run's corun query): its id, its runs that ended within the window and their mean
# seconds, and why it stopped early; empty in the rows of a run without one
CORUN_COLUMNS = ["corun", "corun_runs", "corun_elapsed_s", "corun_error"]
# a query split into subqueries run at once (the run's subqueries): how many, and the fastest's and the slowest's
# seconds; empty in the rows of a query run whole
SUBQUERY_COLUMNS = ["subqueries", "subquery_min_s", "subquery_max_s"]
# InnoDB's purge of earlier steps' history, waited for before each step (MariaDB's and MySQL's settle): the history
# list's length before and after the wait, and its seconds; empty in the rows of other engines
SETTLE_COLUMNS = ["history_before", "history_after", "settle_s"]
# a PostgreSQL server's memory group in the window, its page cache held to os_cache: the most page cache it held, and
# the most its processes held besides; empty in the rows of other engines, of os_cache=unbounded and of older runs
PAGE_CACHE_COLUMNS = ["page_cache_max_bytes", "process_memory_max_bytes"]
# a traced window's driver reports (the warm-up's are <step>_try<n>.warmup.jsonl)
WINDOW_REPORTS = re.compile(r"(.+)_try(\d+)\.jsonl")
QUERY_COLUMNS = ["query", "try", "status", "error", "elapsed_s", "io_time_s", "io_time_undilated_s", "rows", "cache",
                 "started_at", "events_lost", "trace_complete", *SUBQUERY_COLUMNS, *CORUN_COLUMNS, *SETTLE_COLUMNS,
                 *PAGE_CACHE_COLUMNS]


# texts are few distinct values: stored as dictionaries, as the frames hold them (categoricals), not re-encoded
TEXT = pa.dictionary(pa.int32(), pa.string())
REQUEST_SCHEMA = pa.schema([
    ("ts_s", pa.float64()), ("device", TEXT), ("tier", TEXT), ("op", TEXT), ("rwbs", TEXT),
    ("sector", pa.int64()), ("size_sectors", pa.int64()), ("latency_us", pa.float64()), ("pid", pa.int64()),
    ("process", TEXT), ("query", TEXT), ("try", pa.int64()), ("object", TEXT),
    ("file_offset_bytes", pa.float64()), ("sequential", pa.bool_()), ("request", pa.int64()), ("piece", pa.int64()),
    ("request_size_sectors", pa.int64())])


@dataclass
class Window:
    """One traced query try: its attributed requests inside the query's window, and its trace_counts row."""
    query: str
    attempt: int
    requests: pd.DataFrame
    counts: dict


@dataclass
class Run:
    path: Path
    # config/run.json: run_id, started_at, host, tiers, versions and the run's validated settings
    config: dict
    queries: pd.DataFrame
    counters: pd.DataFrame
    device_model: pd.DataFrame
    tiers: list[dict]

    @property
    def settings(self) -> dict:
        return self.config["settings"]

    @property
    def dilation(self) -> float | None:
        return tiers_dilation(self.tiers)

    def profiles(self) -> dict[str, dict | None]:
        """Each tier's device profile as its emulator ran it; None for a tier without a model (a real device)."""
        return {t["name"]: profiles.parse(t["profile"]["text"], f"{t['name']} in {self.path / 'raw' / 'tiers.json'}")
                if (t.get("profile") or {}).get("text") else None for t in self.tiers}

    def traced(self) -> list[dict]:
        """The traced query tries in the run's order, each with its query, try, label and trace_files; refused
        when a trace file one lists is missing."""
        traced = [{**row, "label": f"{row['query']}_try{row['try']}"}
                  for row in read_query_rows(self.path)[["query", "try", "trace_files"]].to_dict("records")
                  if row["trace_files"]]
        traces = self.path / "raw" / "traces"
        missing = [name for row in traced for name in row["trace_files"] if not (traces / name).is_file()]
        if missing:
            raise RunDirError(f"{traces}: {len(missing)} trace file(s) that raw/queries.jsonl lists are missing "
                              f"({', '.join(missing[:3])}{', ...' if len(missing) > 3 else ''}): they were moved or "
                              "deleted after the run; put them back, or remove those tries' rows from raw/queries.jsonl "
                              "and resume the run to measure them again")
        return traced

    def windows(self, tries: list[dict] | None = None, tolerate_errors: bool = False) -> Iterator[Window]:
        """The traced query tries (all of them, or those of `tries` as Run.traced gives them) one at a time, so that
        memory follows the largest window, not the run."""
        tries = self.traced() if tries is None else tries
        extents = extent_table(_read_json(self.path / "raw" / "extents.json")["files"]) if tries else None
        tier_by_device = {t["device"]: t["name"] for t in self.tiers}
        for row in tries:
            trace = _read_window_trace(self.path, row["trace_files"], tolerate_errors)
            start, end = _window(trace.markers, row["label"])
            inside = ((trace.requests["ts_s"] >= start) & (trace.requests["ts_s"] <= end)).to_numpy()
            requests = attribute(trace.requests[inside], extents, tier_by_device)
            requests["query"] = pd.Categorical.from_codes(np.zeros(len(requests), dtype=np.int8), [row["query"]])
            requests["try"] = row["try"]
            counts = {"query": row["query"], "try": row["try"], "files": " ".join(row["trace_files"]),
                      "trace_complete": _complete(row["trace_files"], start, end),
                      "outside_window": int((~inside).sum()), **trace.counts}
            yield Window(row["query"], row["try"], requests, counts)

    def requests(self, tolerate_errors: bool = False) -> pd.DataFrame:
        """Every window's requests in one frame, for notebooks (the whole run in memory)."""
        frames = [window.requests for window in self.windows(tolerate_errors=tolerate_errors)]
        return concat_requests(frames) if frames else pd.DataFrame(columns=REQUEST_SCHEMA.names)


def cut_traces(queries: pd.DataFrame) -> list[tuple[str, int]]:
    """The (query, try) whose trace lost its end marker (trace_complete False in an analyzed queries table)."""
    cut = queries[queries["trace_complete"].eq(False).fillna(False)]
    return list(zip(cut["query"], cut["try"], strict=True))


def _read_json(path: Path):
    if not path.exists():
        raise RunDirError(f"{path} is missing; a run directory holds manifest.json, config/ and raw/ from the playbook")
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunDirError(f"{path} is not valid JSON ({exc}); it was damaged after the run wrote it") from None


def read_manifest(run_dir: Path) -> dict:
    """The run's manifest, refused unless this tierlab knows its results format."""
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a directory; give a run directory, results/<run_id>")
    manifest = _read_json(run_dir / "manifest.json")
    version = manifest.get("schema_version") if isinstance(manifest, dict) else None
    if version not in READ_VERSIONS:
        raise RunDirError(f"{run_dir}: results schema_version {version!r} is not one this tierlab reads "
                          f"(it reads {', '.join(map(str, READ_VERSIONS))}); read it with the tierlab version that wrote it "
                          f"(versions.tierlab_git in its manifest)")
    if version < 3 and "study" in manifest:
        manifest["settings"] = manifest.pop("study")
    return manifest


def read_query_rows(run_dir: Path) -> pd.DataFrame:
    return pd.DataFrame(query_rows(run_dir),
                        columns=[c for c in QUERY_COLUMNS if not c.startswith("io_time") and c != "trace_complete"]
                        + ["trace_files"])


def _window(markers: list[tuple[float, str]], label: str) -> tuple[float, float]:
    start = next((ts for ts, text in markers if text == f"tierlab start {label}"), -np.inf)
    end = next((ts for ts, text in markers if text == f"tierlab end {label}"), np.inf)
    return start, end


def _complete(names: list[str], start: float, end: float) -> bool:
    """Whether the whole query window was traced: an ftrace window (text or raw) has both its markers (a trace
    cut short has lost its end); a blktrace capture is started and stopped around the query, with no markers
    to miss."""
    return not names[0].endswith((".ftrace", ".ftrace-raw")) or (np.isfinite(start) and np.isfinite(end))


def _read_window_trace(run_dir: Path, names: list[str], tolerate_errors: bool):
    """One query window's trace: a raw ftrace window, an ftrace text file (runs traced before raw windows),
    or the per-CPU binary files of blktrace."""
    paths = [run_dir / "raw" / "traces" / name for name in names]
    if names[0].endswith(".ftrace-raw"):
        return parse_ftrace_raw(paths[0], tolerate_errors)
    if names[0].endswith(".ftrace"):
        return parse_ftrace(paths[0], tolerate_errors)
    return parse_blktrace_binary(paths, tolerate_errors)


def _counter_files(run_dir: Path):
    for path in sorted((run_dir / "raw" / "counters").glob("*.json")):
        query, attempt = path.stem.rsplit("_try", 1)
        yield query, int(attempt), json.loads(path.read_text())


def read_plan_accesses(run_dir: Path, engine: str, tables: set[str]) -> pd.DataFrame:
    """Per query try, how its plan (raw/plans/) reads each of the workload's tables: table scan, index scan,
    bitmap scan or index lookup, and through which index."""
    rows = []
    for path in sorted((run_dir / "raw" / "plans").glob("*.json")):
        query, attempt = path.stem.rsplit("_try", 1)
        sql = run_dir / "config" / "queries" / f"{query}.sql"
        rows += [{"query": query, "try": int(attempt), **access}
                 for access in plan_accesses(engine, _read_json(path), tables, sql.read_text() if sql.exists() else "")]
    return pd.DataFrame(rows, columns=["query", "try", "table", "index", "access"])


def read_driver_reports(run_dir: Path) -> pd.DataFrame:
    """A load driver's reports of each traced window (raw/driver/<step>_try<n>.jsonl; the warm-ups' are not
    read), with the step and try of each."""
    rows = []
    for path in sorted((run_dir / "raw" / "driver").glob("*.jsonl")):
        window = WINDOW_REPORTS.fullmatch(path.name)
        if not window:
            continue
        query, attempt = window.groups()
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.startswith("{"):
                continue
            try:
                rows.append({"query": query, "try": int(attempt), **json.loads(line)})
            except json.JSONDecodeError as error:
                raise RunDirError(f"{path}:{number}: not a report of the driver ({error}); it was damaged after the "
                                  "run wrote it") from None
    return pd.DataFrame(rows)


def read_counters(run_dir: Path) -> pd.DataFrame:
    """The engine's counter deltas per query try; an observation's also with the seconds between the two reads they
    are the difference of (counted_s)."""
    return pd.DataFrame([{"query": query, "try": attempt, **counters["delta"],
                          **({"counted_s": counters["counted"]["seconds"]} if "counted" in counters else {})}
                         for query, attempt, counters in _counter_files(run_dir) if counters["delta"] is not None])


def read_unit_counters(run_dir: Path, unit_of_path: dict[str, str], page_bytes: int) -> pd.DataFrame:
    """An observation's per-unit engine reads per interval (raw/counters/), in pages: PostgreSQL's pg_statio deltas (a
    table's heap and TOAST blocks, an index's own), the MySQL family's performance-schema bytes read per file, by the
    unit the file holds."""
    rows = []
    for query, _, counters in _counter_files(run_dir):
        for unit, values in counters.get("objects", {}).items():
            reads = values.get("heap_blks_read", values.get("idx_blks_read", 0)) + values.get("toast_blks_read", 0)
            rows.append({"query": query, "unit": unit, "engine_pages_read": reads})
        for path, values in counters.get("files", {}).items():
            if path in unit_of_path:
                rows.append({"query": query, "unit": unit_of_path[path],
                             "engine_pages_read": values["read_bytes"] / page_bytes})
    return pd.DataFrame(rows, columns=["query", "unit", "engine_pages_read"])


def read_disk_counters(run_dir: Path) -> pd.DataFrame:
    """An observation's requests per interval as the kernel counted them on its disks (raw/counters/, `disks`),
    summed over the disks."""
    rows = [{"query": query, **{f"kernel_{key}": sum(disk[key] for disk in counters["disks"].values())
                                for key in ("read_requests", "write_requests")}}
            for query, _, counters in _counter_files(run_dir) if "disks" in counters]
    return pd.DataFrame(rows, columns=["query", "kernel_read_requests", "kernel_write_requests"])


def read_device_model(run_dir: Path) -> pd.DataFrame:
    """Per query try and modelled tier, the requests the emulator's device model counted per class."""
    rows = [{"query": query, "try": attempt, "tier": tier, **{f"model_{key}": value for key, value in counts.items()}}
            for query, attempt, counters in _counter_files(run_dir)
            for tier, counts in counters.get("device_model", {}).items()]
    frame = pd.DataFrame(rows)
    if not frame.empty:
        reads = frame["model_read_sequential_requests"] + frame["model_read_random_requests"]
        frame["model_sequential_read_pct"] = np.where(reads > 0, 100.0 * frame["model_read_sequential_requests"]
                                                      / reads.where(reads > 0, 1), np.nan)
        # replies due before the host could send them: the share of the query's requests that the model did not hold
        served = frame[[c for c in frame.columns if (c.endswith("_requests") and c != "model_interfered_reads")
                        or c == "model_cache_read_hits"]].sum(axis=1)
        frame["model_late_pct"] = np.where(served > 0, 100.0 * frame["model_late"] / served.where(served > 0, 1), np.nan)
        if "model_cache_read_hits" in frame:
            cached = frame["model_cache_read_hits"] + frame["model_cache_read_misses"]
            frame["model_cache_hit_pct"] = np.where(cached > 0, 100.0 * frame["model_cache_read_hits"]
                                                    / cached.where(cached > 0, 1), np.nan)
    return frame


def load_run(path: str | Path) -> Run:
    """A run's configuration, queries, counters and device model counts; its traces are read by Run.windows."""
    run_dir = Path(path)
    read_manifest(run_dir)
    config = read_run_config(run_dir)
    if config is None:
        raise RunDirError(f"{run_dir / 'config' / 'run.json'} is missing; a run directory holds it from the playbook")
    tiers = _read_json(run_dir / "raw" / "tiers.json") if (run_dir / "raw" / "tiers.json").exists() else []
    return Run(run_dir, config, read_query_rows(run_dir).drop(columns=["trace_files"]), read_counters(run_dir),
               read_device_model(run_dir), tiers)


def read_table(run_dir: Path, name: str) -> pd.DataFrame:
    """tables/NAME.csv, as a previous `tierlab analyze` wrote it."""
    path = run_dir / "tables" / f"{name}.csv"
    if not path.exists():
        raise RunDirError(f"{path} is missing; run `tierlab analyze {run_dir}` first")
    return pd.read_csv(path, dtype={"error": "string"}) if path.stat().st_size > 1 else pd.DataFrame()


def read_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """The CSV tables a previous `tierlab analyze` wrote (queries, query_metrics, plan_accesses, and those a run
    has when it was traced, tier_metrics, or is of a timed workload, throughput)."""
    names = ["queries", "query_metrics", "plan_accesses"]
    names += [name for name in ("tier_metrics", "throughput") if (run_dir / "tables" / f"{name}.csv").exists()]
    return {name: read_table(run_dir, name) for name in names}


def run_figures(run_dir: Path) -> pd.DataFrame:
    """The figures a study compares runs by, one row per step: a timed workload's transactions per second per
    test (tables/throughput.csv), or a query workload's time, the sum of its queries' median elapsed seconds
    (NaN where a query has no ok try); with the bytes its data holds on the devices, its buffer pool bytes and
    all its settings (run_settings: the manifest's validated settings)."""
    manifest = read_manifest(run_dir)
    settings = manifest["settings"]
    sizes = [table.get("stored_bytes") for table in manifest["layout"]["tables"].values()]
    context = {"data_bytes": sum(sizes) if sizes and None not in sizes else np.nan,
               "buffer_pool_bytes": buffer_pool_bytes(settings), "run_settings": settings}
    if (run_dir / "tables" / "throughput.csv").exists():
        totals = read_table(run_dir, "throughput").groupby("query")["tps"].median()
        return pd.DataFrame([{"step": step, "figure": tps, "unit": "transactions/s", "higher_is_better": True,
                              **context} for step, tps in totals.items()])
    queries = read_table(run_dir, "queries")
    elapsed = queries[queries["status"] == "ok"].groupby("query")["elapsed_s"].median()
    complete = set(elapsed.index) == set(settings["queries"])
    return pd.DataFrame([{"step": "all queries", "figure": elapsed.sum() if complete else np.nan, "unit": "s",
                          "higher_is_better": False, **context}])


def per_query(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One run's figures per query (index): the median time of its ok tries, its I/O time, sequential %, RA and
    category, the requests in flight on its busiest tier, how its plan read each table; a timed test's tps."""
    metrics = tables["query_metrics"]
    queries = tables["queries"][tables["queries"]["status"] == "ok"].groupby("query")["elapsed_s"].median()
    figures = pd.DataFrame({"elapsed_s": queries})
    if not metrics.empty:
        figures = figures.join(metrics.groupby("query")[["io_time_s", "sequential_pct", "repeat_access_rate"]].median())
        figures = figures.join(metrics.groupby("query")["category"].first())
    tiers = tables.get("tier_metrics", pd.DataFrame())
    if not tiers.empty:
        busiest = tiers.loc[tiers.groupby(["query", "try"])["requests"].idxmax()]
        figures = figures.join(busiest.groupby("query")["inflight_mean"].median())
    if not tables["plan_accesses"].empty:
        figures = figures.join(pd.Series(plan_summary(tables["plan_accesses"]), name="plan"))
    if "throughput" in tables:
        figures = figures.join(tables["throughput"].groupby("query")[["tps", "latency_pct_ms"]].median())
    return figures


# what the cost model reads of each request; its texts are few distinct values, read as categories
REQUEST_COLUMNS = {"ts_s": False, "device": True, "tier": True, "op": True, "sector": False,
                   "request_size_sectors": False, "latency_us": False, "piece": False, "object": True, "sequential": False}


def request_chunks(run_dir: Path, query: str, attempt: int) -> Iterator[pd.DataFrame]:
    """One query try's attributed requests (REQUEST_COLUMNS), each once (its first piece: the object of its
    first piece, its whole size), from the tables/requests.parquet analyze wrote: a row group at a time, in
    the order written (a window of millions of requests is never a whole frame)."""
    path = run_dir / "tables" / "requests.parquet"
    if not path.exists():
        raise RunDirError(f"{path} is missing; run `tierlab analyze {run_dir}` first")
    parquet = pq.ParquetFile(path, read_dictionary=[c for c, text in REQUEST_COLUMNS.items() if text] + ["query"])

    def may_hold(number: int) -> bool:
        # analyze writes window by window: the row groups of other windows are skipped by their bounds
        group = parquet.metadata.row_group(number)
        bounds = {group.column(i).path_in_schema: group.column(i).statistics for i in range(group.num_columns)}
        return not any(b is not None and b.has_min_max and not b.min <= value <= b.max
                       for b, value in ((bounds["query"], query), (bounds["try"], attempt)))

    groups = (parquet.read_row_group(number, columns=[*REQUEST_COLUMNS, "query", "try"])
              for number in range(parquet.metadata.num_row_groups) if may_hold(number))
    # the next row group is read (arrow lets go of the interpreter) while the caller works on this one
    for table in prefetched(groups, depth=1):
        frame = table.to_pandas()
        del table
        keep = ((frame["query"] == query) & (frame["try"] == attempt) & (frame["piece"] == 0)).to_numpy()
        frame = frame.drop(columns=["query", "try"])
        yield frame if keep.all() else frame[keep]


def write_tables(run_dir: Path, tables: dict[str, pd.DataFrame]) -> list[Path]:
    """tables/NAME.csv of each table (requests.parquet is written by analyze, window by window)."""
    out = run_dir / "tables"
    out.mkdir(exist_ok=True)
    written = []
    for name, frame in tables.items():
        path = out / f"{name}.csv"
        frame.to_csv(path, index=False, float_format="%.6g")
        written.append(path)
    return written
