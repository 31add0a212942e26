"""MariaDB and Oracle MySQL: InnoDB, one .ibd per table placed with DATA DIRECTORY.

The engine's spec (from the mysql role): name, instance, server, defaults_file,
client_file, port, log_file, datadir, tier_dirs {tier role: DATA DIRECTORY}, settings
(variables read back into the manifest), source (where the engine came from),
and chroot: the root of the system the server and its clients run in when the
host's distribution does not package the engine ("" otherwise; the paths
tierlab uses are bind-mounted there at the same place); client_options: more
options of the client (an instance tierlab observes: its sessions read-only).
"""

import errno
import os
import shutil
import subprocess
import time
from pathlib import Path

from ..innodb_pages import index_runs, object_ranges
from ..system import HostError, copy_keeping_holes, no_room, run
from . import server

COUNTERS = [
    "Innodb_buffer_pool_read_ahead",
    "Innodb_buffer_pool_reads",
    "Innodb_buffer_pool_read_requests",
    "Innodb_data_reads",
    "Innodb_data_read",
    "Innodb_data_writes",
    "Innodb_data_written",
    "Innodb_pages_read",
]
# how each engine limits a statement's time on the server (MariaDB in seconds, MySQL in ms)
STATEMENT_LIMIT = {
    "mariadb": "SET SESSION max_statement_time={s}",
    "mysql": "SET SESSION max_execution_time={ms}",
}
# what the server's error says when that limit stopped the statement
LIMIT_ERRORS = ("max_statement_time", "maximum statement execution time exceeded")
# InnoDB's history list: the committed transactions' undo records its purge threads have not removed yet. MySQL
# shortens it only in steps, when the purge truncates it (a history of 6268 transactions stayed 6268 for 22 s of
# purging, then was 0), and leaves some there while idle (161 after a read-write test of a few seconds, for good):
# the purge is done when the history is no longer than it was when InnoDB was last found idle (0 at first), or
# when InnoDB has neither read nor changed a page for SETTLE_QUIET_S. A purge still working after SETTLE_LIMIT_S
# is left to the window; the row says what it left.
HISTORY_LENGTH = "SELECT count FROM information_schema.innodb_metrics WHERE name = 'trx_rseg_history_len'"
PURGE_WORK = ["Innodb_data_reads", "Innodb_buffer_pool_write_requests"]
SETTLE_QUIET_S = 2
SETTLE_LIMIT_S = 1800
# each engine's dictionary of a table's indexes: id, name, and whether it is the clustered one (TYPE bit 1)
INDEXES = {
    "mariadb": "SELECT i.INDEX_ID, i.NAME, i.TYPE & 1 FROM information_schema.INNODB_SYS_INDEXES i "
               "JOIN information_schema.INNODB_SYS_TABLES t ON t.TABLE_ID = i.TABLE_ID WHERE t.NAME = '{table}'",
    "mysql": "SELECT i.INDEX_ID, i.NAME, i.TYPE & 1 FROM information_schema.INNODB_INDEXES i "
             "JOIN information_schema.INNODB_TABLES t ON t.TABLE_ID = i.TABLE_ID WHERE t.NAME = '{table}'",
}


