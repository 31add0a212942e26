"""tierlab recommend on a real traced run: its layouts, curves and verdicts, from the run's own device models,
beside what the layouts study measured."""

import json
from pathlib import Path

import pytest
from lab import cli, command, read_csv

from tierlab.placement.migration_script import migration_plan

pytestmark = pytest.mark.mariadb
# TPC-H's layout codes (README): the tables each names
TPCH_CODES = {"C": "customer", "O": "orders", "L": "lineitem", "PS": "partsupp", "P": "part", "S": "supplier",
              "N": "nation", "R": "region"}


@pytest.fixture(scope="module")
def advice(layout_runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("recommend")
    done = cli("recommend", str(layout_runs["C+O"]), "--fast-capacity", "12M", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def test_the_evidence_is_the_traced_run_s_queries_with_their_measured_times(advice, layout_runs):
    result, _ = advice
    queries = read_csv(layout_runs["C+O"] / "tables" / "queries.csv")
    assert result["traced_layout"] == "C+O"
    assert [(e["run_id"], e["query"], e["weight"]) for e in result["evidence"]] == [
        (layout_runs["C+O"].name, "q01", 1.0), (layout_runs["C+O"].name, "q03", 1.0)]
    assert result["traced_s"] == pytest.approx(queries["elapsed_s"].sum(), rel=1e-5)


def test_the_layouts_not_traced_are_predicted_near_what_they_measured(advice, layouts):
    """From C+O's trace alone: None's and ALL's time relative to C+O's within 25% of the range their runs in the
    layouts study give. A prediction is the traced run's time re-costed, so it carries that run's own luck: this
    host stalls a request now and then for milliseconds (a thread sleeping 1 ms here overshoots by 1.9 ms at
    p99.9, by 4.4 ms at most, at idle), and one run of C+O took 1.44 s where its twin took 0.98 s, with 84 of
    q03's requests over 1 ms against 2. So the prediction is judged as the ratio it is, against the ratios of
    every run of the layout to every run of C+O, not against absolute times the traced run's luck shifts."""
    _, out = advice
    predicted = read_csv(out / "layouts.csv").set_index("layout")["predicted_s"]

    def measured(layout: str) -> list[float]:
        return [read_csv(layouts["runs"][(layout, repetition)] / "tables" / "queries.csv")["elapsed_s"].sum()
                for repetition in (1, 2)]

    traced = measured("C+O")
    assert predicted["C+O"] == pytest.approx(traced[0], rel=1e-5)
    for layout in ("None", "ALL"):
        ratios = [time / base for time in measured(layout) for base in traced]
        assert min(ratios) / 1.25 <= predicted[layout] / traced[0] <= max(ratios) * 1.25, (layout, ratios, predicted[layout])


def test_every_layout_is_predicted_and_lineitem_on_the_fast_tier_helps_q3_most(advice):
    _, out = advice
    layouts = read_csv(out / "layouts.csv").set_index("layout")["predicted_s"]
    assert len(layouts) == 256
    # Q3 reads lineitem at random through its primary key: the model costs it ~9x less on optane than on nand
    assert layouts["ALL"] <= layouts["L"] < layouts["C+O"] < layouts["None"]


def test_the_answer_is_the_fastest_layout_that_fits_the_capacity(advice):
    result, out = advice
    layouts = read_csv(out / "layouts.csv")
    fitting = layouts[layouts["fast_bytes"] <= 12 << 20]
    best = fitting.loc[fitting["predicted_s"].idxmin()]
    assert (result["layout"], result["predicted_s"], result["fast_bytes"]) == (
        best["layout"], pytest.approx(best["predicted_s"], rel=1e-5), best["fast_bytes"])
    curve = read_csv(out / "capacity_curve.csv")
    assert (curve["layout"].iloc[0], curve["capacity_bytes"].iloc[0]) == ("None", 0)
    assert curve["predicted_s"].iloc[0] == pytest.approx(layouts.set_index("layout").loc["None", "predicted_s"], rel=1e-5)
    assert list(curve["predicted_s"]) == sorted(curve["predicted_s"], reverse=True)


def test_the_cache_is_simulated_at_every_capacity_of_the_curve_and_the_one_asked(advice):
    result, out = advice
    capacities = {p["capacity_bytes"] for p in result["capacity_curve"] if p["capacity_bytes"] > 0} | {12 << 20}
    assert {row["capacity_bytes"] for row in result["cache_curve"]} == capacities
    layouts = read_csv(out / "layouts.csv")
    for row in result["cache_curve"]:
        # beside each cache, the best placement in as much fast tier
        fitting = layouts[layouts["fast_bytes"] <= row["capacity_bytes"]]
        assert row["placement_predicted_s"] == pytest.approx(fitting["predicted_s"].min(), rel=1e-5)
    # an LRU cache holds what a smaller one holds (its inclusion property): its hits never fall as it grows, and the
    # traced queries re-read pages, so the largest cache hits some
    hits = [row["lru_hit_pct"] for row in sorted(result["cache_curve"], key=lambda row: row["capacity_bytes"])]
    assert hits == sorted(hits) and hits[-1] > 0


def test_weights_for_a_query_the_run_did_not_trace_are_refused(layout_runs):
    done = cli("recommend", str(layout_runs["C+O"]), "--fast-capacity", "12M", "--weights", "q05=1")
    assert done.returncode == 1
    assert "tierlab recommend: --weights: 'q05' is not a traced query of these runs; they have q01, q03" in done.stderr


def test_out_writes_the_answer_the_layouts_the_curves_and_a_page_with_them_plotted(advice):
    result, out = advice
    assert sorted(p.name for p in out.iterdir()) == [
        "cache_curve.csv", "capacity_curve.csv", "layouts.csv", "migration-undo.sh", "migration.sh", "recommend.json",
        "report.html"]
    assert json.loads((out / "recommend.json").read_text()) == result
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 1
    assert "Placement against caching, by fast-tier capacity" in page
    assert f"<h1>tierlab recommend: {result['layout']} for 12 MiB of fast tier</h1>" in page


def test_the_migration_script_moves_each_table_that_changes_tier_on_mariadb_offline(layout_runs, tmp_path):
    # from the run with nothing on the fast tier, so that the recommended layout moves tables (from C+O's, at this
    # capacity, it keeps C+O)
    done = cli("recommend", str(layout_runs["None"]), "--fast-capacity", "12M", "--out", str(tmp_path), "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    plan = result["migration"]["plan"]
    # the traced run had every table on the capacity tier: the recommended layout's codes name the tables that move
    assert result["layout"] not in ("None", "ALL")
    moved = sorted(TPCH_CODES[code] for code in result["layout"].split("+"))
    assert sorted(step["table"] for step in plan["steps"]) == result["migration"]["tables"] == moved
    manifest = json.loads((layout_runs["None"] / "manifest.json").read_text())
    tables = manifest["layout"]["tables"]
    tier = {t["role"]: t["path"] + "/" for t in manifest["tiers"]}
    # each move takes the table's file from where the traced run had it to the same place on the fast tier
    moves = [line.split() for line in (tmp_path / "migration.sh").read_text().splitlines() if line.startswith("move ")]
    assert [move[1] for move in moves] == [tables[step["table"]]["path"] for step in plan["steps"]]
    assert [move[2] for move in moves] == [move[1].replace(tier["capacity"], tier["fast"], 1) for move in moves]


def _sparse_table_file(path: Path) -> bytes:
    """A table file of 64 KiB whose first and last pages hold data and the rest is a hole, as page compression
    leaves one."""
    path.parent.mkdir(parents=True)
    with open(path, "wb") as f:
        f.write(b"first page".ljust(4096, b"\1"))
        f.seek(61440)
        f.write(b"last page".ljust(4096, b"\2"))
    return path.read_bytes()


def test_the_mysql_family_s_script_moves_a_table_s_file_and_its_isl_and_the_undo_moves_them_back(tmp_path):
    dirs = {"fast": str(tmp_path / "optane" / "tables"), "capacity": str(tmp_path / "nand" / "tables")}
    fast_file, capacity_file = Path(dirs["fast"], "db", "t.ibd"), Path(dirs["capacity"], "db", "t.ibd")
    isl = tmp_path / "datadir" / "db" / "t.isl"
    content = _sparse_table_file(fast_file)
    isl.parent.mkdir(parents=True)
    isl.write_text(str(fast_file))
    manifest = {"run_id": "r1", "settings": {"database": "db"},
                "engine": {"name": "mariadb", "settings": {"datadir": str(tmp_path / "datadir") + "/"},
                           "table_dirs": dirs},
                "layout": {"name": "T", "tables": {"t": {"tier": "fast", "size_bytes": 65536, "files": []}}}}
    plan = migration_plan(manifest, {"t": "fast"}, {"t": "capacity"}, {("fast", "capacity"): 1e9,
                                                                        ("capacity", "fast"): 1e9})
    for name, text in plan["files"].items():
        (tmp_path / name).write_text(text)
    for script, now, then in (("migration.sh", capacity_file, fast_file), ("migration-undo.sh", fast_file, capacity_file)):
        done = command(["sh", str(tmp_path / script)], script, 120)
        assert done.returncode == 0, done.stderr
        assert (now.read_bytes(), then.exists(), isl.read_text()) == (content, False, str(now)), script
        # the hole stays a hole: at most the two pages and the file system's own rounding are allocated
        assert now.stat().st_blocks * 512 <= 2 * 4096 + 2 * now.stat().st_blksize, script


def test_the_mysql_family_s_script_refuses_a_file_the_server_has_open_and_moves_nothing(tmp_path):
    dirs = {"fast": str(tmp_path / "optane"), "capacity": str(tmp_path / "nand")}
    fast_file = Path(dirs["fast"], "db", "t.ibd")
    _sparse_table_file(fast_file)
    manifest = {"run_id": "r1", "settings": {"database": "db"},
                "engine": {"name": "mysql", "settings": {}, "table_dirs": dirs},
                "layout": {"name": "T", "tables": {"t": {"tier": "fast", "size_bytes": 65536, "files": []}}}}
    plan = migration_plan(manifest, {"t": "fast"}, {"t": "capacity"}, {("fast", "capacity"): 1e9, ("capacity", "fast"): 1e9})
    (tmp_path / "migration.sh").write_text(plan["files"]["migration.sh"])
    with open(fast_file, "rb"):
        done = command(["sh", str(tmp_path / "migration.sh")], "migration.sh", 120)
    assert (done.returncode, done.stderr) == (1, f"{fast_file} is open: stop the server first\n")
    assert fast_file.exists() and not Path(dirs["capacity"], "db", "t.ibd").exists()
