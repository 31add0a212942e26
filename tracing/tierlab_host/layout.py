"""Move InnoDB tables between tiers, offline.

MariaDB ignores ALTER TABLE ... DATA DIRECTORY, so a table is moved with its
server stopped: its .ibd is copied to the other tier, its .isl (the path file
in the datadir) is rewritten, and the server is started again. Only tables
whose tier changes are touched.
"""

import json
import os
import shutil
import time
from pathlib import Path

from . import mysqld
from .system import HostError


def isl_path(datadir: str, database: str, table: str) -> Path:
    return Path(datadir) / database / f"{table}.isl"


def current_file(datadir: str, database: str, table: str) -> Path:
    isl = isl_path(datadir, database, table)
    if not isl.exists():
        raise HostError(f"{isl} does not exist: table {database}.{table} was not created with DATA DIRECTORY")
    return Path(isl.read_text().strip())


def _move_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.chown(dst.parent, "mysql", "mysql")
    tmp = dst.with_suffix(".ibd.moving")
    shutil.copyfile(src, tmp)
    shutil.copystat(src, tmp)
    shutil.chown(tmp, "mysql", "mysql")
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, dst)
    src.unlink()


def apply(spec: dict) -> dict:
    """spec: instance, server, defaults_file, client_file, log_file, datadir,
    database, tables: {table: target_dir}. target_dir is the DATA DIRECTORY."""
    pending = []
    for table, target_dir in spec["tables"].items():
        src = current_file(spec["datadir"], spec["database"], table)
        dst = Path(target_dir) / spec["database"] / f"{table}.ibd"
        if src != dst:
            pending.append((table, src, dst))
    if not pending:
        return {"changed": False, "moves": []}
    moves = []
    mysqld.stop(spec["instance"])
    try:
        for table, src, dst in pending:
            started = time.monotonic()
            _move_file(src, dst)
            isl = isl_path(spec["datadir"], spec["database"], table)
            isl.write_text(str(dst))
            shutil.chown(isl, "mysql", "mysql")
            moves.append({"table": table, "from": str(src), "to": str(dst),
                          "size_bytes": dst.stat().st_size, "move_s": round(time.monotonic() - started, 3)})
    finally:
        mysqld.start(spec["instance"], spec["server"], spec["defaults_file"], spec["client_file"], spec["log_file"])
    return {"changed": True, "moves": moves}


def main(spec_file: str) -> None:
    print(json.dumps(apply(json.loads(Path(spec_file).read_text()))))
