"""A run's report.html (self-contained: plots inline as SVG) and summary.md."""

import html
from pathlib import Path

import numpy as np
import pandas as pd

from ..catalog.analysis import REPEAT_THRESHOLD
from ..catalog.values import figure
from ..metrics.contract import RULES
from ..metrics.engine_view import definition
from ..runs.manifest import tiers_dilation
from ..runs.results import CORUN_COLUMNS, PAGE_CACHE_COLUMNS, SUBQUERY_COLUMNS
from .lead import lead, shown
from .page import html_table, log_x_axis, md_table, page, plt, present, svg

# elapsed_s, io_time_s and io_time_undilated_s are in the queries' table above it
METRIC_COLUMNS = ["query", "try", "io_share_pct", "sequential_pct", "random_pct",
                  "engine_sequential_pct", "engine_pages_read", "repeat_access_rate", "category", "read_pages",
                  "latency_p50_us", "latency_p99_us"]


TABLE_COLUMNS = ["object", "tier", "read_requests", "read_pages", "sequential_pct", "random_pct",
                 "repeat_access_rate", "category", "io_time_s", "latency_p50_us", "latency_p99_us"]


CONTRACT_NOTE = (
    "The seven rules of a fast SSD's unwritten contract (Wu, Arpaci-Dusseau and Arpaci-Dusseau, HotStorage '19), "
    "judged for each query on each tier it touched (tables/contract.csv): few requests in flight, no more than the "
    "device serves at once; random reads only where they cost at most twice a sequential one; no request to a 4 KiB "
    "chunk another request is still reading; reads kept apart from writes; no request under 4 KiB; requests on 4 KiB "
    "boundaries; writes within the device's write buffer where it collects garbage. Limits come from the tier's "
    "device profile; a rule is not judged where the tier has none, served fewer than 100 of the query's requests, "
    "or the trace lost events. Below the verdicts, every rule broken or not judged, with its evidence.")


THROUGHPUT_NOTE = (
    "Each step is a test of the load driver (sysbench) run for a timed window after an untraced warm-up; the "
    "block trace covers the window. Rates per second of the window, from the driver's own reports "
    "(tables/throughput.csv, and per report interval tables/throughput_intervals.csv); latency_pct_ms is the "
    "driver's latency at its percentile, per transaction.")


INTERVALS_NOTE = (
    "An observed instance's window, interval by interval (tables/intervals.csv): whether it was traced, the engine's "
    "work (PostgreSQL's transactions, the MySQL family's statements) and per second, the pages it read and its cache "
    "hit share, and the block level's read pages and I/O time. Below: each object's pages as the engine counted "
    "them beside the traced ones (object_engine_view), and the objects whose extents changed during the window.")


def plot_sequential_random(metrics: pd.DataFrame) -> str:
    labels = metrics["query"] + (" #" + metrics["try"].astype(str) if metrics["try"].nunique() > 1 else "")
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(metrics)), 3.2))
    ax.bar(labels, metrics["sequential_pct"], label="sequential", color="#4c78a8")
    ax.bar(labels, metrics["random_pct"], bottom=metrics["sequential_pct"], label="random", color="#f58518")
    ax.set_ylabel("% of read pages")
    ax.set_ylim(0, 100)
    ax.legend(loc="upper right", fontsize=8)
    ax.tick_params(axis="x", rotation=90, labelsize=8)
    ax.set_title("Sequential vs random reads per query (block level)")
    return svg(fig)


def plot_repeat_access(metrics: pd.DataFrame) -> str:
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(metrics)), 3.2))
    ax.bar(metrics["query"], metrics["repeat_access_rate"], color="#54a24b")
    ax.axhline(REPEAT_THRESHOLD, color="#999", linestyle="--", linewidth=1, label=f"repeated above {REPEAT_THRESHOLD}")
    ax.set_ylabel("pages accessed / distinct pages")
    ax.legend(loc="upper right", fontsize=8)
    ax.tick_params(axis="x", rotation=90, labelsize=8)
    ax.set_title("Repeat access rate per query")
    return svg(fig)


