"""A workload of the user's own: a directory with its declaration (workload.yml), its schema, its data (CSV or Parquet
files, data-only dumps, or a command that prints CSV) and its queries, read into the same Workload the catalog
declares TPC-H's with, so that it runs through the same flow. docs/workload-dir.md is the format as a user writes it;
every check here names the file and what is allowed.
"""

import csv
import hashlib
import re
from pathlib import Path

import yaml

from ..catalog.engines import ENGINES
from ..catalog.workloads import WORKLOADS, Workload
from ..errors import InputError

DECLARATION = "workload.yml"
DIALECTS = tuple(sorted({engine.dialect for engine in ENGINES.values()}))
# a name both engines take unquoted and run ids and database names can carry
NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
QUERY_ID = re.compile(r"[a-z0-9][a-z0-9_.-]{0,63}")
KEYS = {"name", "tables", "data", "queries", "replays"}
# the fields of a PostgreSQL csvlog line: 23 up to PostgreSQL 12, more since (backend_type, leader_pid, query_id)
CSVLOG_FIELDS = 23
# the names a workload of one's own cannot take: the catalog's, and what an observed instance's runs are
RESERVED = (*WORKLOADS, "observed")
# A table's bytes in the engine per byte of its CSV, with its indexes: TPC-H's tables at scale factor 1 on MariaDB
# 10.11 took 1.32 (orders) to 1.73 (partsupp) times their generated files, 1.5 over all of them.
TABLE_BYTES_PER_CSV_BYTE = 1.5


def read_workload_dir(path) -> Workload:
    """The workload the directory declares, checked: every file it names exists, every name is one the engines
    take; each error says which file and what is allowed."""
    directory = Path(str(path)).expanduser()
    if not directory.is_absolute():
        raise InputError(f"workload_dir={str(path)!r} is not an absolute path; give the directory's full path")
    declaration_file = directory / DECLARATION
    if not declaration_file.is_file():
        raise InputError(f"workload_dir={directory}: there is no {DECLARATION} in it; docs/workload-dir.md shows one")
    try:
        declared = yaml.safe_load(declaration_file.read_text())
    except yaml.YAMLError as error:
        raise InputError(f"{declaration_file} is not YAML: {error}") from None
    where = str(declaration_file)
    if not isinstance(declared, dict):
        raise InputError(f"{where}: expected a mapping with {', '.join(sorted(KEYS))}")
    unknown = sorted(set(declared) - KEYS)
    if unknown:
        raise InputError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    name = _name(where, declared.get("name"))
    tables = _tables(where, declared.get("tables"))
    generator, source, files, generated_bytes, generated_fixed_bytes = _data(where, directory, declared.get("data"),
                                                                             tables)
    replays, replay_database = _replays(where, directory, declared.get("replays"), name)
    weights = _queries(where, directory, declared.get("queries"), required=not replays)
    clash = sorted(set(weights) & set(replays))
    if clash:
        raise InputError(f"{where}: {', '.join(clash)} is both a query and a replay; name each step once")
    schema_files = {dialect: _sql_file(where, directory, "schema", dialect, required=True) for dialect in DIALECTS}
    index_files = {dialect: _sql_file(where, directory, "indexes", dialect, required=False) for dialect in DIALECTS}
    workload = Workload(
        name=name, codes={table: table for table in tables}, load_order=tuple(tables), queries=(*weights, *replays),
        bytes_at_sf1={t: int(b * TABLE_BYTES_PER_CSV_BYTE) for t, b in generated_bytes.items()},
        fixed_bytes={t: int(b * TABLE_BYTES_PER_CSV_BYTE) for t, b in generated_fixed_bytes.items()},
        generated_bytes_at_sf1=generated_bytes, generated_fixed_bytes=generated_fixed_bytes,
        generator=generator, directory=str(directory), data_source=source, data_files=files,
        weights={**weights, **dict.fromkeys(replays, 1.0)}, replays=replays, replay_database=replay_database,
        schema_files=schema_files, index_files=index_files, data_format="csv")
    missing = [(query, dialect) for query in weights for dialect in DIALECTS
               if not any(Path(p).is_file() for p in workload.query_files(query, dialect))]
    if missing:
        query, dialect = missing[0]
        raise InputError(f"{where}: query {query} has no file for the {dialect} dialect; write "
                         f"{directory}/queries/{query}.sql (or queries/{dialect}/{query}.sql)")
    return Workload(**{**workload.__dict__, "revision": _revision(workload)})


