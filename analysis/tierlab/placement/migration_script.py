"""The steps that move a run's tables from one layout to another on its engine, as a DBA applies them: for each
step the objects it moves, the bytes it copies (as much free space needed on the target tier), the log it writes,
its predicted time on the measured devices, the lock or downtime it costs, and its undo; and the two scripts.

PostgreSQL moves a table online in SQL: ALTER TABLE ... SET TABLESPACE copies the table (with its TOAST) to the
other tablespace, ALTER INDEX ... SET TABLESPACE each index; a unit of the run is a table with its indexes or, where
placed by object (placement.objects), a table or an index alone. The MySQL family cannot: MariaDB ignores DATA DIRECTORY
in ALTER TABLE, and MySQL takes a table's directory only when it creates it. So a table's .ibd is moved with the
server stopped, as tierlab moves its own (tracing/tierlab_host/engines/mysql_family.py): MariaDB follows the .isl
file beside the table's definition, MySQL finds the file in innodb_directories when it starts."""

import shlex
from pathlib import Path

from ..catalog.engines import ENGINES
from ..catalog.layout import CAPACITY, FAST
from ..catalog.values import figure
from ..errors import RunDirError
from ..runs.manifest import table_bytes
from ..runs.observing import OBSERVED
from ..runs.settings import human_bytes
from .objects import relation_of, unit_kind

PSQL = "psql -X -v ON_ERROR_STOP=1"
# what a script says, and does, when an object its steps name no longer exists: nothing moves
GONE = "the plan names objects that no longer exist: {}; nothing was moved: make a new plan from a current run or observation"
# the tablespace an observed PostgreSQL instance's migration makes on the fast tier
OBSERVED_FAST_TABLESPACE = "tierlab_fast"
# the MySQL family's script: a table's file may only move while no server has it open
SHELL_FUNCTIONS = """set -eu
# whether a process has the file open: the server must be stopped for the whole script
in_use() {
  for fd in /proc/[0-9]*/fd/*; do
    [ "$(readlink "$fd" 2>/dev/null)" = "$1" ] && return 0
  done
  return 1
}
# move FILE to its new path by a synced copy renamed into place; then point the .isl (MariaDB) at it, if one is given
move() {
  if in_use "$1"; then echo "$1 is open: stop the server first" >&2; exit 1; fi
  mkdir -p "$(dirname "$2")"
  chown mysql:mysql "$(dirname "$2")"
  cp --sparse=always --preserve=all "$1" "$2.moving"
  sync "$2.moving"
  mv "$2.moving" "$2"
  rm "$1"
  if [ -n "$3" ]; then printf '%s' "$2" > "$3"; chown mysql:mysql "$3"; fi
}"""


def migration_steps(tables: dict, start: dict[str, str], end: dict[str, str],
                    bytes_per_s: dict[tuple[str, str], float]) -> list[dict]:
    """The tables of a run's layout (its manifest's layout.tables) whose tier changes from start to end ({table: tier
    role}), each with the bytes it copies (what it stores) and the time that takes at the slower of the source's read
    and the target's sustained write rate (bytes_per_s): those leaving the fast tier first, so that the space they
    free is there before the tables that take it arrive; then by name."""
    moved = sorted((t for t in tables if start[t] != end[t]), key=lambda t: (start[t] != FAST, t))
    sizes = table_bytes(tables)
    steps = []
    for table in moved:
        size = sizes[table]
        steps.append({"table": table, "kind": unit_kind(table, tables[table]), "from": start[table], "to": end[table],
                      "indexes": sorted({relation_of(f["object"]) for f in tables[table]["files"]
                                         if f["kind"] == "index"} - {table}),
                      "bytes": size, "predicted_s": size / bytes_per_s[(start[table], end[table])]})
    return steps


def _identifier(name: str) -> str:
    """A PostgreSQL identifier, quoted: the catalog's own name, whatever its case, and even where it is a reserved
    word (a table called order)."""
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _postgresql_check(database: str | None, names: list[str]) -> list[str]:
    """The lines that end the script before anything moves when a relation a step names (each as to_regclass takes
    it) no longer exists: the exception stops psql (ON_ERROR_STOP)."""
    listed = ", ".join(_literal(name) for name in names)
    return ([f"\\connect {_identifier(database)}"] if database else []) + [
        "DO $$ DECLARE gone text; BEGIN",
        # typed: a plan that moves nothing names none, and PostgreSQL cannot type an empty ARRAY[]
        f"  SELECT string_agg(name, ', ') INTO gone FROM unnest(ARRAY[{listed}]::text[]) AS name "
        "WHERE to_regclass(name) IS NULL;",
        f"  IF gone IS NOT NULL THEN RAISE EXCEPTION {_literal(GONE.format('%'))}, gone; END IF;",
        "END $$;"]


