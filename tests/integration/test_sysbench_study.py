"""sysbench's OLTP tests as a run of timed steps: its own prepare fills the tables on their tier, each test
is warmed up and then traced for its window, and its reports become the run's throughput tables."""

import json

import pytest
from lab import read_csv

import tierlab

pytestmark = [pytest.mark.mariadb, pytest.mark.postgresql, pytest.mark.mysql]

TESTS = ["oltp_read_only", "oltp_read_write", "oltp_write_only"]
# 2 tables of 20,000 rows (about 10 MB with their indexes) against MariaDB's smallest buffer pool (8 MiB),
# so that the read-only window still reads from the device after its warm-up
SYSBENCH = {"tables": 2, "table_size": 20000, "threads": 2, "duration_s": 3, "warmup_s": 1, "report_interval_s": 1,
            "buffer_pool": "8M", "scale_factor": ""}

# PostgreSQL's read-only run: eight connections, whose allowance in its memory bound (24 MiB each beyond the first)
# would hold the tables in the page cache many times over, and an os_cache of a fifth of the tables
POSTGRESQL_READ_ONLY = {"threads": 8, "os_cache": "2M"}


@pytest.fixture(scope="session")
def sysbench_runs(lab):
    """Every test on MariaDB with the tables on the fast tier; oltp_read_write on PostgreSQL (capacity tier), then
    oltp_read_only there on what it wrote, with 8 threads and a page cache smaller than the tables;
    oltp_read_write then oltp_read_only on MySQL (fast tier)."""
    return {"mariadb": lab.run("ALL", playbook="sysbench.yml", queries="all", **SYSBENCH),
            "postgresql": lab.run("None", playbook="sysbench.yml", engine="postgresql", queries="read_write",
                                    **SYSBENCH),
            "postgresql-after-writes": lab.run("None", playbook="sysbench.yml", engine="postgresql",
                                               queries="read_only", **{**SYSBENCH, **POSTGRESQL_READ_ONLY}),
            "mysql": lab.run("SB", playbook="sysbench.yml", engine="mysql", queries="read_write,read_only",
                             **SYSBENCH)}


def test_a_sysbench_run_is_named_for_its_tables_and_rows_and_has_a_row_per_test(sysbench_runs):
    run_dir = sysbench_runs["mariadb"]
    assert run_dir.name.endswith("_mariadb_sysbench-2x20000_ALL")
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "ok"
    workload = manifest["workload"]
    assert (workload["name"], workload["tables"], workload["table_size"], workload["threads"]) == ("sysbench", 2, 20000, 2)
    assert {table: where["tier"] for table, where in manifest["layout"]["tables"].items()} == {
        "sbtest1": "fast", "sbtest2": "fast"}
    queries = read_csv(run_dir / "tables" / "queries.csv")
    assert list(queries["query"]) == TESTS
    assert set(queries["status"]) == {"ok"}


@pytest.mark.parametrize("engine", ["mariadb", "postgresql", "mysql"])
def test_each_window_s_throughput_comes_from_the_driver_s_own_reports(sysbench_runs, engine):
    run_dir = sysbench_runs[engine]
    totals = read_csv(run_dir / "tables" / "throughput.csv")
    intervals = read_csv(run_dir / "tables" / "throughput_intervals.csv")
    assert list(totals["query"]) == {"mariadb": TESTS, "postgresql": ["oltp_read_write"],
                                     "mysql": ["oltp_read_only", "oltp_read_write"]}[engine]
    for row in totals.itertuples():
        reports = [json.loads(line) for line in (run_dir / "raw" / "driver" / f"{row.query}_try1.jsonl").read_text()
                   .splitlines() if line.startswith("{")]
        (total,) = [r for r in reports if r["kind"] == "total"]
        assert row.transactions == total["events"] > 0
        assert row.tps == pytest.approx(total["events"] / total["time_interval_s"], rel=1e-4)
        assert row.seconds == pytest.approx(3, abs=0.5)
        assert len(intervals[intervals["query"] == row.query]) == sum(r["kind"] == "interval" for r in reports) >= 2


def test_a_read_only_test_writes_nothing_and_a_write_only_test_reads_no_rows(sysbench_runs):
    totals = read_csv(sysbench_runs["mariadb"] / "tables" / "throughput.csv").set_index("query")
    assert totals.loc["oltp_read_only", "writes_per_s"] == 0 < totals.loc["oltp_read_only", "reads_per_s"]
    assert totals.loc["oltp_write_only", "reads_per_s"] == 0 < totals.loc["oltp_write_only", "writes_per_s"]


