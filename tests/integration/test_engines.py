"""PostgreSQL and Oracle MySQL beside MariaDB: the same study on each, the same answers, objects placed apart."""

import json
import os
from pathlib import Path

import pytest
from answers import read_answer, same_answer
from lab import ROOT, TEST_ROOT, TPCH_DATABASE, cli, read_csv

import tierlab
from tierlab.catalog.workloads import TPCH

C_O_FAST = {"customer", "customer_pkey", "customer_nationkey", "orders", "orders_pkey", "orders_custkey"}
L_FAST = {"lineitem", "lineitem_pkey", "lineitem_partkey_suppkey", "lineitem_suppkey"}


@pytest.fixture(scope="session")
def mysql_runs(lab, layout_runs):
    """The same on MySQL (Debian sid's, in a chroot): every query warm under C+O, then Q3 cold and traced under L."""
    return {"C+O": lab.run("C+O", engine="mysql", queries="all", cold=False, trace=False),
            "L": lab.run("L", engine="mysql", queries="3")}


@pytest.fixture(scope="session")
def mariadb_answers(lab, layout_runs, tmp_path_factory):
    """Every query on MariaDB for its answers, through the query loop's execute on the instance the layout runs
    loaded (a run of its own would add a playbook's fixed cost and nothing else)."""
    output = tmp_path_factory.mktemp("mariadb_answers")
    for number in range(1, 23):
        sql = next(path for path in (ROOT / name for name in TPCH.query_files(f"q{number:02d}", "mysql"))
                   if path.exists()).read_text()
        done = lab.execute("mariadb-16k", sql, 300, output / f"q{number:02d}_try1.tsv")
        assert done["status"] == "ok", (number, done)
    return output


@pytest.mark.postgresql
@pytest.mark.mysql
@pytest.mark.parametrize("engine", ["postgresql", "mysql"])
def test_every_tpch_query_returns_the_same_answer_as_on_mariadb(postgresql_runs, mysql_runs, mariadb_answers, engine):
    run_dir = {"postgresql": postgresql_runs, "mysql": mysql_runs}[engine]["C+O"]
    different = []
    for number in range(1, 23):
        name = f"q{number:02d}_try1.tsv"
        mariadb = read_answer(mariadb_answers / name)
        assert mariadb, f"q{number:02d} returned no rows on MariaDB"
        if not same_answer(read_answer(run_dir / "raw" / "output" / name), mariadb):
            different.append(number)
    assert different == []


@pytest.mark.postgresql
def test_each_table_index_and_fork_file_is_in_the_tablespace_of_its_tier(postgresql_runs):
    manifest = json.loads((postgresql_runs["C+O"] / "manifest.json").read_text())
    tables = manifest["layout"]["tables"]
    for table, where in tables.items():
        expected = "optane" if table in ("customer", "orders") else "nand"
        assert {f["tier"] for f in where["files"]} == {expected}, table
        assert f"/tiers/{expected}/postgresql-8k/tablespace/" in where["path"]
    lineitem = {(f["object"], f["kind"]) for f in tables["lineitem"]["files"]}
    assert {("lineitem", "table"), ("lineitem_pkey", "index"), ("lineitem_partkey_suppkey", "index"),
            ("lineitem_suppkey", "index"), ("lineitem.fsm", "table"), ("lineitem.vm", "table")} <= lineitem


def other_share(reads) -> float:
    """The share of reads no object of the workload owns (the catalogs, WAL, temporary files)."""
    return float((reads["object"] == "other").mean())


