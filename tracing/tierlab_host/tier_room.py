"""Room on a tier for a run's layout: other databases of the root make way first.

A root's instances (one per engine and page size) and their databases (one per workload, scale and
compression) share its two tiers, and a database keeps the layout of its last run until a run of its own moves
its tables. A sweep that puts every table on the fast tier at each page size would fill the fast tier with the
earlier points' databases and fail at the third, and one that loads a database per point would fill the
capacity tier. So before a run loads or moves its tables, tierlab works out how much its layout still brings
onto each tier and, where the tier lacks room, makes it with whole other databases of the root, the least
recently used first: off the fast tier they move to the capacity tier (their next run moves them back if its
layout says so); off the capacity tier, where they have nowhere to go, they are dropped (loaded data, which
their next run loads again). Their servers are the ones tierlab started, stopped again after if they were. Where
even that would not make room, the run is refused before anything moves.
"""

import json
import shutil
import time
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

from . import record
from .engines import engine
from .system import HostError

# the share of a tier a layout may fill, as the controller's check of the layout against the tier's size
# (tierlab.runs.settings.TIER_USABLE_SHARE): the rest stays free for the tables to grow as the run writes
USABLE_SHARE = 0.9
# the tier other databases move to, to make room on the fast one; on it, they are dropped
ROOMY = "capacity"


# each instance's record of when a run last made room for each of its databases (its last use), in its directory
USED_FILE = "used.json"


class Holding(NamedTuple):
    """A database's tables on a tier: the instance (its engine spec) and database they belong to, their bytes, and
    when a run last used the database (seconds since the epoch; 0 where none is recorded)."""
    spec: dict
    database: str
    tables: tuple[str, ...]
    size_bytes: int
    used_at: float


def evictions(short_bytes: int, holdings: list[Holding]) -> list[Holding]:
    """The holdings to move off a tier that lacks short_bytes: the least recently used first, and of those used
    as long ago the largest, until they make the room; none when it lacks nothing. HostError (naming what they
    hold) when all of them together would not make it.

    The least recently used, not the largest: a study sweeps its matrix in nested loops, so the databases it used
    longest ago are those of the loops it has finished (E4's page-size sweep, largest first, dropped the
    database its next point loaded again)."""
    chosen, freed = [], 0
    for holding in sorted(holdings, key=lambda h: (h.used_at, -h.size_bytes, h.spec["instance"], h.database)):
        if freed >= short_bytes:
            break
        chosen.append(holding)
        freed += holding.size_bytes
    if freed < short_bytes:
        held = ", ".join(f"{h.spec['instance']}/{h.database} {_mib(h.size_bytes)}" for h in chosen) or "nothing"
        raise HostError(f"the other databases tierlab made hold only {_mib(freed)} there ({held}), and the layout "
                        f"lacks {_mib(short_bytes)}")
    return chosen


