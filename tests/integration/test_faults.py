"""Faults during a run. Its layout finds no room on the fast tier, even with the other databases tierlab made moved
off: the run fails before its load, naming what the layout needs and what the tier has free, and its resume, once
there is room, loads the database. Then the database server is killed with SIGKILL
in the middle of a query: the try gets an error row, the server is started again and the next query runs; the run
ends with its rows, the failed one named. Then the run's last row is torn in its write, and `resume` with
retry_failed=true cuts it off, keeps it aside and runs its try again, and runs the failed query again as a new try,
the failed row kept."""

import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path

import pytest
from answers import read_answer
from lab import FILLER, TEST_ROOT, command, fast_tier, fill_up, one_table_workload, read_csv

from tierlab_host.engines import engine
from tierlab_host.engines.mysql_family import _move_file
from tierlab_host.system import HostError

pytestmark = pytest.mark.mariadb

# a query that waits long enough to be killed in, and one after it
QUERIES = {"slow": "SELECT SLEEP(8), COUNT(*) FROM t;\n", "quick": "SELECT COUNT(*), SUM(v) FROM t;\n"}
# rows enough that their table (some 4 MiB) does not fit in the room left on the fast tier
ROWS = 100_000
# quick's answer: the rows, and the sum of v (7 times each row's id)
QUICK_ANSWER = [[float(ROWS), 7.0 * ROWS * (ROWS + 1) / 2]]
ROOM_LEFT_BYTES = 512 << 10
KILL_WAIT_S = 600


def kill_the_server_in(label: str, killed: dict) -> None:
    """Once the query loop has started the try's client (its output file is there), the server that serves it is
    killed with SIGKILL, found by the root's own record of the processes tierlab started."""
    deadline = time.monotonic() + KILL_WAIT_S
    while not list(Path(TEST_ROOT, "runs").glob(f"*/raw/output/{label}.tsv")):
        if time.monotonic() > deadline:
            return
        time.sleep(0.1)
    time.sleep(1)
    record = json.loads(Path(TEST_ROOT, "state", "created.json").read_text())
    (server,) = [e for e in record if e["kind"] == "process" and e["instance"] == "mariadb-16k"]
    os.kill(server["pid"], signal.SIGKILL)
    killed["pid"] = server["pid"]


