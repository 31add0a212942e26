"""What every report page shares: matplotlib set up to draw SVG, the page's style, tables in HTML and Markdown."""

import html
import io

import matplotlib
import numpy as np
import pandas as pd

matplotlib.use("Agg")
# labels as text, not as glyph outlines: searchable in the report, and a third less time to draw
matplotlib.rcParams["svg.fonttype"] = "none"
# the same figure draws the same SVG (its element ids from this salt, no date), so a page written again from the
# same tables is the same file
matplotlib.rcParams["svg.hashsalt"] = "tierlab"
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import ticker  # noqa: E402

from ..catalog.values import figure  # noqa: E402

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


def log_x_axis(ax, base: int = 10) -> None:
    """A logarithmic x axis labelled with plain numbers (10, 100, 1000): matplotlib's default labels (10^2) are
    mathtext, whose parsing and fonts took 0.7 s of a tiny run's 3.6 s of analysis."""
    ax.set_xscale("log", base=base)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def svg(fig) -> str:
    # laid out as it is drawn, once: bbox_inches="tight" draws every figure twice
    fig.set_layout_engine("constrained")
    buffer = io.StringIO()
    fig.savefig(buffer, format="svg", metadata={"Date": None})
    plt.close(fig)
    text = buffer.getvalue()
    return f'<div class="plot">{text[text.index("<svg"):]}</div>'


def fmt(value) -> str:
    if isinstance(value, float | np.floating):
        return "" if np.isnan(value) else figure(value)
    return str(value)


def present(frame: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    return frame[[c for c in columns if c in frame.columns]]


def html_table(frame: pd.DataFrame) -> str:
    # a long column name may break after its underscores, so that a table of many columns fits the page's width
    head = "".join(f"<th>{html.escape(str(c)).replace('_', '_<wbr>')}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(fmt(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f"<div class='wide'><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"


def md_table(frame: pd.DataFrame) -> str:
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


def page(title: str, sections: list[str]) -> str:
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>{''.join(sections)}</body></html>")
