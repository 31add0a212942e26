"""Instances tierlab did not start, observed while they serve their own traffic (playbooks/observe.yml): a PostgreSQL
cluster on a partitioned disk and a MariaDB server on the emulated capacity tier, each with a small, heavily read
index beside larger tables read rarely. The hot index is found, attributed and recommended first; PostgreSQL's
migration script is applied to the instance and undone; bad connections and grants are refused before a run opens."""

import contextlib
import json
import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import psycopg2
import pymysql
import pytest
from lab import ROOT, TIERLAB, command, read_csv
from own_instances import (
    LOADING_BUFFER_POOL,
    PARTITION_START_SECTORS,
    OwnMariadb,
    OwnPostgresql,
    PartitionedDisk,
    Traffic,
    own_dir,
    remove_own_dir,
)

from tierlab_host.observe import probe
from tierlab_host.system import HostError

WINDOW = {"window_s": 24, "interval_s": 4, "untraced_intervals": 2}
POSTGRESQL_PORT, MARIADB_PORT = 6710, 6711
# PostgreSQL's hot index (1.5 million keys, 32 MiB) is twice what its memory group leaves for the page cache
POSTGRESQL_KEYS = 1_500_000
POSTGRESQL_LOAD = [
    f"CREATE TABLE hot (id int PRIMARY KEY, k int, pad text); INSERT INTO hot SELECT g, (g::bigint * 7919) % "
    f"{POSTGRESQL_KEYS}, repeat('x', 20) FROM generate_series(1, {POSTGRESQL_KEYS}) g; CREATE INDEX hot_k ON hot (k); "
    "CREATE TABLE cold (id int, pad text); INSERT INTO cold SELECT g, repeat(md5(g::text), 10) "
    "FROM generate_series(1, 200000) g; "
    "CREATE TABLE doomed (id int, pad text); INSERT INTO doomed SELECT g, repeat('d', 100) FROM generate_series(1, 20000) g",
    "VACUUM ANALYZE",
]
POSTGRESQL_MEMORY_BYTES = 48 << 20
# MariaDB's, read with direct I/O through an 8 MiB buffer pool
MARIADB_KEYS = 300_000
MARIADB_BUFFER_POOL = "8M"
MARIADB_LOAD = (
    "CREATE TABLE hot (id int PRIMARY KEY, k int, pad varchar(40), KEY hot_k (k)); "
    f"INSERT INTO hot SELECT seq, (seq * 7919) % {MARIADB_KEYS}, repeat('x', 20) FROM seq_1_to_{MARIADB_KEYS}; "
    "CREATE TABLE cold (id int PRIMARY KEY, pad varchar(400)); "
    "INSERT INTO cold SELECT seq, repeat(md5(seq), 10) FROM seq_1_to_200000")


def observe(lab, **variables) -> subprocess.CompletedProcess:
    return lab.playbook("observe.yml", check=False, **{**WINDOW, **variables})


def probe_refusal(**spec) -> str:
    """What the agent's probe, which observe.yml runs before it opens a run, refuses an instance with; here in this
    process (test_a_wrong_password_is_refused_before_a_run_opens shows the playbook stops on it)."""
    with pytest.raises(HostError) as refused:
        probe({"conninfo": "", "client_file": "", "databases": [], "index_pages": None, **spec})
    return str(refused.value)


def window_begun(lab):
    """Whether the next observation's window has begun: its loop has made its run's raw/counters on the host (runs
    that did not end ok keep their host copy, and theirs were there before)."""
    before = set(Path(lab.root, "runs").glob("*/raw/counters"))
    return lambda: bool(set(Path(lab.root, "runs").glob("*/raw/counters")) - before)


def observed_run(lab, **variables) -> Path:
    before = lab.run_ids()
    done = observe(lab, **variables)
    assert done.returncode == 0, done.stdout[-6000:]
    (new,) = lab.run_ids() - before
    return lab.results_dir / new


