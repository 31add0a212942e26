"""A database instance tierlab did not start, as it is observed: reached through the user's own connection settings,
every session read-only; what the user must have been granted; where the instance's files are and which object
each file (or range of it) holds; and its counters. Nothing here writes to the instance, restarts or stops it.

Objects are named as each engine qualifies them. PostgreSQL: database.schema.relation; a table's TOAST table and
its index are <table>.toast and <table>.toast_index, a relation's free space and visibility maps <relation>.fsm and
<relation>.vm; a database's system catalogs are one object, <database>.pg_catalog, the shared catalogs pg_global,
the write-ahead log pg_wal. MySQL and MariaDB: database.table (its clustered index and the file's other pages),
database.table.index (a secondary index's pages in the table's file), database.table#partition; the server's own
tables (schemas mysql and sys) one object, mysql; the system tablespace innodb_system, the undo tablespaces
innodb_undo, the redo log innodb_redo, the temporary tablespace innodb_temp, the doublewrite files
innodb_doublewrite, the binary logs binlog.

Each file also names its unit, the `table` a placement moves as one: in PostgreSQL a table with its TOAST and maps,
or an index (ALTER TABLE and ALTER INDEX ... SET TABLESPACE move them apart); in MySQL and MariaDB a table with its
indexes (one file); the logs and system files are units of their own, which no statement moves.
"""

import re
import shutil
import time
from pathlib import Path

from .engines.mysql_family import MysqlFamily
from .engines.postgresql import FORKS, Postgresql, _segments
from .innodb_pages import index_runs, object_ranges
from .system import HostError

# the relations with files of their own: tables, indexes, materialized views, TOAST tables (not temporary ones:
# another session's come and go with it), each with its tablespace (0: the database's default)
PG_CATALOG = """
SELECT c.oid, n.nspname, c.relname, c.relkind, coalesce(x.indrelid, 0), coalesce(o.oid, 0), c.relisshared,
       coalesce(s.spcname, (SELECT t.spcname FROM pg_database d JOIN pg_tablespace t ON t.oid = d.dattablespace
                             WHERE d.datname = current_database())),
       pg_relation_filepath(c.oid)
  FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
  LEFT JOIN pg_index x ON x.indexrelid = c.oid
  LEFT JOIN pg_class o ON o.reltoastrelid = c.oid
  LEFT JOIN pg_tablespace s ON s.oid = c.reltablespace
 WHERE c.relkind IN ('r', 'i', 'm', 't') AND c.relpersistence <> 't' AND pg_relation_filepath(c.oid) IS NOT NULL"""
PG_SYSTEM_SCHEMAS = ("pg_catalog", "information_schema")
# pg_stat_database summed over the instance's databases; block times in milliseconds, kept in microseconds
PG_INSTANCE_COUNTERS = ["xact_commit", "xact_rollback", "blks_read", "blks_hit", "tup_returned", "tup_fetched",
                        "tup_inserted", "tup_updated", "tup_deleted", "temp_bytes"]
PG_INSTANCE_TIMES = ["blk_read_time", "blk_write_time"]
PG_BGWRITER_COUNTERS = ["buffers_checkpoint", "buffers_clean", "buffers_backend", "buffers_alloc"]
PG_TABLE_COUNTERS = ["heap_blks_read", "heap_blks_hit", "idx_blks_read", "idx_blks_hit", "toast_blks_read",
                     "toast_blks_hit"]
PG_INDEX_COUNTERS = ["idx_blks_read", "idx_blks_hit"]
# WAL segment files are named by timeline, then the segment number's high and low 32 bits
WAL_FILE = re.compile(r"[0-9A-F]{8}([0-9A-F]{8})([0-9A-F]{8})")

MYSQL_STATUS = ["Questions", "Com_select", "Com_insert", "Com_update", "Com_delete", "Com_commit", "Innodb_rows_read",
                "Innodb_rows_inserted", "Innodb_rows_updated", "Innodb_rows_deleted", "Innodb_buffer_pool_reads",
                "Innodb_buffer_pool_read_requests", "Innodb_buffer_pool_read_ahead", "Innodb_data_reads",
                "Innodb_data_read", "Innodb_data_writes", "Innodb_data_written", "Innodb_pages_read",
                "Innodb_pages_written", "Innodb_os_log_written", "Innodb_data_fsyncs"]