def _name(where: str, value) -> str:
    text = "" if value is None else str(value)
    if not NAME.fullmatch(text):
        raise InputError(f"{where}: name {value!r} is not allowed; allowed: lowercase letters, digits and '_', "
                         "starting with a letter, at most 32 (it names the run ids and the database)")
    if text in RESERVED:
        raise InputError(f"{where}: name {text!r} is tierlab's own; choose another (not {', '.join(RESERVED)})")
    return text


def _tables(where: str, value) -> list[str]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: tables must be a list of the workload's table names, in the order they are loaded")
    tables = [str(t) for t in value]
    bad = [t for t in tables if not NAME.fullmatch(t) or t == "tierlab_load"]
    if bad:
        raise InputError(f"{where}: table name(s) {', '.join(map(repr, bad))} not allowed; allowed: lowercase letters, "
                         "digits and '_', starting with a letter (a layout names them: layout=orders+customers), "
                         "not tierlab_load (tierlab's mark of a complete load)")
    repeated = sorted({t for t in tables if tables.count(t) > 1})
    if repeated:
        raise InputError(f"{where}: table(s) {', '.join(repeated)} listed more than once; list each table once")
    return tables


def _data(where: str, directory: Path, value, tables: list[str]) -> tuple[str, str, dict, dict, dict]:
    """(generator, its source, its files (each table's, or each dialect's dump), CSV bytes at scale factor 1, CSV
    bytes that do not scale): the data's files, a data-only dump per dialect, or the command that prints each
    table's and the bytes it prints at scale factor 1."""
    if not isinstance(value, dict) or len({"files", "dump", "command"} & set(value)) != 1:
        raise InputError(f"{where}: data must be a mapping with one of files (a directory of <table>.csv or "
                         "<table>.parquet files), dump (a directory of data-only dumps, <dialect>.sql) or command (run "
                         "once per table, it prints the table's CSV) with csv_bytes_at_sf1")
    if "dump" in value:
        return _dumps(where, directory, value, tables)
    if "files" in value:
        files = _data_directory(where, directory, value, "files")
        found = {t: [name for name in (f"{t}.csv", f"{t}.parquet") if (files / name).is_file()] for t in tables}
        missing = [t for t, names in found.items() if len(names) != 1]
        if missing:
            raise InputError(f"{where}: data files: {', '.join(missing)} in {files} must each have one file, "
                             "<table>.csv or <table>.parquet (found "
                             f"{', '.join(name for t in missing for name in found[t]) or 'none'})")
        chosen = {t: names[0] for t, names in found.items()}
        return "csv_files", str(files), chosen, {}, {t: _csv_bytes(files / name) for t, name in chosen.items()}
    unknown = sorted(set(value) - {"command", "csv_bytes_at_sf1"})
    if unknown:
        raise InputError(f"{where}: data: unknown key(s) {', '.join(unknown)} beside command")
    command = value["command"]
    if not isinstance(command, str) or not command.strip():
        raise InputError(f"{where}: data command must be a shell command (e.g. python3 generate.py)")
    sizes = value.get("csv_bytes_at_sf1")
    if not isinstance(sizes, dict) or sorted(map(str, sizes)) != sorted(tables) or not all(
            isinstance(b, int) and b > 0 for b in sizes.values()):
        raise InputError(f"{where}: data csv_bytes_at_sf1 must give every table's CSV bytes at scale factor 1, a "
                         "whole number above 0 each (run the command at scale factor 1 and count them: wc -c); "
                         "they size the fast tier's fit and the caches given as a share of the data")
    return "csv_command", command.strip(), {}, {str(t): b for t, b in sizes.items()}, {}


