"""tierlab recommend on a real traced run: its layouts, curves and verdicts, from the run's own device models."""

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def recommend(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(ROOT / ".venv/bin/tierlab"), "recommend", *args], capture_output=True, text=True)


@pytest.fixture(scope="module")
def advice(layout_runs, tmp_path_factory):
    out = tmp_path_factory.mktemp("recommend")
    done = recommend(str(layout_runs["C+O"]["dir"]), "--fast-capacity", "12M", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), out


def test_the_traced_layout_is_predicted_at_its_measured_time(advice):
    result, _ = advice
    assert result["traced_layout"] == "C+O"
    assert [e["query"] for e in result["evidence"]] == ["q01", "q03"]
    assert result["traced_predicted_s"] == pytest.approx(result["traced_s"], rel=1e-9)


def test_every_layout_is_predicted_and_lineitem_on_the_fast_tier_helps_q3_most(advice):
    _, out = advice
    layouts = {line.split(",")[0]: float(line.split(",")[2]) for line in (out / "layouts.csv").read_text().splitlines()[1:]}
    assert len(layouts) == 256
    # Q3 reads lineitem at random through its primary key: the model costs it ~9x less on optane than on nand
    assert layouts["ALL"] <= layouts["L"] < layouts["C+O"] < layouts["None"]


def test_the_answer_fits_the_capacity_and_is_the_curve_s_best_there(advice):
    result, _ = advice
    curve = result["capacity_curve"]
    assert curve[0] == {"capacity_bytes": 0, "layout": "None", "predicted_s": curve[0]["predicted_s"]}
    assert [p["predicted_s"] for p in curve] == sorted((p["predicted_s"] for p in curve), reverse=True)
    fitting = [p for p in curve if p["capacity_bytes"] <= 12 << 20]
    assert (result["layout"], result["predicted_s"]) == (fitting[-1]["layout"], fitting[-1]["predicted_s"])
    assert result["fast_bytes"] <= 12 << 20


def test_the_cache_is_simulated_at_every_capacity_of_the_curve_and_the_one_asked(advice):
    result, _ = advice
    capacities = {p["capacity_bytes"] for p in result["capacity_curve"] if p["capacity_bytes"] > 0} | {12 << 20}
    assert {row["capacity_bytes"] for row in result["cache_curve"]} == capacities
    for row in result["cache_curve"]:
        # the ideal LRU admits every page the admitting cache does, and more
        assert 0 <= row["admitting_hit_pct"] <= row["lru_hit_pct"] <= 100
        assert row["verdict"] == ("cache" if row["admitting_predicted_s"] < row["placement_predicted_s"] else "placement")


def test_weights_for_a_query_the_run_did_not_trace_are_refused(layout_runs):
    done = recommend(str(layout_runs["C+O"]["dir"]), "--fast-capacity", "12M", "--weights", "q05=1")
    assert done.returncode != 0
    assert "tierlab recommend: --weights: 'q05' is not a traced query of these runs; they have q01, q03" in done.stderr


def test_out_writes_the_answer_the_layouts_the_curves_and_a_page_with_them_plotted(advice):
    result, out = advice
    assert sorted(p.name for p in out.iterdir()) == [
        "cache_curve.csv", "capacity_curve.csv", "layouts.csv", "recommend.json", "report.html"]
    assert json.loads((out / "recommend.json").read_text()) == result
    page = (out / "report.html").read_text()
    assert page.count("<svg") == 1
    assert "Placement against caching, by fast-tier capacity" in page
    assert f"<h1>tierlab recommend: {result['layout']} for 12 MiB of fast tier</h1>" in page
