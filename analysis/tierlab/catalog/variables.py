"""The variables users set with -e, declared once: each one's name, how its value is read, its default, which
engines and workloads it applies to, and what it means. From this table come the validation of a run's settings
(runs.settings), what the playbooks gather before anything runs, the defaults a study assumes, and the variables'
reference (docs/variables.md, `tierlab variables`).

Groups: `run` variables are a run's settings (config/run.json records them); `tiers` variables say how the
inventory's tiers are made where a tier does not say it itself; `results` variables say where results go and which
run to continue; `observe` variables say how playbooks/observe.yml reaches an instance tierlab did not start and how
long it watches it (with `engine` and `trace_backend` of the run variables)."""

from dataclasses import dataclass

from .engines import ENGINES, PAGE_SIZES, Engine
from .values import (
    Bool,
    Choice,
    Corun,
    Dilation,
    Int,
    Layout,
    Number,
    PageSize,
    Queries,
    RunId,
    SizeOrNone,
    SizeOrShare,
    SizeShareOrNone,
    SizeShareOrUnbounded,
    Text,
)
from .workloads import WORKLOAD_DIR, WORKLOADS

ALL_ENGINES = tuple(ENGINES)
MYSQL_FAMILY = tuple(name for name, engine in ENGINES.items() if engine.family == "mysql")
# a workload directory (playbooks/workload.yml) is a query workload of the user's own
QUERY_WORKLOADS = (*(name for name, workload in WORKLOADS.items() if workload.kind == "queries"), WORKLOAD_DIR)
TIMED_WORKLOADS = tuple(name for name, workload in WORKLOADS.items() if workload.kind == "timed")
SPLIT_WORKLOADS = tuple(name for name, workload in WORKLOADS.items() if workload.partition_keys)
FLUSH_METHODS = ("O_DIRECT", "O_DIRECT_NO_FSYNC", "fsync", "O_DSYNC")
# the optimizer's own choice of join, or hash joins (scans of the fact table) or nested loops over index lookups
# forced by leaving the other methods out (experiment E5)
JOIN_PLANS = ("optimizer", "hash", "index")
# how the fast tier as a block cache admits pages: the cost model's CACHE_POLICIES
FAST_CACHE_POLICIES = ("admitting", "lru")
TIER_ROLES = ("fast", "capacity")
TRACE_BACKENDS = ("auto", "blktrace", "ftrace")
TIER_EMULATIONS = ("model", "throttle", "none")
# the file systems tierlab makes on the tiers it formats
FILESYSTEMS = ("ext4", "btrfs")
# the emulator accepts a dilation from 1 (modelled time as the model says) to this
MAX_DILATION = 1000
PLANNER_COST = Number(0, 1e6, "PostgreSQL's planner cost of a page read, e.g. 1.1")


@dataclass(frozen=True)
class Variable:
    name: str
    kind: object
    # the value a run has when the variable is left unset, as a user would type it; None: the engine's own
    # (default_for says which)
    default: str | None
    help: str
    group: str = "run"
    # the engines and workloads it applies to (None: every one); given for another, it is refused
    engines: tuple[str, ...] | None = None
    workloads: tuple[str, ...] | None = None

    def applies(self, engine: str, workload: str) -> bool:
        return (self.engines is None or engine in self.engines) and (self.workloads is None or workload in self.workloads)

    def default_for(self, engine: Engine) -> str:
        """The value a run on engine has when the variable is left unset."""
        if self.default is not None:
            return self.default
        return {"page_size": engine.default_page_size}[self.name]


