"""Reading a results directory into frames, and writing its tables/.

The only module (with the CLI) that touches the filesystem.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .attribute import attribute, extent_table
from .errors import RunDirError
from .metrics import access_summary, sequential_flags
from .parse_ftrace import parse_ftrace

QUERY_COLUMNS = ["query", "try", "status", "error", "elapsed_s", "io_time_s", "rows", "cache", "started_at", "events_lost"]


@dataclass
class Run:
    path: Path
    study: dict
    queries: pd.DataFrame
    requests: pd.DataFrame
    trace_counts: pd.DataFrame
    counters: pd.DataFrame
    tiers: list[dict]


def _read_json(path: Path):
    if not path.exists():
        raise RunDirError(f"{path} is missing; a run directory holds config/study.json and raw/ from the playbook")
    return json.loads(path.read_text())


def read_query_rows(run_dir: Path) -> pd.DataFrame:
    rows_file = run_dir / "raw" / "queries.jsonl"
    rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()] if rows_file.exists() else []
    frame = pd.DataFrame(rows, columns=[c for c in QUERY_COLUMNS if c != "io_time_s"] + ["trace_files"])
    return frame


def _window(markers: list[tuple[float, str]], label: str) -> tuple[float, float]:
    start = next((ts for ts, text in markers if text == f"tierlab start {label}"), -np.inf)
    end = next((ts for ts, text in markers if text == f"tierlab end {label}"), np.inf)
    return start, end


def read_requests(run_dir: Path, rows: pd.DataFrame, tolerate_errors: bool = False) -> tuple[pd.DataFrame, pd.DataFrame]:
    """All traced requests of the run (query, try set by the query window), and per-trace counts."""
    frames, counts = [], []
    for row in rows[["query", "try", "trace_files"]].to_dict("records"):
        label = f"{row['query']}_try{row['try']}"
        for name in row["trace_files"] or []:
            path = run_dir / "raw" / "traces" / name
            if not name.endswith(".ftrace"):
                raise RunDirError(
                    f"{path}: binary blktrace files are not decoded yet; only ftrace traces can be analyzed in this version"
                )
            trace = parse_ftrace(path, tolerate_errors)
            start, end = _window(trace.markers, label)
            inside = (trace.requests["ts_s"] >= start) & (trace.requests["ts_s"] <= end)
            frames.append(trace.requests.assign(
                query=pd.Series(np.where(inside, row["query"], None), dtype="string"), **{"try": row["try"]}))
            counts.append({"query": row["query"], "try": row["try"], "file": name,
                           "outside_window": int((~inside).sum()), **trace.counts})
    requests = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return requests, pd.DataFrame(counts)


def read_counters(run_dir: Path) -> pd.DataFrame:
    rows = []
    for path in sorted((run_dir / "raw" / "counters").glob("*.json")):
        query, attempt = path.stem.rsplit("_try", 1)
        delta = json.loads(path.read_text())["delta"]
        if delta is not None:
            rows.append({"query": query, "try": int(attempt), **delta})
    return pd.DataFrame(rows)


def load_run(path: str | Path, tolerate_errors: bool = False) -> Run:
    """The run's frames, for notebooks: queries, requests (attributed), trace counts, counters."""
    run_dir = Path(path)
    study = _read_json(run_dir / "config" / "study.json")
    tiers = _read_json(run_dir / "raw" / "tiers.json") if (run_dir / "raw" / "tiers.json").exists() else []
    rows = read_query_rows(run_dir)
    requests, trace_counts = read_requests(run_dir, rows, tolerate_errors)
    if not requests.empty:
        extents = extent_table(_read_json(run_dir / "raw" / "extents.json")["files"])
        requests = attribute(requests, extents, {t["device"]: t["name"] for t in tiers})
    return Run(run_dir, study, rows.drop(columns=["trace_files"]), requests, trace_counts, read_counters(run_dir), tiers)


def _engine_cross_check(counters: pd.DataFrame) -> pd.DataFrame:
    if counters.empty:
        return counters
    ahead = counters["Innodb_buffer_pool_read_ahead"]
    misses = counters["Innodb_buffer_pool_reads"]
    total = ahead + misses
    return pd.DataFrame({
        "query": counters["query"], "try": counters["try"],
        "engine_read_ahead_pages": ahead, "engine_random_page_misses": misses,
        "engine_sequential_pct": np.where(total > 0, 100.0 * ahead / total.where(total > 0, 1), np.nan),
    })


def analyze(run: Run) -> dict[str, pd.DataFrame]:
    """tables/ of a run: queries, requests, query_metrics, table_metrics."""
    page_bytes = run.study["study"]["page_size_bytes"]
    requests = run.requests
    query_rows, table_rows = [], []
    if not requests.empty:
        requests = requests[requests["query"].notna()].reset_index(drop=True)
        requests["sequential"] = False
        reads = requests["op"] == "R"
        requests.loc[reads, "sequential"] = sequential_flags(requests[reads], page_bytes)
        for (query, attempt), group in requests.groupby(["query", "try"], sort=True):
            query_rows.append({"query": query, "try": attempt, **access_summary(group, page_bytes)})
            for (obj, tier), part in group.groupby(["object", "tier"], sort=True):
                table_rows.append({"query": query, "try": attempt, "object": obj, "tier": tier,
                                   **access_summary(part, page_bytes)})
    query_metrics = pd.DataFrame(query_rows)
    checks = _engine_cross_check(run.counters)
    if not query_metrics.empty and not checks.empty:
        query_metrics = query_metrics.merge(checks, on=["query", "try"], how="left")
        query_metrics["sequential_pct_disagreement"] = query_metrics["sequential_pct"] - query_metrics["engine_sequential_pct"]
    queries = run.queries.copy()
    io_time = query_metrics.set_index(["query", "try"])["io_time_s"] if not query_metrics.empty else pd.Series(dtype=float)
    queries["io_time_s"] = [io_time.get((q, t), np.nan) for q, t in zip(queries["query"], queries["try"], strict=True)]
    return {
        "queries": queries[QUERY_COLUMNS],
        "requests": requests,
        "query_metrics": query_metrics,
        "table_metrics": pd.DataFrame(table_rows),
    }


def write_tables(run_dir: Path, tables: dict[str, pd.DataFrame]) -> list[Path]:
    out = run_dir / "tables"
    out.mkdir(exist_ok=True)
    written = []
    for name, frame in tables.items():
        if name == "requests":
            path = out / "requests.parquet"
            columns = ["ts_s", "device", "tier", "op", "rwbs", "sector", "size_sectors", "latency_us",
                       "pid", "process", "query", "try", "object", "file_offset_bytes", "sequential"]
            frame = frame[columns] if not frame.empty else pd.DataFrame(columns=columns)
            frame.to_parquet(path, index=False)
        else:
            path = out / f"{name}.csv"
            frame.to_csv(path, index=False, float_format="%.6g")
        written.append(path)
    return written