def recommend(run_dir: Path, capacity: str, out: Path, *args: str) -> dict:
    done = command([TIERLAB, "recommend", str(run_dir), "--fast-capacity", capacity, "--profiles",
                    "fast=optane,capacity=nand", "--out", str(out), "--json", *args], "tierlab recommend", 600, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def reads_by_object(run_dir: Path):
    metrics = read_csv(run_dir / "tables" / "table_metrics.csv")
    return metrics.groupby("object")["read_requests"].sum().sort_values(ascending=False)


@pytest.fixture(scope="module")
def postgresql(lab):
    """A cluster on a partitioned disk, its observation while its traffic runs, and recommend's answer for a fast
    tier that holds the hot index; the instance stays up for the tests, then is stopped and its disk removed."""
    here = own_dir("postgresql")
    # each step undone, the last made first, even where undoing a later one failed
    with contextlib.ExitStack() as undo:
        undo.callback(remove_own_dir, here)
        disk = PartitionedDisk(here, 1 << 30)
        undo.callback(disk.close)
        instance = OwnPostgresql(disk.mount / "data", POSTGRESQL_PORT)
        undo.callback(instance.stop)
        instance.sql("CREATE DATABASE app")
        for sql in POSTGRESQL_LOAD:
            instance.sql(sql, "app")
        instance.bound(POSTGRESQL_MEMORY_BYTES)
        conninfo = instance.account("observer", "observer-secret", here, "pg_read_all_settings")
        connect = lambda: psycopg2.connect(f"{instance.conninfo()} dbname=app password=postgres-secret")  # noqa: E731
        # each lookup hands its statistics to pg_stat_database as it ends, where a busy backend hands them over at
        # most once a second: the instance's counters then hold every lookup committed before they are read
        with Traffic(connect, "SELECT count(*), pg_stat_force_next_flush() FROM hot WHERE k BETWEEN %s AND %s",
                     POSTGRESQL_KEYS,
                     [(12.0, "SELECT sum(length(pad)) FROM cold"), (16.0, "DROP TABLE doomed")],
                     window_begun(lab)) as traffic:
            run_dir = observed_run(lab, engine="postgresql", conninfo=conninfo)
        assert traffic.errors == [] and len(traffic.lookups) > 100, (traffic.errors, len(traffic.lookups))
        fast = Path(lab.root, "tiers", "optane", "own-postgresql-fast")
        hot_k_bytes = json.loads((run_dir / "manifest.json").read_text())["layout"]["tables"]["app.public.hot_k"]
        advice = recommend(run_dir, str(int(hot_k_bytes["stored_bytes"] * 1.2)), here / "advice",
                           "--fast-location", str(fast))
        yield {"instance": instance, "here": here, "disk": disk, "run": run_dir, "advice": advice,
               "out": here / "advice", "fast": fast, "conninfo": conninfo, "lookups": traffic.lookups}


@pytest.fixture(scope="module")
def mariadb(lab):
    """A server whose data directory is on the emulated capacity tier, observed while its traffic runs."""
    here = own_dir("mariadb")
    home = Path(lab.root, "tiers", "nand", "own-mariadb")
    with contextlib.ExitStack() as undo:
        undo.callback(remove_own_dir, here)
        for path in (home, Path(lab.root, "tiers", "optane", "own-mariadb-fast")):
            undo.callback(shutil.rmtree, path, ignore_errors=True)
        instance = OwnMariadb(home / "data", MARIADB_PORT)
        undo.callback(instance.stop)
        instance.sql("CREATE DATABASE app")
        instance.sql(MARIADB_LOAD, "app")
        instance.bound(MARIADB_BUFFER_POOL)
        client_file = instance.account("observer", "observer-secret", here, "PROCESS")
        instance.sql("GRANT SELECT ON performance_schema.* TO 'observer'@'localhost'")
        connect = lambda: pymysql.connect(unix_socket=str(instance.socket), user="root", database="app")  # noqa: E731
        with Traffic(connect, "SELECT count(*) FROM hot WHERE k BETWEEN %s AND %s", MARIADB_KEYS,
                     [(12.0, "SELECT sum(length(pad)) FROM cold")], window_begun(lab)) as traffic:
            run_dir = observed_run(lab, engine="mariadb", client_file=str(client_file))
        assert traffic.errors == [] and len(traffic.lookups) > 100, (traffic.errors, len(traffic.lookups))
        fast = Path(lab.root, "tiers", "optane", "own-mariadb-fast")
        advice = recommend(run_dir, "64M", here / "advice", "--fast-location", str(fast))
        yield {"instance": instance, "here": here, "run": run_dir, "advice": advice, "out": here / "advice",
               "fast": fast}


def test_an_observation_is_a_run_of_intervals_on_the_disk_under_the_instance_s_files(postgresql):
    manifest = json.loads((postgresql["run"] / "manifest.json").read_text())
    disk = postgresql["disk"]
    assert manifest["status"] == "ok" and manifest["workload"]["name"] == "observed"
    (tier,) = manifest["tiers"]
    assert tier["device"] == f"{os.major(os.stat(disk.loop).st_rdev)}:{os.minor(os.stat(disk.loop).st_rdev)}"
    assert tier["partitions"][disk.partition.name]["start_bytes"] == PARTITION_START_SECTORS * 512
    intervals = read_csv(postgresql["run"] / "tables" / "intervals.csv")
    assert list(intervals["query"]) == [f"i000{n}" for n in range(1, 7)]
    assert list(intervals["traced"]) == [True, False, True, False, True, True]
    assert (intervals["work_per_s"] > 0).all()


def test_the_hot_index_takes_the_most_reads_and_reads_are_attributed_through_the_partition(postgresql):
    reads = reads_by_object(postgresql["run"])
    assert reads.index[0] == "app.public.hot_k"
    assert reads["app.public.hot_k"] > 0.5 * reads.sum()
    # a partition's sectors taken as the disk's would miss every extent by 3 MiB: nearly all reads would be `other`
    assert reads.get("other", 0) < 0.1 * reads.sum()


def test_the_traces_hold_the_requests_the_kernel_counted_on_the_disk(postgresql):
    intervals = read_csv(postgresql["run"] / "tables" / "intervals.csv")
    traced = intervals[intervals["traced"]]
    assert traced["kernel_requests"].sum() > 1000
    assert 0.95 < traced["traced_requests"].sum() / traced["kernel_requests"].sum() < 1.1


def test_the_hot_index_is_recommended_first_with_the_statement_that_moves_it(postgresql):
    advice = postgresql["advice"]
    assert advice["layout"] == "app.public.hot_k"
    assert advice["objects"][0]["unit"] == "app.public.hot_k" and advice["objects"][0]["kind"] == "index"
    (step,) = advice["migration"]["plan"]["steps"]
    assert step["lines"] == ['ALTER INDEX "public"."hot_k" SET TABLESPACE "tierlab_fast";']
    assert advice["predicted_s"] < advice["traced_predicted_s"]


def _index_device(instance: OwnPostgresql) -> int:
    relative = instance.sql("SELECT pg_relation_filepath('hot_k')", "app").strip()
    return os.stat(instance.datadir / relative).st_dev


def test_the_migration_script_moves_the_index_to_the_fast_tier_and_its_undo_moves_it_back(postgresql):
    instance, fast = postgresql["instance"], postgresql["fast"]
    fast.mkdir()
    shutil.chown(fast, "postgres", "postgres")
    before = _index_device(instance)
    for name, device in (("migration.sql", os.stat(fast).st_dev), ("migration-undo.sql", before)):
        done = command(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-d", f"{instance.conninfo()} dbname=postgres", "-f",
                        str(postgresql["out"] / name)], f"psql -f {name}", 600)
        assert done.returncode == 0, done.stderr
        assert _index_device(instance) == device, name
    assert before == os.stat(postgresql["disk"].mount).st_dev


