"""A run's settings: its user-facing variables validated once, before anything runs.

Every playbook calls `validate` (through the `tierlab_study` Ansible filter)
before its first side effect. Each error names what was given, what is
allowed and what to do.
"""

import json
import re
from functools import cache
from pathlib import Path

import yaml

from ..catalog.layout import FAST, layout_name, parse_layout
from ..catalog.workloads import WORKLOADS, Workload
from ..checkout import PROJECT
from ..devices import profiles
from ..errors import DeviceProfileError, InputError

ENGINES = ("mariadb", "mysql", "postgresql")
MYSQL_FAMILY = ("mariadb", "mysql")
PAGE_SIZES = {"4k": 4096, "8k": 8192, "16k": 16384, "32k": 32768, "64k": 65536}
# an empty page_size is the engine's own default; PostgreSQL's block size is fixed when it is built
DEFAULT_PAGE_SIZE = {"mariadb": "16k", "mysql": "16k", "postgresql": "8k"}
ENGINE_PAGE_SIZES = {"mariadb": tuple(PAGE_SIZES), "mysql": tuple(PAGE_SIZES), "postgresql": ("8k",)}
# The memory bound of a PostgreSQL server's processes counts their own memory besides shared_buffers
# and the page cache of what they read: this much is allowed for it. Over TPC-H SF 0.1 with the default
# work_mem their own memory peaked at 16 MiB here (sampled every 2 s); the rest leaves room for the
# sorts and hashes of larger scale factors, and serves as page cache while they do not need it.
POSTGRESQL_PROCESS_BYTES = 64 << 20
# Each further server process a run keeps busy at once (another subquery's or a co-running query's
# connection, a parallel worker) is allowed this much more: SSB Q2.1's hash plan split into 16 subqueries
# (SF 1) held 14.2 MiB of its own in each of them, and 16 of them in the 64 MiB the server had then were
# killed by the memory group.
POSTGRESQL_BACKEND_BYTES = 24 << 20
FLUSH_METHODS = ("O_DIRECT", "O_DIRECT_NO_FSYNC", "fsync", "O_DSYNC")
# the flush methods that write InnoDB's data files through the page cache
BUFFERED_FLUSH_METHODS = ("fsync", "O_DSYNC")
TIERS = (FAST, "capacity")
TRACE_BACKENDS = ("auto", "blktrace", "ftrace")
# how the fast tier as a block cache (fast_cache) admits pages: the cost model's CACHE_POLICIES
FAST_CACHE_POLICIES = ("admitting", "lru")
# what a run has for the fast cache left unset
FAST_CACHE_DEFAULTS = {"fast_cache": "none", "fast_cache_policy": FAST_CACHE_POLICIES[0]}
# the optimizer's own choice of join, or hash joins (scans of the fact table) or nested loops over index lookups
# forced by leaving the other methods out (experiment E5): PostgreSQL's enable_* settings; on MariaDB and MySQL
# the secondary indexes ignored by the optimizer (hash), or no join buffers, so no hash or block joins (index)
JOIN_PLANS = ("optimizer", "hash", "index")
# The compression of the workload's tables: none; InnoDB's ROW_FORMAT=COMPRESSED in 8 or 4 KiB blocks (zlib8,
# zlib4) or page compression (MariaDB's PAGE_COMPRESSED, MySQL's COMPRESSION='zlib': pages compressed in the
# file with holes punched); or the file system's (zstd: btrfs compresses the database's files on every tier)
COMPRESSIONS = ("none", "zlib8", "zlib4", "page", "zstd")
ENGINE_COMPRESSIONS = {"mariadb": COMPRESSIONS, "mysql": COMPRESSIONS, "postgresql": ("none", "zstd")}
# the compressions a file system does, and the file system that does them
FS_COMPRESSIONS = {"zstd": "btrfs"}
COMPRESSED_BLOCK_BYTES = {"zlib8": 8192, "zlib4": 4096}
# InnoDB refuses ROW_FORMAT=COMPRESSED with larger pages
COMPRESSED_MAX_PAGE_BYTES = 16384
SIZE_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
# page-size differences, file-system metadata and the free space InnoDB keeps
SIZE_MARGIN = 1.25
# the file system of a tier cannot hand out all of its blocks to files
TIER_USABLE_SHARE = 0.9