VARIABLES = (
    Variable("engine", Choice(ALL_ENGINES), "mariadb",
             "`mariadb` (Debian 12's MySQL), `postgresql` (Debian 12's PostgreSQL 15), or `mysql` (Oracle MySQL: "
             "from Debian sid in a chroot where the host's distribution has none)."),
    Variable("layout", Layout(), "None",
             "the tables on the fast tier: `None`, `ALL`, or codes joined by `+`. TPC-H: `C` customer, `O` orders, "
             "`L` lineitem, `PS` partsupp, `P` part, `S` supplier, `N` nation, `R` region. SSB: `LO` lineorder, `C` "
             "customer, `S` supplier, `P` part, `D` date. sysbench: `SB` its tables. Every other table sits on the "
             "capacity tier; indexes stay with their table."),
    Variable("queries", Queries(), "all",
             "`all`, or queries joined by commas, run in that order: TPC-H's by number (`3,10,16` or `q03`), SSB's by "
             "flight and number (`1.1,3.2` or `q1.1`), sysbench's tests by name (`read_write` or `oltp_read_write`)."),
    Variable("page_size", PageSize(PAGE_SIZES), None,
             "MariaDB/MySQL `innodb_page_size` (one instance per page size). PostgreSQL: `8k` only (its block size "
             "is fixed when it is built; Debian's is 8 KiB); another size is refused."),
    Variable("buffer_pool", SizeOrShare(), "5%",
             "the engine's own cache (`innodb_buffer_pool_size`, PostgreSQL's `shared_buffers`): a size (`256M`, "
             "`1G`) or a percentage of the estimated data size (the source study used about 4.5%); at least 256 "
             "pages."),
    Variable("query_timeout_s", Int(1, 7 * 86400), "1800",
             "per query (server-side `max_statement_time`, `max_execution_time` or `statement_timeout`); a query "
             "over it gets a `timeout` row."),
    Variable("tries", Int(1, 1000), "1", "runs of each query."),
    Variable("cold", Bool(), "true",
             "restart the server (no buffer-pool reload) and drop the OS caches before every query; `false` runs "
             "warm."),
    Variable("trace", Bool(), "true", "block-trace every query."),
    Variable("trace_backend", Choice(TRACE_BACKENDS), "auto",
             "`blktrace` where its relay files open, else `ftrace` (a private tracing instance); or force one."),
    Variable("system_tier", Choice(TIER_ROLES), "capacity",
             "the tier of the system tablespace, redo/undo logs and temporary files (PostgreSQL: the data directory "
             "with its catalogs, WAL and temporary files)."),
    Variable("fast_cache", SizeShareOrNone(), "none",
             "the fast tier as a block cache of the capacity tier instead of a place for tables: its size (`1G`) "
             "or a percentage of the estimated data size (`25%`). "
             "Emulated (both tiers `model`), with `layout=None`."),
    Variable("fast_cache_policy", Choice(FAST_CACHE_POLICIES), "admitting",
             "how that cache admits pages: `admitting` (on a page's second access, sequential reads passing it by, "
             "as dm-cache and bcache) or `lru` (every page read)."),
    Variable("scale_factor", Number(0, example="e.g. 0.1, 1, 10"), "0.1",
             "TPC-H's and SSB's scale factor, and a workload directory's whose data a command makes. Data is "
             "generated once per workload and scale factor and cached.",
             workloads=QUERY_WORKLOADS),
    Variable("corun", Corun(), "none",
             "one query of the workload (`q1.1`) that runs beside every query of the run on a connection of its own, "
             "over and over, each time to its end, from just before the query starts until it ends (the interference "
             "of a second workload); or `writer`, a concurrent writer: sysbench's `oltp_write_only` with 4 threads on "
             "4 tables of 100,000 rows of its own (database `tierlab_writer`, made afresh at the start of each run, "
             "on the capacity tier), writing for a second before the query's window opens and stopped as it ends. "
             "`queries.csv` gives each query's co-runner, how many of its runs ended within the window and their mean "
             "seconds; for the writer, its transactions in the report intervals that ended within the window (no "
             "mean).", workloads=QUERY_WORKLOADS),
    Variable("subqueries", Int(1, 64), "1",
             "each query split into this many subqueries run at once, each on a connection of its own with one range "
             "of its driving dimension's key added to its WHERE clause (flight 1 by date, flight 2 by part, flights 3 "
             "and 4 by customer); under `join_plan=hash`, one range of LINEORDER's pages instead (PostgreSQL: of its "
             "blocks, a TID range scan each; MariaDB and MySQL: of `lo_orderkey`, its clustered key), so that no "
             "subquery scans the whole fact table. The query ends when its last subquery does.",
             workloads=SPLIT_WORKLOADS),
    Variable("workload_dir", Text("the absolute path of a workload directory on the controller"), "",
             "the directory of a workload of your own (`playbooks/workload.yml`): its `workload.yml` names its tables, "
             "data (CSV files, or a command that prints them, given `TIERLAB_TABLE` and `TIERLAB_SCALE_FACTOR`) and "
             "queries with their weights; `schema.sql`, `indexes.sql` and `queries/<id>.sql` beside it, each with "
             "per-dialect variants where the engines differ (docs/workload-dir.md). Its layouts name its tables "
             "(`layout=orders+customers`).", workloads=(WORKLOAD_DIR,)),
    Variable("replay_speed", Number(0, 10000, "e.g. 1, 10"), "1",
             "how many times faster than it was captured a workload directory's replay of a PostgreSQL log runs "
             "(pgreplay's `-s`): `1` keeps its pauses, `10` shortens them tenfold.", workloads=(WORKLOAD_DIR,)),
    Variable("tables", Int(1, 1024), "4", "sysbench's tables.", workloads=TIMED_WORKLOADS),
    Variable("table_size", Int(1, 10**10), "100000",
             "rows per table (about 260 bytes each with its indexes on InnoDB). The run id and the database carry "
             "`tables`x`table_size` (`sysbench-4x100000`).", workloads=TIMED_WORKLOADS),
    Variable("threads", Int(1, 1024), "4", "client threads.", workloads=TIMED_WORKLOADS),
    Variable("duration_s", Int(1, 86400), "60", "seconds of each test's traced window.", workloads=TIMED_WORKLOADS),
    Variable("warmup_s", Int(0, 86400), "10", "seconds each test runs untraced before its window (0: none).",
             workloads=TIMED_WORKLOADS),
    Variable("report_interval_s", Int(1, 3600), "1", "seconds between sysbench's reports within the window.",
             workloads=TIMED_WORKLOADS),
    Variable("io_threads", Int(1, 64), "4", "`innodb_read_io_threads` and `innodb_write_io_threads`.",
             engines=MYSQL_FAMILY),
    Variable("flush_method", Choice(FLUSH_METHODS), "O_DIRECT",
             "`innodb_flush_method` (`fsync` with `compression=zstd`, where O_DIRECT is refused: btrfs writes "
             "O_DIRECT writes uncompressed).", engines=MYSQL_FAMILY),
    Variable("read_ahead_threshold", Int(0, 64), "56", "`innodb_read_ahead_threshold` (linear read-ahead).",
             engines=MYSQL_FAMILY),
    Variable("random_read_ahead", Bool(), "false", "`innodb_random_read_ahead`.", engines=MYSQL_FAMILY),
    Variable("compression", Choice(ENGINES["mariadb"].compressions), "none",
             "how the workload's tables are compressed: `none`; InnoDB's `zlib8` or `zlib4` (`ROW_FORMAT=COMPRESSED` "
             "with `KEY_BLOCK_SIZE` 8 or 4; only with `page_size` 16k or less, and smaller than the page); `page` "
             "(MariaDB's `PAGE_COMPRESSED=1`, MySQL's `COMPRESSION='zlib'`); `zstd`, for every engine: the file "
             "system's compression, on tiers that are btrfs (`tiers_filesystem=btrfs`). Each compression is a "
             "database of its own in the instance (`tpch_sf1_zlib8`). PostgreSQL takes `none` and `zstd` only."),
    Variable("join_plan", Choice(JOIN_PLANS), "optimizer",
             "the joins the optimizer may choose: `optimizer` (its own choice), `hash` (the fact table is scanned, "
             "never looked up: PostgreSQL's hash joins only; MariaDB and MySQL ignore every secondary index) or "
             "`index` (nested loops only: each join looks its inner table up through an index)."),
    Variable("mysql_version", Choice(("kept", "newest")), "kept",
             "where Oracle MySQL comes from (a chroot of Debian sid on hosts whose distribution has none): `kept`, the "
             "version of the root's first install, whose packages the data cache keeps (the suite's newest the first "
             "time); `newest`, the suite's newest now, kept from then on, with a warning when it is another version. "
             "The manifest records the version and the date of the suite's Release.", engines=("mysql",)),
    Variable("os_cache", SizeShareOrUnbounded(), "64M",
             "the OS page cache the server may keep, beside `shared_buffers` (a size or a percentage of the data): "
             "a memory group (cgroup v1 or v2) bounds the server's processes, page cache included, and while the "
             "queries run the page cache above this size is dropped. `unbounded`: no "
             "memory group, so the page cache may hold the whole database (for hosts without a memory controller).",
             engines=("postgresql",)),
    Variable("parallel_workers", Int(0, 64), "2", "`max_parallel_workers_per_gather`.", engines=("postgresql",)),
    Variable("fast_seq_page_cost", PLANNER_COST, "1", "the planner's `seq_page_cost` of the fast tier's tablespace.",
             engines=("postgresql",)),
    Variable("fast_random_page_cost", PLANNER_COST, "4",
             "the planner's `random_page_cost` of the fast tier's tablespace.", engines=("postgresql",)),
    Variable("capacity_seq_page_cost", PLANNER_COST, "1",
             "the planner's `seq_page_cost` of the capacity tier's tablespace.", engines=("postgresql",)),
    Variable("capacity_random_page_cost", PLANNER_COST, "4",
             "the planner's `random_page_cost` of the capacity tier's tablespace.", engines=("postgresql",)),
    Variable("fast_effective_io_concurrency", Int(0, 1000), "1",
             "the fast tier's tablespace's `effective_io_concurrency` (the pages a bitmap heap scan keeps in flight).",
             engines=("postgresql",)),
    Variable("capacity_effective_io_concurrency", Int(0, 1000), "1",
             "the capacity tier's tablespace's `effective_io_concurrency`.", engines=("postgresql",)),
    Variable("tiers_emulation", Choice(TIER_EMULATIONS), "model",
             "for tiers that name no `emulation` of their own: `model` (tierlab-emu device models), `throttle` (plain "
             "loop devices, a cgroup I/O throttle: v1 blkio or v2 io.max), `none` (real devices).", group="tiers"),
    Variable("tiers_filesystem", Choice(FILESYSTEMS), "ext4",
             "the file system tierlab makes on the tiers it formats that name no `filesystem` of their own: `ext4`, "
             "or `btrfs` (mounted `noatime,nodiscard`), whose zstd compression `compression=zstd` asks for.",
             group="tiers"),
    Variable("tiers_dilation", Dilation(MAX_DILATION), "auto",
             "how many times modelled time is stretched on every modelled tier of a host, so that a host slower than "
             "the models keeps their ratios: `auto` (the least factor the host needs, measured when the tiers come "
             "up) or a number. `tierlab compare` refuses runs of different dilations.", group="tiers"),
    Variable("conninfo", Text("a libpq connection string"), "",
             "how to reach the PostgreSQL instance to observe: a libpq connection string as psql takes it on the "
             "database host, quoted since -e splits at spaces (`-e 'conninfo=\"host=/var/run/postgresql port=5432 "
             "user=observer passfile=/root/.pgpass\"'`); the password in a passfile, never in the string. The role "
             "needs `pg_read_all_settings` (or `pg_monitor`).",
             group="observe", engines=("postgresql",)),
    Variable("client_file", Text(), "",
             "how to reach the MariaDB or MySQL instance to observe: the absolute path, on the database host, of a "
             "client option file with a `[client]` group (user, password, and socket or host and port). The account "
             "needs `PROCESS` (and SELECT on performance_schema for its per-file I/O).",
             group="observe", engines=MYSQL_FAMILY),
    Variable("databases", Text("all, or database names joined by commas"), "all",
             "the databases whose objects are told apart (`all`, or names joined by commas); the files of the others "
             "are traced too, as objects of no name.", group="observe"),
    Variable("window_s", Int(10, 7 * 86400), "600", "how long the instance is observed.", group="observe"),
    Variable("interval_s", Int(1, 3600), "60",
             "the length of each interval of the window: a step of the run, with its own trace and counters.",
             group="observe"),
    Variable("untraced_intervals", Int(0, 100), "2",
             "how many intervals are left untraced, every other one from the second, so that the engine's rate of "
             "work in them against the traced ones measures the tracing's cost to the instance (0: not measured; "
             "left unset, at most half the window's intervals).",
             group="observe"),
    Variable("raw_trace_limit", SizeOrNone(), "8G",
             "the most the window's raw traces may take on the database host: beyond it the oldest traced intervals' "
             "traces are deleted (each interval's engine and disk counters are kept; the block-level figures then "
             "cover the newest intervals, and the report says how many were rotated out). About 0.74 GiB an hour at "
             "1400 requests per second (docs/measurements.md); `none`: no limit.", group="observe"),
    Variable("index_pages", Bool(), "true",
             "tell a table's secondary indexes apart by its pages' headers, read once before the window and once "
             "after it (all of the instance's table files: long on a large database; `false`: tables whole).",
             group="observe", engines=MYSQL_FAMILY),
    Variable("resume", RunId(), "",
             "a run id to continue: runs the queries that have no row yet. Give the same variables again.",
             group="results"),
    Variable("retry_failed", Bool(), "false",
             "with `resume`: each query some of whose tries ended in an error (`status` error: the server died under "
             "it, its client failed; not a timeout) runs again, as new tries numbered on from its last, until as "
             "many of its tries as `tries` ended otherwise. The failed rows are kept.", group="results"),
    Variable("analyze_during_run", Bool(), "false",
             "`true`: each traced query's window is summed up on the controller while the next query runs (`tierlab "
             "analyze --follow`, its trace fetched from the host as the query ends, at the lowest CPU priority), so "
             "that the run's tables and report are written sooner after its last query; on a 2-core host it slowed "
             "the query beside a large window by half (docs/measurements.md), so it is off unless asked for: every "
             "window is then read after the last query.", group="results"),
    Variable("results_dir", Text(), "results",
             "where run directories are written, on the controller (`results` is the checkout's).", group="results"),
)
BY_NAME = {variable.name: variable for variable in VARIABLES}
# the variables that make a run's settings, in the order its settings list them
RUN_VARIABLES = tuple(v.name for v in VARIABLES if v.group == "run")


def group(name: str) -> tuple[str, ...]:
    """The names of a group's variables."""
    return tuple(v.name for v in VARIABLES if v.group == name)
