"""The workloads tierlab runs, declared once: their tables (with the layout's codes and the load
order), their steps (query ids, or a driver's tests), how their data is made, and the size of their tables.
Every step (validation, layouts, data generation, load, queries, analysis) reads them from here.
"""

from dataclasses import asdict, dataclass, field


@dataclass(frozen=True)
class Workload:
    name: str
    # layout code -> table, in the order a layout's name lists them
    codes: dict[str, str]
    # the tables, in the order they are generated and loaded (small ones first)
    load_order: tuple[str, ...]
    # query ids, as results name them and as the query files are named (queries/<workload>/<dialect>/<id>.sql)
    queries: tuple[str, ...]
    # bytes of each table that grows with the scale factor, at scale factor 1, with the schema's indexes:
    # measured after the load on MariaDB 10.11 at 16k pages
    bytes_at_sf1: dict[str, int] = field(default_factory=dict)
    # tables that do not grow with the scale factor
    fixed_bytes: dict[str, int] = field(default_factory=dict)
    # bytes of each table's generated .tbl file at scale factor 1 (measured with the datagen role's generators), and
    # of those that do not grow with the scale factor: the data cache's size
    generated_bytes_at_sf1: dict[str, int] = field(default_factory=dict)
    generated_fixed_bytes: dict[str, int] = field(default_factory=dict)
    # how a run goes through the workload's steps: "queries" (each step one query file, run by the engine's
    # client) or "timed" (each step a timed window of a load driver such as sysbench, one per test)
    kind: str = "queries"
    # a query workload's generator of table files (the datagen role's datagen_generate names each), or a timed
    # workload's driver, which fills its tables itself at load time and runs its steps
    generator: str | None = None
    driver: str | None = None
    # a timed workload's tables are numbered copies of its one declared table (sysbench: sbtest1 to sbtestN),
    # and its layout code places them together
    numbered: bool = False
    # a numbered workload's bytes per row of a table, with its indexes (measured as bytes_at_sf1 is)
    row_bytes: int = 0
    # per query, the driving dimension (table, key column) whose key ranges split the query into subqueries run
    # at once (the subqueries variable); a workload without them runs each query whole
    partition_keys: dict[str, tuple[str, str]] = field(default_factory=dict)
    # the fact table and the first column of its clustered key: under join_plan=hash, where every subquery would
    # scan the whole fact table to join it with its dimension range, each scans its own range of the fact table's
    # pages instead (PostgreSQL: a range of its blocks, a TID range scan; InnoDB: a range of that column, whose
    # order is the pages')
    fact_key: tuple[str, str] | None = None
    # how the generated data is written: TPC-H's '|'-separated .tbl files, or CSV files with a header row (a
    # workload directory's dumps are loaded whole by the engine's client)
    data_format: str = "tbl"
    # A workload of the user's own (runs.workload_dir): its directory on the controller; a digest of what makes
    # its database (schema and data), which the database's name carries; its generator's source (csv_files: the
    # directory of its data files, each table's named in data_files, <table>.csv or <table>.parquet; sql_dump: the
    # directory of its data-only dumps, each dialect's named in data_files, <dialect>.sql; csv_command: the command
    # that prints a table's CSV); each query's weight
    # (how often it runs, relative); per dialect, its schema file and its index file (or None); its replays (steps
    # that replay a PostgreSQL csvlog): id -> the log's path, and the captured database whose sessions they replay.
    directory: str | None = None
    revision: str = ""
    data_source: str = ""
    data_files: dict[str, str] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)
    schema_files: dict[str, str] = field(default_factory=dict)
    index_files: dict[str, str | None] = field(default_factory=dict)
    replays: dict[str, str] = field(default_factory=dict)
    replay_database: str = ""

    @property
    def playbook(self) -> str:
        return playbook(WORKLOAD_DIR if self.directory else self.name)

    @property
    def scope(self) -> str:
        """What the catalog's variables name this workload by (a directory's workload is one of many)."""
        return WORKLOAD_DIR if self.directory else self.name

    def query_files(self, query: str, dialect: str) -> tuple[str, ...]:
        """Where a query's SQL is, in the order to look: the dialect's own file where the dialects differ, else
        the one file every engine runs (paths in the checkout, or in a workload directory); a replay's log."""
        if query in self.replays:
            return (self.replays[query],)
        where = f"{self.directory}/queries" if self.directory else f"queries/{self.name}"
        return f"{where}/{dialect}/{query}.sql", f"{where}/{query}.sql"

    def facts(self) -> dict:
        """The declaration as the playbooks take it."""
        return {**self.declaration(), "playbook": self.playbook, "timed": self.kind == "timed"}

    def declaration(self) -> dict:
        """Every field, as a run's settings record a workload directory's (workload_of reads it back)."""
        return asdict(self)

    def tables(self, count: int = 0) -> list[str]:
        """The tables, in load order; a numbered workload's `count` copies of its table."""
        if self.numbered:
            return [f"{table}{n}" for table in self.load_order for n in range(1, count + 1)]
        return list(self.load_order)

    def query_aliases(self) -> dict[str, str]:
        """What a user may type for each query ('q03', 'q3', '3' for TPC-H's q03; 'q1.1', '1.1' for SSB's;
        'oltp_read_only', 'read_only' for sysbench's test); a workload directory's queries by their ids alone."""
        if self.directory:
            return {query: query for query in self.queries}
        aliases = {}
        for query in self.queries:
            number = query.removeprefix("q").removeprefix("oltp_")
            aliases.update({query: query, number: query})
            if number.isdigit():
                aliases.update({str(int(number)): query, f"q{int(number)}": query})
        return aliases