@pytest.mark.postgresql
def test_q3_under_l_reads_lineitem_and_its_primary_key_on_the_fast_device_only(postgresql_runs):
    requests = tierlab.load_run(postgresql_runs["L"]).requests()
    reads = requests[(requests["query"] == "q03") & (requests["op"] == "R")]
    fast, capacity = reads[reads["tier"] == "optane"], reads[reads["tier"] == "nand"]
    # PostgreSQL joins customer and orders by hashing their scans, and probes lineitem through its primary key
    assert {"lineitem", "lineitem_pkey"} <= set(fast["object"])
    # the fast tier holds lineitem's files only: nothing else is read there but the file system's own blocks
    assert {name.split(".")[0] for name in fast["object"]} <= L_FAST | {"other"}
    assert other_share(fast) <= 0.05
    assert {"customer", "orders"} <= set(capacity["object"])
    assert not {name.split(".")[0] for name in capacity["object"]} & L_FAST
    # the system catalogs, read cold, are the rest: at this scale factor about 150 reads in all
    assert other_share(reads) <= 0.1


def shared_read_blocks(node: dict, relation: str) -> int:
    """The blocks a plan's scans of a relation read into shared buffers (EXPLAIN's BUFFERS, per node; a parallel
    scan's workers are counted in its node)."""
    own = node.get("Shared Read Blocks", 0) if node.get("Relation Name") == relation else 0
    return own + sum(shared_read_blocks(child, relation) for child in node.get("Plans", []))


@pytest.mark.postgresql
def test_each_query_s_plan_and_counters_are_kept_and_agree(postgresql_runs):
    raw = postgresql_runs["C+O"] / "raw"
    for number in range(1, 23):
        plan = json.loads((raw / "plans" / f"q{number:02d}_try1.json").read_text())
        assert "Plan" in plan and "Shared Read Blocks" in plan["Plan"], number
    q01 = json.loads((raw / "counters" / "q01_try1.json").read_text())["delta"]
    plan = json.loads((raw / "plans" / "q01_try1.json").read_text())["Plan"]
    # two accounts of Q1's reads of lineitem: the statistics views' and the executed plan's
    assert q01["lineitem.heap_blks_read"] == shared_read_blocks(plan, "lineitem") > 0
    assert q01["blks_read"] >= q01["lineitem.heap_blks_read"]
    assert q01["customer.heap_blks_read"] == 0


@pytest.mark.postgresql
def test_a_layout_change_moves_each_table_and_index_with_its_time(postgresql_runs):
    manifest = json.loads((postgresql_runs["L"] / "manifest.json").read_text())
    moves = {m["object"]: (m["from"], m["to"]) for m in manifest["load"]["moves"]}
    assert moves == {
        **{name: ("tierlab_fast", "tierlab_capacity") for name in C_O_FAST},
        **{name: ("tierlab_capacity", "tierlab_fast") for name in L_FAST},
    }
    files = {f["object"]: f for where in manifest["layout"]["tables"].values() for f in where["files"]}
    for move in manifest["load"]["moves"]:
        assert move["move_s"] > 0, move
        # what moved is the object as it is now, all its segments
        assert move["size_bytes"] == sum(f["size_bytes"] for name, f in files.items()
                                         if name == move["object"] or name.startswith(move["object"] + ".")), move
    tier_devices = {t["name"]: os.stat(t["path"]).st_dev for t in manifest["tiers"]}
    for table, where in manifest["layout"]["tables"].items():
        expected = "optane" if table == "lineitem" else "nand"
        for item in where["files"]:
            assert (item["tier"], os.stat(item["path"]).st_dev) == (expected, tier_devices[expected]), item["object"]


@pytest.mark.postgresql
def test_a_run_stops_the_root_s_other_servers_before_its_first_query_and_names_them(postgresql_runs):
    """PostgreSQL's first run follows the layouts study's runs on MariaDB, whose server it stops."""
    first = (postgresql_runs["C+O"] / "raw" / "run.log").read_text().splitlines()[0]
    prefix = "stopped the root's other servers: "
    assert first.startswith(prefix)
    assert "mariadb-16k" in first.removeprefix(prefix).split(", ")


