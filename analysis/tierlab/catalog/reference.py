"""The variables' reference (docs/variables.md, `tierlab variables`), written from the catalog's table."""

from .engines import ENGINES
from .variables import VARIABLES, Variable
from .workloads import WORKLOAD_DIR, WORKLOADS

HEADER = """# Variables

Set with `-e name=value` (or in a study file's `variables` and `matrix`). Every playbook checks them all before it
touches anything: a bad value fails with what was given and what is allowed, and a variable given for an engine or
a workload it does not apply to is refused, naming those it applies to. Left unset (or given empty), a variable
takes its default.

This page is written from tierlab's catalog (`analysis/tierlab/catalog/variables.py`) by `tierlab variables`; a
test fails when it is not current.
"""
SECTIONS = (
    ("Every run", lambda v: v.group == "run" and v.engines is None and v.workloads is None),
    ("Variables of some workloads only", lambda v: v.group == "run" and v.workloads is not None),
    ("Variables of some engines only", lambda v: v.group == "run" and v.engines is not None),
    ("Where results go", lambda v: v.group == "results"),
    ("How the tiers are made (for tiers of the inventory that do not say it themselves)", lambda v: v.group == "tiers"),
    ("Observing an instance tierlab did not start (playbooks/observe.yml, with `engine` and `trace_backend`)",
     lambda v: v.group == "observe"),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _default(variable: Variable) -> str:
    if variable.default is None:
        defaults = {}
        for engine in ENGINES.values():
            defaults.setdefault(variable.default_for(engine), []).append(engine.name)
        return "the engine's: " + "; ".join(f"`{value}` ({', '.join(names)})" for value, names in defaults.items())
    return f"`{variable.default}`" if variable.default else "(empty)"


def _applies(variable: Variable) -> str:
    scopes = []
    if variable.engines is not None:
        scopes.append("engine " + ", ".join(variable.engines))
    if variable.workloads is not None:
        scopes.append("workload " + ", ".join(variable.workloads))
    return "; ".join(scopes) or "every run"


def markdown() -> str:
    """The reference as Markdown: a table per section, each variable with its default, what it takes, where it
    applies and what it means."""
    lines = [HEADER]
    for title, belongs in SECTIONS:
        lines += [f"## {title}", "", "| variable | default | allowed | applies to | meaning |", "|---|---|---|---|---|"]
        lines += [f"| `{v.name}` | {_cell(_default(v))} | {_cell(v.kind.allowed)} | {_cell(_applies(v))} | {_cell(v.help)} |"
                  for v in VARIABLES if belongs(v)]
        lines.append("")
    lines += ["## Workloads", "", "| workload | playbook | kind | tables (layout codes) |", "|---|---|---|---|"]
    lines += [f"| `{w.name}` | `{w.playbook}` | {w.kind} | {', '.join(f'{t} ({c})' for c, t in w.codes.items())} |"
              for w in WORKLOADS.values()]
    lines += [f"| `{WORKLOAD_DIR}` | `playbooks/workload.yml` | queries | a directory's own (`workload_dir`; "
              "docs/workload-dir.md): its table names are its codes |"]
    lines += ["", "## Engines", "", "| engine | what | page sizes | compressions |", "|---|---|---|---|"]
    lines += [f"| `{e.name}` | {e.title} | {', '.join(e.page_sizes)} | {', '.join(e.compressions)} |"
              for e in ENGINES.values()]
    return "\n".join(lines) + "\n"
