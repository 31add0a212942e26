import json

from tierlab_host.engines.postgresql import Postgresql

Q = "-- SSB Q2.1\nSELECT SUM(lo_revenue)\nFROM lineorder\nWHERE lo_partkey = 1;\n"
CORUN = "-- SSB Q1.1\nSELECT SUM(lo_discount)\nFROM lineorder;\n"


def _logged(query_text: str, node: str) -> str:
    plan = json.dumps({"Query Text": query_text, "Plan": {"Node Type": node}}, indent=1)
    return "2026-11-25 19:00:00 UTC [42] LOG:  duration: 1.0 ms  plan:\n\t" + plan.replace("\n", "\n\t") + "\n"


def test_the_plan_is_the_one_logged_for_the_statement_not_one_run_beside_it(tmp_path):
    log = tmp_path / "postgresql.log"
    earlier = "an earlier query's line\n"
    log.write_text(earlier + _logged("SELECT 1;", "Result") + _logged("SELECT SUM(lo_discount)\nFROM lineorder;", "Seq Scan")
                   + _logged("SELECT SUM(lo_revenue)\nFROM lineorder\nWHERE lo_partkey = 1;", "Index Scan"))
    db = Postgresql({"name": "postgresql", "log_file": str(log)})
    assert json.loads(db.plan("ssb", Q, len(earlier)))["Plan"] == {"Node Type": "Index Scan"}
    assert json.loads(db.plan("ssb", CORUN, len(earlier)))["Plan"] == {"Node Type": "Seq Scan"}
    assert db.plan("ssb", "SELECT 2;", len(earlier)) is None