def _shell_check(tests: list[tuple[str, str]]) -> list[str]:
    """The lines that end the script before anything moves when a table a step names no longer exists: (a shell test
    that it does, what to call it)."""
    return ['gone=""', *(f'{test} || gone="$gone "{shlex.quote(name)}' for test, name in tests),
            f'if [ -n "$gone" ]; then echo "{GONE.format("$gone")}" >&2; exit 1; fi']


def _tablespaces(m: dict) -> dict[str, dict]:
    """Each tier role's tablespace: the one whose location is under the tier's path."""
    found = {}
    for tier in m["tiers"]:
        names = [(name, ts["location"]) for name, ts in m["engine"].get("tablespaces", {}).items()
                 if ts["location"].startswith(tier["path"].rstrip("/") + "/")]
        if len(names) != 1:
            raise RunDirError(f"run {m['run_id']}: {len(names)} tablespaces lie on the {tier['role']} tier "
                              f"({tier['path']}); a migration script needs exactly one there")
        found[tier["role"]] = {"name": names[0][0], "location": names[0][1], "tier": tier["name"]}
    return found


def _postgresql_wal(step: dict) -> str:
    return (f"about {human_bytes(step['bytes'])} of WAL (every page copied is logged unless wal_level = minimal), which "
            "each standby replays")


def _postgresql_lock(name: str, kind: str, indexes: list[str], space: str) -> str:
    """The lock a step's SET TABLESPACE takes, what waits for it, and the online alternative."""
    if kind == "index":
        return (f"ACCESS EXCLUSIVE on {name} while it is copied: reads and writes of its table wait (online instead: "
                f"CREATE INDEX CONCURRENTLY a copy of it in TABLESPACE {space}, then DROP INDEX CONCURRENTLY {name})")
    then = ", then on each of its indexes," if indexes else ""
    return (f"ACCESS EXCLUSIVE on {name}{then} while it is copied: the table's reads and writes wait (online instead: "
            f"pg_repack --no-order --tablespace={space}{' --moveidx' if indexes else ''} --table={name})")


def _postgresql(m: dict, steps: list[dict], undo: list[dict]) -> dict:
    spaces = _tablespaces(m)
    for step in steps + undo:
        space = spaces[step["to"]]["name"]
        kind = "INDEX" if step["kind"] == "index" else "TABLE"
        step["lines"] = ([f"ALTER {kind} {_identifier(step['table'])} SET TABLESPACE {_identifier(space)};"]
                         + [f"ALTER INDEX {_identifier(index)} SET TABLESPACE {_identifier(space)};"
                            for index in step["indexes"]])
        step["log"] = _postgresql_wal(step)
        step["lock"] = _postgresql_lock(step["table"], step["kind"], step["indexes"], space)
    created = [f"SELECT format('CREATE TABLESPACE %I LOCATION %L', {_literal(ts['name'])}, {_literal(ts['location'])})"
               f" WHERE NOT EXISTS (SELECT FROM pg_tablespace WHERE spcname = {_literal(ts['name'])}) \\gexec"
               for _, ts in sorted(spaces.items())]
    notes = [f"Apply with: {PSQL} -d {shlex.quote(m['settings']['database'])} -f FILE",
             "The tablespaces are made where they are missing. A standby replays CREATE TABLESPACE into the same "
             "directory: make it there first, empty and owned by postgres."]
    check = _postgresql_check(None, [_identifier(name) for step in steps for name in [step["table"], *step["indexes"]]])
    return {"method": "online, in SQL: each table and index copied under its lock", "downtime_s": 0.0,
            "tiers": {role: f"tablespace {ts['name']} ({ts['location']})" for role, ts in spaces.items()},
            "files": {"migration.sql": _script("--", notes, [*check, *created], steps),
                      "migration-undo.sql": _script("--", notes[:1], check, undo)}}


