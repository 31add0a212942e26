"""The lead of a run's report, the answer before the tables: where the run's I/O time goes (the objects that hold
most of it, charted), what on the capacity tier holds the most of it per GiB, and the caveats the run itself
gives, each with its evidence."""

import html
import math
import re

import pandas as pd

from ..runs.manifest import tiers_dilation, tiers_fidelity
from ..runs.observing import OBSERVED
from ..runs.results import cut_traces
from ..runs.settings import human_bytes
from ..traces.stats import suspect
from .objects import OTHER, capacity_candidates, object_io
from .page import fmt, html_table, md_table, plt, svg

# the lead names the top objects until they hold this share of the objects' I/O time, and at most NAMED_MAX of them
NAMED_PCT = 80.0
NAMED_MAX = 5
# the chart's bars and the lead's table rows: enough for the objects that matter, few enough to read
CHARTED = 15
# the candidates the lead lists; the objects section has them all
CANDIDATES_LISTED = 5
# above this share, the requests of no object are a part of the I/O that the objects' ranking does not hold
OTHER_CAVEAT_PCT = 5.0
# the steps or windows a caveat names before it counts the rest
NAMED_IN_CAVEAT = 5
NO_CAVEATS = (f"None: every trace whole, every step ok, the requests of no object at most {OTHER_CAVEAT_PCT:g}% of the "
              "I/O time, the tiers real or faithful, every step tried more than once.")
TIER_COLOURS = {"fast": "#4c78a8", "capacity": "#f58518"}


def _pct(value: float) -> str:
    if 0 < value < 0.05:
        return "under 0.1%"
    return f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"


def _seconds(value: float) -> str:
    return f"{fmt(value)} s"


def _named(items: list[str], separator: str = ", ") -> str:
    """The first NAMED_IN_CAVEAT items, then how many more."""
    more = len(items) - NAMED_IN_CAVEAT
    return separator.join(items[:NAMED_IN_CAVEAT]) + (f"{separator}and {more} more" if more > 0 else "")


def _sentence(text: str) -> str:
    return text[0].upper() + text[1:] + "."


def _objects(count: int, which: str) -> str:
    return f"the {which} object" if count == 1 else f"the {count} {which} objects"


def _on_tier(tier: str, roles: dict[str, str]) -> str:
    return f"{tier} ({roles[tier]} tier)" if tier in roles else tier


def _paragraph(lines: list[str]) -> str:
    """Lines as an HTML paragraph, a command between backquotes as code (Markdown's way)."""
    return "<p>" + re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(" ".join(lines))) + "</p>"


def tier_roles(manifest: dict) -> dict[str, str]:
    """Each tier's role (fast, capacity) by its name, as the tables name tiers."""
    return {t["name"]: t["role"] for t in manifest.get("tiers", []) if t.get("role")}


def where_time_goes(objects: pd.DataFrame, roles: dict[str, str], steps: int, dilation: float | None) -> list[str]:
    """The lead's answer: the run's I/O time, the objects that hold most of it with their tier and dominant
    pattern, and what the rest and the requests of no object hold."""
    if objects.empty:
        return ["No step of this run has traced requests (tables/table_metrics.csv is empty): there is no I/O time "
                "to share out."]
    dilated = f", on tiers dilated {dilation:g}x" if dilation and dilation > 1 else ""
    total = objects["io_time_s"].sum()
    ranked = objects[objects["object"].ne(OTHER)]
    # the top objects, until they hold NAMED_PCT of the objects' time (the requests of no object are said apart,
    # however much they hold): the one that crosses it is named too
    held_before = ranked["share_pct"].cumsum().shift(fill_value=0)
    named = ranked[held_before < NAMED_PCT / 100 * ranked["share_pct"].sum()].head(NAMED_MAX)
    parts = [f"{row.object} on {_on_tier(row.tier, roles)}: {_pct(row.share_pct)} ({_seconds(row.io_time_s)}), "
             f"{row.pattern} ({_pct(row.pattern_pct)} of its time)" for row in named.itertuples()]
    lines = [f"The run's {steps} step{'s' if steps > 1 else ''} spent {_seconds(total)} in I/O, summed over the "
             f"objects {'they' if steps > 1 else 'it'} read and wrote (each object's time with a request in flight, "
             f"measured{dilated})."]
    if parts:
        lines.append("Most of it went to " + "; then ".join(parts) + ".")
    rest = ranked.iloc[len(named):]
    other = objects[objects["object"].eq(OTHER)]["share_pct"].sum()
    tail = []
    if len(rest):
        tail.append(f"{_objects(len(rest), 'other')} {'hold' if len(rest) > 1 else 'holds'} "
                    f"{_pct(rest['share_pct'].sum())}")
    if other > 0:
        tail.append(f"requests of no object ({OTHER}) {_pct(other)}")
    if tail:
        lines.append(_sentence("; ".join(tail)))
    return lines


