"""A run's settings: its user-facing variables (catalog.variables) validated once, before anything runs, into the
settings the playbooks and config/run.json take; and what follows from them (sizes, the memory bound, connections).

Every playbook calls `validate` (through the `tierlab_run_settings` Ansible filter) before its first side effect.
Each error names what was given, what is allowed and what to do.
"""

import json
import re
from pathlib import Path

from ..catalog.engines import ENGINES, PAGE_SIZES
from ..catalog.layout import FAST, parse_layout
from ..catalog.values import Context, SizeOrShare, parse_bytes, refusal
from ..catalog.variables import (
    BY_NAME,
    FILESYSTEMS,
    RUN_VARIABLES,
    TIER_EMULATIONS,
    TIER_ROLES,
    VARIABLES,
    Choice,
    Int,
)
from ..catalog.workloads import CORUN_WRITER, WORKLOAD_DIR, WORKLOADS, Workload, workload_of
from ..devices import profiles
from ..errors import DeviceProfileError, InputError
from .workload_dir import read_workload_dir

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
# the flush methods that write InnoDB's data files through the page cache
BUFFERED_FLUSH_METHODS = ("fsync", "O_DSYNC")
# the compressions a file system does, and the file system that does them
FS_COMPRESSIONS = {"zstd": "btrfs"}
COMPRESSED_BLOCK_BYTES = {"zlib8": 8192, "zlib4": 4096}
# InnoDB refuses ROW_FORMAT=COMPRESSED with larger pages
COMPRESSED_MAX_PAGE_BYTES = 16384
# page-size differences, file-system metadata and the free space InnoDB keeps
SIZE_MARGIN = 1.25
# the file system of a tier cannot hand out all of its blocks to files
TIER_USABLE_SHARE = 0.9
THROTTLE_KEYS = ("read_iops", "write_iops", "read_bps", "write_bps")
# the variables that apply to some workloads only: the manifest's workload lists them
WORKLOAD_VARIABLES = tuple(v.name for v in VARIABLES if v.workloads is not None)


def typed(values: dict, context: Context, names: tuple[str, ...] = RUN_VARIABLES, workload: str = "") -> dict:
    """Each variable of names read by its kind: given, or its default where it applies; None where it does not
    (given there, it is refused). workload: the context's, or the name of one the catalog does not declare."""
    found = {}
    engine, workload = context.engine.name, workload or context.workload.scope
    for name in names:
        variable = BY_NAME[name]
        given = "" if values.get(name) is None else str(values[name]).strip()
        if not variable.applies(engine, workload):
            if given:
                scope, chosen, scopes = (("engine", engine, variable.engines) if variable.engines is not None
                                         else ("workload", workload, variable.workloads))
                raise InputError(f"{name}={given!r} means nothing for {scope}={chosen}; it applies to "
                                 f"{scope} {_listed(scopes)} only. Leave it unset for {chosen}")
            found[name] = None
            continue
        found[name] = variable.kind.parse(name, given or variable.default_for(context.engine), context)
    return found