MYSQL_VARIABLES = ["datadir", "innodb_page_size", "innodb_data_home_dir", "innodb_data_file_path",
                   "innodb_undo_directory", "innodb_log_group_home_dir", "innodb_temp_data_file_path", "log_bin",
                   "log_bin_basename", "performance_schema", "innodb_flush_method", "innodb_buffer_pool_size",
                   "version_comment"]
# each engine's view of its tablespaces' files, and of every table's indexes (TYPE bit 1: the clustered one)
MYSQL_TABLESPACES = {
    "mariadb": "SELECT NAME, FILENAME FROM information_schema.INNODB_SYS_TABLESPACES",
    "mysql": "SELECT t.NAME, d.PATH FROM information_schema.INNODB_TABLESPACES t "
             "JOIN information_schema.INNODB_DATAFILES d ON d.SPACE = t.SPACE",
}
MYSQL_INDEXES = {
    "mariadb": "SELECT t.NAME, i.INDEX_ID, i.NAME, i.TYPE & 1 FROM information_schema.INNODB_SYS_INDEXES i "
               "JOIN information_schema.INNODB_SYS_TABLES t ON t.TABLE_ID = i.TABLE_ID",
    "mysql": "SELECT t.NAME, i.INDEX_ID, i.NAME, i.TYPE & 1 FROM information_schema.INNODB_INDEXES i "
             "JOIN information_schema.INNODB_TABLES t ON t.TABLE_ID = i.TABLE_ID",
}
# the performance schema's I/O per file (where it is on and readable): bytes and requests the server asked for
MYSQL_FILE_IO = ("SELECT FILE_NAME, COUNT_READ, SUM_NUMBER_OF_BYTES_READ, COUNT_WRITE, SUM_NUMBER_OF_BYTES_WRITE "
                 "FROM performance_schema.file_summary_by_instance WHERE EVENT_NAME LIKE 'wait/io/file/innodb/%'")
# the schemas of the server's own tables (privileges, statistics, replication state)
MYSQL_SYSTEM_SCHEMAS = ("mysql", "sys")
# InnoDB writes a table name's other characters as @ and four hex digits in its files' names
MYSQL_ENCODED = re.compile(r"@([0-9a-f]{4})")


def _refused(what: str, exc: HostError) -> HostError:
    """A client's failure, said with the client's own last words (not its command line)."""
    said = str(exc).rsplit("):", 1)[-1].strip()
    return HostError(f"{what}: {said}")


def _timed(read):
    """What read() returns, and when it read it: time.monotonic() halfway through the call."""
    began = time.monotonic()
    value = read()
    return value, (began + time.monotonic()) / 2