def _fast_capacity(candidates: pd.DataFrame, layout: dict) -> str:
    """The fast-tier size for recommend to try: what the fast tier holds now and the candidates' tables, in whole
    MiB (the bytes on the devices, as recommend counts them); SIZE where the layout does not give them."""
    tables = layout.get("tables", {})
    if candidates["table"].isna().any():
        return "SIZE"
    wanted = {t for t, entry in tables.items() if entry.get("tier") == "fast"} | set(candidates["table"])
    sizes = [tables[t].get("stored_bytes", tables[t].get("size_bytes")) for t in wanted]
    if None in sizes:
        return "SIZE"
    return f"{math.ceil(sum(sizes) / 2**20)}M"


def what_to_move(objects: pd.DataFrame, roles: dict[str, str], layout: dict, run_id: str, options: str = ""
                 ) -> tuple[list[str], pd.DataFrame]:
    """The capacity tier's objects with the most I/O time per GiB (capacity_candidates) in words and as a table,
    with the recommend command (and its options) that predicts what moving them gains."""
    capacity = {tier for tier, role in roles.items() if role == "capacity"}
    if not capacity:
        return ["No tier of this run has the capacity role: there is nothing to move to a fast tier."], pd.DataFrame()
    candidates = capacity_candidates(objects, capacity, layout)
    on_capacity = objects[objects["tier"].isin(capacity) & objects["object"].ne(OTHER)]
    if candidates.empty:
        return [f"No object on the capacity tier holds {_pct(1.0)} of the I/O time or more; together they hold "
                f"{_pct(on_capacity['share_pct'].sum())}."], candidates
    listed = candidates.head(CANDIDATES_LISTED)
    parts = [f"{row.object} ({_seconds(row.io_time_s)}, {_pct(row.share_pct)}"
             + (f", {fmt(row.io_s_per_gib)} s per GiB of its {human_bytes(row.size_bytes)})"
                if not math.isnan(row.size_bytes) else ", size unknown)")
             for row in listed.itertuples()]
    unsized = " (those of unknown size after them, by their I/O time)" if listed["size_bytes"].isna().any() else ""
    lines = [f"On the capacity tier, the objects that hold the most I/O time per GiB{unsized}: " + "; ".join(parts) + "."]
    left = on_capacity[~on_capacity["object"].isin(listed["object"])]
    if len(left):
        lines.append(_sentence(f"{_objects(len(left), 'other')} there {'hold' if len(left) > 1 else 'holds'} "
                               f"{_pct(left['share_pct'].sum())}"))
    lines.append(f"`tierlab recommend results/{run_id} --fast-capacity {_fast_capacity(listed, layout)}{options}` predicts the "
                 "time of the best layout for a fast tier that holds what it holds now and these objects' tables, "
                 "and its capacity curve other sizes: the gain is its prediction; this report computes none.")
    return lines, listed


