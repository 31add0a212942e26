"""PostgreSQL: a private cluster, a tablespace per tier, a file (and segments) per relation.

The engine's spec (from the postgresql role): name, instance, bindir,
config_file, datadir, socket_dir, port, password_file (a libpq passfile), or
instead of the last three a conninfo (an instance tierlab observes),
log_file, tablespaces {tier role: tablespace}, memory_limit_bytes (the limit
of the memory group that bounds the server's private memory and the page cache
of what it reads; null: no bound, os_cache=unbounded), page_cache_bytes (the
page cache the query loop holds that group to: os_cache), settings (read back
into the manifest), source (where the engine came from).
"""

import json
import subprocess
import time
from pathlib import Path

from .. import cgroups
from ..system import HostError, no_room, run
from . import server

# per database, from pg_stat_database (block read/write times in milliseconds, kept in microseconds)
DATABASE_COUNTERS = ["blks_read", "blks_hit", "tup_returned", "tup_fetched", "temp_files", "temp_bytes"]
DATABASE_TIMES = ["blk_read_time", "blk_write_time"]
# per table (heap, all its indexes, TOAST) and per index, from pg_statio_user_tables/indexes
TABLE_COUNTERS = ["heap_blks_read", "heap_blks_hit", "idx_blks_read", "idx_blks_hit",
                  "toast_blks_read", "toast_blks_hit", "tidx_blks_read", "tidx_blks_hit"]
INDEX_COUNTERS = ["idx_blks_read", "idx_blks_hit"]
# what the server's error says when statement_timeout stopped the statement
LIMIT_ERROR = "canceling statement due to statement timeout"
# auto_explain writes the plan of the query it ran to the server's log, after this
PLAN_MARK = "plan:\n"
# the fork files of a relation beside its main one: free space map and visibility map
FORKS = {"": "", "_fsm": ".fsm", "_vm": ".vm"}