def plot_latency_cdf(read_latency: pd.DataFrame) -> str:
    """read_latency: reads per tier and latency bucket (upper bound latency_le_us)."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for tier, group in read_latency.groupby("tier", sort=True):
        group = group.sort_values("latency_le_us")
        reads = group["reads"].to_numpy()
        ax.step(group["latency_le_us"], np.cumsum(reads) / reads.sum(), where="post",
                label=f"{tier} ({reads.sum()} reads)")
    log_x_axis(ax)
    ax.set_xlabel("read latency, dispatch to completion (µs)")
    ax.set_ylabel("fraction of reads")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Read latency CDF per tier")
    return svg(fig)


def plot_throughput(intervals: pd.DataFrame) -> str:
    """Transactions per second over each window, a line per step try."""
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for (query, attempt), part in intervals.groupby(["query", "try"], sort=True):
        ax.plot(part["time_s"], part["tps"], marker=".", label=f"{query} try {attempt}")
    ax.set_xlabel("seconds into the window")
    ax.set_ylabel("transactions per second")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.set_title("Throughput over each traced window (the driver's reports)")
    return svg(fig)


def _tier_label(tier: dict) -> str:
    if not tier.get("emulated"):
        how = "real"
    elif tier.get("profile"):
        how = f"emulated, device model {tier['profile']['name']}"
    else:
        how = "emulated" + (f", throttle {tier['throttle']}" if tier.get("throttle") else "")
    return f"{tier['name']} ({tier['role']}, {how}, {tier.get('fs') or 'file system unknown'})"


def _stored_label(layout: dict) -> str:
    """The bytes the tables' files hold on the devices against their size (what a compression saved)."""
    tables = layout.get("tables", {}).values()
    if not tables or any(t.get("stored_bytes") is None or t.get("size_bytes") is None for t in tables):
        return "not mapped"
    stored, size = sum(t["stored_bytes"] for t in tables), sum(t["size_bytes"] for t in tables)
    return f"{stored / 2**20:.1f} MiB stored for {size / 2**20:.1f} MiB of files ({100 * stored / size:.0f}%)"


def _workload_label(workload: dict) -> str:
    """tpch sf0.1, cold; sysbench 4x100000 (tables x rows), 4 threads, 60 s windows after 10 s of warm-up, cold."""
    scale = workload.get("scale") or f"sf{workload.get('scale_factor', '')}"
    if workload.get("threads"):
        scale += (f" (tables x rows), {workload['threads']} threads, {workload['duration_s']} s windows after "
                  f"{workload['warmup_s']} s of warm-up")
    return f"{workload.get('name', '')} {scale}, {workload.get('cache_state', '')}"


def _fast_cache_label(settings: dict) -> str:
    if not settings.get("fast_cache_bytes"):
        return "no"
    return (f"{settings['fast_cache_bytes'] / 2**20:.0f} MiB in front of the capacity tier, admitting "
            f"{'every page read' if settings['fast_cache_policy'] == 'lru' else 'on a second access'}")


def _os_cache_label(settings: dict, engine: dict) -> str:
    """How the server's OS page cache was bounded (PostgreSQL reads through it)."""
    if settings["os_cache"] == "unbounded":
        return "unbounded (os_cache=unbounded): it may have held the whole database"
    cache = settings["os_cache"]
    given = f"{cache['bytes'] / 2**20:.0f} MiB" if "bytes" in cache else f"{cache['percent']:g}% of the data"
    group = engine.get("memory_cgroup")
    where = f", cgroup v{group['version']} {group['path']}" if group else ""
    start = f"{engine['memory_limit_bytes'] / 2**20:.0f} MiB"
    if "page_cache_bytes" not in engine:
        # a run of a tierlab that bounded the group by that limit alone: the page cache took what the processes left
        return f"os_cache {given}: the server's processes bounded to {start}, page cache included{where}"
    return (f"os_cache {given}: the page cache above it dropped while the queries ran, the server's processes "
            f"bounded to {start}, page cache included{where}")