def _fail(name: str, value, allowed: str, todo: str = "") -> InputError:
    message = f"{name}={value!r} is not allowed; allowed: {allowed}"
    return InputError(message + (f". {todo}" if todo else ""))


def parse_bytes(name: str, value) -> int:
    match = re.fullmatch(r"\s*(\d+)\s*([KMGT]?)i?B?\s*", str(value), re.IGNORECASE)
    if not match or int(match.group(1)) == 0:
        raise _fail(name, value, "a positive size in bytes, with an optional K, M, G or T suffix (e.g. 128M)")
    return int(match.group(1)) * SIZE_UNITS[match.group(2).upper()]


def parse_scale_factor(value) -> float:
    try:
        sf = float(value)
    except (TypeError, ValueError):
        raise _fail("scale_factor", value, "a number > 0 (e.g. 0.1, 1, 10)") from None
    if not sf > 0:
        raise _fail("scale_factor", value, "a number > 0 (e.g. 0.1, 1, 10)")
    return sf


def parse_page_size(value) -> str:
    text = str(value).strip().lower()
    by_bytes = {str(v): k for k, v in PAGE_SIZES.items()}
    if text in PAGE_SIZES:
        return text
    if text in by_bytes:
        return by_bytes[text]
    raise _fail("page_size", value, ", ".join(PAGE_SIZES) + " (or the same in bytes)")


def parse_queries(value, workload: Workload) -> list[str]:
    """'all' or the workload's queries joined by commas ('3,10,16' for TPC-H, '1.1,3.2' for SSB); their ids."""
    text = str(value).strip().lower()
    aliases = workload.query_aliases()
    shortest = {query: min((a for a, q in aliases.items() if q == query), key=len) for query in workload.queries}
    first, *_, last = shortest.values()
    steps = "tests" if workload.kind == "timed" else "queries"
    allowed = f"all, or {workload.name} {steps} {first} to {last} joined by commas (e.g. {first},{last})"
    if text == "all":
        return list(workload.queries)
    parts = [p.strip() for p in text.split(",")]
    if not all(p in aliases for p in parts):
        raise _fail("queries", value, allowed)
    queries = [aliases[p] for p in parts]
    repeated = sorted({q for q in queries if queries.count(q) > 1})
    if repeated:
        raise _fail("queries", value, allowed, f"Query {', '.join(repeated)} is given more than once")
    return queries


def parse_corun(value: str, workload: Workload) -> str:
    """'none', or the id of the one query of the workload that runs beside every query of the run, over and
    over, each time to its end (the interference of a second workload)."""
    if value.lower() == "none":
        return "none"
    try:
        (query,) = parse_queries(value, workload)
    except (InputError, ValueError):
        first, last = workload.queries[0], workload.queries[-1]
        raise _fail("corun", value, f"none, or one {workload.name} query from {first} to {last} (e.g. {last})") from None
    return query


def parse_buffer_pool(value, name: str = "buffer_pool") -> dict:
    """{'bytes': N} or {'percent': P} of the data's estimated size."""
    text = str(value).strip()
    if text.endswith("%"):
        try:
            percent = float(text[:-1])
        except ValueError:
            percent = -1.0
        if not 0 < percent <= 100:
            raise _fail(name, value, "a size (e.g. 256M) or a percentage of the data from 0 to 100 (e.g. 5%)")
        return {"percent": percent}
    return {"bytes": parse_bytes(name, value)}


