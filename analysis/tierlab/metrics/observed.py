"""An observation's own figures (a run of playbooks/observe.yml): per interval the engine's rate of work and its reads
beside the block level's; per unit the engine's reads beside the traced ones; the tracing's cost to the instance,
measured on its own traffic; and warnings where the window looks unrepresentative. Pure frame-to-frame functions."""

import numpy as np
import pandas as pd

from ..catalog.engines import ENGINES
from ..catalog.values import figure

# the counters whose sum is the engine's work: PostgreSQL's transactions, the MySQL family's statements
WORK = {"postgresql": ("xact_commit", "xact_rollback"), "innodb": ("Questions",)}
# what the engine read, in pages, and what its cache served without reading
PAGES_READ = {"postgresql": "blks_read", "innodb": "Innodb_pages_read"}
# a window with fewer traced intervals than this says little of how the instance varies
FEW_TRACED = 3
# the rate of work varying more than this (its coefficient of variation over the intervals) is more than one phase
WORK_VARIATION = 0.5
# the engine's cache hit share rising more than this many points from the window's first third to its last: warming
WARMING_POINTS = 5.0
# a trace holding fewer of the requests the kernel counted on the disks than this share missed some
TRACED_SHARE = 0.95
INTERVAL_COLUMNS = ["query", "traced", "trace_rotated", "elapsed_s", "counted_s", "work", "work_per_s",
                    "engine_pages_read", "engine_hit_pct", "block_read_pages", "io_time_s", "traced_requests",
                    "kernel_requests"]


def _family(engine: str) -> str:
    return ENGINES[engine].counters


def _hit_pct(counters: pd.DataFrame, family: str) -> pd.Series:
    if family == "postgresql":
        hits, reads = counters["blks_hit"], counters["blks_read"]
        total = hits + reads
    else:
        total, reads = counters["Innodb_buffer_pool_read_requests"], counters["Innodb_buffer_pool_reads"]
    return pd.Series(np.where(total > 0, 100.0 * (total - reads) / total.where(total > 0, 1), np.nan),
                     index=counters.index)


def intervals(queries: pd.DataFrame, counters: pd.DataFrame, query_metrics: pd.DataFrame, engine: str,
              disks: pd.DataFrame, rotated: dict[str, int]) -> pd.DataFrame:
    """Per interval: whether its trace is read (traced) or was traced and deleted to keep the raw traces within their
    limit (trace_rotated; rotated: the bytes of each such interval's, by step), its seconds, the seconds between the
    counters' two reads (counted_s), the engine's work (and per counted second; per interval second in observations
    older than counted_s), pages read and cache hit share; the block level's read pages, I/O time and requests (traced
    intervals only), and the requests the kernel counted on the disks meanwhile."""
    family = _family(engine)
    rows = queries[["query", "elapsed_s", "trace_complete"]].merge(counters, on="query", how="left")
    counted = rows["counted_s"] if "counted_s" in rows else pd.Series(np.nan, index=rows.index)
    frame = pd.DataFrame({"query": rows["query"], "traced": rows["trace_complete"].notna(),
                          "trace_rotated": rows["query"].isin(list(rotated)), "elapsed_s": rows["elapsed_s"],
                          "counted_s": counted, "work": rows[list(WORK[family])].sum(axis=1, min_count=1),
                          "engine_pages_read": rows[PAGES_READ[family]], "engine_hit_pct": _hit_pct(rows, family)})
    frame["work_per_s"] = frame["work"] / counted.fillna(rows["elapsed_s"])
    block = pd.DataFrame({"query": query_metrics["query"], "block_read_pages": query_metrics["read_pages"],
                          "io_time_s": query_metrics["io_time_s"], "traced_requests": query_metrics["requests"]}) \
        if not query_metrics.empty else pd.DataFrame(columns=["query", "block_read_pages", "io_time_s", "traced_requests"])
    frame = frame.merge(block, on="query", how="left")
    traced = frame["traced"]
    measured = ["block_read_pages", "io_time_s", "traced_requests"]
    frame.loc[traced, measured] = frame.loc[traced, measured].fillna(0)
    kernel = disks.assign(kernel_requests=disks["kernel_read_requests"] + disks["kernel_write_requests"])
    frame = frame.merge(kernel[["query", "kernel_requests"]], on="query", how="left")
    return frame[INTERVAL_COLUMNS]


