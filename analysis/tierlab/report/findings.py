"""The findings page (`tierlab findings`): findings.md and findings.html, per experiment of docs/experiments.md,
from the studies' tables in findings/ (studies/findings.py) alone, so that the page is written again, the same,
from the committed tables."""

import html
from pathlib import Path

import pandas as pd

from ..studies import cache_against_placement
from ..studies.findings import EXPERIMENTS, read_gathered, study_findings
from .compare import plot_per_query
from .page import html_table, md_table, page

TITLE = "tierlab findings"
INTRO = ("Written by `tierlab findings` from the tables under `findings/` beside this page (one directory per study, "
         "the runs reduced to a few KB); `tierlab findings` with no study directory writes this page again from them. "
         "Runs on emulated tiers are dilated: their times are the modelled devices' stretched by the dilation "
         "the setup names, so ratios between tiers carry over and absolute times do not (docs/metrics.md, "
         "\"Dilation\"). Each figure is the median over the point's runs; the least and most of their tries "
         "follow in brackets. `docs/experiments.md` has each experiment's design.")
# an experiment without findings yet: how to run it
NOT_RUN = {"E6": "No device suite has findings yet: `make findings` runs `playbooks/devices.yml` (fio on each tier) "
                 "into results/findings/e6/, and `tierlab findings results/devices_<time>_<host>` publishes a device "
                 "suite's results directory as E6's findings; every run's tables/contract.csv judges its queries by "
                 "the contract's rules."}
NOT_RUN_STUDIES = "No study of this experiment has findings yet; `make findings` runs its study files (docs/studies)."
CACHE_AGAINST_PLACEMENT = (
    "The cache against the best placement that fits",
    "Each E3 cache size against the fastest of E2's measured layouts whose tables fit in it (sized as E3's runs "
    "stored them), for the queries both studies timed on the same engine, scale factor and buffer pool. Both are "
    "speedups over their own study's run with nothing on the fast tier (their tiers may be dilated differently), "
    "with their least and most over the runs; one side is faster only where its least stays above the other's "
    "most, a tie otherwise.")


def _sections(found: dict) -> list[tuple[str, list[str]]]:
    """A study's findings as (heading, lines) in the page's order; the figures table and runs apart."""
    return [(heading, lines) for heading, lines in (
        ("Answer", found["answers"]), ("Engines apart, with their plans", found["contrasts"]),
        ("Advice (tierlab advise)", found["advice"]), ("Advice (tierlab recommend)", found["recommend"]),
        ("recommend's predictions against the measurements (tierlab validate)", found["validation"]),
        ("Not answered", found["unanswered"])) if lines]


def _across(experiment: str, gathered: list[dict]) -> list[tuple[str, str, list[str], pd.DataFrame]]:
    """What an experiment's studies say together, beside other experiments' studies: (heading, what it is,
    sentences, table)."""
    if experiment != "E3":
        return []
    compared = cache_against_placement.cache_against_placement(gathered)
    if compared.empty:
        return []
    return [(*CACHE_AGAINST_PLACEMENT, cache_against_placement.lines(compared),
             cache_against_placement.display(compared))]


def _markdown(experiments: list[tuple[tuple, list[dict]]], gathered: list[dict]) -> str:
    parts = [f"# {TITLE}\n\n{INTRO}\n"]
    for (key, title, question, _), studies in experiments:
        parts.append(f"\n## {key}. {title}\n\n**Question.** {question}\n")
        if not studies:
            parts.append(f"\n{NOT_RUN.get(key, NOT_RUN_STUDIES)}\n")
        for found in studies:
            parts.append(f"\n### {found['name']}\n\n**Setup.** {found['setup']}\n")
            for heading, lines in _sections(found):
                parts.append(f"\n**{heading}.**\n\n" + "".join(f"- {line}\n" for line in lines))
            if not found["table"].empty:
                parts.append(f"\n**Figures.**\n\n{md_table(found['table'])}\n")
            parts.append(f"\n**Runs.**\n\n{md_table(found['runs'])}\n")
        for heading, about, lines, table in _across(key, gathered):
            parts.append(f"\n### {heading}\n\n{about}\n\n" + "".join(f"- {line}\n" for line in lines)
                         + f"\n{md_table(table)}\n")
    return "".join(parts)


def _html(experiments: list[tuple[tuple, list[dict]]], gathered: list[dict]) -> str:
    sections = [f"<p>{html.escape(INTRO)}</p>"]
    for (key, title, question, _), studies in experiments:
        sections.append(f"<h2>{key}. {html.escape(title)}</h2><p><b>Question.</b> {html.escape(question)}</p>")
        if not studies:
            sections.append(f"<p class='note'>{html.escape(NOT_RUN.get(key, NOT_RUN_STUDIES))}</p>")
        for found in studies:
            sections.append(f"<h3>{html.escape(found['name'])}</h3>"
                            f"<p><b>Setup.</b> {html.escape(found['setup'])}</p>")
            for heading, lines in _sections(found):
                sections.append(f"<p><b>{html.escape(heading)}.</b></p><ul>"
                                + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>")
            unit = "tps" if found["unit"] == "tps" else "elapsed (s)"
            sections += [plot_per_query(figures, unit, f"{found['name']}: {where}, by {found['compared']}")
                         for where, figures in found["plots"]]
            if not found["table"].empty:
                sections.append(html_table(found["table"]))
            sections.append(f"<details><summary>Runs</summary>{html_table(found['runs'])}</details>")
        for heading, about, lines, table in _across(key, gathered):
            sections += [f"<h3>{html.escape(heading)}</h3><p>{html.escape(about)}</p><ul>"
                         + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>", html_table(table)]
    return page(TITLE, sections)


def write_findings_page(findings_dir: Path, out_dir: Path) -> list[Path]:
    """out_dir/findings.md and findings.html from every study's tables under findings_dir."""
    gathered = read_gathered(findings_dir)
    found = [study_findings(tables) for tables in gathered]
    experiments = [(experiment, [f for f in found if f["experiment"] == experiment[0]]) for experiment in EXPERIMENTS]
    others = [f for f in found if not f["experiment"]]
    if others:
        experiments.append((("Other", "Other studies", "What the studies outside the experiments found.", ()), others))
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "findings.md", out_dir / "findings.html"]
    written[0].write_text(_markdown(experiments, gathered))
    written[1].write_text(_html(experiments, gathered))
    return written