def _listed(names: tuple[str, ...]) -> str:
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def validate(values: dict, fast_tier_bytes: int | None = None, tier_filesystems: dict[str, str] | None = None,
             tier_emulations: dict[str, str] | None = None) -> dict:
    """The run's normalized settings from raw -e values (strings or typed; a variable left out or empty takes
    its default); tier_filesystems and tier_emulations as the tiers declare them (validate_tiers), by role."""
    workload = _workload(values)
    engine = ENGINES[BY_NAME["engine"].kind.parse("engine", values.get("engine") or BY_NAME["engine"].default)]
    settings = {"engine": engine.name, "workload": workload.name, **typed(values, Context(engine, workload))}
    if workload.directory:
        settings["workload_declared"] = workload.declaration()
        settings["scale_factor"] = _files_scale_factor(workload, values.get("scale_factor"), settings["scale_factor"])
        if workload.generator == "sql_dump" and engine.dialect not in workload.data_files:
            raise InputError(f"workload {workload.name}'s data is dumped for {', '.join(workload.data_files)} only "
                             f"({workload.data_source}); engine={engine.name} loads a {engine.dialect}.sql there")
        replays = [query for query in settings["queries"] if query in workload.replays]
        if replays and engine.family != "postgresql":
            kept = [query for query in settings["queries"] if query not in workload.replays]
            raise InputError(f"{', '.join(replays)} of workload {workload.name} replay a PostgreSQL log, which "
                             f"engine={engine.name} cannot run; use engine=postgresql"
                             + (f", or leave them out: queries={','.join(kept)}" if kept else ""))
    settings["placement"] = parse_layout(settings["layout"], workload)
    settings["load_order"] = workload.tables(settings["tables"] or 0)
    if workload.numbered:
        settings["placement"] = {table: settings["placement"][workload.load_order[0]] for table in settings["load_order"]}
    settings["page_size_bytes"] = PAGE_SIZES[settings["page_size"]]
    check_compression(settings["compression"], engine.name, settings["page_size"], tier_filesystems)
    if engine.family == "mysql" and settings["compression"] in FS_COMPRESSIONS:
        settings["flush_method"] = _buffered_flush_method(values.get("flush_method"), settings["compression"])
    settings.update(_fast_cache(settings, None if fast_tier_bytes is None else int(fast_tier_bytes), tier_emulations))
    settings["resume"] = BY_NAME["resume"].kind.parse("resume", values.get("resume") or "")
    settings["retry_failed"] = BY_NAME["retry_failed"].kind.parse("retry_failed", values.get("retry_failed") or "false")
    if settings["retry_failed"] and not settings["resume"]:
        raise InputError("retry_failed=true retries the failed tries of a run being resumed: give resume=RUN_ID too")
    settings["analyze_during_run"] = BY_NAME["analyze_during_run"].kind.parse(
        "analyze_during_run", values.get("analyze_during_run") or BY_NAME["analyze_during_run"].default)
    settings["subquery_keys"] = _subquery_keys(settings, workload, engine.family)
    settings["corun_writer"] = CORUN_WRITER if settings.get("corun") == "writer" else None
    settings["scale"] = scale_name(settings)
    # where the data is generated once, under the root's data cache (a workload directory's, per revision)
    settings["data_cache"] = f"{workload.name}/{settings['scale']}" + (f"-{workload.revision}" if workload.revision else "")
    compression = settings["compression"]
    settings["database"] = f"{workload.name}_{settings['scale'].replace('.', '_')}" + (
        f"_{compression}" if compression != "none" else "") + (f"_{workload.revision}" if workload.revision else "")
    if fast_tier_bytes is not None:
        check_fit(settings, int(fast_tier_bytes))
    return settings


def _workload(values: dict) -> Workload:
    """The catalog's workload the playbook names, or the one of the directory workload_dir gives."""
    name = Choice((*WORKLOADS, WORKLOAD_DIR)).parse("workload", values.get("workload") or "tpch")
    if name != WORKLOAD_DIR:
        return WORKLOADS[name]
    given = "" if values.get("workload_dir") is None else str(values["workload_dir"]).strip()
    if not given:
        raise InputError("playbooks/workload.yml runs a workload of your own: give its directory, "
                         "-e workload_dir=/path/to/it (docs/workload-dir.md shows what it holds)")
    return read_workload_dir(given)


def _files_scale_factor(workload: Workload, given, default: float) -> float | None:
    """A workload whose data are files or dumps has no scale factor (None); one whose command makes them, its own."""
    if workload.generator == "csv_command":
        return default
    if given not in (None, ""):
        raise InputError(f"scale_factor={given!r} means nothing for workload {workload.name}: its data are the files "
                         f"in {workload.data_source}; leave it unset, or give the workload a data command")
    return None


def resume_conflicts(recorded: dict, values: dict, *tiers) -> dict[str, tuple]:
    """The variables of the settings these values make (validate(values, *tiers)) that the run to resume
    (recorded: the settings of its config/run.json) had otherwise, as {variable: (the run's, now)}. A run
    made by an earlier tierlab lacks the variables added since: it ran with their defaults."""
    settings = json.loads(json.dumps(validate(values, *tiers)))
    added = [name for name in RUN_VARIABLES if name not in recorded]
    then = {**json.loads(json.dumps(validate({**values, **dict.fromkeys(added, "")}, *tiers))), **recorded} if added \
        else recorded
    # the variables given, not what follows from them (a layout's placement, a scale's database)
    return {name: (then.get(name), settings[name]) for name in ("workload", *RUN_VARIABLES) if then.get(name) != settings[name]}