def _trace_caveats(queries: pd.DataFrame, trace_counts: pd.DataFrame) -> list[str]:
    """Windows whose trace was cut short, and windows whose counts say the trace lost or skipped something."""
    found = []
    cut = [f"{query} try {attempt}" for query, attempt in cut_traces(queries)] if "trace_complete" in queries else []
    if cut:
        found.append(f"The traces of {_named(cut)} were cut short (no end marker): their figures miss the requests "
                     "after the cut (tables/queries.csv, trace_complete).")
    suspects = [f"{row['query']} try {row['try']}: {', '.join(problems)}" for row in trace_counts.to_dict("records")
                if (problems := suspect({key: value for key, value in row.items() if pd.notna(value)}))]
    if suspects:
        found.append(f"Suspect traces: {_named(suspects, '; ')} (tables/trace_counts.csv).")
    return found


def _run_caveats(manifest: dict, queries: pd.DataFrame) -> list[str]:
    """Steps that did not end ok, emulated tiers that were not faithful, steps tried once."""
    found = []
    failed = queries[queries["status"] != "ok"]
    if len(failed):
        steps = [f"{query} try {attempt} ({status})"
                 for query, attempt, status in zip(failed["query"], failed["try"], failed["status"], strict=True)]
        found.append(f"{_named(steps)} did not end ok: the run's figures miss what {'it' if len(steps) == 1 else 'they'} "
                     "would have read and written (tables/queries.csv, status and error).")
    fidelity = tiers_fidelity(manifest.get("tiers", []), manifest.get("tiers_check"))
    if fidelity["verdict"] not in (None, "faithful"):
        unfaithful = ", ".join(f"{tier} {verdict}" for tier, verdict in fidelity["tiers"].items() if verdict != "faithful")
        found.append(f"The emulated tiers of this run were {fidelity['verdict']} ({unfaithful}): their measured "
                     "contrasts differ from the device models' by more than 20%, so times on them do not stand for "
                     "the modelled devices; \"Tiers' fidelity\" gives the reasons (manifest.json, tiers_fidelity).")
    tries = queries.groupby("query", sort=False)["try"].nunique()
    once = list(tries[tries == 1].index)
    # an observation's steps are intervals of the instance's own time: each is had once
    if once and manifest.get("workload", {}).get("name") != OBSERVED:
        steps = "Every step" if len(once) == len(tries) else _named(once)
        found.append(f"{steps} ran once: nothing shows how much {'its' if len(once) == 1 else 'their'} figures vary "
                     "from try to try (tables/queries.csv).")
    return found


def caveats(manifest: dict, queries: pd.DataFrame, trace_counts: pd.DataFrame, objects: pd.DataFrame) -> list[str]:
    """What the run itself says its figures miss or may not stand for, each with its evidence file."""
    found = _trace_caveats(queries, trace_counts)
    other = objects[objects["object"].eq(OTHER)]["share_pct"].sum() if not objects.empty else 0.0
    if other > OTHER_CAVEAT_PCT:
        found.append(f"{_pct(other)} of the I/O time is of requests of no object ({OTHER}: logs, temporary files, "
                     "the system tablespace, or files the extent map missed), which the objects' ranking does not "
                     "hold (tables/table_metrics.csv).")
    return found + _run_caveats(manifest, queries)


def recommend_options(manifest: dict) -> str:
    """What recommend needs beyond a capacity for this run: device profiles where a tier has no model (real devices),
    and for an observed instance where its migration puts the fast tier's objects."""
    options = ""
    if any(not (tier.get("profile") or {}).get("text") for tier in manifest.get("tiers", [])):
        options += " --profiles fast=PROFILE,capacity=PROFILE"
    if manifest.get("workload", {}).get("name") == OBSERVED:
        options += " --fast-location DIR"
    return options


def observation_caveats(tables: dict[str, pd.DataFrame]) -> list[str]:
    """An observation's own warnings, and the tracing's cost it measured on the instance's traffic."""
    found = [_sentence(f"{row['warning']} ({row['evidence']})")
             for row in tables.get("observation_warnings", pd.DataFrame()).to_dict("records")]
    for row in tables.get("observation", pd.DataFrame()).to_dict("records"):
        if pd.notna(row["overhead_pct"]):
            found.append(f"Tracing cost the instance {row['overhead_pct']:.1f}% of its rate of work, measured on its "
                         f"own traffic in {int(row['untraced_intervals'])} untraced interval(s) against their traced "
                         "neighbours; a negative figure is the traffic's own variation (tables/observation.csv).")
    return found