def _mysql_family(m: dict, steps: list[dict], undo: list[dict]) -> dict:
    engine = m["engine"]
    dirs = engine.get("table_dirs")
    if not dirs:
        raise RunDirError(f"run {m['run_id']} does not record its engine's table directories (runs before tierlab "
                          "kept them): run the layout again to get a migration script")
    database = m["settings"]["database"]
    mariadb = engine["name"] == "mariadb"
    datadir = engine.get("settings", {}).get("datadir", "").rstrip("/")

    for step in steps + undo:
        # a table's file is <its tier's table directory>/<database>/<table>.ibd: MySQL takes a file-per-table
        # tablespace only in a directory named after its database
        files = [shlex.quote(f"{dirs[role]}/{database}/{step['table']}.ibd") for role in (step["from"], step["to"])]
        isl = shlex.quote(f"{datadir}/{database}/{step['table']}.isl") if mariadb else "''"
        step["lines"] = [f"move {files[0]} {files[1]} {isl}"]
        step["log"] = "no redo or binary log (the file is copied outside the server); each replica moves its own"
        step["lock"] = "the server stopped for the whole script"
    found = ("MariaDB reads each moved table's .isl when it opens it" if mariadb else
             f"MySQL finds the moved files when it starts: innodb_directories must list {dirs[FAST]} and "
             f"{dirs[CAPACITY]}")

    def notes(ordered: list[dict]) -> list[str]:
        return [f"Offline: stop the server, run this as root, start the server ({found}).",
                f"Downtime: about {figure(sum(step['predicted_s'] for step in ordered))} s of copying on the measured "
                "devices."]

    def check(ordered: list[dict]) -> list[str]:
        return _shell_check([(f"[ -f {shlex.quote(path)} ]", path) for path in
                             (f"{dirs[step['from']]}/{database}/{step['table']}.ibd" for step in ordered)])

    return {"method": "offline: each table's file moved with the server stopped",
            "downtime_s": sum(step["predicted_s"] for step in steps),
            "tiers": {role: f"DATA DIRECTORY {directory}" for role, directory in dirs.items()},
            "files": {"migration.sh": "#!/bin/sh\n" + _script("#", notes(steps), [SHELL_FUNCTIONS, *check(steps)],
                                                               steps),
                      "migration-undo.sh": "#!/bin/sh\n" + _script("#", notes(undo), [SHELL_FUNCTIONS, *check(undo)],
                                                                    undo)}}


def _script(comment: str, notes: list[str], code: list[str], steps: list[dict]) -> str:
    """A script's text: its notes as comments and the code its steps need, then each step with what it costs."""
    lines = [f"{comment} {note}" for note in notes] + [""] + (code + [""] if code else [])
    for number, step in enumerate(steps, 1):
        lines += [f"{comment} Step {number} of {len(steps)}: {step['table']} (indexes: "
                  f"{', '.join(step['indexes']) or 'none'}) from the {step['from']} tier to the {step['to']} tier: "
                  f"{human_bytes(step['bytes'])} copied (as much free space needed there), about "
                  f"{figure(step['predicted_s'])} s on the measured devices; {step['log']}.",
                  f"{comment} Lock: {step['lock']}.", *step["lines"], ""]
    return "\n".join(lines)


def _observed_postgresql(m: dict, steps: list[dict], undo: list[dict], fast_location: str | None) -> dict:
    """An observed instance's units moved in SQL, database by database: a table (with its TOAST and maps) or an index
    to the fast tier's tablespace, made at fast_location where it is missing; the undo takes each back to the
    tablespace it was observed in."""
    if not fast_location:
        raise RunDirError("give --fast-location DIR: the directory on the fast device, on the database host, where the "
                          f"tablespace {OBSERVED_FAST_TABLESPACE} is made (empty, owned by postgres)")
    tables = m["layout"]["tables"]
    own = {unit: next(f for f in info["files"] if f.get("qualified")) for unit, info in tables.items()
           if any(f.get("qualified") for f in info["files"])}
    for step in steps + undo:
        database, schema, relation = own[step["table"]]["qualified"]
        space = OBSERVED_FAST_TABLESPACE if step["to"] == FAST else own[step["table"]]["tablespace"]
        kind = "INDEX" if step["kind"] == "index" else "TABLE"
        step["database"] = database
        step["lines"] = [f"ALTER {kind} {_identifier(schema)}.{_identifier(relation)} SET TABLESPACE "
                         f"{_identifier(space)};"]
        step["log"] = _postgresql_wal(step)
        step["lock"] = _postgresql_lock(f"{schema}.{relation}", step["kind"], [], space)
    created = [f"SELECT format('CREATE TABLESPACE %I LOCATION %L', {_literal(OBSERVED_FAST_TABLESPACE)}, "
               f"{_literal(fast_location)}) WHERE NOT EXISTS (SELECT FROM pg_tablespace WHERE spcname = "
               f"{_literal(OBSERVED_FAST_TABLESPACE)}) \\gexec"]
    named: dict[str, list[str]] = {}
    for step in steps:
        database, schema, relation = own[step["table"]]["qualified"]
        named.setdefault(database, []).append(f"{_identifier(schema)}.{_identifier(relation)}")
    check = [line for database, names in sorted(named.items()) for line in _postgresql_check(database, names)]
    notes = [f"Apply with: {PSQL} -d postgres -f FILE, as a superuser (or the owner of each object, with CREATE on "
             "the tablespace); it connects to each database in turn.",
             f"The tablespace {OBSERVED_FAST_TABLESPACE} is made where it is missing. A standby replays CREATE "
             "TABLESPACE into the same directory: make it there first, empty and owned by postgres."]
    return {"method": "online, in SQL: each table and index copied under its lock", "downtime_s": 0.0,
            "tiers": {FAST: f"tablespace {OBSERVED_FAST_TABLESPACE} ({fast_location})",
                      CAPACITY: "each object's tablespace as observed"},
            "files": {"migration.sql": _script("--", notes, [*check, *created], _connected(steps)),
                      "migration-undo.sql": _script("--", notes[:1], check, _connected(undo))}}


