"""`tierlab analyze`: a run's tables/ from its raw traces, a query window at a time."""

import json
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..catalog.analysis import RANDOM_PCT_THRESHOLD, REPEAT_THRESHOLD, STREAM_WINDOW
from ..devices import profiles as device_profiles
from ..errors import RunDirError
from ..metrics import observed
from ..metrics.contract import contract
from ..metrics.engine_view import engine_view
from ..metrics.patterns import LATENCY_EDGES_US
from ..metrics.throughput import throughput
from ..traces.prefetch import prefetched, sink_on_thread
from . import window_store
from .observing import OBSERVED
from .results import (
    QUERY_COLUMNS,
    REQUEST_SCHEMA,
    TEXT,
    Run,
    read_disk_counters,
    read_driver_reports,
    read_plan_accesses,
    read_unit_counters,
)
from .window_summary import WindowParameters, summarize


def _with_device_model(tier_metrics: pd.DataFrame, device_model: pd.DataFrame) -> pd.DataFrame:
    """Beside each query x tier's block-level figures, what the emulator's device model counted there."""
    if tier_metrics.empty or device_model.empty:
        return tier_metrics
    return tier_metrics.merge(device_model, on=["query", "try", "tier"], how="left")


def _request_table(requests: pd.DataFrame | pa.Table) -> pa.Table:
    """A window's requests as requests.parquet keeps them (a kept window's are already)."""
    if isinstance(requests, pa.Table):
        return requests
    return pa.Table.from_pandas(requests[REQUEST_SCHEMA.names], preserve_index=False).cast(REQUEST_SCHEMA)


@contextmanager
def _requests_file(path: Path | None):
    """A sink of the windows' request frames that writes them to path (parquet) on a thread of its own, or
    nowhere for None. The file is written beside its place and moved there once every window is in, so
    that a failure leaves no half file."""
    if path is None:
        yield lambda requests: None
        return
    partial = path.with_name(path.name + ".partial")
    # dictionary pages for the text columns only: numbers gain nothing from them and cost twice the time
    writer = pq.ParquetWriter(partial, REQUEST_SCHEMA, use_dictionary=[f.name for f in REQUEST_SCHEMA if f.type == TEXT])
    try:
        with sink_on_thread(lambda requests: writer.write_table(_request_table(requests)), depth=1) as write:
            yield write
    except BaseException:
        writer.close()
        partial.unlink()
        raise
    writer.close()
    partial.replace(path)


def _windows(run: Run, parameters: WindowParameters, tolerate_errors: bool, progress):
    """Each traced window in the run's order: the summary and requests kept of it while the run went on
    (window_store) where they were made from what it has now, else the Window read from its trace."""
    tries = run.traced()
    shared = window_store.run_key(run, parameters)
    kept = {row["label"] for row in tries if window_store.is_kept(run.path, row["label"],
                                                                  window_store.key(run, row, shared))}
    unread = run.windows([row for row in tries if row["label"] not in kept], tolerate_errors)
    for number, row in enumerate(tries, 1):
        if progress:
            progress(number, len(tries), row["label"] + (" (analysed during the run)" if row["label"] in kept else ""))
        yield window_store.take(run.path, row["label"]) if row["label"] in kept else next(unread)


def analyze_window(run: Run, label: str, stream_window: int = STREAM_WINDOW,
                   random_threshold: float = RANDOM_PCT_THRESHOLD, repeat_threshold: float = REPEAT_THRESHOLD,
                   tolerate_errors: bool = False) -> Path:
    """One traced window of a run still going on, summed up and kept (window_store) for the analysis of the whole
    run to take; the file it kept."""
    parameters = WindowParameters.of(run, stream_window, random_threshold, repeat_threshold)
    row = next((row for row in run.traced() if row["label"] == label), None)
    if row is None:
        raise RunDirError(f"{run.path}: raw/queries.jsonl has no traced try {label}")
    (window,) = run.windows([row], tolerate_errors)
    summary = summarize(window, parameters)
    return window_store.keep(run.path, label, window_store.key(run, row, window_store.run_key(run, parameters)), summary,
                             _request_table(window.requests))