def make_room(db, database: str, placement: dict[str, str], table_bytes: dict[str, int],
              instances_dir: str) -> list[dict]:
    """Make room on each tier the placement lacks it on; the moves and drops that made it, each with its instance
    and database. table_bytes: each table's estimated bytes, for a table not made yet (the load makes it on its
    tier); a table that exists counts with its file's size."""
    note_use(Path(instances_dir, db.spec["instance"]), database, time.time())
    located = {role: db.tier_tables(role).get(database, {}) for role in db.spec["tier_dirs"]}
    size = {table: tables[table] for tables in located.values() for table in tables}
    incoming = {role: sorted(t for t, tier in placement.items() if tier == role and t not in located[role])
                for role in located}
    need_of_layout = {role: sum(size.get(t, table_bytes.get(t, 0)) for t in tables) for role, tables in incoming.items()}
    need = dict(need_of_layout)
    chosen = {}
    # the fast tier first: what moves off it needs room on the capacity tier
    for role in sorted(located, key=lambda role: role == ROOMY):
        usage = shutil.disk_usage(db.spec["tier_dirs"][role])
        short = need[role] - (usage.free - int(usage.total * (1 - USABLE_SHARE)))
        if need[role] == 0 or short <= 0:
            continue
        holdings = [h for h in _holdings(instances_dir, role)
                    if (h.spec["instance"], h.database) != (db.spec["instance"], database)]
        try:
            chosen[role] = evictions(short, holdings)
        except HostError as error:
            arriving = ["the tables moved off the fast tier"] if need[role] > need_of_layout[role] else []
            brought = ", ".join(incoming[role] + arriving)
            raise HostError(f"the layout brings {_mib(need[role])} onto the {role} tier ({brought}), which has "
                            f"{_mib(usage.free)} free of {_mib(usage.total)} and keeps a tenth free for the tables to "
                            f"grow; {error}. Free space on that tier, or choose a layout that fits it") from None
        if role != ROOMY:
            need[ROOMY] += sum(h.size_bytes for h in chosen[role])
    dropped = chosen.pop(ROOMY, [])
    moves = [move for holding in dropped for move in _drop(db, holding)]
    gone = {(h.spec["instance"], h.database) for h in dropped}
    for holdings in chosen.values():
        moves += [move for holding in holdings if (holding.spec["instance"], holding.database) not in gone
                  for move in _move_off(db, holding)]
    return moves


def _holdings(instances_dir: str, role: str) -> list[Holding]:
    """What each database of every instance tierlab made under the root keeps on the role's tier. An instance
    with no file there is not asked, nor started: its databases are elsewhere, or went with the tiers they were
    on (teardown keeps the instances' directories, and tiers brought up again are empty)."""
    holdings = []
    for spec_file in sorted(Path(instances_dir).glob("*/engine.json")):
        spec = json.loads(spec_file.read_text())
        # an engine spec written before the specs named their tier directories: its next run writes them
        directory = spec.get("tier_dirs", {}).get(role)
        if directory is None or not any(path.is_file() for path in Path(directory).rglob("*")):
            continue
        used = uses(spec_file.parent)
        with _running(engine(spec)) as other:
            for database, tables in other.tier_tables(role).items():
                holdings.append(Holding(spec, database, tuple(sorted(tables)), sum(tables.values()),
                                        used.get(database, 0.0)))
    return holdings


def uses(instance_dir: Path) -> dict[str, float]:
    """When a run last used each database of the instance; none for an instance no run has made room for since
    the record was kept."""
    path = instance_dir / USED_FILE
    return json.loads(path.read_text()) if path.exists() else {}


def note_use(instance_dir: Path, database: str, at: float) -> None:
    """Record that a run uses the database now (written whole: a run killed midway leaves the record before or
    after, never half)."""
    record.replace_json(instance_dir / USED_FILE, {**uses(instance_dir), database: at})


def _move_off(db, holding: Holding) -> list[dict]:
    """Move a holding's tables to the capacity tier, with the server of its instance (the run's own, or another
    that tierlab started, left running or stopped as it was)."""
    with _running(_owner(db, holding)) as owner:
        moved = owner.move(holding.database, dict.fromkeys(holding.tables, ROOMY))
    return [{**move, "instance": holding.spec["instance"], "database": holding.database} for move in moved]


def _drop(db, holding: Holding) -> list[dict]:
    """Drop a holding's database, with the server of its instance, as _move_off moves it."""
    with _running(_owner(db, holding)) as owner:
        owner.drop(holding.database)
    return [{"instance": holding.spec["instance"], "database": holding.database, "tables": list(holding.tables),
             "size_bytes": holding.size_bytes, "dropped": True}]


def _owner(db, holding: Holding):
    """The engine of the holding's instance: the run's own where it is the run's instance."""
    return db if holding.spec["instance"] == db.spec["instance"] else engine(holding.spec)


@contextmanager
def _running(db):
    """The engine's server, started for the block if it was not running and stopped again after."""
    was_running = db.running()
    if not was_running:
        db.start()
    try:
        yield db
    finally:
        if not was_running:
            db.stop()


def _mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"