def run_context(manifest: dict) -> list[tuple[str, str]]:
    dilation = tiers_dilation(manifest.get("tiers", []))
    tiers = "; ".join(_tier_label(t) for t in manifest.get("tiers", []))
    workload = manifest.get("workload", {})
    settings = manifest.get("settings") or {}
    return [
        ("run", manifest.get("run_id", "")), ("status", manifest.get("status", "")),
        ("engine", f"{manifest.get('engine', {}).get('name', '')} {manifest.get('engine', {}).get('version', '')}"),
        ("engine from", manifest.get("engine", {}).get("source", "")),
        ("workload", _workload_label(workload)),
        ("layout", manifest.get("layout", {}).get("name", "")), ("tiers", tiers),
        ("fast tier as a block cache", _fast_cache_label(settings)),
        *([("OS page cache", _os_cache_label(settings, manifest.get("engine", {})))]
          if settings.get("os_cache") is not None else []),
        ("compression", (manifest.get("load") or {}).get("compression") or "none"),
        ("data on the devices", _stored_label(manifest.get("layout", {}))),
        ("tracer", manifest.get("versions", {}).get("tracer_backend") or ""),
        ("modelled time dilated", f"{dilation:g}x" if dilation else "no"),
        ("tiers' fidelity", ((manifest.get("tiers_check") or {}).get("fidelity") or {}).get("verdict") or "not checked"),
    ]


def fidelity(manifest: dict, tier_metrics: pd.DataFrame) -> tuple[list[str], pd.DataFrame]:
    """The tiers' fidelity for this run (the lead's caveats say when it was not faithful): the paragraphs that say
    what the emulation did to the figures, and each query's late-reply share per tier."""
    check = manifest.get("tiers_check") or {}
    verdicts = check.get("fidelity")
    dilation = tiers_dilation(manifest.get("tiers", []))
    late = pd.DataFrame()
    if "model_late_pct" in tier_metrics:
        late = tier_metrics.pivot_table(index=["query", "try"], columns="tier", values="model_late_pct", dropna=False)
        late = late.rename(columns=lambda tier: f"late % on {tier}").reset_index().rename_axis(columns=None)
    if verdicts is None and dilation is None:
        return [], late
    lines = []
    if verdicts:
        per_tier = ", ".join(f"{name}: {verdict}" for name, verdict in verdicts["tiers"].items())
        lines.append(f"Self-check of the tiers ({check.get('checked_at', '')}): {verdicts['verdict']} ({per_tier}). "
                     "Each contrast the study rests on (random against sequential reads, the capacity tier against the "
                     "fast one, queue depth 32 against 1), measured with fio on the device and through the file system, "
                     "against the device model's own ratio; faithful within 20%, degraded within 50%.")
        lines += [f"Not faithful or degraded: {reason}" for reason in verdicts["reasons"]]
    if dilation and dilation > 1:
        lines.append(f"Modelled time was dilated {dilation:g}x: every latency of the device models, their queues and "
                     "buffers ran that many times slower, so that the models stay above what this host can do and "
                     "every ratio between them holds. Elapsed times are as measured, that is dilated; io_time_s is the "
                     f"measured block I/O time and io_time_undilated_s the same divided by {dilation:g}, what the modelled "
                     "devices would take. The CPU is not dilated, so I/O takes a larger share of each query's time here "
                     "than it would on the modelled devices: compare io_time_undilated_s with the compute time "
                     "(elapsed_s - io_time_s) to judge whether a query is I/O-bound there.")
    if not late.empty:
        lines.append("Late %: the share of a query's requests on a modelled tier whose reply was due before the host "
                     "could send it (model_late_pct in tier_metrics.csv); those requests took the host's time, not the "
                     "model's.")
    return lines, late


DETAIL_NOTE = ("A line per step and try, most I/O time first; open one for how its plan read each table "
               "(tables/plan_accesses.csv) and each object's figures on each tier in it (tables/table_metrics.csv).")
DETAIL_NOTE_MD = ("A section per step and try, most I/O time first: how its plan read each table "
                  "(tables/plan_accesses.csv) and each object's figures on each tier in it (tables/table_metrics.csv).")