def _positive_int(name: str, value, low: int = 1, high: int | None = None) -> int:
    allowed = f"a whole number from {low}" + (f" to {high}" if high else " up")
    try:
        number = int(str(value))
    except ValueError:
        raise _fail(name, value, allowed) from None
    if number < low or (high is not None and number > high):
        raise _fail(name, value, allowed)
    return number


def _bool(name: str, value) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "yes", "1", "on"):
        return True
    if text in ("false", "no", "0", "off"):
        return False
    raise _fail(name, value, "true or false")


def _cost(name: str, value) -> float:
    allowed = "a number > 0 (PostgreSQL's planner cost of a page read, e.g. 1.1)"
    try:
        cost = float(value)
    except (TypeError, ValueError):
        raise _fail(name, value, allowed) from None
    if not 0 < cost < 1e6:
        raise _fail(name, value, allowed)
    return cost


def _choice(name: str, value, allowed: tuple) -> str:
    if value not in allowed:
        raise _fail(name, value, ", ".join(allowed))
    return value


# Variables that mean something for some engines only: those engines, the default an empty value
# stands for, and how a value is read. A value given for another engine is refused rather than
# silently ignored.
ENGINE_VARIABLES = {
    "io_threads": (MYSQL_FAMILY, "4", lambda n, v: _positive_int(n, v, 1, 64)),
    "flush_method": (MYSQL_FAMILY, "O_DIRECT", lambda n, v: _choice(n, v, FLUSH_METHODS)),
    "read_ahead_threshold": (MYSQL_FAMILY, "56", lambda n, v: _positive_int(n, v, 0, 64)),
    "random_read_ahead": (MYSQL_FAMILY, "false", _bool),
    "compression": (ENGINES, "none", lambda n, v: _choice(n, v, COMPRESSIONS)),
    "os_cache": (("postgresql",), "64M", lambda n, v: parse_buffer_pool(v, n)),
    "parallel_workers": (("postgresql",), "2", lambda n, v: _positive_int(n, v, 0, 64)),
    "join_plan": (ENGINES, "optimizer", lambda n, v: _choice(n, v, JOIN_PLANS)),
    "fast_seq_page_cost": (("postgresql",), "1", _cost),
    "fast_random_page_cost": (("postgresql",), "4", _cost),
    "capacity_seq_page_cost": (("postgresql",), "1", _cost),
    "capacity_random_page_cost": (("postgresql",), "4", _cost),
    "fast_effective_io_concurrency": (("postgresql",), "1", lambda n, v: _positive_int(n, v, 0, 1000)),
    "capacity_effective_io_concurrency": (("postgresql",), "1", lambda n, v: _positive_int(n, v, 0, 1000)),
}
QUERY_WORKLOADS = ("tpch", "ssb")
# the workloads whose queries can be split into subqueries by their driving dimension's keys
SPLIT_WORKLOADS = tuple(workload.name for workload in WORKLOADS.values() if workload.partition_keys)
# Variables of some workloads only, alike: the size of the query workloads' data, and sysbench's tables,
# client threads and the seconds of each test's window (after its warm-up), with the interval of its reports.
WORKLOAD_VARIABLES = {
    "scale_factor": (QUERY_WORKLOADS, "0.1", lambda n, v: parse_scale_factor(v)),
    "tables": (("sysbench",), "4", lambda n, v: _positive_int(n, v, 1, 1024)),
    "table_size": (("sysbench",), "100000", lambda n, v: _positive_int(n, v, 1, 10**10)),
    "threads": (("sysbench",), "4", lambda n, v: _positive_int(n, v, 1, 1024)),
    "duration_s": (("sysbench",), "60", lambda n, v: _positive_int(n, v, 1, 86400)),
    "warmup_s": (("sysbench",), "10", lambda n, v: _positive_int(n, v, 0, 86400)),
    "report_interval_s": (("sysbench",), "1", lambda n, v: _positive_int(n, v, 1, 3600)),
    "subqueries": (SPLIT_WORKLOADS, "1", lambda n, v: _positive_int(n, v, 1, 64)),
    # read in full by parse_corun, which needs the workload's queries
    "corun": (QUERY_WORKLOADS, "none", lambda n, v: str(v).strip()),
}