def _data_directory(where: str, directory: Path, value: dict, key: str) -> Path:
    """The directory inside the workload directory that data's key (files, dump) names, the key alone."""
    unknown = sorted(set(value) - {key})
    if unknown:
        raise InputError(f"{where}: data: unknown key(s) {', '.join(unknown)} beside {key}")
    found = (directory / str(value[key])).resolve()
    if not found.is_relative_to(directory.resolve()) or not found.is_dir():
        raise InputError(f"{where}: data {key} {value[key]!r} is not a directory inside {directory}")
    return found


def _dumps(where: str, directory: Path, value: dict, tables: list[str]) -> tuple[str, str, dict, dict, dict]:
    """A directory of data-only dumps, one per dialect that has one (mysqldump --no-create-info: mysql.sql;
    pg_dump --data-only: postgresql.sql), each table's bytes counted in the first."""
    dumps = _data_directory(where, directory, value, "dump")
    files = {dialect: f"{dialect}.sql" for dialect in DIALECTS if (dumps / f"{dialect}.sql").is_file()}
    if not files:
        raise InputError(f"{where}: data dump: {dumps} has no {' or '.join(f'{d}.sql' for d in DIALECTS)}; write "
                         "mysqldump --no-create-info's or pg_dump --data-only's output there")
    for name in files.values():
        with open(dumps / name, "rb") as dump:
            if dump.read(len(PG_DUMP_ARCHIVE)) == PG_DUMP_ARCHIVE:
                raise InputError(f"{where}: data dump: {dumps / name} is a pg_dump archive (-Fc), not SQL; tierlab "
                                 f"loads plain SQL with psql: pg_restore --data-only -f {dumps / name}.plain "
                                 f"{dumps / name} && mv {dumps / name}.plain {dumps / name}")
    return "sql_dump", str(dumps), files, {}, _dump_bytes(dumps / next(iter(files.values())), tables)


# how pg_dump's custom-format archive (-Fc) begins
PG_DUMP_ARCHIVE = b"PGDMP"
# where a dump's rows of a table start: mysqldump's INSERT INTO `t`, pg_dump's COPY public.t (...) FROM stdin or
# INSERT INTO public.t (its --inserts)
DUMPED_TABLE = re.compile(r'^(?:INSERT INTO|COPY)\s+(?:[`"]?\w+[`"]?\.)?[`"]?(\w+)[`"]?[\s(]')
# and where they end: pg_dump's COPY data ends in a line \., mysqldump's table with UNLOCK TABLES
DUMPED_END = (b"\\.\n", b"UNLOCK TABLES;\n")


def _dump_bytes(path: Path, tables: list[str]) -> dict[str, int]:
    """Each table's bytes in a dump: the lines of its rows (a table the dump has no rows of, 0)."""
    sizes = dict.fromkeys(tables, 0)
    current = None
    with open(path, "rb") as dump:
        for line in dump:
            found = DUMPED_TABLE.match(line[:200].decode(errors="replace"))
            if found:
                current = found.group(1) if found.group(1) in sizes else None
            elif line in DUMPED_END:
                current = None
            if current:
                sizes[current] += len(line)
    return sizes


def _csv_bytes(path: Path) -> int:
    """A data file's bytes as CSV: a CSV file's own; a Parquet file's rows uncompressed, as its footer counts them
    (read without its data), near what they take as text. pyarrow is imported here, not with the module: every
    run's manifest command reads the workload directory's settings without it."""
    import pyarrow.parquet as pq

    if path.suffix == ".csv":
        return path.stat().st_size
    try:
        metadata = pq.ParquetFile(path).metadata
    except (OSError, ValueError) as error:
        raise InputError(f"{path} is not a Parquet file: {error}") from None
    return sum(metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups))