def objects_note(tries: int) -> str:
    """What the objects' table sums, and how it counts a step's tries."""
    counted = " (the median over its tries, a try that did not touch the object counting 0)" if tries > 1 else ""
    return ("Every object read or written, on each tier, over the whole run: each step's figures" + counted + ", "
            "summed over the steps. io_time_s is the time with one of the object's requests in flight, share_pct its "
            "share of every object's (other, requests of no object, included); where requests of several objects "
            "were in flight at once, that sum exceeds the devices' busy time (io_time_s in tables/queries.csv). "
            "sequential_pct is over the pages read; pattern is the category of the steps that hold most of its I/O "
            "time, pattern_pct that share of it. Sizes from the manifest's layout.")


def _step_details(table_metrics: pd.DataFrame, plans: pd.DataFrame) -> tuple[list[str], list[str]]:
    """Each step try's plan accesses and its objects' figures: in HTML a line each that opens on them, most I/O time
    first; in Markdown a section each."""
    sections, md = [], []
    steps = table_metrics.groupby(["query", "try"], sort=True)
    order = steps["io_time_s"].sum().sort_values(ascending=False, kind="stable").index
    for query, attempt in order:
        part = steps.get_group((query, attempt)).sort_values("io_time_s", ascending=False)
        plan = plans[(plans["query"] == query) & (plans["try"] == attempt)][["table", "index", "access"]]
        top = part.iloc[0]
        line = (f"{query} try {attempt}: {figure(part['io_time_s'].sum())} s of I/O over {part['object'].nunique()} objects; "
                f"most on {top['object']} ({top['tier']}), {100 * top['io_time_s'] / part['io_time_s'].sum():.0f}%")
        inside = ["<p class='note'>How the plan reads each table:</p>", html_table(plan)] if not plan.empty else []
        sections.append(f"<details><summary>{html.escape(line)}</summary>{''.join(inside)}"
                        f"{html_table(present(part, TABLE_COLUMNS))}</details>")
        md += [f"### {query} (try {attempt})", ""]
        if not plan.empty:
            md += ["How the plan reads each table:", "", md_table(plan), ""]
        md += [md_table(present(part, TABLE_COLUMNS)), ""]
    return sections, md