class MysqlFamily:
    def __init__(self, spec: dict):
        self.spec = spec
        self.name = spec["name"]
        self.prefix = ["chroot", spec["chroot"]] if spec.get("chroot") else []
        self.user = "mysql"
        self._idle_history = 0

    # `mysql` and `mysqladmin` are MySQL's clients and MariaDB's compatibility names for its own
    def client_command(self, database: str | None = None) -> list[str]:
        return [*self.prefix, "mysql", f"--defaults-file={self.spec['client_file']}", "--batch", "--skip-column-names",
                *self.spec.get("client_options", []), *([database] if database else [])]

    def ping(self) -> bool:
        done = subprocess.run([*self.prefix, "mysqladmin", f"--defaults-file={self.spec['client_file']}",
                               "--connect-timeout=2", "ping"], capture_output=True, text=True)
        return done.returncode == 0

    def start(self) -> dict:
        marker = f"--defaults-file={self.spec['defaults_file']}"
        # the server drops to its `user` setting itself; --defaults-file must come first (chroot execs the
        # server in its own process, so the recorded pid is the server's)
        return server.start(self.spec["instance"], self.name, [*self.prefix, self.spec["server"], marker], marker,
                            self.spec["log_file"], self.ping, self.spec["port"], self.spec["stop_signals"])

    def stop(self) -> dict:
        return server.stop(self.spec["instance"])

    def running(self) -> bool:
        return server.running(self.spec["instance"])

    def script(self, sql: str, limit_s: int) -> str:
        """What the client is given for one statement under a server-side time limit."""
        return f"{STATEMENT_LIMIT[self.name].format(s=limit_s, ms=limit_s * 1000)};\n{sql}\n"

    def is_timeout(self, error: str) -> bool:
        return any(text in error for text in LIMIT_ERRORS)

    def sysbench_options(self, database: str, target: str = "", table_options: str = "") -> tuple[list[str], dict]:
        """sysbench's options to reach the server (its mysql driver, as root through the server's socket, which
        a chroot's bind mounts show at the same path), and the environment it needs; with a target, its
        prepare creates the tables there (DATA DIRECTORY) with the given table options."""
        lines = Path(self.spec["client_file"]).read_text().splitlines()
        client = {key.strip(): value.strip() for key, value in (line.split("=", 1) for line in lines if "=" in line)}
        options = ["--db-driver=mysql", f"--mysql-socket={client['socket']}", f"--mysql-user={client['user']}",
                   f"--mysql-password={client['password']}", f"--mysql-db={database}"]
        if target:
            options.append(f"--mysql-storage-engine=InnoDB DATA DIRECTORY='{target}' {table_options}".rstrip())
        return options, {}

    def rows(self, sql: str, database: str | None = None, timeout_s: float = 60) -> list[list[str]]:
        done = run([*self.client_command(database), "-e", sql], timeout_s=timeout_s)
        return [line.split("\t") for line in done.stdout.splitlines()]

    def _variables(self, kind: str, names: list[str]) -> dict[str, str]:
        """SHOW GLOBAL VARIABLES or STATUS (MySQL has no information_schema tables of them any more)."""
        quoted = ",".join(f"'{n}'" for n in names)
        rows = self.rows(f"SHOW GLOBAL {kind} WHERE variable_name IN ({quoted})")
        values = {name.lower(): value for name, value in rows}
        return {n: values.get(n.lower()) for n in names}

    def facts(self) -> dict:
        return {"name": self.name, "version": self.rows("SELECT VERSION()")[0][0], "source": self.spec["source"],
                "settings": self._variables("VARIABLES", self.spec["settings"]),
                # where a table of each tier role is made: DATA DIRECTORY, the directory a move takes it to
                "table_dirs": self.spec["tier_dirs"]}

    def counters(self, database: str) -> dict:
        return {name: int(value) for name, value in self._variables("STATUS", COUNTERS).items()}

    def settle(self) -> dict:
        """Wait for InnoDB's purge of what earlier transactions left in the undo logs, so that a window does not
        carry the purge of an earlier step's writes: a cold restart is a fast shutdown, which leaves the purge to
        the next start, and MySQL's purge threads then wrote for minutes into a read-only window after a
        write-only one. Returns the history list's length before and after the wait, and the seconds waited."""
        started = quiet_since = time.monotonic()
        history, work = self._purge_state()
        before = history
        while history > self._idle_history and time.monotonic() - quiet_since < SETTLE_QUIET_S:
            if time.monotonic() - started > SETTLE_LIMIT_S:
                break
            time.sleep(0.5)
            history, now = self._purge_state()
            if now != work:
                work, quiet_since = now, time.monotonic()
        else:
            self._idle_history = history
        return {"history_before": before, "history_after": history, "settle_s": round(time.monotonic() - started, 3)}

    def _purge_state(self) -> tuple[int, list[str]]:
        """The history list's length, and InnoDB's page reads and changes so far."""
        work = self._variables("STATUS", PURGE_WORK)
        return int(self.rows(HISTORY_LENGTH)[0][0]), [work[name] for name in PURGE_WORK]

    def plan(self, database: str, sql: str, log_from: int) -> str:
        """The optimizer's plan of the statement, as JSON text (EXPLAIN FORMAT=JSON: the plan the
        optimizer chooses now, with the statistics the run used; the log is not read)."""
        done = run([*self.client_command(database), "--raw", "-e", f"EXPLAIN FORMAT=JSON {sql.strip().rstrip(';')}"])
        return done.stdout

    def _isl(self, database: str, table: str) -> Path:
        return Path(self.spec["datadir"]) / database / f"{table}.isl"

    def _table_file(self, database: str, table: str) -> Path:
        """Where a table's .ibd is: MariaDB keeps the path in an .isl file beside the datadir's own
        files, MySQL in its data dictionary (the server must be running)."""
        if self.name == "mysql":
            rows = self.rows(f"SELECT file_name FROM information_schema.files WHERE tablespace_name = '{database}/{table}'")
            if not rows:
                raise HostError(f"MySQL has no tablespace {database}/{table}: the table does not exist")
            return Path(rows[0][0])
        isl = self._isl(database, table)
        if not isl.exists():
            raise HostError(f"{isl} does not exist: table {database}.{table} was not created with DATA DIRECTORY")
        return Path(isl.read_text().strip())

    def object_files(self, database: str, tables: list[str]) -> list[dict]:
        """Each table's .ibd, split by its pages' own headers into byte ranges: the clustered index's pages
        and the file's other pages are the table's object, each secondary index's pages an object named
        as the index (as PostgreSQL's are). The server first writes what it holds of them to their files."""
        self.rows(f"FLUSH TABLES {', '.join(tables)} FOR EXPORT; UNLOCK TABLES", database)
        page_bytes = int(self._variables("VARIABLES", ["innodb_page_size"])["innodb_page_size"])
        files = []
        for table in tables:
            path = str(self._table_file(database, table))
            names = {int(index_id): table if int(clustered) else name for index_id, name, clustered
                     in self.rows(INDEXES[self.name].format(table=f"{database}/{table}"))}
            for name, ranges in object_ranges(index_runs(path, page_bytes), page_bytes, names, table).items():
                files.append({"object": name, "kind": "table" if name == table else "index", "table": table,
                              "path": path, "offset_bytes": 0, "ranges": ranges})
        return files

    def tier_tables(self, role: str) -> dict[str, dict[str, int]]:
        """{database: {table: bytes}} of the tables whose files are on the role's tier: InnoDB makes them in a
        directory named after their database, under the tier's DATA DIRECTORY."""
        tables = {}
        for path in sorted(Path(self.spec["tier_dirs"][role]).glob("*/*.ibd")):
            tables.setdefault(path.parent.name, {})[path.stem] = path.stat().st_size
        return tables

    def database_dirs(self, database: str) -> list[Path]:
        """InnoDB makes a table's file under its DATA DIRECTORY, in a directory named after its database."""
        return [Path(directory) / database for directory in self.spec["tier_dirs"].values()]

    def place(self, database: str, placement: dict[str, str], table_options: str) -> list[dict]:
        """Give each new, still empty table of a schema tierlab did not write (a workload directory's) its tier's
        DATA DIRECTORY: MariaDB ignores DATA DIRECTORY in ALTER TABLE, so each is made again from the server's own
        CREATE TABLE text with the clause (and the run's table options) added."""
        placed = []
        for table, tier in placement.items():
            shown = run([*self.client_command(database), "--raw", "-e", f"SHOW CREATE TABLE `{table}`"]).stdout
            create = shown.split("\t", 1)[1].strip()
            if "PARTITION BY" in create.upper():
                raise HostError(f"table {database}.{table} is partitioned: tierlab places whole tables with DATA "
                                "DIRECTORY, which a partitioned table takes per partition; leave its partitioning out "
                                "of the workload's schema")
            target = self.spec["tier_dirs"][tier]
            run([*self.client_command(database), "-e",
                 f"SET SESSION foreign_key_checks = 0; DROP TABLE `{table}`; "
                 f"{create} DATA DIRECTORY='{target}' {table_options}".rstrip()])
            placed.append({"object": table, "to": target})
        return placed

    def drop(self, database: str) -> None:
        """Drop a database tierlab loaded: InnoDB removes each table's file under its DATA DIRECTORY too."""
        self.rows(f"DROP DATABASE `{database}`", timeout_s=3600)

    def move(self, database: str, placement: dict[str, str]) -> list[dict]:
        """Move tables whose tier changes, offline: MariaDB ignores ALTER TABLE ... DATA DIRECTORY, so
        with the server stopped the .ibd is copied to the other tier and its .isl rewritten; MySQL finds
        the moved file itself when it starts, in its innodb_directories."""
        pending = []
        for table, tier in placement.items():
            src = self._table_file(database, table)
            dst = Path(self.spec["tier_dirs"][tier]) / database / f"{table}.ibd"
            if src != dst:
                pending.append((table, src, dst))
        if not pending:
            return []
        moves = []
        self.stop()
        try:
            for table, src, dst in pending:
                started = time.monotonic()
                _move_file(src, dst, placement[table])
                if self.name == "mariadb":
                    isl = self._isl(database, table)
                    isl.write_text(str(dst))
                    shutil.chown(isl, "mysql", "mysql")
                moves.append({"object": table, "from": str(src), "to": str(dst),
                              "size_bytes": dst.stat().st_size, "move_s": round(time.monotonic() - started, 3)})
        finally:
            self.start()
        return moves


def _move_file(src: Path, dst: Path, tier: str) -> None:
    """Copy src to dst on the other tier, then remove src: the table is on one tier or the other, whole. A copy
    the tier has no room for is removed again and refused, with the tier's free space."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.chown(dst.parent, "mysql", "mysql")
    tmp = dst.with_suffix(".ibd.moving")
    try:
        copy_keeping_holes(src, tmp)
        shutil.copystat(src, tmp)
        shutil.chown(tmp, "mysql", "mysql")
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno != errno.ENOSPC:
            raise
        raise HostError(f"moving {src.name} ({src.stat().st_size / 2**20:.1f} MiB) to the {tier} tier ran out of space "
                        f"there: {no_room(dst.parent)}; it stays whole on its tier ({src.parent}), and the tables "
                        "moved before it stay moved. Free space on that tier, or choose a layout that fits it, then "
                        "resume the run") from None
    os.replace(tmp, dst)
    src.unlink()