def analyze(run: Run, stream_window: int = STREAM_WINDOW, random_threshold: float = RANDOM_PCT_THRESHOLD,
            repeat_threshold: float = REPEAT_THRESHOLD, tolerate_errors: bool = False, progress=None,
            requests_path: Path | None = None, profiles: dict[str, Path] | None = None) -> dict[str, pd.DataFrame]:
    """tables/ of a run: queries, query_metrics, tier_metrics, table_metrics, size_histogram, read_latency,
    trace_counts, and the parameters the metrics were computed with. The traces are read one query window
    at a time (a window analysed during the run is taken as it was kept); each window's requests go to
    `requests_path` (parquet), if given, and are then let go.
    profiles: a device profile file per tier role that the contract judges that tier by (a real device's fitted
    by playbooks/devices.yml); by default the models the emulated tiers ran."""
    parameters = WindowParameters.of(run, stream_window, random_threshold, repeat_threshold)
    rows: dict[str, list] = {"query": [], "tier": [], "table": [], "size": [], "counts": []}
    latency: dict[str, np.ndarray] = {}
    # the next window is read (mostly compiled code and numpy) while this one is summed up and written
    with _requests_file(requests_path) as write:
        for window in prefetched(_windows(run, parameters, tolerate_errors, progress), depth=1):
            summary, requests = (window if isinstance(window, tuple)
                                 else (summarize(window, parameters), window.requests))
            write(requests)
            rows["counts"].append(summary.counts)
            rows["query"] += summary.query
            rows["tier"] += summary.tiers
            rows["size"] += summary.sizes
            rows["table"] += summary.tables
            for tier, counts in summary.latency.items():
                latency[tier] = latency.get(tier, 0) + counts
    trace_counts = pd.DataFrame(rows["counts"])
    queries = run.queries.copy()
    complete = {(r["query"], r["try"]): bool(r["trace_complete"]) for r in rows["counts"]}
    queries["trace_complete"] = pd.array([complete.get((q, t)) for q, t in zip(queries["query"], queries["try"], strict=True)],
                                         dtype="boolean")
    query_metrics = pd.DataFrame(rows["query"])
    if not query_metrics.empty:
        io_time = query_metrics.set_index(["query", "try"])["io_time_s"]
        queries["io_time_s"] = [io_time.get((q, t), np.nan) for q, t in zip(queries["query"], queries["try"], strict=True)]
        queries["io_time_undilated_s"] = queries["io_time_s"] / (run.dilation or 1.0)
        query_metrics["io_time_undilated_s"] = query_metrics["io_time_s"] / (run.dilation or 1.0)
        elapsed = queries.set_index(["query", "try"])["elapsed_s"]
        query_metrics["elapsed_s"] = [elapsed.get((q, t), np.nan)
                                      for q, t in zip(query_metrics["query"], query_metrics["try"], strict=True)]
        query_metrics["io_share_pct"] = 100.0 * query_metrics["io_time_s"] / query_metrics["elapsed_s"]
        view = engine_view(run.settings["engine"], run.counters)
        if not view.empty:
            query_metrics = query_metrics.merge(view, on=["query", "try"], how="left")
        if "engine_sequential_pct" in query_metrics:
            disagreement = query_metrics["sequential_pct"] - query_metrics["engine_sequential_pct"]
            query_metrics["sequential_pct_disagreement"] = disagreement
    else:
        queries["io_time_s"] = queries["io_time_undilated_s"] = np.nan
    tier_metrics = _with_device_model(pd.DataFrame(rows["tier"]), run.device_model)
    judged_by, profile_sources = _contract_profiles(run, profiles or {})
    return {
        "queries": queries[QUERY_COLUMNS],
        "query_metrics": query_metrics,
        "tier_metrics": tier_metrics,
        "contract": contract(tier_metrics, trace_counts, judged_by),
        "table_metrics": pd.DataFrame(rows["table"]),
        "plan_accesses": read_plan_accesses(run.path, run.settings["engine"], set(run.settings["placement"] or ())),
        "size_histogram": pd.DataFrame(rows["size"]),
        "read_latency": pd.DataFrame([{"tier": tier, "latency_le_us": edge, "reads": int(count)}
                                      for tier, counts in sorted(latency.items())
                                      for edge, count in zip(LATENCY_EDGES_US, counts, strict=True) if count],
                                     columns=["tier", "latency_le_us", "reads"]),
        "trace_counts": trace_counts,
        "parameters": pd.DataFrame([{"page_size_bytes": parameters.page_bytes, "stream_window": stream_window,
                                     "random_threshold_pct": random_threshold, "repeat_threshold": repeat_threshold,
                                     **{f"profile_{tier}": source for tier, source in profile_sources.items()}}]),
        **_throughput_tables(run.path),
        **_observation_tables(run, queries, query_metrics, pd.DataFrame(rows["table"])),
    }


