"""The page of advise: each setting a study varies, plotted with its advice."""

import html
from pathlib import Path

import pandas as pd

from .page import html_table, md_table, page, plt, svg


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
    return svg(fig)


def write_advice_report(out_dir: Path, study: dict, advice: pd.DataFrame, lines: list[str]) -> list[Path]:
    """advise's statements, a plot of each setting's figure against its values, and the table behind them."""
    title = f"tierlab advice from study {study['name']}"
    sections = ["<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"]
    for (setting, context, step), rows in advice.groupby(["setting", "context", "step"], sort=False):
        sections += [f"<h2>{html.escape(setting)}: {html.escape(str(step))} ({html.escape(context)})</h2>",
                     plot_setting(setting, context, str(step), rows), html_table(rows.drop(columns=["setting"]))]
    report, summary = out_dir / "report.html", out_dir / "summary.md"
    report.write_text(page(title, sections))
    summary.write_text(f"# {title}\n\n" + "\n".join(f"- {line}" for line in lines) + "\n\n"
                       + md_table(advice.drop(columns=["runs"])) + "\n")
    return [report, summary]