def test_the_read_only_window_reads_the_sysbench_tables_on_the_fast_device(sysbench_runs):
    requests = tierlab.load_run(sysbench_runs["mariadb"]).requests()
    reads = requests[(requests["query"] == "oltp_read_only") & (requests["op"] == "R")]
    sysbench_reads = reads[reads["object"].astype(str).str.startswith("sbtest")]
    assert len(sysbench_reads) > 0
    assert set(sysbench_reads["tier"]) == {"optane"}
    # every read of the fast tier, where the layout put both tables, is one of theirs; what no table owns (InnoDB's
    # system tablespace, undo and redo, on the capacity tier) is read there only, in a share that depends on how
    # much background work a busy host left to this window
    assert set(reads.loc[reads["tier"] == "optane", "object"].astype(str)) == {"sbtest1", "sbtest2"}
    assert set(reads.loc[reads["object"] == "other", "tier"]) <= {"nand"}


def test_a_mysql_step_waits_for_innodb_to_purge_what_the_step_before_wrote(sysbench_runs):
    queries = read_csv(sysbench_runs["mysql"] / "tables" / "queries.csv").set_index("query")
    # MySQL shortens its history list only when the purge truncates it: what the read-write window left is there
    assert queries.loc["oltp_read_only", "history_before"] > 0
    # the wait ends on an empty history, once InnoDB has neither read nor changed a page for 2 s, or at once where
    # the history is no longer than the one an earlier wait ended quiet on (InnoDB keeps a small one while idle)
    read_write, read_only = queries.loc["oltp_read_write"], queries.loc["oltp_read_only"]
    assert (read_only["history_after"] == 0 or read_only["settle_s"] >= 2
            or (read_write["settle_s"] >= 2 and read_only["history_after"] <= read_write["history_after"]))


def test_postgresql_steps_wait_for_no_purge(sysbench_runs):
    queries = read_csv(sysbench_runs["postgresql"] / "tables" / "queries.csv")
    assert queries[["history_before", "history_after", "settle_s"]].isna().all().all()


@pytest.mark.parametrize("engine", ["mariadb", "postgresql", "mysql"])
def test_a_read_write_window_writes_to_the_devices(sysbench_runs, engine):
    metrics = read_csv(sysbench_runs[engine] / "tables" / "tier_metrics.csv")
    assert metrics.loc[metrics["query"] == "oltp_read_write", "write_requests"].sum() > 0


def test_postgresql_s_page_cache_stays_at_os_cache_whatever_its_connections_leave_unused(sysbench_runs):
    """While the window runs, the page cache above os_cache (2 MiB) is dropped twenty times a second, though the
    memory bound allows the server 242 MiB: the window reads the 10 MB of tables from the device."""
    run_dir = sysbench_runs["postgresql-after-writes"]
    (window,) = read_csv(run_dir / "tables" / "queries.csv").itertuples()
    # between two drops the page cache grows by what 8 threads read meanwhile, still far below the tables' 10 MB
    assert 2 << 20 <= window.page_cache_max_bytes <= 8 << 20
    # shared_buffers (8 MiB) is shared memory, which the processes hold besides their own heaps
    assert window.process_memory_max_bytes > 8 << 20
    metrics = read_csv(run_dir / "tables" / "tier_metrics.csv")
    assert metrics.loc[metrics["query"] == "oltp_read_only", "read_requests"].sum() > 0


def test_postgresql_s_sysbench_tables_and_indexes_are_in_the_capacity_tablespace(sysbench_runs):
    tables = json.loads((sysbench_runs["postgresql"] / "manifest.json").read_text())["layout"]["tables"]
    assert {(f["object"], f["tier"]) for where in tables.values() for f in where["files"] if f["kind"] == "index"} == {
        ("sbtest1_pkey", "nand"), ("sbtest2_pkey", "nand"), ("k_1", "nand"), ("k_2", "nand")}


def test_a_postgresql_run_starts_from_its_tables_without_what_the_run_before_wrote(sysbench_runs):
    written = json.loads((sysbench_runs["postgresql"] / "manifest.json").read_text())
    after = json.loads((sysbench_runs["postgresql-after-writes"] / "manifest.json").read_text())
    compacted = after["load"]["compacted"]
    assert sorted(compacted) == ["sbtest1", "sbtest2"]
    for table, sizes in compacted.items():
        # a manifest's sizes are taken before the run's first step, right after the rewrite: the table as it was
        # loaded, to within its indexes' rebuild (a page here)
        loaded = written["layout"]["tables"][table]["size_bytes"]
        assert after["layout"]["tables"][table]["size_bytes"] == pytest.approx(loaded, rel=0.01)
        # what the read-write run's writes added
        assert sizes["before_bytes"] > loaded * 1.01
    assert after["load"]["compact_s"] > 0
    # the run that loaded the tables rewrote nothing
    assert written["load"]["compacted"] == {}


def test_the_report_shows_the_throughput(sysbench_runs):
    report = (sysbench_runs["mariadb"] / "report" / "report.html").read_text()
    assert "<h2>Throughput</h2>" in report
    assert "Throughput over each traced window" in report
