"""The engine commands the roles run: start or stop a server, move objects between tiers, and fill
sysbench's tables.

engine-start and engine-stop take the engine's spec; layout-apply takes
{engine: spec, database, placement: {table: tier role}} and moves what the
placement changes (the engine decides how: offline for InnoDB files, ALTER ...
SET TABLESPACE for PostgreSQL), with each move's time; sysbench-prepare takes
{engine: spec, database, tables, table_size, threads, target, table_options}.
"""

import json
from pathlib import Path

from . import sysbench
from .engines import engine


def main(command: str, spec_file: str) -> None:
    spec = json.loads(Path(spec_file).read_text())
    if command == "engine-start":
        result = engine(spec).start()
    elif command == "engine-stop":
        result = engine(spec).stop()
    else:
        db = engine(spec["engine"])
        db.start()
        if command == "sysbench-prepare":
            result = sysbench.prepare(db, spec)
        else:
            moves = db.move(spec["database"], spec["placement"])
            result = {"changed": bool(moves), "moves": moves}
    print(json.dumps(result))
