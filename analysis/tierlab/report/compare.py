"""Runs side by side (`tierlab compare`): compare.csv, report.html and summary.md."""

import html
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import RunDirError
from ..runs.results import per_query, read_manifest, read_tables
from .page import html_table, md_table, page, plt, svg


def plot_per_query(figures: pd.DataFrame, ylabel: str, title: str) -> str:
    """figures: index query, one column per run (or value) label."""
    fig, ax = plt.subplots(figsize=(max(6, 0.6 * len(figures)), 3.2))
    width = 0.8 / max(1, len(figures.columns))
    positions = np.arange(len(figures))
    for i, label in enumerate(figures.columns):
        ax.bar(positions + i * width, figures[label].to_numpy(), width, label=label)
    ax.set_xticks(positions + width * (len(figures.columns) - 1) / 2, figures.index, rotation=90, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.set_title(title)
    return svg(fig)


def compare_runs(run_dirs: list[Path], out: Path | None = None) -> tuple[list[Path], list[str]]:
    """The comparison report of analyzed runs (by default beside the first, named after them all), and what it
    warns of (version_differences); refuses a run given twice and runs whose modelled time was dilated
    differently."""
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
    warnings = version_differences({run_id: read_manifest(run_dir) for run_id, run_dir in dirs.items()})
    return write_comparison_report(out, {run_id: read_tables(run_dir) for run_id, run_dir in dirs.items()}, warnings), warnings


def version_differences(manifests: dict[str, dict]) -> list[str]:
    """What the runs ran with that differs where it should not: one engine at several versions, the host's
    kernel, tierlab itself. Runs of different engines are compared on purpose; their versions are not warned of."""
    found = {}
    for run_id, run in manifests.items():
        engine = run.get("engine", {})
        found.setdefault(f"{engine.get('name')} version", {}).setdefault(engine.get("version"), []).append(run_id)
        found.setdefault("kernel", {}).setdefault(run.get("host", {}).get("kernel"), []).append(run_id)
        found.setdefault("tierlab", {}).setdefault(run.get("versions", {}).get("tierlab"), []).append(run_id)
    return [f"the runs differ in {what}: " + "; ".join(f"{value} ({', '.join(runs)})" for value, runs in values.items())
            for what, values in found.items() if len(values) > 1]


def speedups(side: pd.DataFrame, first: str) -> pd.Series:
    """Each row's speed against the first run's for the same query or test (say everything on the capacity tier):
    4 is four times as fast as there. A query's by its time, a timed test's (whose time is its window) by its
    transactions per second; empty where the first run has no figure for it."""
    figure = "tps" if "tps" in side else "elapsed_s"
    base = side[side["run"] == first].set_index("query")[figure]
    ratio = side[figure] / side["query"].map(base) if figure == "tps" else side["query"].map(base) / side[figure]
    return ratio.replace([np.inf, -np.inf], np.nan)


def write_comparison_report(out_dir: Path, runs: dict[str, dict[str, pd.DataFrame]], warnings: list[str]) -> list[Path]:
    """runs: label (run id) -> its tables. Side by side per query: time, speedup over the first run, I/O time,
    sequential %, RA, category,
    the requests in flight on the tier that served most of them (while it was busy), and how its plan read each
    table (so that runs of different engines, plans or degrees of parallelism show why their patterns differ);
    per sysbench test its transactions per second and latency."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = [per_query(tables).assign(run=label) for label, tables in runs.items()]
    side = pd.concat(frames).reset_index().rename(columns={"index": "query"})
    times = side.pivot(index="query", columns="run", values="elapsed_s")[list(runs)]
    side.insert(side.columns.get_loc("elapsed_s") + 1, "speedup", speedups(side, next(iter(runs))))
    title = "tierlab comparison: " + ", ".join(runs)
    (out_dir / "compare.csv").write_text(side.to_csv(index=False, float_format="%.6g"))
    html_sections = ["<p>" + "<br>".join(html.escape(label) for label in runs) + "</p>",
                     *[f'<p class="warning">{html.escape(warning)}</p>' for warning in warnings],
                     plot_per_query(times, "elapsed (s)", "Time per query per run"),
                     "<h2>Side by side</h2>", html_table(side.sort_values(["query", "run"]))]
    (out_dir / "report.html").write_text(page(title, html_sections))
    (out_dir / "summary.md").write_text(f"# {title}\n\n" + "".join(f"**{warning}**\n\n" for warning in warnings)
                                        + f"## Elapsed seconds\n\n{md_table(times.reset_index())}\n\n"
                                        f"## Side by side\n\n{md_table(side.sort_values(['query', 'run']))}\n")
    return [out_dir / "report.html", out_dir / "summary.md", out_dir / "compare.csv"]
