"""The pages of recommend (the capacity curves) and validate (layouts and caches, predicted against measured)."""

import html
from pathlib import Path

import numpy as np
import pandas as pd

from .page import html_table, page, plt, svg


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
    return svg(fig)


def write_recommend_report(out_dir: Path, result: dict, summary_text: str) -> Path:
    """recommend's answer as a page: the advice, the curves plotted and tabled, the evidence, the assumptions."""
    evidence = pd.DataFrame(result["evidence"])
    sections = [f"<pre>{html.escape(summary_text.split(chr(10) + chr(10))[0])}</pre>", plot_capacity_curves(result),
                "<h2>Capacity curve</h2>", html_table(pd.DataFrame(result["capacity_curve"])),
                "<h2>Placement against caching</h2>", html_table(pd.DataFrame(result["cache_curve"])),
                "<h2>Evidence</h2>", html_table(evidence),
                "<h2>Assumptions</h2><ul>" + "".join(f"<li>{html.escape(a)}</li>" for a in result["assumptions"]) + "</ul>"]
    path = out_dir / "report.html"
    path.write_text(page(f"tierlab recommend: {result['layout']} for {result['fast_capacity_bytes'] / 2**20:.0f} MiB "
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
    return svg(fig)


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
    return svg(fig)


def write_validation_report(study_dir: Path, study: dict, layouts: pd.DataFrame | None,
                            layout_errors: pd.DataFrame | None, caches: pd.DataFrame | None) -> Path:
    """validate's answer as a page: the layouts' ranks and regret, each layout's predicted and measured times
    plotted, the caches' times and hit shares plotted, each from every traced run of the study."""
    sections = []
    if layouts is not None:
        sections += ["<h2>Layouts: predicted against measured</h2>", html_table(layouts.drop(columns="run_id")),
                     "<h2>Each layout: its runs and its predictions</h2>", plot_layout_validation(layout_errors),
                     html_table(layout_errors)]
    if caches is not None:
        sections += ["<h2>Caches: predicted against measured</h2>", plot_cache_validation(caches),
                     html_table(caches.drop(columns="run_id"))]
    path = study_dir / "validation.html"
    path.write_text(page(f"tierlab validate: study {study['name']}", sections))
    return path
