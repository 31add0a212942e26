"""report.html (self-contained: plots inline as SVG) and summary.md, per run and per comparison.

The only module that plots.
"""

import html
import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
# labels as text, not as glyph outlines: searchable in the report, and a third less time to draw
matplotlib.rcParams["svg.fonttype"] = "none"
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from .contract import RULES  # noqa: E402
from .defaults import REPEAT_THRESHOLD  # noqa: E402
from .engine_view import definition  # noqa: E402
from .errors import RunDirError  # noqa: E402
from .manifest import tiers_dilation  # noqa: E402
from .plans import plan_summary  # noqa: E402
from .run_io import CORUN_COLUMNS, SUBQUERY_COLUMNS, cut_traces, read_manifest, read_tables  # noqa: E402

METRIC_COLUMNS = ["query", "try", "elapsed_s", "io_time_s", "io_time_undilated_s", "io_share_pct", "sequential_pct", "random_pct",
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
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; max-width: 1200px; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; } h3 { font-size: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
.plot svg { max-width: 100%; height: auto; } .note { color: #666; font-size: 0.85em; }
.wide { overflow-x: auto; }
.warning { background: #fff3cd; border: 1px solid #e0b000; padding: 0.5em 1em; }
"""


def _svg(fig) -> str:
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buffer.getvalue()
    return f'<div class="plot">{text[text.index("<svg"):]}</div>'


def _fmt(value) -> str:
    if isinstance(value, float | np.floating):
        return "" if np.isnan(value) else f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"
    return str(value)


def _present(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[[c for c in columns if c in frame.columns]]


def _html_table(frame: pd.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def _md_table(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


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
    return _svg(fig)


def plot_repeat_access(metrics: pd.DataFrame) -> str:
    fig, ax = plt.subplots(figsize=(max(6, 0.45 * len(metrics)), 3.2))
    ax.bar(metrics["query"], metrics["repeat_access_rate"], color="#54a24b")
    ax.axhline(REPEAT_THRESHOLD, color="#999", linestyle="--", linewidth=1, label=f"repeated above {REPEAT_THRESHOLD}")
    ax.set_ylabel("pages accessed / distinct pages")
    ax.legend(loc="upper right", fontsize=8)
    ax.tick_params(axis="x", rotation=90, labelsize=8)
    ax.set_title("Repeat access rate per query")
    return _svg(fig)


def plot_latency_cdf(read_latency: pd.DataFrame) -> str:
    """read_latency: reads per tier and latency bucket (upper bound latency_le_us)."""
    fig, ax = plt.subplots(figsize=(6, 3.2))
    for tier, group in read_latency.groupby("tier", sort=True):
        group = group.sort_values("latency_le_us")
        reads = group["reads"].to_numpy()
        ax.step(group["latency_le_us"], np.cumsum(reads) / reads.sum(), where="post",
                label=f"{tier} ({reads.sum()} reads)")
    ax.set_xscale("log")
    ax.set_xlabel("read latency, dispatch to completion (µs)")
    ax.set_ylabel("fraction of reads")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Read latency CDF per tier")
    return _svg(fig)


def plot_time_per_layout(times: pd.DataFrame) -> str:
    """times: index query, one column per run label, seconds."""
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(times)), 3.2))
    width = 0.8 / max(1, len(times.columns))
    positions = np.arange(len(times))
    for i, label in enumerate(times.columns):
        ax.bar(positions + i * width, times[label].to_numpy(), width, label=label)
    ax.set_xticks(positions + width * (len(times.columns) - 1) / 2, times.index, rotation=90, fontsize=8)
    ax.set_ylabel("elapsed (s)")
    ax.legend(fontsize=8)
    ax.set_title("Time per query per run")
    return _svg(fig)


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
    return _svg(fig)


def _page(title: str, sections: list[str]) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>")


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


def run_context(manifest: dict) -> list[tuple[str, str]]:
    dilation = tiers_dilation(manifest.get("tiers", []))
    tiers = "; ".join(_tier_label(t) for t in manifest.get("tiers", []))
    workload = manifest.get("workload", {})
    return [
        ("run", manifest.get("run_id", "")), ("status", manifest.get("status", "")),
        ("engine", f"{manifest.get('engine', {}).get('name', '')} {manifest.get('engine', {}).get('version', '')}"),
        ("engine from", manifest.get("engine", {}).get("source", "")),
        ("workload", _workload_label(workload)),
        ("layout", manifest.get("layout", {}).get("name", "")), ("tiers", tiers),
        ("fast tier as a block cache", _fast_cache_label(manifest.get("settings") or {})),
        ("compression", (manifest.get("load") or {}).get("compression") or "none"),
        ("data on the devices", _stored_label(manifest.get("layout", {}))),
        ("tracer", manifest.get("versions", {}).get("tracer_backend") or ""),
        ("modelled time dilated", f"{dilation:g}x" if dilation else "no"),
        ("tiers' fidelity", ((manifest.get("tiers_check") or {}).get("fidelity") or {}).get("verdict") or "not checked"),
    ]


def fidelity(manifest: dict, tier_metrics: pd.DataFrame) -> tuple[str | None, list[str], pd.DataFrame]:
    """The tiers' fidelity for this run: a warning for the top of the report (None when faithful), the
    paragraphs that say what the emulation did to the figures, and each query's late-reply share per tier."""
    check = manifest.get("tiers_check") or {}
    verdicts = check.get("fidelity")
    dilation = tiers_dilation(manifest.get("tiers", []))
    late = pd.DataFrame()
    if "model_late_pct" in tier_metrics:
        late = tier_metrics.pivot_table(index=["query", "try"], columns="tier", values="model_late_pct", dropna=False)
        late = late.rename(columns=lambda tier: f"late % on {tier}").reset_index().rename_axis(columns=None)
    if verdicts is None and dilation is None:
        return None, [], late
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
    warning = None
    if verdicts and verdicts["verdict"] != "faithful":
        warning = (f"The emulated tiers of this run were {verdicts['verdict']}: their measured contrasts differ from the "
                   "device models' by more than 20%, so times on them do not stand for the modelled devices. See "
                   "\"Tiers' fidelity\".")
    return warning, lines, late


def write_run_report(out_dir: Path, manifest: dict, tables: dict[str, pd.DataFrame]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    context = pd.DataFrame(run_context(manifest), columns=["", "value"])
    metrics, table_metrics = tables["query_metrics"], tables["table_metrics"]
    title = f"tierlab run {manifest.get('run_id', '')}"
    # the columns of a split query or a co-runner, where the run had them
    extra = [c for first, columns in (("subqueries", SUBQUERY_COLUMNS), ("corun", CORUN_COLUMNS))
             if tables["queries"].get(first, pd.Series(dtype=object)).notna().any() for c in columns]
    queries = _present(tables["queries"], ["query", "try", "status", "error", "elapsed_s", "io_time_s",
                                           "io_time_undilated_s", "rows", "trace_complete", *extra])
    dilation = tiers_dilation(manifest.get("tiers", [])) or 1.0
    # every elapsed time of a dilated run says so where it is shown
    dilated = {"elapsed_s": f"elapsed_s (dilated {dilation:g}x)"} if dilation > 1 else {}
    queries = queries.rename(columns=dilated)
    shown_metrics = _present(metrics, METRIC_COLUMNS).rename(columns=dilated)
    warning, fidelity_lines, late = fidelity(manifest, tables.get("tier_metrics", pd.DataFrame()))
    warnings = [warning] if warning else []
    cut = cut_traces(queries) if "trace_complete" in queries else []
    if cut:
        tries = ", ".join(f"{query} try {attempt}" for query, attempt in cut)
        warnings.append(f"The traces of {tries} were cut short (no end marker): their metrics miss the requests "
                        "after the cut.")
    sections = [f"<p class='warning'>{html.escape(text)}</p>" for text in warnings]
    md = [f"# {title}", ""] + [line for text in warnings for line in (f"> **Warning.** {text}", "")]
    sections += [_html_table(context), "<h2>Queries</h2>", _html_table(queries)]
    md += [_md_table(context), "", "## Queries", "", _md_table(queries.drop(columns=["error", "corun_error"], errors="ignore"))]
    if "throughput" in tables:
        totals = tables["throughput"]
        sections += ["<h2>Throughput</h2>", f"<p class='note'>{html.escape(THROUGHPUT_NOTE)}</p>", _html_table(totals),
                     plot_throughput(tables["throughput_intervals"])]
        md += ["", "## Throughput", "", THROUGHPUT_NOTE, "", _md_table(totals)]
    if fidelity_lines:
        sections += ["<h2>Tiers' fidelity</h2>"] + [f"<p>{html.escape(line)}</p>" for line in fidelity_lines]
        md += ["", "## Tiers' fidelity", ""] + [line + "\n" for line in fidelity_lines]
        if not late.empty:
            sections.append(_html_table(late))
            md += [_md_table(late), ""]
    if not metrics.empty:
        definitions = _definitions(tables["parameters"].to_dict("records")[0], manifest["engine"]["name"])
        sections += ["<h2>Per-query access patterns</h2>",
                     f"<p class='note'>{html.escape(definitions)}</p>",
                     _html_table(shown_metrics),
                     plot_sequential_random(metrics), plot_repeat_access(metrics), plot_latency_cdf(tables["read_latency"]),
                     "<h2>Per-table breakdown of each query</h2>"]
        md += ["", "## Per-query access patterns", "", definitions, "", _md_table(shown_metrics), "",
               "## Per-table breakdown", ""]
        plans = tables["plan_accesses"]
        for (query, attempt), part in table_metrics.groupby(["query", "try"], sort=True):
            plan = plans[(plans["query"] == query) & (plans["try"] == attempt)][["table", "index", "access"]]
            sections += [f"<h3>{html.escape(query)} (try {attempt})</h3>"]
            md += [f"### {query} (try {attempt})", ""]
            if not plan.empty:
                sections += ["<p class='note'>How the plan reads each table:</p>", _html_table(plan)]
                md += ["How the plan reads each table:", "", _md_table(plan), ""]
            sections.append(_html_table(_present(part, TABLE_COLUMNS)))
            md += [_md_table(_present(part, TABLE_COLUMNS)), ""]
    contract = tables.get("contract", pd.DataFrame())
    if not contract.empty:
        verdicts, flagged = contract_tables(contract)
        sections += ["<h2>The unwritten contract</h2>", f"<p class='note'>{html.escape(CONTRACT_NOTE)}</p>",
                     _html_table(verdicts), _html_table(flagged)]
        md += ["", "## The unwritten contract", "", CONTRACT_NOTE, "", _md_table(verdicts), "", _md_table(flagged), ""]
    report, summary = out_dir / "report.html", out_dir / "summary.md"
    report.write_text(_page(title, sections))
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


def compare_runs(run_dirs: list[Path], out: Path | None = None) -> list[Path]:
    """The comparison report of analyzed runs (by default beside the first, named after them all); refuses a
    run given twice and runs whose modelled time was dilated differently."""
    # every run's manifest is checked before any run's tables are read
    dirs, dilations = {}, {}
    for run_dir in run_dirs:
        run = read_manifest(run_dir)
        run_id = run["run_id"]
        if run_id in dirs:
            raise RunDirError(f"run {run_id} is given twice ({run_dir} and an earlier argument); give each run once")
        dirs[run_id] = run_dir
        dilations[run_id] = (run.get("tiers_fidelity") or {}).get("dilation") or 1.0
    if len(set(dilations.values())) > 1:
        each = ", ".join(f"{run_id} {k:g}x" for run_id, k in dilations.items())
        raise RunDirError(f"these runs' modelled time was dilated differently ({each}), so their times cannot be "
                          "compared; run them on tiers brought up with the same tiers_dilation")
    out = out or run_dirs[0].parent / ("compare_" + "__".join(dirs))[:200]
    return write_comparison_report(out, {run_id: read_tables(run_dir) for run_id, run_dir in dirs.items()})


def write_comparison_report(out_dir: Path, runs: dict[str, dict[str, pd.DataFrame]]) -> list[Path]:
    """runs: label (run id) -> its tables. Side by side per query: time, I/O time, sequential %, RA, category,
    the requests in flight on the tier that served most of them (while it was busy), and how its plan read each
    table (so that runs of different engines, plans or degrees of parallelism show why their patterns differ);
    per sysbench test its transactions per second and latency."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    for label, tables in runs.items():
        metrics = tables["query_metrics"]
        queries = tables["queries"][tables["queries"]["status"] == "ok"].groupby("query")["elapsed_s"].median()
        per_query = pd.DataFrame({"elapsed_s": queries})
        if not metrics.empty:
            per_query = per_query.join(metrics.groupby("query")[["io_time_s", "sequential_pct", "repeat_access_rate"]].median())
            per_query = per_query.join(metrics.groupby("query")["category"].first())
        tiers = tables.get("tier_metrics", pd.DataFrame())
        if not tiers.empty:
            busiest = tiers.loc[tiers.groupby(["query", "try"])["requests"].idxmax()]
            per_query = per_query.join(busiest.groupby("query")["inflight_mean"].median())
        if not tables["plan_accesses"].empty:
            per_query = per_query.join(pd.Series(plan_summary(tables["plan_accesses"]), name="plan"))
        if "throughput" in tables:
            per_query = per_query.join(tables["throughput"].groupby("query")[["tps", "latency_pct_ms"]].median())
        frames.append(per_query.assign(run=label))
    side = pd.concat(frames).reset_index().rename(columns={"index": "query"})
    times = side.pivot(index="query", columns="run", values="elapsed_s")[list(runs)]
    title = "tierlab comparison: " + ", ".join(runs)
    (out_dir / "compare.csv").write_text(side.to_csv(index=False, float_format="%.6g"))
    html_sections = ["<p>" + "<br>".join(html.escape(label) for label in runs) + "</p>",
                     plot_time_per_layout(times), "<h2>Side by side</h2>", _html_table(side.sort_values(["query", "run"]))]
    (out_dir / "report.html").write_text(_page(title, html_sections))
    (out_dir / "summary.md").write_text(f"# {title}\n\n## Elapsed seconds\n\n{_md_table(times.reset_index())}\n\n"
                                        f"## Side by side\n\n{_md_table(side.sort_values(['query', 'run']))}\n")
    return [out_dir / "report.html", out_dir / "summary.md", out_dir / "compare.csv"]


def plot_capacity_curves(result: dict) -> str:
    """The best placement's and the LRU cache's predicted time against the fast tier's capacity."""
    curve, cache = pd.DataFrame(result["capacity_curve"]), pd.DataFrame(result["cache_curve"])
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.step(curve["capacity_bytes"] / 2**20, curve["predicted_s"], where="post", marker="o", label="best placement")
    for row in curve.itertuples(index=False):
        ax.annotate(row.layout, (row.capacity_bytes / 2**20, row.predicted_s), fontsize=7,
                    xytext=(3, 3), textcoords="offset points")
    ax.plot(cache["capacity_bytes"] / 2**20, cache["admitting_predicted_s"], marker="s",
            label="block cache (admitting as dm-cache, bcache)")
    ax.plot(cache["capacity_bytes"] / 2**20, cache["lru_predicted_s"], marker="^", linestyle="--",
            label="ideal LRU cache (every page admitted)")
    ax.axvline(result["fast_capacity_bytes"] / 2**20, color="#999", linestyle=":", label="capacity asked")
    ax.set_xlabel("fast tier (MiB)")
    ax.set_ylabel("predicted workload time (s)")
    ax.legend(fontsize=8)
    ax.set_title("Placement against caching, by fast-tier capacity")
    return _svg(fig)


def write_recommend_report(out_dir: Path, result: dict, summary_text: str) -> Path:
    """recommend's answer as a page: the advice, the curves plotted and tabled, the evidence, the assumptions."""
    evidence = pd.DataFrame(result["evidence"])
    sections = [f"<pre>{html.escape(summary_text.split(chr(10) + chr(10))[0])}</pre>", plot_capacity_curves(result),
                "<h2>Capacity curve</h2>", _html_table(pd.DataFrame(result["capacity_curve"])),
                "<h2>Placement against caching</h2>", _html_table(pd.DataFrame(result["cache_curve"])),
                "<h2>Evidence</h2>", _html_table(evidence),
                "<h2>Assumptions</h2><ul>" + "".join(f"<li>{html.escape(a)}</li>" for a in result["assumptions"]) + "</ul>"]
    path = out_dir / "report.html"
    path.write_text(_page(f"tierlab recommend: {result['layout']} for {result['fast_capacity_bytes'] / 2**20:.0f} MiB "
                          "of fast tier", sections))
    return path


def plot_cache_validation(table: pd.DataFrame) -> str:
    """validate's caches, a row of panels per query: each cache's measured time and hit share (bars) beside
    the predicted ones (the median over the runs without a cache, their range as error bars)."""
    queries = list(dict.fromkeys(table["query"]))
    fig, axes = plt.subplots(len(queries), 2, figsize=(11, 3 * len(queries)), squeeze=False)
    for row, query in zip(axes, queries, strict=True):
        caches = table[table["query"] == query].groupby(["fast_cache", "policy"], sort=False)
        labels = [f"{size} {policy}" for size, policy in caches.groups]
        positions = np.arange(len(labels))
        for ax, (predicted, measured, unit) in zip(row, (("predicted_s", "measured_s", "elapsed (s)"),
                                                         ("predicted_hit_pct", "measured_hit_pct", "reads hit (%)")),
                                                   strict=True):
            middle, low, high = caches[predicted].median(), caches[predicted].min(), caches[predicted].max()
            ax.bar(positions - 0.2, caches[measured].median(), 0.4, label="measured")
            ax.errorbar(positions + 0.2, middle, yerr=[middle - low, high - middle], fmt="o", capsize=3,
                        label="predicted")
            ax.set_xticks(positions, labels, fontsize=8)
            ax.set_ylabel(unit)
            ax.set_ylim(bottom=0)
            ax.set_title(query, fontsize=9)
            ax.legend(fontsize=7)
    fig.tight_layout()
    return _svg(fig)


def plot_layout_validation(table: pd.DataFrame) -> str:
    """validate's layouts, a panel per query (and combination of the study's other variables), fastest measured
    first: each layout's measured median (its runs' range as error bars) beside its predicted median (the
    range over the traced runs as error bars)."""
    # the columns before the layout's are the query's and the other variables'
    panels = list(table.groupby(list(table.columns[:table.columns.get_loc("layout")]), sort=False))
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 3 * len(panels)), squeeze=False)
    for (key, rows), (ax,) in zip(panels, axes, strict=True):
        positions = np.arange(len(rows))
        for offset, (middle, low, high), label in (
                (-0.2, ("measured_s", "measured_min_s", "measured_max_s"), "measured (runs' range)"),
                (0.2, ("predicted_s", "predicted_min_s", "predicted_max_s"), "predicted (traced runs' range)")):
            ax.errorbar(positions + offset, rows[middle], yerr=[rows[middle] - rows[low], rows[high] - rows[middle]],
                        fmt="o", capsize=3, label=label)
        ax.set_xticks(positions, rows["layout"], fontsize=8, rotation=45)
        ax.set_ylabel("elapsed (s)")
        ax.set_ylim(bottom=0)
        ax.set_title(" ".join(str(k) for k in key), fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _svg(fig)


def write_validation_report(study_dir: Path, study: dict, layouts: pd.DataFrame | None,
                            layout_errors: pd.DataFrame | None, caches: pd.DataFrame | None) -> Path:
    """validate's answer as a page: the layouts' ranks and regret, each layout's predicted and measured times
    plotted, the caches' times and hit shares plotted, each from every traced run of the study."""
    sections = []
    if layouts is not None:
        sections += ["<h2>Layouts: predicted against measured</h2>", _html_table(layouts.drop(columns="run_id")),
                     "<h2>Each layout: its runs and its predictions</h2>", plot_layout_validation(layout_errors),
                     _html_table(layout_errors)]
    if caches is not None:
        sections += ["<h2>Caches: predicted against measured</h2>", plot_cache_validation(caches),
                     _html_table(caches.drop(columns="run_id"))]
    path = study_dir / "validation.html"
    path.write_text(_page(f"tierlab validate: study {study['name']}", sections))
    return path


def plot_setting(setting: str, context: str, step: str, rows: pd.DataFrame) -> str:
    """A setting's figure against its values (median, with the repetitions' spread as error bars)."""
    fig, ax = plt.subplots(figsize=(5.5, 3))
    spread = rows["figure"] * rows["spread_pct"].fillna(0) / 200
    ax.errorbar(rows["value"].astype(str), rows["figure"], yerr=spread, marker="o", capsize=3)
    for row in rows[rows["verdict"] != ""].itertuples():
        ax.annotate(row.verdict, (str(row.value), row.figure), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.set_xlabel(setting)
    ax.set_ylabel(rows["unit"].iloc[0])
    ax.set_ylim(bottom=0)
    ax.set_title(f"{step}: {context}", fontsize=9)
    return _svg(fig)


def write_advice_report(out_dir: Path, study: dict, advice: pd.DataFrame, lines: list[str]) -> list[Path]:
    """advise's statements, a plot of each setting's figure against its values, and the table behind them."""
    title = f"tierlab advice from study {study['name']}"
    sections = ["<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"]
    for (setting, context, step), rows in advice.groupby(["setting", "context", "step"], sort=False):
        sections += [f"<h2>{html.escape(setting)}: {html.escape(str(step))} ({html.escape(context)})</h2>",
                     plot_setting(setting, context, str(step), rows), _html_table(rows.drop(columns=["setting"]))]
    report, summary = out_dir / "report.html", out_dir / "summary.md"
    report.write_text(_page(title, sections))
    summary.write_text(f"# {title}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n\n"
                       + _md_table(advice.drop(columns=["runs"])) + "\n")
    return [report, summary]


def plot_device_curves(jobs: pd.DataFrame, sustained: pd.DataFrame) -> str:
    """The device suite's curves, a row of panels per tier: 4 KiB latency at QD1 as a distribution, random
    read and write bandwidth against queue depth per request size, read latency against the share of writes,
    and the sustained writes' bandwidth over time."""
    tiers = list(dict.fromkeys(jobs["tier"]))
    fig, axes = plt.subplots(len(tiers), 4, figsize=(15, 3.2 * len(tiers)), squeeze=False)
    percentiles = [c for c in jobs.columns if c.startswith("p") and c[1:].replace(".", "").isdigit()]
    for row, tier in zip(axes, tiers, strict=True):
        mine = jobs[jobs["tier"] == tier]
        for job in mine[mine["kind"] == "latency"].to_dict("records"):
            row[0].plot([job[p] for p in percentiles], [float(p[1:]) for p in percentiles], marker=".",
                        label=job["rw"])
        row[0].set_xscale("log")
        row[0].set_xlabel("latency (us)")
        row[0].set_ylabel(f"{tier}: percentile")
        row[0].legend(fontsize=7)
        row[0].set_title("4 KiB at QD1", fontsize=9)
        grid = mine[mine["kind"] == "bandwidth"]
        for (rw, block), line in grid.groupby(["rw", "block_bytes"], sort=False):
            row[1].plot(line["iodepth"], line["mb_s"], marker="o", linestyle="-" if rw == "randread" else "--",
                        label=f"{rw} {block // 1024} KiB")
        row[1].set_xscale("log", base=2)
        row[1].set_xlabel("queue depth")
        row[1].set_ylabel("MB/s")
        row[1].legend(fontsize=6)
        row[1].set_title("bandwidth against queue depth", fontsize=9)
        mixed = mine[(mine["kind"] == "mixed") & (mine["side"] == "read")]
        row[2].plot(mixed["write_pct"], mixed["p50"], marker="o", label="p50")
        row[2].plot(mixed["write_pct"], mixed["p99"], marker="^", label="p99")
        row[2].set_xlabel("writes (%)")
        row[2].set_ylabel("read latency (us)")
        row[2].legend(fontsize=7)
        row[2].set_title("4 KiB random reads among writes, QD4", fontsize=9)
        log = sustained[sustained["tier"] == tier]
        row[3].plot(log["t_s"], log["mb_s"])
        row[3].set_xlabel("seconds")
        row[3].set_ylabel("MB/s")
        row[3].set_ylim(bottom=0)
        row[3].set_title("sustained 128 KiB writes, QD32", fontsize=9)
    fig.tight_layout()
    return _svg(fig)


def write_devices_report(run_dir: Path, result: dict, fitted: dict[str, dict]) -> Path:
    """The device suite as a page: the curves, each tier's fitted profile (beside its model's, for an
    emulated tier), the small and misaligned requests, how the fit was made."""
    from . import device_fit

    jobs = device_fit.job_rows(result)
    sections = [f"<p>Measured {html.escape(result['measured_at'])}: {result['runtime_s']} s per job, sustained "
                f"writes {result['sustained_s']} s, on a {result['scratch_bytes'] >> 20} MiB scratch file per tier "
                "(O_DIRECT, libaio). The curves and the small reads' table are as measured, in the host's time; the "
                "profiles are in the model's time (each tier's dilation taken out).</p>",
                plot_device_curves(jobs, device_fit.sustained_rows(result))]
    for tier in result["tiers"]:
        values = fitted[tier["name"]]
        table = (device_fit.comparison(tier, values) if tier.get("profile")
                 else pd.DataFrame({"parameter": list(values), "fitted": list(values.values())}))
        sections += [f"<h2>{html.escape(tier['name'])} ({html.escape(tier['role'])} tier, dilation "
                     f"{tier['dilation']}): profiles/{html.escape(tier['name'])}.toml</h2>", _html_table(table)]
    odd = jobs[jobs["kind"].isin(["small", "misaligned", "latency"]) & (jobs["rw"] == "randread")]
    sections += ["<h2>Small and misaligned reads (QD1)</h2>",
                 _html_table(odd[["tier", "kind", "block_bytes", "align_bytes", "iops", "mean_us", "p50", "p99"]]),
                 "<h2>How each parameter is fitted</h2><pre>" + html.escape(device_fit.__doc__) + "</pre>"]
    path = run_dir / "report.html"
    path.write_text(_page(f"tierlab devices: {', '.join(t['name'] for t in result['tiers'])}", sections))
    return path