# the variables of one run (README: Variables), besides resume and results_dir
RUN_VARIABLES = ("engine", "layout", "queries", "page_size", "buffer_pool", "query_timeout_s", "tries", "cold", "trace",
                 "trace_backend", "system_tier", "fast_cache", "fast_cache_policy", *WORKLOAD_VARIABLES,
                 *ENGINE_VARIABLES)


def _scoped_variables(values: dict, variables: dict, scope: str, chosen: str) -> dict:
    """Variables that apply to some engines (or workloads) only, typed: given or defaulted where they apply,
    None elsewhere."""
    typed = {}
    for name, (scopes, default, parse) in variables.items():
        given = "" if values.get(name) is None else str(values[name]).strip()
        if chosen not in scopes:
            if given:
                raise InputError(f"{name}={given!r} means nothing for {scope}={chosen}; it applies to "
                                      f"{scope} {' and '.join(scopes)} only. Leave it unset for {chosen}")
            typed[name] = None
            continue
        typed[name] = parse(name, given or default)
    return typed


def estimated_table_bytes(settings: dict) -> dict[str, int]:
    """Each table's bytes, with a margin for page sizes, file-system metadata and the free space engines keep."""
    declared = WORKLOADS[settings["workload"]]
    if declared.numbered:
        return {t: int(settings["table_size"] * declared.row_bytes * SIZE_MARGIN) for t in declared.tables(settings["tables"])}
    sized = {t: int(b * settings["scale_factor"] * SIZE_MARGIN) for t, b in declared.bytes_at_sf1.items()}
    return {**sized, **declared.fixed_bytes}


def scale_name(settings: dict) -> str:
    """The size of a workload's data as run ids and database names carry it: sf0.1; sysbench's 4x100000
    (tables x rows)."""
    if WORKLOADS[settings["workload"]].numbered:
        return f"{settings['tables']}x{settings['table_size']}"
    return f"sf{settings['scale_factor']:g}"


def human_bytes(size: int) -> str:
    return f"{size / 2**30:.2f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"


def check_fit(settings: dict, fast_tier_bytes: int) -> None:
    sizes = estimated_table_bytes(settings)
    fast = {t: sizes[t] for t, tier in settings["placement"].items() if tier == FAST}
    needed = sum(fast.values())
    usable = int(fast_tier_bytes * TIER_USABLE_SHARE)
    if needed > usable:
        listing = ", ".join(f"{t} {human_bytes(b)}" for t, b in sorted(fast.items(), key=lambda kv: -kv[1])[:4])
        listing += f" and {len(fast) - 4} more" if len(fast) > 4 else ""
        numbered = WORKLOADS[settings["workload"]].numbered
        scale = (f"tables={settings['tables']} x table_size={settings['table_size']}" if numbered
                 else f"scale_factor={settings['scale_factor']:g}")
        raise InputError(
            f"layout {settings['layout']!r} at {scale} needs about {human_bytes(needed)} "
            f"on the fast tier ({listing}), but the fast tier holds {human_bytes(usable)} usable "
            f"of {human_bytes(fast_tier_bytes)}; choose fewer tables, a smaller "
            f"{'table_size' if numbered else 'scale_factor'}, or a larger fast tier"
        )


def _compresses(compression: str, page_bytes: int) -> bool:
    """Whether InnoDB can compress pages of page_bytes so: ROW_FORMAT=COMPRESSED needs pages of 16 KiB or
    less, and blocks smaller than the page."""
    block_bytes = COMPRESSED_BLOCK_BYTES.get(compression)
    return block_bytes is None or block_bytes < page_bytes <= COMPRESSED_MAX_PAGE_BYTES