def _contract_profiles(run: Run, given: dict[str, Path]) -> tuple[dict[str, dict | None], dict[str, str]]:
    """Each tier's device profile for the contract, and where it came from: the file given for its role, else
    the model its emulator ran, else none (a real device)."""
    judged_by, sources = run.profiles(), {t["name"]: "the emulator's model" for t in run.tiers
                                          if (t.get("profile") or {}).get("text")}
    for tier in run.tiers:
        if tier["role"] in given:
            judged_by[tier["name"]] = device_profiles.load(given[tier["role"]])
            sources[tier["name"]] = str(given[tier["role"]])
    return judged_by, sources


def _observation_tables(run: Run, queries: pd.DataFrame, query_metrics: pd.DataFrame,
                        table_metrics: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """An observation's intervals, the tracing's cost to the instance, the window's warnings, the objects that changed
    during it and the engine's reads per unit beside the traced ones (none for a run of tierlab's own workloads)."""
    if run.settings["workload"] != OBSERVED:
        return {}
    extents = json.loads((run.path / "raw" / "extents.json").read_text())
    unit_of = {f["object"]: f["table"] for f in extents["files"]}
    unit_of_path = {f["path"]: f["table"] for f in extents["files"]}
    rotated_file = run.path / "raw" / "rotated.json"
    rotated = json.loads(rotated_file.read_text()) if rotated_file.exists() else {}
    steps_rotated = {label.rpartition("_try")[0]: size for label, size in rotated.items()}
    frame = observed.intervals(queries, run.counters, query_metrics, run.settings["engine"],
                               read_disk_counters(run.path), steps_rotated)
    changed = extents.get("changed", [])
    unit_counters = read_unit_counters(run.path, unit_of_path, run.settings["page_size_bytes"])
    traced = set(frame.loc[frame["traced"], "query"])
    return {"intervals": frame, "observation": pd.DataFrame([observed.tracing_overhead(frame)]),
            "observation_warnings": pd.DataFrame(observed.warnings(frame, changed, steps_rotated),
                                                 columns=["warning", "evidence"]),
            "objects_changed": pd.DataFrame(changed, columns=["object", "change", "bytes_before", "bytes_after",
                                                              "ambiguous_bytes"]),
            "object_engine_view": observed.object_engine_view(
                unit_counters[unit_counters["query"].isin(traced)], table_metrics, unit_of)}


def _throughput_tables(run_dir: Path) -> dict[str, pd.DataFrame]:
    """throughput and throughput_intervals, for a run whose steps are a driver's timed windows (none otherwise)."""
    reports = read_driver_reports(run_dir)
    if reports.empty:
        return {}
    totals, intervals = throughput(reports)
    return {"throughput": totals, "throughput_intervals": intervals}