def test_the_migration_script_of_an_index_renamed_since_stops_before_anything_moves(postgresql):
    instance = postgresql["instance"]
    before = _index_device(instance)
    instance.sql("ALTER INDEX hot_k RENAME TO hot_k_renamed", "app")
    try:
        done = command(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-d", f"{instance.conninfo()} dbname=postgres", "-f",
                        str(postgresql["out"] / "migration.sql")], "psql -f migration.sql", 600)
    finally:
        instance.sql("ALTER INDEX hot_k_renamed RENAME TO hot_k", "app")
    assert done.returncode != 0
    assert ('the plan names objects that no longer exist: "public"."hot_k"; nothing was moved: make a new plan from '
            'a current run or observation') in done.stderr
    assert _index_device(instance) == before


def test_a_table_dropped_during_the_window_is_flagged_not_attributed_by_a_stale_map(postgresql):
    changed = read_csv(postgresql["run"] / "tables" / "objects_changed.csv")
    assert changed.loc[changed["object"] == "app.public.doomed", "change"].tolist() == ["dropped"]
    warnings = read_csv(postgresql["run"] / "tables" / "observation_warnings.csv")
    assert any("app.public.doomed dropped" in text for text in warnings["warning"])


def test_the_engine_s_reads_of_each_object_stand_beside_the_traced_ones(postgresql):
    view = read_csv(postgresql["run"] / "tables" / "object_engine_view.csv").set_index("unit")
    assert view.loc["app.public.hot_k", "engine_pages_read"] > 0
    assert view.loc["app.public.hot_k", "block_read_pages"] > 0


