"""Placement at the grain of objects, for runs of many units (an observed instance's tables and indexes, a workload
directory's own schema), where the 2^n layouts recommend enumerates for a benchmark's few tables are far too many.
On PostgreSQL a unit is a table (with its TOAST and maps) or an index, as ALTER TABLE and ALTER INDEX move them apart;
on MySQL and MariaDB a table with its indexes, which live in its one file.

Each unit's saving is what the fast tier would take off the traced steps if it alone moved there (each step's window
replayed with that unit on the fast profile, the step's time scaled as recommend scales it), summed by weight. The
units are ranked by saving per byte, as DB2's Object Placement Advisor fills the fast device, greedily by gain per GB,
and the fast tier is filled in that order, a unit that does not fit left out and the next one tried. Units that share
a device interfere, so savings do not simply add up: every placement that is advised or drawn on the capacity curve is
replayed whole.

Units that no statement moves (logs, catalogs, system tablespaces) are not placed; their I/O time is reported.
"""

import numpy as np

from ..catalog.layout import CAPACITY, FAST
from ..devices import cost_model
from ..errors import InputError
from .predict import TracedQuery

# the kinds of units a statement moves: a table (with what moves with it) or an index
MOVABLE_KINDS = ("table", "index")
NONE = "None"
# a PostgreSQL relation's other forks, the free space and visibility maps: each moves with its relation
FORK_SUFFIXES = (".fsm", ".vm")


def relation_of(obj: str) -> str:
    """The relation whose fork obj is (obj itself for a main fork)."""
    return next((obj.removesuffix(suffix) for suffix in FORK_SUFFIXES if obj.endswith(suffix)), obj)


def unit_kind(unit: str, info: dict) -> str:
    """A unit's kind: that of its own file (the object named as the unit), else of its first file."""
    own = [f["kind"] for f in info["files"] if f["object"] == unit] or [f["kind"] for f in info["files"]]
    return own[0] if own else "table"


def unit_kinds(tables: dict) -> dict[str, str]:
    return {unit: unit_kind(unit, info) for unit, info in tables.items()}


def postgresql_units(tables: dict, tier_roles: dict[str, str]) -> dict[str, dict]:
    """A PostgreSQL run's tables (its manifest's layout.tables) as the units statements move: each index with its
    forks a unit of its own, named by the index; each table with its TOAST and maps. A unit's tier is the role of its
    files' tier (tier_roles: tier name to role; its table's where the files do not name one), its bytes theirs."""
    units: dict[str, dict] = {}
    for table, info in tables.items():
        for f in info["files"]:
            unit = relation_of(f["object"]) if f["kind"] == "index" else table
            found = units.setdefault(unit, {"tier": tier_roles.get(f.get("tier"), info["tier"]), "files": []})
            found["files"].append(f)
        if not info["files"]:
            units[table] = {**info, "files": []}
    for info in units.values():
        files = info["files"]
        if files:
            info["size_bytes"] = sum(f["size_bytes"] for f in files) if all(f.get("size_bytes") is not None
                                                                            for f in files) else None
            info["stored_bytes"] = sum(f.get("stored_bytes") or 0 for f in files)
    return units


def parse_placement(text: str, units: dict) -> frozenset:
    """--from-layout for runs placed by object: the units on the fast tier, joined by +, or None."""
    if text == NONE:
        return frozenset()
    named = text.split("+")
    unknown = [u for u in named if u not in units]
    if unknown:
        raise InputError(f"--from-layout {text!r}: {unknown[0]!r} is not a unit of these runs; give units joined by + "
                         f"(or {NONE}) from: {', '.join(sorted(units))}")
    return frozenset(named)


def placement_name(fast: frozenset) -> str:
    return "+".join(sorted(fast)) if fast else NONE


def window_costs(window: cost_model.Window, profiles: dict, placements: list[frozenset]) -> dict[frozenset, float]:
    """The window's model I/O time (us) with each placement's units on the fast tier, keyed by the units of the
    placement it reads (placements that differ only in units it does not read cost it the same)."""
    costs: dict[frozenset, float] = {}
    for fast in [frozenset(), frozenset(window.tables), *placements]:
        key = fast & frozenset(window.tables)
        if key not in costs:
            mask = np.array([table in key for table in window.tables], dtype=bool)
            costs[key] = window.io_us(window.roles(mask), profiles)
    return costs


def singles(window: cost_model.Window, movable: set[str]) -> list[frozenset]:
    """Each movable unit the window reads, alone on the fast tier."""
    return [frozenset([table]) for table in window.tables if table in movable]


def savings_s(queries: list[TracedQuery], units: list[str], movable: list[str]) -> dict[str, float]:
    """Each movable unit's predicted saving (weighted seconds) when it alone of the units is on the fast tier."""
    everything_capacity = dict.fromkeys(units, CAPACITY)
    found = {}
    for unit in movable:
        placement = {**everything_capacity, unit: FAST}
        found[unit] = sum(q.weight * (q.predict_s(q.io_us(everything_capacity)) - q.predict_s(q.io_us(placement)))
                          for q in queries)
    return found


def ranking(saving: dict[str, float], unit_bytes: dict[str, int]) -> list[str]:
    """The units that save time, by saving per byte (then by name)."""
    return sorted((u for u, s in saving.items() if s > 0), key=lambda u: (-saving[u] / max(unit_bytes[u], 1), u))


def fill(order: list[str], unit_bytes: dict[str, int], capacity_bytes: int) -> frozenset:
    """The units of the ranking that fit in the capacity, taken in order, each that does not fit left out."""
    chosen, used = [], 0
    for unit in order:
        if used + unit_bytes[unit] <= capacity_bytes:
            chosen.append(unit)
            used += unit_bytes[unit]
    return frozenset(chosen)


def candidates(order: list[str], unit_bytes: dict[str, int], capacities: list[int]) -> list[frozenset]:
    """The placements to replay whole: every prefix of the ranking, and the fill of each capacity asked about."""
    prefixes = [frozenset(order[:n]) for n in range(1, len(order) + 1)]
    return list(dict.fromkeys([*prefixes, *(fill(order, unit_bytes, c) for c in capacities)]))