def plot_top_objects(objects: pd.DataFrame, roles: dict[str, str]) -> str:
    """The objects with the most I/O time as horizontal bars, the most at the top, coloured by their tier."""
    ranked = objects[objects["object"].ne(OTHER)]
    top = ranked.head(CHARTED).iloc[::-1]
    fig, ax = plt.subplots(figsize=(7, 0.9 + 0.28 * len(top)))
    colours = [TIER_COLOURS.get(roles.get(tier), "#999") for tier in top["tier"]]
    ax.barh(top["object"] + " (" + top["tier"] + ")", top["io_time_s"], color=colours)
    for position, row in enumerate(top.itertuples()):
        ax.annotate(_pct(row.share_pct), (row.io_time_s, position), fontsize=7, xytext=(3, 0),
                    textcoords="offset points", va="center")
    for tier in dict.fromkeys(top["tier"][::-1]):
        ax.bar(0, 0, color=TIER_COLOURS.get(roles.get(tier), "#999"), label=_on_tier(tier, roles))
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xlabel("I/O time summed over the steps (s)")
    ax.tick_params(axis="y", labelsize=8)
    title = (f"The {len(top)} objects by their I/O time" if len(top) == len(ranked) else
             f"The {len(top)} objects with the most I/O time, of {len(ranked)}")
    other = objects[objects["object"].eq(OTHER)]["share_pct"].sum()
    ax.set_title(f"{title} ({_pct(top['share_pct'].sum())} of it; requests of no object {_pct(other)})", fontsize=10)
    return svg(fig)


def shown(objects: pd.DataFrame) -> pd.DataFrame:
    """Objects or candidates as the report shows them: sizes in MiB."""
    return objects.rename(columns={"size_bytes": "size_mib"}).assign(size_mib=objects["size_bytes"] / 2**20)


def lead(manifest: dict, tables: dict[str, pd.DataFrame]) -> tuple[list[str], list[str], pd.DataFrame]:
    """The lead's HTML sections and Markdown lines, and the objects (object_io) the report's detail shows."""
    table_metrics, queries = tables["table_metrics"], tables["queries"]
    layout, roles = manifest.get("layout", {}), tier_roles(manifest)
    objects = object_io(table_metrics, layout) if not table_metrics.empty else pd.DataFrame()
    answer = where_time_goes(objects, roles, queries["query"].nunique(), tiers_dilation(manifest.get("tiers", [])))
    sections = ["<h2>Where the I/O time goes</h2>", _paragraph(answer)]
    md = ["## Where the I/O time goes", "", " ".join(answer), ""]
    if not objects.empty and objects["object"].ne(OTHER).any():
        move, candidates = what_to_move(objects, roles, layout, manifest.get("run_id", ""), recommend_options(manifest))
        sections += [plot_top_objects(objects, roles), "<h2>What to move</h2>", _paragraph(move)]
        md += [md_table(shown(objects.head(CHARTED))), "", "## What to move", "", " ".join(move), ""]
        if not candidates.empty:
            sections.append(html_table(shown(candidates)))
            md += [md_table(shown(candidates)), ""]
    found = caveats(manifest, queries, tables.get("trace_counts", pd.DataFrame()), objects) + observation_caveats(tables)
    sections.append("<h2>Caveats</h2>")
    md += ["## Caveats", ""]
    if found:
        sections.append("<ul class='warning'>" + "".join(f"<li>{html.escape(text)}</li>" for text in found) + "</ul>")
        md += [f"- {text}" for text in found] + [""]
    else:
        sections.append(f"<p>{html.escape(NO_CAVEATS)}</p>")
        md += [NO_CAVEATS, ""]
    return sections, md, objects