def test_the_work_counted_over_the_window_is_the_instance_s_own_traffic(postgresql):
    """The transactions PostgreSQL counted in the window's intervals against the lookups the traffic committed
    between each interval's two counter reads: the same within a tenth in all (the observer's own statements count a
    few), and each interval's work per second its traffic's rate over those seconds within a second and a half's
    worth (a read's time is the middle of its statement, whose counters may be read before or after it)."""
    committed, spans = 0, []
    for path in sorted((postgresql["run"] / "raw" / "counters").glob("i*_try1.json")):
        counted = json.loads(path.read_text())["counted"]
        begin = datetime.fromisoformat(counted["from"]).timestamp()
        inside = sum(begin <= at <= begin + counted["seconds"] for at in postgresql["lookups"])
        committed += inside
        spans.append((inside / counted["seconds"], counted["seconds"]))
    intervals = read_csv(postgresql["run"] / "tables" / "intervals.csv")
    assert committed > 100
    assert abs(intervals["work"].sum() - committed) <= 0.1 * committed, (intervals["work"].sum(), committed)
    for work_per_s, (rate, seconds) in zip(intervals["work_per_s"], spans, strict=True):
        assert abs(work_per_s - rate) <= 1.5 * rate / seconds, (work_per_s, rate, seconds)


def test_the_tracing_s_cost_is_measured_on_the_instance_s_own_traffic(postgresql):
    (observation,) = read_csv(postgresql["run"] / "tables" / "observation.csv").to_dict("records")
    work = read_csv(postgresql["run"] / "tables" / "intervals.csv").set_index("query")["work_per_s"]
    # the window traces i0001, i0003, i0005 and i0006, and leaves i0002 and i0004 untraced (the first test): the
    # untraced intervals' work per second against their traced neighbours'
    assert observation["untraced_intervals"] == 2
    assert observation["untraced_work_per_s"] == pytest.approx(work[["i0002", "i0004"]].mean(), rel=1e-4)
    assert observation["traced_work_per_s"] == pytest.approx(work[["i0001", "i0003", "i0005"]].mean(), rel=1e-4)
    assert observation["overhead_pct"] == pytest.approx(
        100 * (1 - work[["i0001", "i0003", "i0005"]].mean() / work[["i0002", "i0004"]].mean()), abs=1e-3)