# an observed MariaDB or MySQL instance's table is rebuilt where it is to be: MariaDB ignores DATA DIRECTORY in ALTER
# TABLE, and a table made without one is found only in the data directory
REBUILD_FUNCTIONS = """set -eu
MYSQL="${MYSQL:-mysql}"
# the statements' result, raw, without column names
query() { $MYSQL --batch --raw --skip-column-names -e "$1"; }
# a name as an SQL identifier, and as an SQL string
ident() { printf '`%s`' "$(printf '%s' "$1" | sed 's/`/``/g')"; }
text() { printf "'%s'" "$(printf '%s' "$1" | sed "s/'/''/g")"; }
# rebuild DATABASE TABLE DIRECTORY: the table made again from its own definition in DIRECTORY (empty: the data
# directory) as TABLE__tierlab_new, filled from it, and the two swapped by one RENAME TABLE; the old one dropped. The
# new table is made in the same database: MariaDB renames a table made with DATA DIRECTORY into another database
# without its .isl file, and would not find it after a restart. Writes to the table must stop until it ends: they
# would be lost.
rebuild() {
  db=$(ident "$1"); table="$db.$(ident "$2")"; new="$db.$(ident "$2__tierlab_new")"; old="$db.$(ident "$2__tierlab_old")"
  schema_text=$(text "$1"); name_text=$(text "$2")
  if [ "$(query "SELECT COUNT(*) FROM information_schema.TRIGGERS
             WHERE EVENT_OBJECT_SCHEMA = $schema_text AND EVENT_OBJECT_TABLE = $name_text")" != 0 ] ||
     [ "$(query "SELECT COUNT(*) FROM information_schema.KEY_COLUMN_USAGE WHERE REFERENCED_TABLE_NAME IS NOT NULL
             AND ((TABLE_SCHEMA = $schema_text AND TABLE_NAME = $name_text)
                  OR (REFERENCED_TABLE_SCHEMA = $schema_text AND REFERENCED_TABLE_NAME = $name_text))")" != 0 ]
  then
    echo "$table has triggers or foreign keys, which RENAME TABLE would leave with the old table: move it by hand" >&2
    exit 1
  fi
  # SHOW CREATE TABLE's definition (its second column, whose first line is CREATE TABLE `name` (), named as the new
  # table, without a DATA DIRECTORY it had
  ddl=$(query "SHOW CREATE TABLE $table" | cut -f2- | sed -e "s/ DATA DIRECTORY='[^']*'//" |
        NAME="$new" awk 'NR == 1 { print "CREATE TABLE " ENVIRON["NAME"] " ("; next } { print }')
  if [ -n "$3" ]; then ddl="$ddl DATA DIRECTORY=$(text "$3")"; fi
  query "$ddl"
  query "INSERT INTO $new SELECT * FROM $table"
  query "RENAME TABLE $table TO $old, $new TO $table; DROP TABLE $old"
}
# exists DATABASE TABLE: whether the table is there
exists() {
  [ "$(query "SELECT COUNT(*) FROM information_schema.TABLES
              WHERE TABLE_SCHEMA = $(text "$1") AND TABLE_NAME = $(text "$2")")" = 1 ]
}"""