def _queries(where: str, directory: Path, value, required: bool) -> dict[str, float]:
    """Each query's weight (how often it runs, relative): as declared, or every queries/*.sql once (a workload of
    replays alone may have none)."""
    if value is None:
        found = sorted(p.stem for p in (directory / "queries").glob("*.sql"))
        if not found and required:
            raise InputError(f"{where}: no queries: write {directory}/queries/<id>.sql, one query each")
        if not found:
            return {}
        value = dict.fromkeys(found, 1)
    if isinstance(value, list):
        value = dict.fromkeys(value, 1)
    if not isinstance(value, dict) or not value:
        raise InputError(f"{where}: queries must map each query's id to its weight (top_customers: 10), or list ids")
    weights = {}
    for query, weight in value.items():
        if not QUERY_ID.fullmatch(str(query)):
            raise InputError(f"{where}: query id {query!r} not allowed; allowed: lowercase letters, digits, '_', '.' "
                             "and '-', starting with a letter or digit (its file is queries/<id>.sql)")
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not weight > 0:
            raise InputError(f"{where}: query {query}: weight {weight!r} is not a number above 0 (how often it runs, "
                             "relative to the others)")
        weights[str(query)] = float(weight)
    return weights


def _replays(where: str, directory: Path, value, name: str) -> tuple[dict[str, str], str]:
    """Each replay's id (its file's name without .csv) and its PostgreSQL csvlog, checked by its first line; and the
    database whose sessions are replayed (the workload's name unless given)."""
    if value is None:
        return {}, ""
    if not isinstance(value, dict) or set(value) - {"database", "logs"} or not isinstance(value.get("logs"), list) \
            or not value["logs"]:
        raise InputError(f"{where}: replays must be a mapping with logs (a list of PostgreSQL csvlog files, "
                         "logs/monday.csv, each a step) and optionally database (whose sessions are replayed)")
    database = str(value.get("database", name))
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$-]{0,62}", database):
        raise InputError(f"{where}: replays database {database!r} is not a PostgreSQL database name")
    replays = {}
    for given in map(str, value["logs"]):
        path = (directory / given).resolve()
        if not path.is_relative_to(directory.resolve()) or not path.is_file() or path.suffix != ".csv":
            raise InputError(f"{where}: replay {given!r} is not a .csv file inside {directory}")
        if not QUERY_ID.fullmatch(path.stem) or path.stem in replays:
            raise InputError(f"{where}: replay {given!r}: its name {path.stem!r} is its step's id, and must be "
                             "lowercase letters, digits, '_', '.' and '-', and one of its own")
        with open(path, newline="", errors="replace") as log:
            first = next(csv.reader(log), [])
        if len(first) < CSVLOG_FIELDS or not re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \S+", first[0]):
            raise InputError(f"{where}: replay {given}: its first line is not a PostgreSQL csvlog line (log_destination"
                             f"=csvlog: {CSVLOG_FIELDS} or more fields, a time first); docs/workload-dir.md says how to "
                             "capture one")
        replays[path.stem] = str(path)
    return replays, database


def _sql_file(where: str, directory: Path, kind: str, dialect: str, required: bool) -> str | None:
    """The dialect's own <kind>/<dialect>.sql, else the one <kind>.sql every engine runs."""
    for candidate in (directory / kind / f"{dialect}.sql", directory / f"{kind}.sql"):
        if candidate.is_file():
            return str(candidate)
    if required:
        raise InputError(f"{where}: no {kind} for the {dialect} dialect; write {directory}/{kind}.sql "
                         f"(or {kind}/{dialect}.sql where the engines differ)")
    return None


def _revision(workload: Workload) -> str:
    """A digest of what makes the loaded database: the tables, schema and index files, and the data (its files'
    sizes and times, or its command and the files beside it); a change gives the database another name, so a stale
    one is never used."""
    digest = hashlib.sha256(repr((workload.load_order, workload.generator, workload.data_source)).encode())
    for path in [*workload.schema_files.values(), *filter(None, workload.index_files.values())]:
        digest.update(Path(path).read_bytes())
    directory = Path(workload.directory)
    # the data's files, or every file the command may read (its script and inputs), the queries, replays and the
    # declaration (whose weights may change) aside
    data = ([Path(workload.data_source) / name for name in workload.data_files.values()]
            if workload.generator == "csv_files" else
            sorted(p for p in directory.rglob("*") if p.is_file() and p.name != DECLARATION
                   and not p.is_relative_to(directory / "queries") and str(p) not in workload.replays.values()))
    for path in data:
        stat = path.stat()
        digest.update(f"{path.relative_to(directory)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:8]
