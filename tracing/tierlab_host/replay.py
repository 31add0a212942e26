"""A PostgreSQL log replayed by pgreplay (Debian's): a workload directory's csvlog, captured with log_statement=all
and log_connections and log_disconnections on, its sessions made the run's (user and database), replayed against the
run's instance with the captured pauses (shortened by a speed factor); what pgreplay reports of it, read back."""

import csv
import os
import re
from pathlib import Path

from .system import HostError

# the csvlog's fields (PostgreSQL's order): who and where a line's session is, and what it says
USER, DATABASE, SESSION, MESSAGE = 1, 2, 5, 13
# what a session's lines say when it starts, and for each statement (log_statement=all)
CONNECTED = "connection authorized:"
STATEMENT = "statement: "
# pgreplay's report at the end of a replay
REPORTED = {"statements": re.compile(r"^SQL statements executed: (\d+)$", re.M),
            "errors": re.compile(r"^\((\d+) or [\d.]+% of these completed with error\)$", re.M)}


def rewrite(log: Path, out: Path, captured: str, user: str, database: str) -> dict:
    """The lines of the log's sessions on the captured database, each made a session of user on the run's database,
    written to out (whole or not at all), its sessions and statements counted; the server's own lines and other
    databases' sessions are left out. A log without a session and a statement there is refused, saying how to
    capture one."""
    sessions, statements = set(), 0
    partial = out.with_name(out.name + ".partial")
    with open(log, newline="", errors="replace") as src, open(partial, "w", newline="") as dst:
        lines = csv.writer(dst, lineterminator="\n")
        for row in csv.reader(src):
            if len(row) <= MESSAGE or row[DATABASE] != captured:
                continue
            row[USER], row[DATABASE] = user, database
            if row[MESSAGE].startswith(CONNECTED):
                sessions.add(row[SESSION])
            statements += row[MESSAGE].startswith(STATEMENT)
            lines.writerow(row)
    if not sessions or not statements:
        partial.unlink()
        raise HostError(f"{log.name} has {len(sessions)} sessions and {statements} statements on database {captured} "
                        "to replay: capture the log with log_destination = 'csvlog', logging_collector = on, "
                        "log_statement = 'all', log_connections = on and log_disconnections = on, or name the "
                        "database whose sessions to replay (replays: database)")
    os.replace(partial, out)
    return {"sessions": len(sessions), "statements": statements}


def command(spec: dict, log: Path, speed: float) -> tuple[list[str], dict]:
    """pgreplay's command line (parse the csvlog and replay it at once) on the run's instance (its socket, its
    passfile), and its environment."""
    return (["pgreplay", "-c", "-h", spec["socket_dir"], "-p", str(spec["port"]), "-s", f"{speed:g}", str(log)],
            {**os.environ, "PGPASSFILE": spec["password_file"]})


def reported(text: str) -> dict:
    """The statements pgreplay ran and how many of them failed, from its report."""
    found = {name: pattern.search(text) for name, pattern in REPORTED.items()}
    return {name: int(match.group(1)) if match else None for name, match in found.items()}