def _observed_mysql_family(m: dict, steps: list[dict], undo: list[dict], fast_location: str | None) -> dict:
    """An observed instance's tables rebuilt into the fast tier's directory (DATA DIRECTORY at fast_location), each
    while writes to it wait; the undo rebuilds each where it was observed (the data directory, or its own DATA
    DIRECTORY)."""
    if not fast_location:
        raise RunDirError("give --fast-location DIR: the directory on the fast device, on the database host, where the "
                          "tables are rebuilt (DATA DIRECTORY; owned by mysql)")
    tables = m["layout"]["tables"]
    datadir = Path(m["engine"].get("data_directory", "")).resolve()
    own = {unit: next(f for f in info["files"] if f.get("qualified")) for unit, info in tables.items()
           if any(f.get("qualified") for f in info["files"])}
    for step in steps + undo:
        if step["table"] not in own:
            step["lines"] = [f"# {step['table']} is partitioned: place its partitions by hand (ALTER TABLE ... "
                             "REORGANIZE PARTITION ... DATA DIRECTORY)"]
        else:
            database, table = own[step["table"]]["qualified"]
            observed_dir = Path(own[step["table"]]["path"]).parent.parent
            directory = fast_location if step["to"] == FAST else ("" if observed_dir == datadir else str(observed_dir))
            step["lines"] = [f"rebuild {shlex.quote(database)} {shlex.quote(table)} {shlex.quote(directory)}"]
        step["log"] = ("the new table's redo, and its rows in the binary log (each replica rebuilds it too), "
                       f"about {human_bytes(step['bytes'])}")
        step["lock"] = "none that stops writes: stop writing to the table until its step ends, or the writes are lost"
    def check(ordered: list[dict]) -> list[str]:
        return _shell_check([(f"exists {shlex.quote(database)} {shlex.quote(table)}", f"{database}.{table}")
                             for database, table in (own[step["table"]]["qualified"] for step in ordered
                                                     if step["table"] in own)])

    mysql = ("MySQL takes a DATA DIRECTORY only inside innodb_directories: list it there first. "
             if m["engine"]["name"] == "mysql" else "")

    def notes(ordered: list[dict]) -> list[str]:
        return [f"Online, table by table: run this as root with MYSQL set to a client that may create, fill, rename "
                f"and drop the tables (e.g. MYSQL='mysql --defaults-file=/root/admin.cnf'). {mysql}Each table's "
                "writes must wait until its step ends.",
                f"About {figure(sum(step['predicted_s'] for step in ordered))} s of copying on the measured devices."]

    return {"method": "online, in SQL: each table rebuilt where it is to be, then renamed into its place",
            "downtime_s": 0.0,
            "tiers": {FAST: f"DATA DIRECTORY {fast_location}", CAPACITY: "each table's directory as observed"},
            "files": {"migration.sh": "#!/bin/sh\n" + _script("#", notes(steps), [REBUILD_FUNCTIONS, *check(steps)],
                                                               steps),
                      "migration-undo.sh": "#!/bin/sh\n" + _script("#", notes(undo), [REBUILD_FUNCTIONS, *check(undo)],
                                                                    undo)}}


def _connected(steps: list[dict]) -> list[dict]:
    """The steps, each that starts another database's run of steps connecting to it first (psql's \\connect)."""
    current, connected = None, []
    for step in sorted(steps, key=lambda step: step["database"]):
        if step["database"] != current:
            current = step["database"]
            step = {**step, "lines": [f"\\connect {_identifier(current)}", *step["lines"]]}
        connected.append(step)
    return connected


def migration_plan(m: dict, start: dict[str, str], end: dict[str, str],
                   bytes_per_s: dict[tuple[str, str], float], fast_location: str | None = None,
                   units: dict | None = None) -> dict:
    """How to move the units of the run whose manifest is m (its tables, or units as placement.objects splits them)
    from one placement to another ({unit: tier role}) on its engine: the method, where each tier's units go, the steps
    (each with its lines, log and lock), those of the undo, the downtime, and the two scripts' texts. An observed
    instance's units go to a fast tier it does not have yet, at fast_location."""
    tables = units or m["layout"]["tables"]
    steps, undo = migration_steps(tables, start, end, bytes_per_s), migration_steps(tables, end, start, bytes_per_s)
    family = ENGINES[m["engine"]["name"]].family
    observed = m["settings"].get("workload") == OBSERVED
    if observed:
        plan = (_observed_postgresql if family == "postgresql" else _observed_mysql_family)(m, steps, undo, fast_location)
    else:
        plan = _postgresql(m, steps, undo) if family == "postgresql" else _mysql_family(m, steps, undo)
    return {"engine": m["engine"]["name"], "database": m["settings"].get("database"), "steps": steps, "undo": undo,
            **plan}