@pytest.fixture(scope="module")
def killed_run(lab, tmp_path_factory):
    """The run whose layout found the fast tier full, as it failed; resumed with room made, the server killed in
    slow's first try, as it ended; and, its last row (quick's first try) torn, after its resume with
    retry_failed."""
    stall = one_table_workload(tmp_path_factory.mktemp("stall") / "stall", ROWS, QUERIES)
    variables = {"workload_dir": str(stall), "scale_factor": "", "queries": "all"}
    before = lab.run_ids()
    fast = fast_tier(TEST_ROOT)
    filled = fill_up(fast, ROOM_LEFT_BYTES)
    try:
        assert filled.returncode == 0, filled.stderr
        full = lab.playbook("workload.yml", check=False, layout="t", **variables)
    finally:
        (fast / FILLER).unlink(missing_ok=True)
    (run_id,) = lab.run_ids() - before
    run_dir = lab.results_dir / run_id
    no_room = {"code": full.returncode, "output": full.stdout,
               "manifest": json.loads((run_dir / "manifest.json").read_text())}
    killed: dict = {}
    killer = threading.Thread(target=kill_the_server_in, args=("slow_try1", killed), daemon=True)
    killer.start()
    lab.playbook("workload.yml", layout="t", resume=run_id, **variables)
    killer.join(timeout=60)
    assert killed, "the slow query's try never started, so its server was not killed"
    ended = {"rows": read_csv(run_dir / "tables" / "queries.csv"),
             "manifest": json.loads((run_dir / "manifest.json").read_text()),
             "report": (run_dir / "report" / "report.html").read_text()}
    # the last row torn in its write, as when the host stops in the middle of it
    rows_file = run_dir / "raw" / "queries.jsonl"
    *whole, last = rows_file.read_text().splitlines(keepends=True)
    torn = last[:len(last) // 2]
    rows_file.write_text("".join(whole) + torn)
    lab.playbook("workload.yml", layout="t", resume=run_id, retry_failed=True, **variables)
    return {"dir": run_dir, "no_room": no_room, "ended": ended, "torn": torn,
            "rows": read_csv(run_dir / "tables" / "queries.csv"),
            "manifest": json.loads((run_dir / "manifest.json").read_text())}


def test_a_layout_the_fast_tier_has_no_room_for_fails_the_run_before_its_load_naming_what_it_needs_and_has(
        killed_run):
    no_room = killed_run["no_room"]
    assert no_room["code"] != 0
    assert no_room["manifest"]["status"] == "failed"
    error = no_room["manifest"]["error"]
    said = re.fullmatch(r"Load the database: Make room for the layout \(other databases tierlab made move off a tier "
                        r"that lacks it\) failed: non-zero return code: tierlab_host layout-room: the layout brings "
                        r"([\d.]+) MiB onto the fast tier \(t\), which has ([\d.]+) MiB free of [\d.]+ MiB and keeps a "
                        r"tenth free for the tables to grow; the other databases tierlab made hold only [\d.]+ MiB "
                        r"there \(.*\), and the layout lacks [\d.]+ MiB\. Free space on that tier, or choose "
                        r"a layout that fits it", error.strip())
    assert said, error
    needed_mib, free_mib = map(float, said.groups())
    assert free_mib <= ROOM_LEFT_BYTES / 2**20 < 1 < needed_mib
    assert no_room["manifest"]["load"] is None, "the run loaded a database it had no room for"


def test_a_layout_short_of_room_on_the_fast_tier_moves_other_databases_off_it_whole_and_their_servers_serve_them(
        lab, killed_run, tmp_path):
    """The run's own database is on the fast tier (layout t); a new database's table of 3 MiB finds 1 MiB of room
    there beyond the tenth kept free, so 2 MiB and more of other databases move to the capacity tier."""
    instances = Path(TEST_ROOT, "instances")
    spec = json.loads((instances / "mariadb-16k" / "engine.json").read_text())
    layout = tmp_path / "layout.json"
    layout.write_text(json.dumps({"engine": spec, "database": "room_test", "placement": {"big": "fast"},
                                  "table_bytes": {"big": 3 << 20}, "instances_dir": str(instances)}))
    fast = fast_tier(TEST_ROOT)
    filled = fill_up(fast, shutil.disk_usage(fast).total // 10 + (1 << 20))
    try:
        assert filled.returncode == 0, filled.stderr
        made = lab.agent("layout-room", str(layout))
        room = shutil.disk_usage(fast).free - shutil.disk_usage(fast).total // 10
    finally:
        (fast / FILLER).unlink(missing_ok=True)
    assert made.returncode == 0, made.stderr
    moves = json.loads(made.stdout)["moves"]
    assert room >= 3 << 20, moves
    assert sum(move["size_bytes"] for move in moves) >= 2 << 20, moves
    for instance, database in {(move["instance"], move["database"]) for move in moves}:
        owner = engine(lab.serving(instance))
        # the objects moved: InnoDB's tables, or PostgreSQL's tables and their indexes
        objects = {move["object"] for move in moves if (move["instance"], move["database"]) == (instance, database)}
        assert database not in owner.tier_tables("fast"), (instance, database)
        tables = objects & set(owner.tier_tables("capacity")[database])
        assert tables, (instance, database, objects)
        assert all(int(owner.rows(f"SELECT COUNT(*) FROM {table}", database)[0][0]) > 0 for table in tables)


def test_the_killed_query_s_try_is_an_error_row_and_the_next_query_runs_on_a_restarted_server(killed_run):
    rows = killed_run["ended"]["rows"]
    assert list(zip(rows["query"], rows["try"], rows["status"], strict=True)) == [("slow", 1, "error"),
                                                                                 ("quick", 1, "ok")]
    assert rows["error"][0].endswith("server was not running after the query"), rows["error"][0]
    assert read_answer(killed_run["dir"] / "raw" / "output" / "quick_try1.tsv") == QUICK_ANSWER


def test_the_run_s_manifest_counts_the_failed_try_and_its_report_names_it(killed_run):
    manifest = killed_run["ended"]["manifest"]
    assert manifest["status"] == "ok"
    assert manifest["queries"]["by_status"] == {"error": 1, "ok": 1}
    assert "slow try 1 (error) did not end ok" in killed_run["ended"]["report"]


def test_a_resume_that_retries_failed_tries_runs_the_killed_query_again_as_a_new_try_and_keeps_the_failed_row(
        killed_run):
    rows = killed_run["rows"]
    assert list(zip(rows["query"], rows["try"], rows["status"], strict=True)) == [
        ("slow", 1, "error"), ("quick", 1, "ok"), ("slow", 2, "ok")]
    assert read_answer(killed_run["dir"] / "raw" / "output" / "slow_try2.tsv") == [[0.0, float(ROWS)]]
    assert killed_run["manifest"]["queries"]["by_status"] == {"error": 1, "ok": 2}
    assert killed_run["manifest"]["status"] == "ok"


def test_a_resume_cuts_off_a_row_torn_in_its_write_keeps_it_aside_and_runs_its_try_again(killed_run):
    assert killed_run["torn"].startswith('{"query": "quick", "try": 1,'), killed_run["torn"]
    assert (killed_run["dir"] / "raw" / "torn_rows.txt").read_text().endswith(
        f" cut from the end of queries.jsonl: {killed_run['torn']}\n")
    rows = killed_run["rows"]
    assert rows[rows["query"] == "quick"]["status"].tolist() == ["ok"]
    assert read_answer(killed_run["dir"] / "raw" / "output" / "quick_try1.tsv") == QUICK_ANSWER


@pytest.fixture
def tiny_tier(tmp_path):
    """A file system of 1 MiB (tmpfs) as a full fast tier, unmounted after."""
    mountpoint = tmp_path / "fast"
    mountpoint.mkdir()
    assert command(["mount", "-t", "tmpfs", "-o", "size=1M", "tierlab-test-tiny", str(mountpoint)], "mount",
                   60).returncode == 0
    try:
        yield mountpoint
    finally:
        command(["umount", str(mountpoint)], "umount", 60)


def test_a_table_moved_to_a_tier_with_no_room_for_it_stays_whole_where_it_was_with_the_tier_s_free_space_named(
        tiny_tier, tmp_path):
    source = tmp_path / "capacity" / "tpch" / "lineitem.ibd"
    source.parent.mkdir(parents=True)
    source.write_bytes(bytes(range(256)) * (8 << 10))
    with pytest.raises(HostError) as refused:
        _move_file(source, tiny_tier / "tpch" / "lineitem.ibd", "fast")
    assert str(refused.value).startswith(
        "moving lineitem.ibd (2.0 MiB) to the fast tier ran out of space there: ")
    assert f"MiB free of 1.0 MiB on the file system of {tiny_tier / 'tpch'}; it stays whole on its tier " \
           f"({source.parent}), and the tables moved before it stay moved" in str(refused.value)
    assert list((tiny_tier / "tpch").iterdir()) == []
    assert source.read_bytes() == bytes(range(256)) * (8 << 10)