class ObservedPostgresql:
    def __init__(self, spec: dict):
        psql = shutil.which("psql")
        if psql is None:
            raise HostError("psql is not installed on this host; install postgresql-client (tierlab reads the instance's "
                            "catalog with it)")
        self.shown = spec["conninfo"]
        self.db = Postgresql({"name": "postgresql", "bindir": str(Path(psql).parent),
                              "conninfo": f"{spec['conninfo']} options='-c default_transaction_read_only=on'"})
        self.asked = spec["databases"]
        self.databases: list[str] = []

    def _rows(self, sql: str, database: str = "postgres") -> list[list[str]]:
        return self.db.rows(sql, database)

    def require(self) -> dict:
        """Connect, and check what the user may do: read data_directory (pg_read_all_settings, or superuser) and
        connect to every database asked for."""
        try:
            ((user, allowed),) = self._rows("SELECT current_user, (SELECT rolsuper FROM pg_roles WHERE rolname = "
                                            "current_user) OR pg_has_role('pg_read_all_settings', 'USAGE')")
        except HostError as exc:
            raise _refused(f"cannot connect to PostgreSQL with conninfo '{self.shown}' (the database postgres)", exc) \
                from None
        if allowed != "t":
            raise HostError(f"PostgreSQL user {user} may not read where the instance keeps its files (data_directory); "
                            f"tierlab needs no more than: GRANT pg_read_all_settings TO {user}; (pg_monitor includes "
                            "it, and lets the statistics views show every session's work)")
        reachable = [name for (name,) in self._rows(
            "SELECT datname FROM pg_database WHERE datallowconn AND NOT datistemplate "
            "AND has_database_privilege(datname, 'CONNECT') ORDER BY 1")]
        missing = [name for name in self.asked if name not in reachable]
        if missing:
            raise HostError(f"databases {', '.join(missing)}: no such database, or user {user} may not connect to it "
                            f"(GRANT CONNECT ON DATABASE {missing[0]} TO {user};); it may connect to: "
                            f"{', '.join(reachable)}")
        self.databases = self.asked or reachable
        return {"user": user, "granted": "pg_read_all_settings", "databases": self.databases}

    def facts(self) -> dict:
        settings = dict(self._rows("SELECT name, setting FROM pg_settings WHERE name IN ('data_directory', "
                                   "'shared_buffers', 'block_size', 'segment_size', 'wal_segment_size', "
                                   "'effective_io_concurrency', 'random_page_cost', 'seq_page_cost', 'server_version')"))
        tablespaces = dict(self._rows("SELECT spcname, pg_tablespace_location(oid) FROM pg_tablespace"))
        return {"name": "postgresql", "version": settings["server_version"], "source": "observed",
                "page_size_bytes": int(settings["block_size"]), "data_directory": settings["data_directory"],
                "tablespaces": tablespaces, "databases": self.databases, "settings": settings}

    def object_files(self, facts: dict) -> list[dict]:
        """Every file of the instance's objects (see above): each fork's segments, with their offset in it."""
        settings = facts["settings"]
        data_dir = Path(facts["data_directory"])
        segment_bytes = int(settings["segment_size"]) * int(settings["block_size"])
        files, seen = [], set()
        for database in self.databases:
            for item in self._database_files(database, data_dir, segment_bytes):
                if item["path"] not in seen:
                    seen.add(item["path"])
                    files.append(item)
        wal_bytes = int(settings["wal_segment_size"])
        for path in sorted((data_dir / "pg_wal").resolve().iterdir()):
            name = WAL_FILE.fullmatch(path.name)
            if name and path.is_file():
                number = int(name[1], 16) * (2**32 // wal_bytes) + int(name[2], 16)
                files.append({"object": "pg_wal", "kind": "wal", "table": "pg_wal", "path": str(path),
                              "offset_bytes": number * wal_bytes})
        return files

    def _database_files(self, database: str, data_dir: Path, segment_bytes: int) -> list[dict]:
        relations = {int(row[0]): row[1:] for row in self._rows(PG_CATALOG, database)}

        def qualified(oid: int) -> tuple[str, bool]:
            schema, name = relations[oid][0], relations[oid][1]
            return f"{database}.{schema}.{name}", schema in PG_SYSTEM_SCHEMAS

        files = []
        for oid, (_, _, kind, table_oid, toast_owner, shared, tablespace, relative) in relations.items():
            if shared == "t":
                unit = obj = "pg_global"
                what = "catalog"
            elif kind == "t" or (kind == "i" and relations.get(int(table_oid), ("", "", ""))[2] == "t"):
                owner = int(toast_owner) if kind == "t" else int(relations[int(table_oid)][4])
                if owner not in relations:
                    continue
                unit, system = qualified(owner)
                what = "toast" if kind == "t" else "toast_index"
                obj = f"{unit}.{what}"
                if system:
                    unit = obj = f"{database}.pg_catalog"
                    what = "catalog"
            else:
                unit, system = qualified(oid)
                obj = unit
                what = "index" if kind == "i" else "table"
                if system:
                    unit = obj = f"{database}.pg_catalog"
                    what = "catalog"
            main = (data_dir / relative).resolve()
            # a unit's own file names it part by part, for the statements that move it (names may hold dots)
            named = {"qualified": [database, *relations[oid][:2]]} if obj == unit and what != "catalog" else {}
            for fork, suffix in FORKS.items():
                for number, path in _segments(main.with_name(main.name + fork)):
                    files.append({"object": obj if what == "catalog" else obj + suffix, "kind": what, "table": unit,
                                  "path": str(path), "offset_bytes": number * segment_bytes, "tablespace": tablespace,
                                  **(named if not fork else {})})
        return files

    def counters(self) -> dict:
        """{"instance": counters of the whole instance, "objects": {unit: its counters}, "read_at": when (monotonic,
        the middle of its statement) the instance's counters were read} (user tables and indexes)."""
        columns = ", ".join([f"sum({c})::bigint" for c in PG_INSTANCE_COUNTERS]
                            + [f"round(sum({t}) * 1000)::bigint" for t in PG_INSTANCE_TIMES])
        (values,), read_at = _timed(lambda: self._rows(f"SELECT {columns} FROM pg_stat_database"))
        instance = dict(zip(PG_INSTANCE_COUNTERS + [f"{t}_us" for t in PG_INSTANCE_TIMES],
                            (int(v or 0) for v in values), strict=True))
        (values,) = self._rows(f"SELECT {', '.join(PG_BGWRITER_COUNTERS)} FROM pg_stat_bgwriter")
        instance.update(zip(PG_BGWRITER_COUNTERS, map(int, values), strict=True))
        objects = {}
        for database in self.databases:
            for row in self._rows(f"SELECT schemaname, relname, {', '.join(f'coalesce({c}, 0)' for c in PG_TABLE_COUNTERS)} "
                                  "FROM pg_statio_user_tables", database):
                objects[f"{database}.{row[0]}.{row[1]}"] = dict(zip(PG_TABLE_COUNTERS, map(int, row[2:]), strict=True))
            for row in self._rows(f"SELECT schemaname, indexrelname, {', '.join(PG_INDEX_COUNTERS)} "
                                  "FROM pg_statio_user_indexes", database):
                objects[f"{database}.{row[0]}.{row[1]}"] = dict(zip(PG_INDEX_COUNTERS, map(int, row[2:]), strict=True))
        return {"instance": instance, "objects": objects, "read_at": read_at}


def _mysql_name(text: str) -> str:
    return MYSQL_ENCODED.sub(lambda m: chr(int(m[1], 16)), text)


class ObservedMysql:
    def __init__(self, spec: dict):
        if shutil.which("mysql") is None:
            raise HostError("the mysql client is not installed on this host; install mariadb-client (or MySQL's client): "
                            "tierlab reads the instance's catalog with it")
        self.name = spec["engine"]
        self.shown = spec["client_file"]
        self.db = MysqlFamily({"name": self.name, "client_file": spec["client_file"],
                               "client_options": ["--init-command=SET SESSION TRANSACTION READ ONLY"]})
        self.asked = spec["databases"]
        self.index_pages = spec["index_pages"]
        self.variables: dict[str, str] = {}
        self.file_io = False

    def require(self) -> dict:
        """Connect, and check what the user may do: read InnoDB's tablespaces and indexes (PROCESS)."""
        try:
            ((user,),) = self.db.rows("SELECT CURRENT_USER()")
        except HostError as exc:
            raise _refused(f"cannot connect to {self.name} with the client options in {self.shown}", exc) from None
        try:
            self.db.rows(f"{MYSQL_TABLESPACES[self.name]} LIMIT 1")
        except HostError as exc:
            if "PROCESS" not in str(exc):
                raise
            account = "'{}'@'{}'".format(*user.split("@", 1))
            raise HostError(f"{self.name} user {user} may not read InnoDB's tablespaces and indexes; tierlab needs no "
                            f"more than: GRANT PROCESS ON *.* TO {account};") from None
        self.variables = self.db._variables("VARIABLES", MYSQL_VARIABLES)
        databases = [name for (name,) in self.db.rows("SHOW DATABASES")]
        missing = [name for name in self.asked if name not in databases]
        if missing:
            raise HostError(f"databases {', '.join(missing)}: no such database, or user {user} may not see it; it "
                            f"sees: {', '.join(databases)}")
        if self.variables["performance_schema"] == "ON":
            try:
                self.db.rows(f"{MYSQL_FILE_IO} LIMIT 1")
                self.file_io = True
            except HostError:
                self.file_io = False
        return {"user": user, "granted": "PROCESS", "databases": self.asked or "all",
                "file_io": "performance_schema.file_summary_by_instance" if self.file_io else None}

    def facts(self) -> dict:
        return {"name": self.name, "version": self.db.rows("SELECT VERSION()")[0][0], "source": "observed",
                "page_size_bytes": int(self.variables["innodb_page_size"]), "data_directory": self.variables["datadir"],
                "databases": self.asked or "all", "settings": self.variables}

    def _dir(self, setting: str) -> Path:
        """A directory setting of InnoDB's: empty or relative ones are the data directory's, or under it."""
        return Path(self.variables["datadir"]) / (self.variables[setting] or ".")

    def object_files(self, facts: dict) -> list[dict]:
        """Every file of the instance's objects (see above); each table's file split into its indexes' pages by the
        pages' own headers, unless index_pages is off (reading every page of a large database takes long)."""
        datadir = Path(self.variables["datadir"])
        page_bytes = int(self.variables["innodb_page_size"])
        indexes: dict[str, dict[int, str]] = {}
        if self.index_pages:
            for table, index_id, name, clustered in self.db.rows(MYSQL_INDEXES[self.name]):
                indexes.setdefault(table, {})[int(index_id)] = "" if int(clustered) else name
        files, seen = [], set()

        def add(obj: str, kind: str, unit: str, path: Path, ranges=None, qualified=None) -> None:
            path = path.resolve()
            if path.is_file() and (obj, str(path)) not in seen:
                seen.add((obj, str(path)))
                files.append({"object": obj, "kind": kind, "table": unit, "path": str(path), "offset_bytes": 0,
                              **({"ranges": ranges} if ranges is not None else {}),
                              **({"qualified": qualified} if qualified else {})})

        for space, filename in self.db.rows(MYSQL_TABLESPACES[self.name]):
            if "/" not in space:
                continue
            database, table = space.split("/", 1)
            table, *partition = re.split(r"#[Pp]#", table, maxsplit=1)
            database, table = _mysql_name(database), _mysql_name(table)
            if database in MYSQL_SYSTEM_SCHEMAS:
                # the server's own tables: one object, which no statement moves
                add("mysql", "catalog", "mysql", datadir / filename)
                continue
            if self.asked and database not in self.asked:
                continue
            unit = f"{database}.{table}"
            obj = f"{unit}#{_mysql_name(partition[0])}" if partition else unit
            path = Path(filename) if Path(filename).is_absolute() else datadir / filename
            names = indexes.get(space)
            if names and path.is_file():
                named = {index_id: (obj if not name else f"{unit}.{_mysql_name(name)}") for index_id, name in names.items()}
                for name, ranges in object_ranges(index_runs(str(path), page_bytes), page_bytes, named, obj).items():
                    add(name, "table" if name == obj else "index", unit, path, ranges,
                        [database, table] if name == unit else None)
            else:
                add(obj, "table", unit, path, qualified=[database, table] if obj == unit else None)
        home = self._dir("innodb_data_home_dir")
        for spec in self.variables["innodb_data_file_path"].split(";"):
            add("innodb_system", "system", "innodb_system", home / spec.split(":")[0])
        undo = self._dir("innodb_undo_directory")
        for path in sorted([*undo.glob("undo[0-9][0-9][0-9]"), *undo.glob("undo_[0-9][0-9][0-9]")]):
            add("innodb_undo", "undo", "innodb_undo", path)
        logs = self._dir("innodb_log_group_home_dir")
        for path in sorted([*logs.glob("ib_logfile[0-9]*"), *logs.glob("#innodb_redo/#ib_redo[0-9]*")]):
            add("innodb_redo", "redo", "innodb_redo", path)
        for spec in self.variables["innodb_temp_data_file_path"].split(";"):
            add("innodb_temp", "temp", "innodb_temp", datadir / spec.split(":")[0])
        for path in sorted(datadir.glob("#ib_*.dblwr")):
            add("innodb_doublewrite", "doublewrite", "innodb_doublewrite", path)
        if self.variables["log_bin"] == "ON":
            base = Path(self.variables["log_bin_basename"])
            for path in sorted(base.parent.glob(f"{base.name}.[0-9]*")):
                add("binlog", "binlog", "binlog", path)
        return files

    def counters(self) -> dict:
        """{"instance": the server's status counters, "files": {path: the performance schema's I/O on it}, "read_at":
        when (monotonic, the middle of its statement) the status counters were read} (files only where the performance
        schema is on and readable)."""
        status, read_at = _timed(lambda: self.db._variables("STATUS", MYSQL_STATUS))
        instance = {name: int(value) for name, value in status.items() if value is not None}
        files = {}
        if self.file_io:
            for name, reads, read_bytes, writes, written in self.db.rows(MYSQL_FILE_IO):
                files[name] = {"reads": int(reads), "read_bytes": int(read_bytes), "writes": int(writes),
                               "written_bytes": int(written)}
        return {"instance": instance, "files": files, "read_at": read_at}


def observed(spec: dict):
    """The observed instance a spec describes."""
    return ObservedPostgresql(spec) if spec["engine"] == "postgresql" else ObservedMysql(spec)