def test_the_observer_s_sessions_are_read_only(postgresql):
    from tierlab_host.observed import observed
    from tierlab_host.system import HostError

    instance = observed({"engine": "postgresql", "conninfo": postgresql["instance"].conninfo(), "databases": ["app"],
                         "index_pages": None})
    assert instance._rows("SHOW transaction_read_only", "app") == [["on"]]
    with pytest.raises(HostError, match="read-only transaction"):
        instance._rows("CREATE TABLE written (id int)", "app")


def test_a_window_over_its_raw_trace_limit_keeps_the_newest_trace_and_every_interval_s_counters(lab, postgresql):
    run = observed_run(lab, engine="postgresql", conninfo=postgresql["conninfo"], window_s=10, interval_s=2,
                       untraced_intervals=0, raw_trace_limit="1")
    assert json.loads((run / "manifest.json").read_text())["status"] == "ok"
    assert sorted(json.loads((run / "raw" / "rotated.json").read_text())) == [
        "i0001_try1", "i0002_try1", "i0003_try1", "i0004_try1"]
    assert [p.name for p in (run / "raw" / "traces").iterdir()] == ["i0005_try1.ftrace-raw"]
    intervals = read_csv(run / "tables" / "intervals.csv")
    assert (intervals["trace_rotated"].tolist(), intervals["traced"].tolist()) == (
        [True, True, True, True, False], [False, False, False, False, True])
    assert intervals["work"].notna().all()
    warnings = read_csv(run / "tables" / "observation_warnings.csv")["warning"]
    assert warnings.str.startswith("4 interval(s)' traces (").any()


def test_a_wrong_password_is_refused_before_a_run_opens(lab, postgresql):
    passfile = postgresql["here"] / "wrong.pgpass"
    passfile.write_text("*:*:*:observer:not-the-password\n")
    passfile.chmod(0o600)
    before = lab.run_ids()
    done = observe(lab, engine="postgresql", conninfo=f"{postgresql['instance'].conninfo('observer', passfile)}")
    assert done.returncode != 0
    assert "cannot connect to PostgreSQL with conninfo" in done.stdout
    assert 'password authentication failed for user' in done.stdout
    assert lab.run_ids() == before


def test_an_account_without_the_grant_it_needs_is_told_which(postgresql):
    conninfo = postgresql["instance"].account("weak", "weak-secret", postgresql["here"])
    assert "GRANT pg_read_all_settings TO weak;" in probe_refusal(engine="postgresql", conninfo=conninfo)


def test_a_data_directory_on_no_block_device_is_refused():
    here = own_dir("tmpfs")
    with contextlib.ExitStack() as undo:
        undo.callback(remove_own_dir, here)
        command(["mount", "-t", "tmpfs", "-o", "size=256m", "tmpfs", str(here)], "mount tmpfs", 60)
        undo.callback(command, ["umount", str(here)], "umount tmpfs", 60)
        instance = OwnPostgresql(here / "data", POSTGRESQL_PORT + 10)
        undo.callback(instance.stop)
        assert "its file system (tmpfs) is not on a block device" in probe_refusal(engine="postgresql",
                                                                                  conninfo=instance.conninfo())


def test_mariadb_s_hot_index_is_found_in_its_table_s_file_and_the_table_recommended(mariadb):
    reads = reads_by_object(mariadb["run"])
    assert reads.index[0] == "app.hot.hot_k"
    assert reads["app.hot.hot_k"] > 0.5 * reads.sum()
    advice = mariadb["advice"]
    assert advice["objects"][0]["unit"] == "app.hot"
    assert advice["layout"] == "app.hot"
    (step,) = advice["migration"]["plan"]["steps"]
    assert step["lines"] == [f"rebuild app hot {mariadb['fast']}"]


