"""The database engines tierlab runs, declared once: everything the rest of tierlab asks of an engine before it
starts one (validation, the role that provisions it, the SQL files it reads, how its plans and counters are read,
how its server stops) comes from here."""

from dataclasses import asdict, dataclass

PAGE_SIZES = {"4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536}
# The compression of the workload's tables: none; InnoDB's ROW_FORMAT=COMPRESSED in 8 or 4 KiB blocks (zlib8,
# zlib4) or page compression (MariaDB's PAGE_COMPRESSED, MySQL's COMPRESSION='zlib': pages compressed in the
# file with holes punched); or the file system's (zstd: btrfs compresses the database's files on every tier)
COMPRESSIONS = ("none", "zlib8", "zlib4", "page", "zstd")


@dataclass(frozen=True)
class Engine:
    name: str
    # what it is, as the docs and errors name it
    title: str
    # the family: the role that provisions it (playbooks/roles/<family>) and the host agent's module
    # (tracing/tierlab_host/engines); its members share one InnoDB
    family: str
    # the SQL dialect of its schema and query files: schemas/<workload>/<dialect>.sql,
    # queries/<workload>/<dialect>/<query>.sql where the dialects differ
    dialect: str
    # the page sizes an instance may have (innodb_page_size; PostgreSQL's BLCKSZ is fixed when it is built)
    page_sizes: tuple[str, ...]
    default_page_size: str
    compressions: tuple[str, ...]
    # whose counters tell its own account of a query's reads (metrics.engine_view): innodb or postgresql
    counters: str
    # the format of the plans it explains (metrics.plans): mysql or postgresql
    plan_format: str
    # the signals that shut its server down, cleanly first (the host agent sends each in turn, then SIGKILL)
    stop_signals: tuple[str, ...]

    def facts(self) -> dict:
        """The declaration as the playbooks take it."""
        return asdict(self)


MARIADB = Engine(name="mariadb", title="MariaDB (Debian 12's 10.11)", family="mysql", dialect="mysql",
                 page_sizes=tuple(PAGE_SIZES), default_page_size="16k", compressions=COMPRESSIONS, counters="innodb",
                 plan_format="mysql", stop_signals=("SIGTERM",))
MYSQL = Engine(name="mysql", title="Oracle MySQL (Debian sid's, in a chroot where the host has none)", family="mysql",
               dialect="mysql", page_sizes=tuple(PAGE_SIZES), default_page_size="16k", compressions=COMPRESSIONS,
               counters="innodb", plan_format="mysql", stop_signals=("SIGTERM",))
# a fast shutdown, then an immediate one
POSTGRESQL = Engine(name="postgresql", title="PostgreSQL (Debian 12's 15)", family="postgresql", dialect="postgresql",
                    page_sizes=("8k",), default_page_size="8k", compressions=("none", "zstd"), counters="postgresql",
                    plan_format="postgresql", stop_signals=("SIGINT", "SIGQUIT"))

ENGINES = {engine.name: engine for engine in (MARIADB, MYSQL, POSTGRESQL)}