def check_compression(compression: str, engine: str, page_size: str, tier_filesystems: dict[str, str] | None) -> None:
    """The compression is the engine's (or the file system's, on every tier) and suits the page size.
    tier_filesystems: each tier role's file system, where it is known before the tiers are up."""
    if compression not in ENGINE_COMPRESSIONS[engine]:
        raise _fail("compression", compression, f"{', '.join(ENGINE_COMPRESSIONS[engine])} for engine={engine}",
                    "PostgreSQL compresses only values over 2 kB (TOAST), which TPC-H, SSB and sysbench rows never "
                    "reach; the file system's compression (zstd) applies to its files" if engine == "postgresql" else "")
    wanted = FS_COMPRESSIONS.get(compression)
    if wanted and tier_filesystems is not None:
        others = {role: fs for role, fs in tier_filesystems.items() if fs != wanted}
        if others:
            listing = ", ".join(f"the {role} tier's is {fs or 'not declared'}" for role, fs in sorted(others.items()))
            raise InputError(
                f"compression={compression!r} is {wanted}'s, on the database's directories of every tier, but {listing}; "
                f"set tiers_filesystem={wanted} (or the tiers' own 'filesystem: {wanted}') on a tierlab_root whose "
                "tiers are not made yet, or choose another compression")
    page_bytes = PAGE_SIZES[page_size]
    if _compresses(compression, page_bytes):
        return
    if page_bytes > COMPRESSED_MAX_PAGE_BYTES:
        why = f"InnoDB refuses ROW_FORMAT=COMPRESSED with pages larger than {COMPRESSED_MAX_PAGE_BYTES >> 10}k"
    else:
        why = f"its {COMPRESSED_BLOCK_BYTES[compression] >> 10} KiB blocks would not be smaller than the pages"
    allowed = ", ".join(c for c in COMPRESSIONS if _compresses(c, page_bytes))
    raise InputError(f"compression={compression!r} cannot be used with page_size={page_size}: {why}; allowed "
                          f"with page_size={page_size}: {allowed}")


def _buffered_flush_method(given, compression: str) -> str:
    """btrfs compresses only what is written through the page cache, and writes O_DIRECT as it is: with the
    file system's compression InnoDB's flush method is fsync unless a buffered one is given."""
    given = "" if given is None else str(given).strip()
    if not given:
        return "fsync"
    if given not in BUFFERED_FLUSH_METHODS:
        raise InputError(f"flush_method={given!r} cannot be used with compression={compression!r}: "
                              f"{FS_COMPRESSIONS[compression]} writes O_DIRECT writes uncompressed; allowed with it: "
                              f"{', '.join(BUFFERED_FLUSH_METHODS)} (fsync when flush_method is left unset)")
    return given


def _fast_cache(values: dict, layout: str, fast_tier_bytes: int | None, tier_emulations: dict[str, str] | None) -> dict:
    """fast_cache (a size, or empty for none) and fast_cache_policy, checked: the cache is emulated, in front of the
    capacity tier, which then holds every table, and no larger than the fast tier."""
    given = str(values.get("fast_cache") or "").strip()
    # a policy without a cache stays as given, so that a settings can set it once beside a matrix that has no cache
    policy = _choice("fast_cache_policy", values.get("fast_cache_policy") or FAST_CACHE_DEFAULTS["fast_cache_policy"],
                     FAST_CACHE_POLICIES)
    if not given or given.lower() == "none":
        return {"fast_cache": FAST_CACHE_DEFAULTS["fast_cache"], "fast_cache_bytes": 0, "fast_cache_policy": policy}
    size = parse_bytes("fast_cache", given)
    if layout != "None":
        raise InputError(f"fast_cache={given} makes the fast tier a cache of the capacity tier, which then holds "
                              f"every table: give layout=None (got layout={layout})")
    if tier_emulations is not None and (tier_emulations.get(FAST), tier_emulations.get("capacity")) != ("model", "model"):
        raise InputError(f"fast_cache={given}: the cache is emulated by the tiers' device models, so both tiers must "
                              f"have emulation: model (these have fast: {tier_emulations.get(FAST)}, capacity: "
                              f"{tier_emulations.get('capacity')}); on real devices make the capacity tier an lvmcache, "
                              "dm-cache or bcache device instead")
    if fast_tier_bytes is not None and size > fast_tier_bytes:
        raise InputError(f"fast_cache={given} is larger than the fast tier ({human_bytes(fast_tier_bytes)})")
    return {"fast_cache": given, "fast_cache_bytes": size, "fast_cache_policy": policy}