def _hot_file(instance: OwnMariadb) -> Path:
    """Where app.hot's file is, as InnoDB says (a file in the data directory relative to it)."""
    name = instance.sql("SELECT FILENAME FROM information_schema.INNODB_SYS_TABLESPACES WHERE NAME = 'app/hot'").strip()
    return (instance.datadir / name).resolve()


def test_mariadb_s_migration_rebuilds_the_table_on_the_fast_tier_and_its_undo_in_the_data_directory(mariadb):
    instance, fast = mariadb["instance"], mariadb["fast"]
    fast.mkdir()
    shutil.chown(fast, "mysql", "mysql")
    # the rebuild copies the table through the buffer pool: the 8 MiB one would write each page back as it is
    # evicted, minutes on the emulated tiers, and the script's outcome does not depend on it
    instance.bound(LOADING_BUFFER_POOL)
    rows = instance.sql("SELECT COUNT(*), SUM(k) FROM hot", "app")
    client = f"mariadb --no-defaults --socket={instance.socket} -uroot"
    for name, directory in (("migration.sh", fast / "app"), ("migration-undo.sh", instance.datadir / "app")):
        done = command(["sh", str(mariadb["out"] / name)], f"sh {name}", 600, env={**os.environ, "MYSQL": client})
        assert done.returncode == 0, done.stderr
        if name == "migration.sh":
            # a table in a DATA DIRECTORY is found through its .isl after a restart too
            instance.stop()
            instance.start()
        assert _hot_file(instance) == directory / "hot.ibd", name
        assert os.stat(_hot_file(instance)).st_dev == os.stat(directory).st_dev
        assert instance.sql("SELECT COUNT(*), SUM(k) FROM hot", "app") == rows
    assert instance.sql("SHOW TABLES", "app").split() == ["cold", "hot"]


def test_mariadb_s_system_files_and_logs_are_objects_of_their_own(mariadb):
    tables = json.loads((mariadb["run"] / "manifest.json").read_text())["layout"]["tables"]
    assert {"innodb_system", "innodb_redo", "innodb_temp", "mysql", "app.hot", "app.cold"} <= set(tables)
    assert not [table for table in tables if table.startswith("mysql.")]
    assert {f["object"] for f in tables["app.hot"]["files"]} == {"app.hot", "app.hot.hot_k"}


def test_mariadb_s_per_file_io_stands_beside_the_traced_reads(mariadb):
    view = read_csv(mariadb["run"] / "tables" / "object_engine_view.csv").set_index("unit")
    # with direct I/O every page InnoDB reads is a read of the device: the two counts differ only by the reads at
    # the traced intervals' edges (about 1% here)
    for table in ("app.hot", "app.cold"):
        assert view.loc[table, "block_read_pages"] > 0
        assert view.loc[table, "block_read_pages"] == pytest.approx(view.loc[table, "engine_pages_read"], rel=0.1)


def test_mariadb_without_process_is_told_which_grant_it_needs(mariadb):
    client_file = mariadb["instance"].account("weak", "weak-secret", mariadb["here"])
    assert "GRANT PROCESS ON *.* TO 'weak'@'localhost';" in probe_refusal(engine="mariadb", client_file=str(client_file))


def test_mariadb_on_a_wrong_socket_is_refused_with_the_client_s_words(mariadb):
    client_file = mariadb["here"] / "nowhere.cnf"
    client_file.write_text("[client]\nuser=observer\npassword=observer-secret\nsocket=/nonexistent/mariadb.sock\n")
    said = probe_refusal(engine="mariadb", client_file=str(client_file))
    assert f"cannot connect to mariadb with the client options in {client_file}" in said
    assert "/nonexistent/mariadb.sock" in said
