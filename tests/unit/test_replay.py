"""A PostgreSQL csvlog, captured from PostgreSQL 15 with log_statement=all and log_connections and
log_disconnections on (postgresql_logs/captured.csv: a session on database postgres that creates database shop, then
one on shop with five statements, one of them over three lines and one that fails), made ready for pgreplay; and
pgreplay's report of its replay (postgresql_logs/pgreplay-report.txt, Debian's pgreplay 1.2.0)."""

import csv
from pathlib import Path

import pytest

from tierlab_host import replay
from tierlab_host.system import HostError

LOGS = Path(__file__).with_name("postgresql_logs")


def test_only_the_captured_database_s_sessions_are_kept_each_made_the_run_s_user_and_database(tmp_path):
    out = tmp_path / "replayed.csv"
    assert replay.rewrite(LOGS / "captured.csv", out, "shop", "postgres", "shop_sf1_abc") == {"sessions": 1,
                                                                                            "statements": 5}
    rows = list(csv.reader(out.open(newline="")))
    assert {(row[replay.USER], row[replay.DATABASE]) for row in rows} == {("postgres", "shop_sf1_abc")}
    statements = [row[replay.MESSAGE] for row in rows if row[replay.MESSAGE].startswith("statement: ")]
    assert statements[3] == "statement: SELECT status,\n       count(*)\nFROM orders GROUP BY status;"
    assert rows[0][replay.MESSAGE].startswith("connection authorized: ")
    assert rows[-1][replay.MESSAGE].startswith("disconnection: ")


def test_a_log_without_sessions_on_the_captured_database_is_refused_and_nothing_is_written(tmp_path):
    out = tmp_path / "replayed.csv"
    with pytest.raises(HostError) as err:
        replay.rewrite(LOGS / "captured.csv", out, "crm", "postgres", "shop_sf1_abc")
    assert str(err.value).startswith("captured.csv has 0 sessions and 0 statements on database crm to replay: "
                                     "capture the log with log_destination = 'csvlog'")
    assert list(tmp_path.iterdir()) == []


def test_pgreplay_s_report_gives_the_statements_it_ran_and_those_that_failed():
    assert replay.reported((LOGS / "pgreplay-report.txt").read_text()) == {"statements": 5, "errors": 1}


def test_pgreplay_parses_the_log_and_replays_it_at_once_on_the_run_s_socket_with_its_passfile():
    cmd, env = replay.command({"socket_dir": "/run/pg", "port": 5516, "password_file": "/root/pass"},
                              Path("/x/monday.replayed.csv"), 10.0)
    assert cmd == ["pgreplay", "-c", "-h", "/run/pg", "-p", "5516", "-s", "10", "/x/monday.replayed.csv"]
    assert env["PGPASSFILE"] == "/root/pass"