def default_text(name: str, engine: str) -> str:
    """What a run on engine has for a variable left unset, as a user would type it."""
    return BY_NAME[name].default_for(ENGINES[engine])


def _scaled(settings: dict, at_sf1: dict[str, int], fixed: dict[str, int], margin: float) -> dict[str, int]:
    return {**{t: int(b * settings["scale_factor"] * margin) for t, b in at_sf1.items()}, **fixed}


def estimated_table_bytes(settings: dict) -> dict[str, int]:
    """Each table's bytes, with a margin for page sizes, file-system metadata and the free space engines keep."""
    declared = workload_of(settings)
    if declared.numbered:
        return {t: int(settings["table_size"] * declared.row_bytes * SIZE_MARGIN) for t in declared.tables(settings["tables"])}
    return _scaled(settings, declared.bytes_at_sf1, declared.fixed_bytes, SIZE_MARGIN)


def estimated_generated_bytes(settings: dict) -> dict[str, int]:
    """Each table's generated .tbl file's bytes (none where a driver fills the tables itself): sizes measured at
    scale factor 1 grow in proportion, within a few percent (SSB's part grows slower)."""
    declared = workload_of(settings)
    return _scaled(settings, declared.generated_bytes_at_sf1, declared.generated_fixed_bytes, 1.0)