def validate(values: dict, fast_tier_bytes: int | None = None, tier_filesystems: dict[str, str] | None = None,
             tier_emulations: dict[str, str] | None = None) -> dict:
    """The run's normalized settings from raw -e values (strings or typed); tier_filesystems and
    tier_emulations as the tiers declare them (validate_tiers), by role."""
    workload = values.get("workload", "tpch")
    if workload not in WORKLOADS:
        raise _fail("workload", workload, ", ".join(WORKLOADS))
    declared = WORKLOADS[workload]
    engine = _choice("engine", values["engine"], ENGINES)
    workload_variables = _scoped_variables(values, WORKLOAD_VARIABLES, "workload", workload)
    if workload_variables["corun"] is not None:
        workload_variables["corun"] = parse_corun(workload_variables["corun"], declared)
    placement = parse_layout(values["layout"], workload)
    layout = layout_name(placement, workload)
    load_order = declared.tables(workload_variables["tables"] or 0)
    if declared.numbered:
        placement = {table: placement[declared.load_order[0]] for table in load_order}
    page_size = parse_page_size(values.get("page_size") or DEFAULT_PAGE_SIZE[engine])
    if page_size not in ENGINE_PAGE_SIZES[engine]:
        raise _fail("page_size", values["page_size"], f"{', '.join(ENGINE_PAGE_SIZES[engine])} for engine={engine}",
                    "PostgreSQL's block size is fixed when it is built, and Debian's packages have 8 KiB blocks"
                    if engine == "postgresql" else "")
    engine_variables = _scoped_variables(values, ENGINE_VARIABLES, "engine", engine)
    check_compression(engine_variables["compression"], engine, page_size, tier_filesystems)
    if engine in MYSQL_FAMILY and engine_variables["compression"] in FS_COMPRESSIONS:
        engine_variables["flush_method"] = _buffered_flush_method(values.get("flush_method"),
                                                                  engine_variables["compression"])
    settings = {
        "engine": engine,
        "workload": workload,
        **workload_variables,
        "layout": layout,
        "placement": placement,
        "load_order": load_order,
        "queries": parse_queries(values["queries"], declared),
        "page_size": page_size,
        "page_size_bytes": PAGE_SIZES[page_size],
        "buffer_pool": parse_buffer_pool(values["buffer_pool"]),
        "query_timeout_s": _positive_int("query_timeout_s", values["query_timeout_s"]),
        "tries": _positive_int("tries", values["tries"]),
        "cold": _bool("cold", values["cold"]),
        "trace": _bool("trace", values["trace"]),
        "trace_backend": _choice("trace_backend", values["trace_backend"], TRACE_BACKENDS),
        **engine_variables,
        "system_tier": _choice("system_tier", values["system_tier"], TIERS),
        **_fast_cache(values, layout, None if fast_tier_bytes is None else int(fast_tier_bytes), tier_emulations),
        "resume": str(values.get("resume") or ""),
    }
    # per query, the driving dimension's table and key whose ranges split it, when it is split
    settings["subquery_keys"] = ({query: list(declared.partition_keys[query]) for query in settings["queries"]}
                              if (settings["subqueries"] or 1) > 1 else {})
    settings["scale"] = scale_name(settings)
    compression = settings["compression"]
    settings["database"] = f"{workload}_{settings['scale'].replace('.', '_')}" + (
        f"_{compression}" if compression != "none" else "")
    if fast_tier_bytes is not None:
        check_fit(settings, int(fast_tier_bytes))
    return settings