class Postgresql:
    def __init__(self, spec: dict):
        self.spec = spec
        self.name = spec["name"]
        self.user = "postgres"

    def _conninfo(self, database: str) -> str:
        spec = self.spec
        given = spec.get("conninfo") or (f"host={spec['socket_dir']} port={spec['port']} user=postgres "
                                         f"passfile={spec['password_file']}")
        # libpq takes the last of a keyword given twice: the database named here wins over one in the conninfo
        return f"{given} dbname={database}"

    def client_command(self, database: str | None = None) -> list[str]:
        # -X: no ~/.psqlrc; unaligned, tuples only, tab-separated, quiet (no command tags), NULL written as
        # the MySQL family's clients write it (psql writes nothing)
        return [f"{self.spec['bindir']}/psql", "-X", "-q", "-A", "-t", "-F", "\t", "-P", "null=NULL",
                "-v", "ON_ERROR_STOP=1", "-d", self._conninfo(database or "postgres")]

    def ping(self) -> bool:
        done = subprocess.run([f"{self.spec['bindir']}/pg_isready", "-q", "-h", self.spec["socket_dir"],
                               "-p", str(self.spec["port"]), "-t", "2"], capture_output=True)
        return done.returncode == 0

    def start(self) -> dict:
        marker = f"--config-file={self.spec['config_file']}"
        return server.start(self.spec["instance"], self.name, [f"{self.spec['bindir']}/postgres", marker], marker,
                            self.spec["log_file"], self.ping, self.spec["port"], self.spec["stop_signals"], user="postgres",
                            memory_limit_bytes=self.spec["memory_limit_bytes"])

    def stop(self) -> dict:
        return server.stop(self.spec["instance"])

    def running(self) -> bool:
        return server.running(self.spec["instance"])

    def script(self, sql: str, limit_s: int) -> str:
        """The statement under a server-side limit, its executed plan logged by auto_explain (with
        buffers, without per-node timing), and the session's statistics flushed before it ends so
        that the counters read next include it."""
        return (f"SET statement_timeout = '{limit_s}s';\n"
                "LOAD 'auto_explain';\n"
                "SET auto_explain.log_format = json;\nSET auto_explain.log_analyze = on;\n"
                "SET auto_explain.log_buffers = on;\nSET auto_explain.log_timing = off;\n"
                "SET auto_explain.log_min_duration = 0;\n"
                f"{sql}\n"
                "SET auto_explain.log_min_duration = -1;\n"
                "\\o /dev/null\n"
                "SELECT pg_stat_force_next_flush();\n")

    def is_timeout(self, error: str) -> bool:
        return LIMIT_ERROR in error

    def sysbench_options(self, database: str, target: str = "", table_options: str = "") -> tuple[list[str], dict]:
        """sysbench's options to reach the server (its pgsql driver, through the server's socket, the password
        from the instance's passfile) and the environment it needs; with a target tablespace, its prepare
        creates the tables and their indexes there. PostgreSQL has no table options."""
        options = ["--db-driver=pgsql", f"--pgsql-host={self.spec['socket_dir']}", f"--pgsql-port={self.spec['port']}",
                   "--pgsql-user=postgres", f"--pgsql-db={database}"]
        env = {"PGPASSFILE": self.spec["password_file"]}
        if target:
            env["PGOPTIONS"] = f"-c default_tablespace={target}"
        return options, env

    def rows(self, sql: str, database: str | None = None, timeout_s: float = 60) -> list[list[str]]:
        done = run([*self.client_command(database), "-c", sql], timeout_s=timeout_s)
        return [line.split("\t") for line in done.stdout.splitlines()]

    def facts(self) -> dict:
        names = ",".join(f"'{n}'" for n in self.spec["settings"])
        settings = dict(self.rows(f"SELECT name, current_setting(name) FROM pg_settings WHERE name IN ({names})"))
        tablespaces = dict(self.rows("SELECT spcname, pg_tablespace_location(oid) FROM pg_tablespace "
                                     "WHERE spcname NOT LIKE 'pg\\_%'"))
        tablespace_options = dict(self.rows("SELECT spcname, coalesce(array_to_string(spcoptions, ','), '') "
                                            "FROM pg_tablespace WHERE spcname NOT LIKE 'pg\\_%'"))
        return {"name": self.name, "version": self.rows("SHOW server_version")[0][0], "source": self.spec["source"],
                "settings": {n: settings.get(n) for n in self.spec["settings"]},
                "tablespaces": {name: {"location": location, "options": tablespace_options[name]}
                                for name, location in tablespaces.items()},
                "memory_limit_bytes": self.spec["memory_limit_bytes"],
                "page_cache_bytes": self.spec["page_cache_bytes"],
                "memory_cgroup": (None if self.spec["memory_limit_bytes"] is None
                                  else cgroups.memory_group(self.spec["instance"]))}

    def counters(self, database: str) -> dict:
        columns = ", ".join(DATABASE_COUNTERS + [f"round({t} * 1000)::bigint" for t in DATABASE_TIMES])
        (values,) = self.rows(f"SELECT {columns} FROM pg_stat_database WHERE datname = current_database()", database)
        counters = dict(zip(DATABASE_COUNTERS + [f"{t}_us" for t in DATABASE_TIMES], map(int, values), strict=True))
        for row in self.rows(f"SELECT relname, {', '.join(f'coalesce({c}, 0)' for c in TABLE_COUNTERS)} "
                             "FROM pg_statio_user_tables", database):
            counters.update({f"{row[0]}.{c}": int(v) for c, v in zip(TABLE_COUNTERS, row[1:], strict=True)})
        for row in self.rows(f"SELECT indexrelname, {', '.join(INDEX_COUNTERS)} FROM pg_statio_user_indexes", database):
            counters.update({f"{row[0]}.{c}": int(v) for c, v in zip(INDEX_COUNTERS, row[1:], strict=True)})
        return counters

    def settle(self) -> dict:
        """Nothing to wait for: autovacuum is off, and nothing else carries an earlier step's work into a later
        window (the cold restart's shutdown checkpoint writes what the step left dirty)."""
        return {}

    def plan(self, database: str, sql: str, log_from: int) -> str | None:
        """The plan auto_explain logged for the statement since the log had `log_from` bytes (JSON text): the
        first whose query text is the statement's, since statements run beside it (a co-runner, the other
        subqueries) log theirs too."""
        with open(self.spec["log_file"], "rb") as log:
            log.seek(log_from)
            text = log.read().decode(errors="replace")
        wanted = _statement(sql)
        start = text.find(PLAN_MARK)
        while start >= 0:
            # the log indents the plan's lines with a tab, which the decoder does not skip before the value
            plan, end = json.JSONDecoder().raw_decode(text, text.index("{", start))
            if _statement(plan.get("Query Text", "")) == wanted:
                return json.dumps(plan, indent=1)
            start = text.find(PLAN_MARK, end)
        return None

    def object_files(self, database: str, tables: list[str]) -> list[dict]:
        """The files of each table, its indexes and its TOAST table and index: every segment of every
        fork, with the segment's offset in its relation. The main fork's object is the relation's name
        (a table or an index), TOAST's `<table>.toast` and `<table>.toast_index`, other forks' the
        same with `.fsm` or `.vm`."""
        names = ",".join(f"'{t}'" for t in tables)
        relations = self.rows(f"""
            SELECT t.relname, t.relname, 'table', pg_relation_filepath(t.oid) FROM pg_class t
             WHERE t.relname IN ({names}) AND t.relkind = 'r' AND t.relnamespace = 'public'::regnamespace
            UNION ALL
            SELECT t.relname, i.relname, 'index', pg_relation_filepath(i.oid) FROM pg_class t
              JOIN pg_index x ON x.indrelid = t.oid JOIN pg_class i ON i.oid = x.indexrelid
             WHERE t.relname IN ({names}) AND t.relkind = 'r' AND t.relnamespace = 'public'::regnamespace
            UNION ALL
            SELECT t.relname, t.relname || '.toast', 'toast', pg_relation_filepath(t.reltoastrelid) FROM pg_class t
             WHERE t.relname IN ({names}) AND t.relkind = 'r' AND t.reltoastrelid <> 0
               AND t.relnamespace = 'public'::regnamespace
            UNION ALL
            SELECT t.relname, t.relname || '.toast_index', 'toast_index', pg_relation_filepath(x.indexrelid)
              FROM pg_class t JOIN pg_index x ON x.indrelid = t.reltoastrelid
             WHERE t.relname IN ({names}) AND t.relkind = 'r' AND t.relnamespace = 'public'::regnamespace
             ORDER BY 1, 3, 2""", database)
        (segment_bytes,) = self.rows("SELECT setting::bigint * current_setting('block_size')::bigint "
                                     "FROM pg_settings WHERE name = 'segment_size'")[0]
        files = []
        for table, relation, kind, relative in relations:
            main = (Path(self.spec["datadir"]) / relative).resolve()
            for fork, suffix in FORKS.items():
                for number, path in _segments(main.with_name(main.name + fork)):
                    files.append({"object": relation + suffix, "kind": kind, "table": table, "path": str(path),
                                  "offset_bytes": number * int(segment_bytes)})
        return files

    def _relations(self, database: str) -> list[list[str]]:
        """[relation, TABLE or INDEX, its table, its tablespace] of every table and index, each table first."""
        return self.rows("SELECT c.relname, CASE c.relkind WHEN 'r' THEN 'TABLE' ELSE 'INDEX' END, "
                         "coalesce(t.relname, c.relname), coalesce(s.spcname, 'pg_default') FROM pg_class c "
                         "LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid "
                         "LEFT JOIN pg_tablespace s ON s.oid = c.reltablespace "
                         "WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'i') "
                         "ORDER BY 3, 2 DESC, 1", database)

    def tier_tables(self, role: str) -> dict[str, dict[str, int]]:
        """{database: {table: bytes}} of the tables (each with its TOAST and those of its indexes) in the role's
        tablespace, in every database of the cluster."""
        tables = {}
        for (database,) in self.rows("SELECT datname FROM pg_database WHERE NOT datistemplate AND datname <> 'postgres' "
                                     "ORDER BY 1"):
            rows = self.rows("SELECT coalesce(t.relname, c.relname), sum(pg_table_size(c.oid)) FROM pg_class c "
                             "LEFT JOIN pg_index i ON i.indexrelid = c.oid LEFT JOIN pg_class t ON t.oid = i.indrelid "
                             "JOIN pg_tablespace s ON s.oid = c.reltablespace "
                             f"WHERE s.spcname = '{self.spec['tablespaces'][role]}' AND c.relkind IN ('r', 'i') "
                             "AND c.relnamespace = 'public'::regnamespace GROUP BY 1", database)
            if rows:
                tables[database] = {table: int(size) for table, size in rows}
        return tables

    def database_dirs(self, database: str) -> list[Path]:
        """A tablespace keeps each database's files in <location>/PG_<major>_<catalog version>/<database oid>,
        made when the database's first relation there is."""
        ((oid,),) = self.rows(f"SELECT oid FROM pg_database WHERE datname = '{database}'")
        names = ", ".join(f"'{name}'" for name in self.spec["tablespaces"].values())
        dirs = []
        for (location,) in self.rows(f"SELECT pg_tablespace_location(oid) FROM pg_tablespace WHERE spcname IN ({names})"):
            (version_dir,) = Path(location).glob("PG_*")
            dirs.append(version_dir / oid)
        return dirs

    def drop(self, database: str) -> None:
        """Drop a database tierlab loaded, with its files in every tablespace (its sessions ended first)."""
        self.rows(f'DROP DATABASE "{database}" WITH (FORCE)', timeout_s=3600)

    def compact(self, database: str, tables: list[str]) -> dict:
        """The tables as the load left them, whatever earlier runs wrote: autovacuum is off (nothing but the
        workload may read or write while it is traced), so the rows a writing workload updated or deleted stay
        in the files, run after run, and each run would read a larger, more scattered table than the last.
        CLUSTER rewrites each table in its primary key's order, the order the load filled it in, without
        them, and rebuilds its indexes; VACUUM (FREEZE, ANALYZE) and CHECKPOINT then leave the tables as the
        load does. Each table's bytes before (with its indexes, TOAST and forks), and the seconds; its bytes
        after are the manifest's, mapped right after."""
        names = ",".join(f"'{t}'" for t in tables)
        before = {table: int(size) for table, size in self.rows(
            f"SELECT relname, pg_total_relation_size(oid) FROM pg_class WHERE relname IN ({names}) "
            "AND relkind = 'r' AND relnamespace = 'public'::regnamespace", database)}
        keys = dict(self.rows(f"SELECT t.relname, i.relname FROM pg_index x JOIN pg_class t ON t.oid = x.indrelid "
                              f"JOIN pg_class i ON i.oid = x.indexrelid WHERE x.indisprimary AND t.relname IN ({names}) "
                              "AND t.relnamespace = 'public'::regnamespace", database))
        unordered = sorted(set(tables) - set(keys))
        if unordered:
            raise HostError(f"cannot compact {', '.join(unordered)} in {database}: no primary key to order the rows by")
        started = time.monotonic()
        for table in tables:
            self.rows(f"CLUSTER {table} USING {keys[table]}", database, timeout_s=24 * 3600)
        self.rows(f"VACUUM (FREEZE, ANALYZE) {', '.join(tables)}", database, timeout_s=24 * 3600)
        self.rows("CHECKPOINT", database, timeout_s=3600)
        return {"tables": {t: {"before_bytes": before[t]} for t in tables},
                "seconds": round(time.monotonic() - started, 3)}

    def place(self, database: str, placement: dict[str, str], table_options: str) -> list[dict]:
        """Put each table of a schema tierlab did not write (a workload directory's) and its indexes in its tier's
        tablespace: ALTER ... SET TABLESPACE, cheap while the tables are empty; PostgreSQL has no table options."""
        return self.move(database, placement)

    def move(self, database: str, placement: dict[str, str]) -> list[dict]:
        """Move each table (with its TOAST) and each of its indexes whose tier changes, online:
        ALTER TABLE/INDEX ... SET TABLESPACE copies the relation to new files on the other tier."""
        moves = []
        for relation, kind, table, tablespace in self._relations(database):
            # the load marker table has no place in the layout
            if table not in placement:
                continue
            target = self.spec["tablespaces"][placement[table]]
            if tablespace == target:
                continue
            (size,) = self.rows(f"SELECT pg_table_size('{relation}')", database)[0]
            started = time.monotonic()
            moved = run([*self.client_command(database), "-c", f"ALTER {kind} {relation} SET TABLESPACE {target}"],
                        timeout_s=24 * 3600, check=False)
            if moved.returncode != 0:
                # PostgreSQL undoes a move it cannot finish: the relation stays whole in its tablespace
                advice = "Mend what PostgreSQL says"
                if "No space left on device" in moved.stderr:
                    ((location,),) = self.rows(f"SELECT pg_tablespace_location(oid) FROM pg_tablespace "
                                               f"WHERE spcname = '{target}'", database)
                    advice = f"{no_room(Path(location))}: free space there, or choose a layout that fits"
                raise HostError(f"moving {kind.lower()} {relation} ({int(size) / 2**20:.1f} MiB) to tablespace {target} "
                                f"failed: {moved.stderr.strip()}; it stays whole in {tablespace}, and what moved "
                                f"before it stays moved. {advice}, then resume the run")
            moves.append({"object": relation, "from": tablespace, "to": target, "size_bytes": int(size),
                          "move_s": round(time.monotonic() - started, 3)})
        return moves


def _segments(first: Path):
    """(number, path) of a relation fork's segment files: `F`, `F.1`, `F.2`, ... while they exist."""
    number, path = 0, first
    while path.exists():
        yield number, path
        number += 1
        path = first.with_name(f"{first.name}.{number}")


def _statement(sql: str) -> str:
    """A statement as psql sends it, to compare: without its comment lines, its spacing or its closing ';'."""
    lines = [line for line in sql.splitlines() if not line.lstrip().startswith("--")]
    return " ".join(" ".join(lines).split()).rstrip(";").rstrip()