@pytest.mark.postgresql
def test_the_server_runs_inside_its_memory_bound(lab, postgresql_runs):
    manifest = json.loads((postgresql_runs["L"] / "manifest.json").read_text())
    lab.serving("postgresql-8k")
    # 5% of SF 0.01's data is under the least shared_buffers, 8 MiB; then os_cache's 64 MiB, 64 MiB for the
    # server's processes, and 24 MiB for each of parallel_workers=2's workers beside the query's connection
    assert manifest["engine"]["settings"]["shared_buffers"] == "8MB"
    assert manifest["engine"]["memory_limit_bytes"] == (8 + 64 + 64 + 2 * 24) << 20
    group = Path("/sys/fs/cgroup/memory", f"{Path(lab.root).name}-postgresql-8k")
    assert int((group / "memory.limit_in_bytes").read_text()) == manifest["engine"]["memory_limit_bytes"]
    (server,) = [e for e in json.loads(Path(lab.root, "state", "created.json").read_text())
                 if e["kind"] == "process" and e["engine"] == "postgresql"]
    assert str(server["pid"]) in (group / "cgroup.procs").read_text().split()


@pytest.mark.postgresql
def test_a_statement_over_its_limit_on_postgresql_is_a_timeout(lab, postgresql_runs, tmp_path):
    timed_out = lab.execute("postgresql-8k", "SELECT pg_sleep(5);", 1, tmp_path / "sleep.tsv")
    assert (timed_out["status"], timed_out["error"]) == (
        "timeout", "ERROR:  canceling statement due to statement timeout")
    failed = lab.execute("postgresql-8k", "SELECT no_such_column FROM lineitem;", 1, tmp_path / "bad.tsv")
    assert failed["status"] == "error"
    assert 'column "no_such_column" does not exist' in failed["error"]