def tracing_overhead(frame: pd.DataFrame) -> dict:
    """The tracing's cost to the instance: the engine's rate of work in the untraced intervals against their traced
    neighbours' (the intervals just before and after each), as a share of the untraced rate. None where no interval
    was left untraced (an interval whose trace was rotated out ran traced)."""
    ran_traced = (frame["traced"] | frame["trace_rotated"]).to_numpy()
    positions = np.flatnonzero(~ran_traced)
    if not len(positions):
        return {"untraced_intervals": 0, "untraced_work_per_s": None, "traced_work_per_s": None, "overhead_pct": None}
    neighbours = sorted({p + step for p in positions for step in (-1, 1) if 0 <= p + step < len(frame)
                         and ran_traced[p + step]})
    untraced = float(frame["work_per_s"].iloc[positions].mean())
    traced = float(frame["work_per_s"].iloc[neighbours].mean()) if neighbours else float("nan")
    return {"untraced_intervals": len(positions), "untraced_work_per_s": untraced, "traced_work_per_s": traced,
            "overhead_pct": 100.0 * (1 - traced / untraced) if untraced > 0 else float("nan")}


def warnings(frame: pd.DataFrame, changed: list[dict], rotated: dict[str, int]) -> list[dict]:
    """Why the window may not represent the instance's work, each with its evidence."""
    found = []
    traced = int(frame["traced"].sum())
    if rotated:
        found.append({"warning": f"{len(rotated)} interval(s)' traces ({sum(rotated.values()) / 2**30:.2f} GiB) were "
                                 "deleted to keep the raw traces within raw_trace_limit: the block-level figures and "
                                 f"the advice rest on the newest {traced} traced interval(s), the counters on all",
                      "evidence": "tables/intervals.csv trace_rotated, raw/rotated.json"})
    if traced < FEW_TRACED:
        found.append({"warning": f"only {traced} traced interval(s): too few to tell a steady load from a passing one",
                      "evidence": "tables/intervals.csv traced"})
    work = frame["work_per_s"].dropna()
    if len(work) and work.max() == 0:
        found.append({"warning": "the instance did no work in the window: its traces are its background writes only",
                      "evidence": "tables/intervals.csv work_per_s"})
    elif len(work) > 1 and work.mean() > 0 and work.std() / work.mean() > WORK_VARIATION:
        found.append({"warning": f"the rate of work varied from {figure(work.min())} to {figure(work.max())} per s across the "
                                 "intervals: the window holds more than one phase of the load, and the advice weighs "
                                 "them as they came",
                      "evidence": "tables/intervals.csv work_per_s"})
    hits = frame["engine_hit_pct"].dropna()
    third = len(hits) // 3
    if third and hits.iloc[-third:].mean() - hits.iloc[:third].mean() > WARMING_POINTS:
        found.append({"warning": f"the engine's cache hit share rose from {hits.iloc[:third].mean():.1f}% to "
                                 f"{hits.iloc[-third:].mean():.1f}% over the window: its cache was warming, and the "
                                 "reads of its first part overstate the steady state",
                      "evidence": "tables/intervals.csv engine_hit_pct"})
    counted = frame[frame["traced"]][["traced_requests", "kernel_requests"]].dropna().sum()
    if counted["kernel_requests"] > 0 and counted["traced_requests"] < TRACED_SHARE * counted["kernel_requests"]:
        found.append({"warning": f"the traces hold {counted['traced_requests']:.0f} requests where the kernel counted "
                                 f"{counted['kernel_requests']:.0f} on the disks in the traced intervals: the tracer "
                                 "missed some, and the figures are short of them",
                      "evidence": "tables/intervals.csv traced_requests, kernel_requests"})
    if changed:
        found.append({"warning": f"{len(changed)} object(s) changed during the window ("
                                 + ", ".join(f"{c['object']} {c['change']}" for c in changed[:5])
                                 + (", ..." if len(changed) > 5 else "") + "): each is attributed by the map "
                                 "that held it, and sectors the two maps give to two objects to neither",
                      "evidence": "tables/objects_changed.csv"})
    return found


def object_engine_view(unit_counters: pd.DataFrame, table_metrics: pd.DataFrame, unit_of: dict[str, str]) -> pd.DataFrame:
    """Per unit, the engine's own reads over the traced intervals beside the block level's: PostgreSQL's blocks
    read (pg_statio: a table's heap and TOAST, an index's own; some served by the OS page cache), the MySQL family's
    pages read from the performance schema's per-file I/O, where it was on."""
    if unit_counters.empty:
        return pd.DataFrame(columns=["unit", "engine_pages_read", "block_read_pages"])
    engine_reads = unit_counters.groupby("unit")["engine_pages_read"].sum()
    block = (table_metrics.assign(unit=table_metrics["object"].map(lambda o: unit_of.get(o, o)))
             .groupby("unit")["read_pages"].sum() if not table_metrics.empty else pd.Series(dtype=float))
    units = sorted(set(engine_reads.index) | set(block.index) - {"other"})
    return pd.DataFrame({"unit": units, "engine_pages_read": [engine_reads.get(u, 0) for u in units],
                         "block_read_pages": [block.get(u, 0) for u in units]})
