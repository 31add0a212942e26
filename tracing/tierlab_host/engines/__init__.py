"""The database engines behind one interface, one module per engine family.

An engine is built from its spec (what the engine's role wrote) and offers:
start, stop, ping, running (whether tierlab's recorded server runs);
client_command, script (a statement under a time limit) and is_timeout, which
the query loop runs through; rows (a query's rows);
facts (version, settings read back); counters (the engine's I/O counters, as
integers, for per-query deltas); settle (wait, before a window, for the
background work earlier statements left: what it waited for and how long);
plan (the plan of a statement just run);
object_files (every file of every object of the workload's tables, with its
offset in the object); database_dirs (the directory on each tier where a
database's files are made) and user (who owns them); tier_tables (each
database's tables on a tier, with their bytes); move (objects to the tier a
placement gives them); drop (a database, with its files on every tier);
sysbench_options (the options and environment that let sysbench reach the
server, and place the tables its prepare creates).
"""

from .mysql_family import MysqlFamily
from .postgresql import Postgresql
from .server import stop_others, stop_recorded

ENGINES = {"mariadb": MysqlFamily, "mysql": MysqlFamily, "postgresql": Postgresql}


def engine(spec: dict):
    return ENGINES[spec["name"]](spec)


__all__ = ["engine", "stop_others", "stop_recorded"]