def write_run_report(out_dir: Path, manifest: dict, tables: dict[str, pd.DataFrame]) -> list[Path]:
    """report.html and summary.md: the lead (where the I/O time goes, what to move, the caveats), then the run,
    its queries or windows, the tiers' fidelity, the access patterns, the objects, each step's detail, the
    contract."""
    out_dir.mkdir(parents=True, exist_ok=True)
    context = pd.DataFrame(run_context(manifest), columns=["", "value"])
    metrics, table_metrics = tables["query_metrics"], tables["table_metrics"]
    title = f"tierlab run {manifest.get('run_id', '')}"
    sections, lead_md, objects = lead(manifest, tables)
    md = [f"# {title}", "", *lead_md]
    # the columns of a split query or a co-runner, where the run had them
    extra = [c for first, columns in (("subqueries", SUBQUERY_COLUMNS), ("corun", CORUN_COLUMNS),
                                      ("page_cache_max_bytes", PAGE_CACHE_COLUMNS))
             if tables["queries"].get(first, pd.Series(dtype=object)).notna().any() for c in columns]
    queries = present(tables["queries"], ["query", "try", "status", "error", "elapsed_s", "io_time_s",
                                           "io_time_undilated_s", "rows", "trace_complete", *extra])
    dilation = tiers_dilation(manifest.get("tiers", [])) or 1.0
    # every elapsed time of a dilated run says so where it is shown
    dilated = {"elapsed_s": f"elapsed_s (dilated {dilation:g}x)"} if dilation > 1 else {}
    queries = queries.rename(columns=dilated)
    shown_metrics = present(metrics, METRIC_COLUMNS)
    fidelity_lines, late = fidelity(manifest, tables.get("tier_metrics", pd.DataFrame()))
    sections += ["<h2>Run</h2>", html_table(context), "<h2>Queries</h2>", html_table(queries)]
    md += ["## Run", "", md_table(context), "", "## Queries", "",
           md_table(queries.drop(columns=["error", "corun_error"], errors="ignore"))]
    if "throughput" in tables:
        totals = tables["throughput"]
        sections += ["<h2>Throughput</h2>", f"<p class='note'>{html.escape(THROUGHPUT_NOTE)}</p>", html_table(totals),
                     plot_throughput(tables["throughput_intervals"])]
        md += ["", "## Throughput", "", THROUGHPUT_NOTE, "", md_table(totals)]
    if "intervals" in tables:
        intervals = tables["intervals"]
        sections += ["<h2>Intervals</h2>", f"<p class='note'>{html.escape(INTERVALS_NOTE)}</p>", html_table(intervals)]
        for name in ("object_engine_view", "objects_changed"):
            if not tables[name].empty:
                sections += [f"<h3>{name}</h3>", html_table(tables[name])]
        md += ["", "## Intervals", "", INTERVALS_NOTE, "", md_table(intervals)]
    if fidelity_lines:
        sections += ["<h2>Tiers' fidelity</h2>"] + [f"<p>{html.escape(line)}</p>" for line in fidelity_lines]
        md += ["", "## Tiers' fidelity", ""] + [line + "\n" for line in fidelity_lines]
        if not late.empty:
            sections.append(html_table(late))
            md += [md_table(late), ""]
    if not metrics.empty:
        definitions = _definitions(tables["parameters"].to_dict("records")[0], manifest["engine"]["name"])
        note = objects_note(int(table_metrics.groupby("query")["try"].nunique().max()))
        details, details_md = _step_details(table_metrics, tables["plan_accesses"])
        sections += ["<h2>Per-query access patterns</h2>",
                     f"<p class='note'>{html.escape(definitions)}</p>",
                     html_table(shown_metrics),
                     plot_sequential_random(metrics), plot_repeat_access(metrics), plot_latency_cdf(tables["read_latency"]),
                     "<h2>Objects</h2>", f"<p class='note'>{html.escape(note)}</p>", html_table(shown(objects)),
                     "<h2>Each step's objects</h2>", f"<p class='note'>{html.escape(DETAIL_NOTE)}</p>", *details]
        md += ["", "## Per-query access patterns", "", definitions, "", md_table(shown_metrics), "",
               "## Objects", "", note, "", md_table(shown(objects)), "", "## Each step's objects", "", DETAIL_NOTE_MD, "",
               *details_md]
    contract = tables.get("contract", pd.DataFrame())
    if not contract.empty:
        verdicts, flagged = contract_tables(contract)
        sections += ["<h2>The unwritten contract</h2>", f"<p class='note'>{html.escape(CONTRACT_NOTE)}</p>",
                     html_table(verdicts), html_table(flagged)]
        md += ["", "## The unwritten contract", "", CONTRACT_NOTE, "", md_table(verdicts), "", md_table(flagged), ""]
    report, summary = out_dir / "report.html", out_dir / "summary.md"
    report.write_text(page(title, sections))
    summary.write_text("\n".join(md) + "\n")
    return [report, summary]


def contract_tables(contract: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The contract's verdicts, a row per query try and tier and a column per rule; and every verdict other
    than kept with its evidence."""
    verdicts = contract.pivot(index=["query", "try", "tier"], columns="rule", values="verdict")[list(RULES)].reset_index()
    verdicts.columns.name = None
    flagged = contract[contract["verdict"] != "kept"][["query", "try", "tier", "rule", "verdict", "evidence"]]
    return verdicts, flagged


def _definitions(parameters: dict, engine: str) -> str:
    """How the access-pattern columns are defined, with the parameters this analysis used."""
    return (f"Pages of {parameters['page_size_bytes'] // 1024} KiB. Sequential: a read that starts where one of the last "
            f"{parameters['stream_window']} reads on its device ended, or spans more than one page; percentages over "
            f"read pages. {definition(engine)} "
            f"Categories: random when random_pct > {parameters['random_threshold_pct']:g}, repeated when "
            f"repeat_access_rate > {parameters['repeat_threshold']:g}: 1 random repeated, 2 random, 3 sequential, "
            "4 sequential repeated.")
