"""The engine commands the roles run: start or stop a server, make room on the tiers and move objects
between them, fill sysbench's tables, and have the file system compress a database.

engine-start and engine-stop take the engine's spec; layout-room takes
{engine: spec, database, placement: {table: tier role}, table_bytes: {table:
estimated bytes}, instances_dir} and moves other databases tierlab made off a
tier that lacks room for the placement (tier_room.py); layout-apply takes the
same, makes that room and moves what the placement changes (the engine decides
how: offline for InnoDB files, ALTER ... SET TABLESPACE for PostgreSQL), with
each move's time; layout-place takes the same and table_options, and puts
the new, empty tables of a schema tierlab did not write on their tiers;
sysbench-prepare takes
{engine: spec, database, tables, table_size, threads, target, table_options};
database-compress takes {engine: spec, database, compression, step}: step
`dirs` sets the compression on the database's directory on every tier, before
its files are made; `files` rewrites them compressed once they are filled; database-compact takes
layout-room's spec and rewrites the placement's tables as their load left them,
without what earlier runs wrote (PostgreSQL's compact).
"""

import json
from pathlib import Path

from . import fs_compression, sysbench, tier_room
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
        elif command == "database-compress" and spec["step"] == "dirs":
            dirs = fs_compression.compress_dirs(db.database_dirs(spec["database"]), db.user, spec["compression"])
            result = {"changed": True, "dirs": dirs}
        elif command == "database-compress":
            dirs = fs_compression.compress_files(db.database_dirs(spec["database"]), spec["compression"])
            result = {"changed": True, "dirs": dirs}
        elif command == "database-compact":
            result = {"changed": True, **db.compact(spec["database"], list(spec["placement"]))}
        elif command == "layout-room":
            moves = tier_room.make_room(db, spec["database"], spec["placement"], spec["table_bytes"],
                                        spec["instances_dir"])
            result = {"changed": bool(moves), "moves": moves}
        elif command == "layout-place":
            moves = db.place(spec["database"], spec["placement"], spec["table_options"])
            result = {"changed": bool(moves), "moves": moves}
        else:
            room_moves = tier_room.make_room(db, spec["database"], spec["placement"], spec["table_bytes"],
                                             spec["instances_dir"])
            moves = db.move(spec["database"], spec["placement"])
            result = {"changed": bool(room_moves or moves), "moves": moves, "room_moves": room_moves}
    print(json.dumps(result))