TPCH = Workload(
    name="tpch",
    codes={"C": "customer", "O": "orders", "L": "lineitem", "PS": "partsupp", "P": "part", "S": "supplier",
           "N": "nation", "R": "region"},
    load_order=("region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem"),
    queries=tuple(f"q{n:02d}" for n in range(1, 23)),
    bytes_at_sf1={"lineitem": 1_136_656_384, "orders": 226_492_416, "partsupp": 205_520_896, "part": 41_943_040,
                  "customer": 37_748_736, "supplier": 10_485_760},
    fixed_bytes={"nation": 98_304, "region": 81_920},
    generated_bytes_at_sf1={"lineitem": 759_863_287, "orders": 171_952_161, "partsupp": 118_984_616,
                            "part": 24_135_125, "customer": 24_346_144, "supplier": 1_409_184},
    generated_fixed_bytes={"nation": 2_224, "region": 389},
    generator="tpchgen",
)

# The Star Schema Benchmark (O'Neil, O'Neil, Chen): LINEORDER and four dimensions; its 13 queries in 4 flights.
SSB_QUERIES = ("q1.1", "q1.2", "q1.3", "q2.1", "q2.2", "q2.3", "q3.1", "q3.2", "q3.3", "q3.4", "q4.1", "q4.2", "q4.3")
# Per flight, the dimension whose key ranges split a query: flight 1 filters dates, flight 2 parts; flights 3
# and 4 filter customers and suppliers alike, of which customers have the more keys to split.
SSB_DRIVING_DIMENSIONS = {"1": ("date", "d_datekey"), "2": ("part", "p_partkey"), "3": ("customer", "c_custkey"),
                          "4": ("customer", "c_custkey")}
SSB = Workload(
    name="ssb",
    codes={"LO": "lineorder", "C": "customer", "S": "supplier", "P": "part", "D": "date"},
    load_order=("date", "supplier", "customer", "part", "lineorder"),
    queries=SSB_QUERIES,
    bytes_at_sf1={"lineorder": 1_098_907_648, "customer": 12_582_912, "supplier": 360_448, "part": 30_408_704},
    fixed_bytes={"date": 425_984},
    generated_bytes_at_sf1={"lineorder": 595_450_080, "customer": 2_912_791, "supplier": 171_965, "part": 17_094_462},
    generated_fixed_bytes={"date": 228_574},
    partition_keys={query: SSB_DRIVING_DIMENSIONS[query[1]] for query in SSB_QUERIES},
    fact_key=("lineorder", "lo_orderkey"),
    generator="ssb_dbgen",
)

# sysbench's OLTP tests (Kopytov): `tables` tables sbtest1..N of `table_size` rows each, made by sysbench's own
# prepare; each step is one test run for a timed window.
SYSBENCH = Workload(
    name="sysbench",
    codes={"SB": "sbtest"},
    load_order=("sbtest",),
    queries=("oltp_read_only", "oltp_read_write", "oltp_write_only"),
    row_bytes=260,
    kind="timed",
    driver="sysbench",
    numbered=True,
)

WORKLOADS = {workload.name: workload for workload in (TPCH, SSB, SYSBENCH)}

# corun=writer: a concurrent writer beside every query, sysbench's write-only OLTP test on tables of its own on the
# capacity tier (about 100 MB: small beside TPC-H's or SSB's SF 1, so that it writes at random over all of them)
CORUN_WRITER = {"test": "oltp_write_only", "database": "tierlab_writer", "tables": 4, "table_size": 100000,
                "threads": 4, "report_interval_s": 1}
# the workload of playbooks/workload.yml: one the user declares in a directory (workload_dir)
WORKLOAD_DIR = "workload_dir"


def playbook(workload: str) -> str:
    """The playbook that runs a catalog's workload, or a workload directory's (WORKLOAD_DIR)."""
    return "playbooks/workload.yml" if workload == WORKLOAD_DIR else f"playbooks/{workload}.yml"


def workload_of(settings: dict) -> Workload:
    """A run's workload: the catalog's, or the one its settings recorded from a workload directory (whose codes are
    its tables, in load order: a record written with sorted keys keeps the order in load_order alone)."""
    if settings["workload"] in WORKLOADS:
        return WORKLOADS[settings["workload"]]
    declared = settings["workload_declared"]
    tables = tuple(declared["load_order"])
    return Workload(**{**declared, "codes": {table: table for table in tables}, "load_order": tables,
                       "queries": tuple(declared["queries"])})