def scale_name(settings: dict) -> str:
    """The size of a workload's data as run ids and database names carry it: sf0.1; sysbench's 4x100000
    (tables x rows)."""
    if workload_of(settings).numbered:
        return f"{settings['tables']}x{settings['table_size']}"
    if settings["scale_factor"] is None:
        return "files"
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
        numbered = workload_of(settings).numbered
        scale = (f"tables={settings['tables']} x table_size={settings['table_size']}" if numbered
                 else "its data files" if settings["scale_factor"] is None
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
    if compression not in ENGINES[engine].compressions:
        raise refusal("compression", compression, f"{', '.join(ENGINES[engine].compressions)} for engine={engine}",
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
    allowed = ", ".join(c for c in ENGINES[engine].compressions if _compresses(c, page_bytes))
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


def _fast_cache(settings: dict, fast_tier_bytes: int | None, tier_emulations: dict[str, str] | None) -> dict:
    """fast_cache_bytes, with the cache checked: it is emulated, in front of the capacity tier, which then holds
    every table, and no larger than the fast tier. A policy without a cache stays as given, so that a study can
    set it once beside a matrix that has no cache."""
    given, layout = settings["fast_cache"], settings["layout"]
    if given == "none":
        return {"fast_cache_bytes": 0}
    cache = SizeOrShare().parse("fast_cache", given)
    size = cache["bytes"] if "bytes" in cache else _cache_bytes(cache, settings)
    if size == 0:
        raise InputError(f"fast_cache={given} is less than 1 MiB of this run's data: give a larger share or a size")
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
    return {"fast_cache_bytes": size}


def _subquery_keys(settings: dict, workload: Workload, family: str) -> dict[str, list[str]]:
    """Per query, the table and column whose ranges split it, when it is split: under join_plan=hash the fact
    table's pages (`ctid`, its blocks, on PostgreSQL; its clustered key's first column on InnoDB), else its driving
    dimension's key."""
    if (settings["subqueries"] or 1) == 1:
        return {}
    if settings["join_plan"] == "hash" and workload.fact_key:
        table, column = workload.fact_key
        return {query: [table, "ctid" if family == "postgresql" else column] for query in settings["queries"]}
    return {query: list(workload.partition_keys[query]) for query in settings["queries"]}


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
    corun = settings["corun"]
    return (settings["subqueries"] or 1) + (0 if corun in (None, "none") else CORUN_WRITER["threads"]
                                             if corun == "writer" else 1)


def busy_postgresql_processes(settings: dict) -> int:
    """The server processes a PostgreSQL run keeps busy at once: one per connection, and the parallel workers
    a query's plans may start (max_parallel_workers at most; sysbench's short statements start none)."""
    if settings["threads"] is not None:
        return connections(settings)
    return connections(settings) + min(connections(settings) * settings["parallel_workers"], max(settings["parallel_workers"], 8))


def os_cache_bytes(settings: dict) -> int | None:
    """The page cache a PostgreSQL server may keep of what it reads (os_cache), in bytes; None with
    os_cache=unbounded."""
    if settings["os_cache"] == "unbounded":
        return None
    return _cache_bytes(settings["os_cache"], settings)


def memory_limit_bytes(settings: dict) -> int | None:
    """The memory bound of a PostgreSQL server's processes: shared_buffers,
    the page cache it may keep (os_cache) and its processes' own memory, more for each further process it keeps
    busy; None with os_cache=unbounded. While the loop runs, the page cache above os_cache that the processes'
    unused allowance lets in is dropped (tierlab_host/page_cache.py)."""
    page_cache = os_cache_bytes(settings)
    if page_cache is None:
        return None
    return (buffer_pool_bytes(settings) + page_cache + POSTGRESQL_PROCESS_BYTES
            + (busy_postgresql_processes(settings) - 1) * POSTGRESQL_BACKEND_BYTES)


def validate_tiers(tiers, default_emulation: str, default_filesystem: str) -> list[dict]:
    """The inventory's `tiers` list: one fast and one capacity tier, each complete.

    Returns the tiers with `emulation` filled in (from default_emulation where a
    tier gives none), `filesystem` (from default_filesystem for a tier tierlab
    formats; a mounted path's only where the tier declares it, None otherwise)
    and, for `model` tiers, the checked `profile_file`.
    """
    if not isinstance(tiers, list) or not tiers:
        raise InputError("the inventory's 'tiers' must be a list of tiers (name, role, emulation, ...); see "
                         "playbooks/inventory/real.example.yml and docs/user-guide.md")
    BY_NAME["tiers_emulation"].kind.parse("tiers_emulation", default_emulation)
    BY_NAME["tiers_filesystem"].kind.parse("tiers_filesystem", default_filesystem)
    names = [str(t.get("name", "")) for t in tiers]
    resolved = []
    for tier in tiers:
        name = tier.get("name")
        where = f"tier {name!r}"
        if not name or not re.fullmatch(r"[a-z][a-z0-9_-]*", str(name)):
            raise refusal("tiers name", name, "lowercase letters, digits, '_' and '-', starting with a letter (e.g. optane)")
        if names.count(str(name)) > 1:
            raise InputError(f"{where} is named twice in the inventory's 'tiers'; give each tier its own name")
        Choice(TIER_ROLES).parse(f"{where} role", tier.get("role"))
        tier = {**tier, "emulation": tier.get("emulation", default_emulation)}
        Choice(TIER_EMULATIONS).parse(f"{where} emulation", tier["emulation"])
        formatted = tier["emulation"] != "none" or bool(tier.get("device") and tier.get("format"))
        tier["filesystem"] = tier.get("filesystem", default_filesystem if formatted else None)
        if tier["filesystem"] is not None:
            Choice(FILESYSTEMS).parse(f"{where} filesystem", tier["filesystem"])
        if tier["emulation"] == "none":
            if not tier.get("path") and not tier.get("device"):
                raise InputError(
                    f"{where} (emulation none) needs 'path' (a mounted file system) or 'device' (to format and mount)"
                )
        else:
            parse_bytes(f"{where} size", tier.get("size"))
        if tier["emulation"] == "model":
            if not tier.get("profile"):
                raise refusal(f"{where} profile", tier.get("profile"),
                            f"{', '.join(profiles.profile_names())}, or the path of a .toml profile")
            try:
                tier["profile_file"] = str(profiles.profile_path(str(tier["profile"])))
                profiles.load(Path(tier["profile_file"]))
            except DeviceProfileError as exc:
                raise InputError(f"{where}: {exc}") from None
        if tier.get("read_ahead_kb") is not None:
            Int(0).parse(f"{where} read_ahead_kb", tier["read_ahead_kb"])
        unknown = set(tier.get("throttle") or {}) - set(THROTTLE_KEYS)
        if unknown:
            raise refusal(f"{where} throttle", sorted(unknown), ", ".join(THROTTLE_KEYS))
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
    return BY_NAME["tiers_dilation"].kind.parse("tiers_dilation", value)