@cache
def run_defaults() -> dict:
    """The playbooks' defaults of the run variables (playbooks/group_vars/all.yml)."""
    values = yaml.safe_load((PROJECT / "playbooks" / "group_vars" / "all.yml").read_text())
    return {name: values[name] for name in RUN_VARIABLES}


def resume_conflicts(recorded: dict, values: dict, *tiers) -> dict[str, tuple]:
    """The variables of the settings these values make (validate(values, *tiers)) that the run to resume
    (recorded: the settings of its config/run.json) had otherwise, as {variable: (the run's, now)}. A run
    made by an earlier tierlab lacks the variables added since: it ran with their defaults."""
    settings = json.loads(json.dumps(validate(values, *tiers)))
    added = {name: run_defaults()[name] for name in RUN_VARIABLES if name not in recorded}
    then = {**json.loads(json.dumps(validate({**values, **added}, *tiers))), **recorded} if added else recorded
    # the variables given, not what follows from them (a layout's placement, a scale's database)
    return {name: (then.get(name), settings[name]) for name in ("workload", *RUN_VARIABLES) if then.get(name) != settings[name]}


def _cache_bytes(cache: dict, settings: dict) -> int:
    """A size given as bytes or as a percentage of the run's estimated data size, in whole MiB."""
    if "bytes" in cache:
        wanted = cache["bytes"]
    else:
        data = sum(estimated_table_bytes(settings).values()) / SIZE_MARGIN
        wanted = int(data * cache["percent"] / 100)
    return wanted >> 20 << 20


def buffer_pool_bytes(settings: dict) -> int:
    """Bytes of the engine's own cache (innodb_buffer_pool_size, shared_buffers).

    MariaDB needs room for a few hundred pages at the least, so small
    percentages are raised to 256 pages (and to 8 MiB).
    """
    return max(256 * settings["page_size_bytes"], 8 << 20, _cache_bytes(settings["buffer_pool"], settings))


def connections(settings: dict) -> int:
    """The connections a run's workload holds open at once: sysbench's threads, or a query's subqueries
    (one when it is not split) and the co-running query's."""
    if settings["threads"] is not None:
        return settings["threads"]
    return (settings["subqueries"] or 1) + (settings["corun"] not in (None, "none"))


def busy_postgresql_processes(settings: dict) -> int:
    """The server processes a PostgreSQL run keeps busy at once: one per connection, and the parallel workers
    a query's plans may start (max_parallel_workers at most; sysbench's short statements start none)."""
    if settings["threads"] is not None:
        return connections(settings)
    return connections(settings) + min(connections(settings) * settings["parallel_workers"], max(settings["parallel_workers"], 8))


def memory_limit_bytes(settings: dict) -> int:
    """The memory bound of a PostgreSQL server's processes: shared_buffers, the page cache it may
    keep (os_cache) and its processes' own memory, more for each further process it keeps busy."""
    return (buffer_pool_bytes(settings) + _cache_bytes(settings["os_cache"], settings) + POSTGRESQL_PROCESS_BYTES
            + (busy_postgresql_processes(settings) - 1) * POSTGRESQL_BACKEND_BYTES)


TIER_EMULATIONS = ("model", "throttle", "none")
# the file systems tierlab makes on the tiers it formats
FILESYSTEMS = ("ext4", "btrfs")
# the emulator accepts a dilation from 1 (modelled time as the model says) to this
MAX_DILATION = 1000
THROTTLE_KEYS = ("read_iops", "write_iops", "read_bps", "write_bps")