@pytest.mark.postgresql
def test_recommend_s_script_moves_each_table_and_index_to_its_tier_and_its_undo_moves_them_back(lab, postgresql_runs,
                                                                                               tmp_path):
    run = postgresql_runs["L"]
    manifest = json.loads((run / "manifest.json").read_text())
    done = cli("recommend", str(run), "--fast-capacity", "1M", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    plan = json.loads((tmp_path / "recommend.json").read_text())["migration"]["plan"]
    # lineitem's 11 MiB do not fit in 1 MiB of fast tier: L's one table leaves it
    assert ("lineitem", "fast", "capacity") in [(s["table"], s["from"], s["to"]) for s in plan["steps"]]
    tables = manifest["layout"]["tables"]
    start = {table: info["tier"] for table, info in tables.items()}
    end = {**start, **{s["table"]: s["to"] for s in plan["steps"]}}

    def expected(placement: dict[str, str]) -> dict[str, str]:
        return {name: placement[table] for table, info in tables.items()
                for name in {table} | {f["object"] for f in info["files"] if f["kind"] == "index"}}

    for script, placement in (("migration.sql", end), ("migration-undo.sql", start)):
        applied = lab.psql(TPCH_DATABASE, "-f", str(tmp_path / script))
        assert applied.returncode == 0, f"{script}: {applied.stderr}"
        now = lab.relation_tiers(TPCH_DATABASE, manifest)
        assert {name: now.get(name) for name in expected(placement)} == expected(placement), script


@pytest.mark.mysql
def test_mysql_comes_from_a_debian_sid_chroot_and_places_each_table_on_its_tier(mysql_runs):
    manifest = json.loads((mysql_runs["C+O"] / "manifest.json").read_text())
    assert manifest["engine"]["version"].startswith("9.")
    assert manifest["engine"]["source"].startswith("Debian sid (http://deb.debian.org/debian, Release of ")
    assert f" in the chroot {TEST_ROOT}/chroots/debian-sid, package mysql-server-core" in \
        manifest["engine"]["source"]
    assert manifest["engine"]["settings"]["innodb_page_size"] == "16384"
    for table, where in manifest["layout"]["tables"].items():
        expected = "optane" if table in ("customer", "orders") else "nand"
        assert (where["tier_name"], Path(where["path"]).name) == (expected, f"{table}.ibd"), table


@pytest.mark.mysql
def test_the_data_cache_keeps_the_mysql_packages_the_runs_use_for_a_chroot_made_again(mysql_runs):
    source = json.loads((mysql_runs["C+O"] / "manifest.json").read_text())["engine"]["source"]
    version = source.rsplit(" ", 1)[1]
    kept = sorted(path.name for path in Path(TEST_ROOT, "data", "packages", "debian-sid-mysql").iterdir())
    assert f"mysql-server-core_{version}_amd64.deb" in kept
    assert f"mysql-client_{version}_amd64.deb" in kept
    assert all(name.startswith("mysql-") for name in kept)


@pytest.mark.mysql
def test_mysql_s_queries_after_the_first_wait_for_no_purge(mysql_runs):
    queries = read_csv(mysql_runs["C+O"] / "tables" / "queries.csv")
    assert len(queries) == 22
    # a query writes nothing: the history InnoDB was idle at when the first query's wait ended is all there is
    assert list(queries["history_before"][1:]) == [queries["history_after"][0]] * 21
    assert (queries["settle_s"][1:] < 1).all()


@pytest.mark.mysql
def test_an_innodb_file_is_split_by_its_pages_into_the_table_s_rows_and_each_secondary_index(mysql_runs):
    lineitem = json.loads((mysql_runs["L"] / "manifest.json").read_text())["layout"]["tables"]["lineitem"]
    assert {(f["object"], f["kind"]) for f in lineitem["files"]} == {
        ("lineitem", "table"), ("lineitem_partkey_suppkey", "index"), ("lineitem_suppkey", "index")}
    assert {f["path"] for f in lineitem["files"]} == {lineitem["path"]}
    assert lineitem["size_bytes"] == os.path.getsize(lineitem["path"])


@pytest.mark.mysql
def test_a_layout_change_on_mysql_moves_the_files_it_finds_again_when_it_starts(mysql_runs):
    manifest = json.loads((mysql_runs["L"] / "manifest.json").read_text())
    assert {m["object"] for m in manifest["load"]["moves"]} == {"customer", "orders", "lineitem"}
    assert {t: where["tier_name"] for t, where in manifest["layout"]["tables"].items()} == {
        t: "optane" if t == "lineitem" else "nand" for t in manifest["layout"]["tables"]}
    rows = [json.loads(line) for line in (mysql_runs["L"] / "raw" / "queries.jsonl").read_text().splitlines()]
    assert [(r["query"], r["status"], r["rows"]) for r in rows] == [("q03", "ok", 10)]
    # traced through the chroot's bind mounts like a host install: lineitem's reads on the fast device (its
    # rows, which the plan reads through the primary key, and now and then single pages of its secondary
    # indexes that InnoDB reads in the background, such as its statistics' sample dives)
    requests = tierlab.load_run(mysql_runs["L"]).requests()
    reads = requests[requests["op"] == "R"]
    fast = reads[reads["tier"] == "optane"]
    assert "lineitem" in set(fast["object"])
    # the fast tier holds lineitem's file only: nothing else is read there but the file system's own blocks
    assert set(fast["object"]) <= L_FAST | {"other"}
    assert other_share(fast) <= 0.05
    assert {"customer", "orders"} <= set(reads.loc[reads["tier"] == "nand", "object"])


@pytest.mark.mysql
def test_a_statement_over_its_limit_on_mysql_is_a_timeout(lab, mysql_runs, tmp_path):
    # max_execution_time stops a SELECT that reads rows (SLEEP() alone only returns early, and MySQL counts
    # a cross join's rows without making them)
    timed_out = lab.execute("mysql-16k", "SELECT SUM(a.l_quantity * b.l_quantity) FROM lineitem a, lineitem b;", 1,
                              tmp_path / "join.tsv")
    assert timed_out["status"] == "timeout"
    assert "maximum statement execution time exceeded" in timed_out["error"]