def validate_tiers(tiers, default_emulation: str, default_filesystem: str) -> list[dict]:
    """The inventory's `tiers` list: one fast and one capacity tier, each complete.

    Returns the tiers with `emulation` filled in (from default_emulation where a
    tier gives none), `filesystem` (from default_filesystem for a tier tierlab
    formats; a mounted path's only where the tier declares it, None otherwise)
    and, for `model` tiers, the checked `profile_file`.
    """
    if not isinstance(tiers, list) or not tiers:
        raise InputError("the inventory's 'tiers' must be a list of tiers (name, role, emulation, ...); see README")
    _choice("tiers_emulation", default_emulation, TIER_EMULATIONS)
    _choice("tiers_filesystem", default_filesystem, FILESYSTEMS)
    names = [str(t.get("name", "")) for t in tiers]
    resolved = []
    for tier in tiers:
        name = tier.get("name")
        where = f"tier {name!r}"
        if not name or not re.fullmatch(r"[a-z][a-z0-9_-]*", str(name)):
            raise _fail("tiers name", name, "lowercase letters, digits, '_' and '-', starting with a letter (e.g. optane)")
        if names.count(str(name)) > 1:
            raise InputError(f"{where} is named twice in the inventory's 'tiers'; give each tier its own name")
        _choice(f"{where} role", tier.get("role"), TIERS)
        tier = {**tier, "emulation": tier.get("emulation", default_emulation)}
        _choice(f"{where} emulation", tier["emulation"], TIER_EMULATIONS)
        formatted = tier["emulation"] != "none" or bool(tier.get("device") and tier.get("format"))
        tier["filesystem"] = tier.get("filesystem", default_filesystem if formatted else None)
        if tier["filesystem"] is not None:
            _choice(f"{where} filesystem", tier["filesystem"], FILESYSTEMS)
        if tier["emulation"] == "none":
            if not tier.get("path") and not tier.get("device"):
                raise InputError(
                    f"{where} (emulation none) needs 'path' (a mounted file system) or 'device' (to format and mount)"
                )
        else:
            parse_bytes(f"{where} size", tier.get("size"))
        if tier["emulation"] == "model":
            if not tier.get("profile"):
                raise _fail(f"{where} profile", tier.get("profile"),
                            f"{', '.join(profiles.profile_names())}, or the path of a .toml profile")
            try:
                tier["profile_file"] = str(profiles.profile_path(str(tier["profile"])))
                profiles.load(Path(tier["profile_file"]))
            except DeviceProfileError as exc:
                raise InputError(f"{where}: {exc}") from None
        if tier.get("read_ahead_kb") is not None:
            _positive_int(f"{where} read_ahead_kb", tier["read_ahead_kb"], 0)
        unknown = set(tier.get("throttle") or {}) - set(THROTTLE_KEYS)
        if unknown:
            raise _fail(f"{where} throttle", sorted(unknown), ", ".join(THROTTLE_KEYS))
        resolved.append(tier)
    roles = [t["role"] for t in tiers]
    if sorted(roles) != ["capacity", FAST]:
        raise InputError(
            "the inventory's 'tiers' must have exactly one tier with role 'fast' and one with role 'capacity'; "
            f"given roles: {roles}"
        )
    return resolved


def validate_dilation(value) -> str | float:
    """`tiers_dilation`: `auto` (the least factor this host needs, chosen when the tiers come up) or a number."""
    if str(value) == "auto":
        return "auto"
    allowed = f"auto, or a number from 1 to {MAX_DILATION} (modelled time stretched that many times on every tier)"
    try:
        dilation = float(value)
    except (TypeError, ValueError):
        raise _fail("tiers_dilation", value, allowed) from None
    if not 1 <= dilation <= MAX_DILATION:
        raise _fail("tiers_dilation", value, allowed)
    return dilation
