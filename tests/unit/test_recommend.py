"""Placement advice from the model's costs: predictions, the capacity curve, cache against placement, migration."""

import math

import pandas as pd
import pytest

from tierlab.catalog.layout import parse_layout
from tierlab.catalog.workloads import TPCH
from tierlab.devices.profiles import profile_path
from tierlab.placement import predict, traced

MIB = 1 << 20
SIZES = {"customer": 2 * MIB, "lineitem": 60 * MIB, "nation": 0, "orders": 15 * MIB, "part": 2 * MIB,
         "partsupp": 10 * MIB, "region": 0, "supplier": MIB}


def q03(weight: float = 1.0, emulated_dilation: float | None = None) -> predict.TracedQuery:
    """Traced under C+O: 10 s elapsed, 8 s of it with I/O in flight; the model's I/O time per split."""
    costs = {frozenset(): 1000.0, frozenset({"customer"}): 990.0, frozenset({"orders"}): 600.0,
             frozenset({"lineitem"}): 700.0, frozenset({"customer", "orders"}): 500.0,
             frozenset({"customer", "lineitem"}): 690.0, frozenset({"orders", "lineitem"}): 300.0,
             frozenset({"customer", "orders", "lineitem"}): 250.0}
    return predict.TracedQuery("run1", "q03", weight, 10.0, 8.0, parse_layout("C+O", TPCH), costs, emulated_dilation)


def test_the_traced_layout_is_predicted_as_measured_and_others_scale_its_io_time():
    query = q03()
    assert query.predict_s(query.io_us(parse_layout("C+O", TPCH))) == 10.0
    # 2 s without I/O, and 8 s of I/O scaled by 1000 / 500
    assert query.predict_s(query.io_us(parse_layout("None", TPCH))) == 18.0
    # tables the query does not read change nothing
    assert query.io_us(parse_layout("O+L+PS+P", TPCH)) == 300.0


def test_on_emulated_tiers_the_io_time_beyond_the_dilated_model_s_stays_as_traced():
    # dilated 12,000 times, the model's 500 us under C+O are 6 s of the 8 s traced: 2 s were the host's
    query = q03(emulated_dilation=12000.0)
    assert query.host_s == pytest.approx(2.0)
    assert query.predict_s(query.io_us(parse_layout("C+O", TPCH))) == pytest.approx(10.0)
    # 2 s without I/O, the host's 2 s, and the model's 6 s scaled by 1000 / 500
    assert query.predict_s(query.io_us(parse_layout("None", TPCH))) == pytest.approx(16.0)


def test_a_dilated_model_slower_than_the_trace_leaves_the_host_no_share():
    # dilated 20,000 times, the model's 500 us are 10 s: more than the 8 s traced, so all of it scales
    query = q03(emulated_dilation=20000.0)
    assert query.host_s == 0.0
    assert query.predict_s(query.io_us(parse_layout("None", TPCH))) == 18.0


def emulated_tiers(dilation: float) -> list[dict]:
    """A run's tiers as its manifest has them: emulated on the shipped optane and nand models."""
    return [{"name": name, "role": role, "profile": {"text": profile_path(name).read_text()},
             "calibration": {"dilation": dilation}} for name, role in (("optane", "fast"), ("nand", "capacity"))]


def test_a_run_on_emulated_tiers_costed_on_their_own_models_gives_their_dilation(tmp_path):
    tiers = emulated_tiers(7.7)
    assert traced.emulated_dilation({"tiers": tiers}, traced.device_profiles(None, tiers, tmp_path)) == 7.7


def test_a_run_costed_on_other_profiles_than_its_tiers_own_gives_no_dilation(tmp_path):
    tiers = emulated_tiers(7.7)
    assert traced.emulated_dilation({"tiers": tiers}, traced.device_profiles("fast=nand,capacity=nand", tiers, tmp_path)) \
        is None


def test_the_capacity_curve_lists_each_capacity_where_the_best_layout_changes():
    predicted = predict.predict_layouts([q03()], predict.all_layouts(SIZES), TPCH)
    assert len(predicted) == 256
    curve = predict.capacity_curve(predicted)
    # None at 0 B is as good as N+R (0 B too) and comes first; O beats C+O's larger footprint until L fits
    assert curve.to_dict("records") == [
        {"capacity_bytes": 0, "layout": "None", "predicted_s": 18.0},
        {"capacity_bytes": 2 * MIB, "layout": "C", "predicted_s": pytest.approx(17.84)},
        {"capacity_bytes": 15 * MIB, "layout": "O", "predicted_s": pytest.approx(11.6)},
        {"capacity_bytes": 17 * MIB, "layout": "C+O", "predicted_s": 10.0},
        {"capacity_bytes": 75 * MIB, "layout": "O+L", "predicted_s": pytest.approx(6.8)},
        {"capacity_bytes": 77 * MIB, "layout": "C+O+L", "predicted_s": pytest.approx(6.0)},
    ]
    assert predict.best_at(curve, 70 * MIB)["layout"] == "C+O"


def test_weights_scale_each_query_s_share_of_the_workload_time():
    predicted = predict.predict_layouts([q03(weight=3.0)], predict.all_layouts(SIZES), TPCH).set_index("layout")
    # three times 18 s, 10 s and 6.8 s
    assert predicted.loc[["None", "C+O", "O+L"], "predicted_s"].tolist() == pytest.approx([54.0, 30.0, 20.4])


def test_the_cache_wins_where_the_admitting_cache_s_predicted_time_is_below_the_best_placement_s():
    curve = predict.capacity_curve(predict.predict_layouts([q03()], predict.all_layouts(SIZES), TPCH))
    cache = pd.DataFrame({"capacity_bytes": [2 * MIB, 2 * MIB, 17 * MIB, 17 * MIB],
                          "policy": ["lru", "admitting"] * 2, "hits": [20, 10, 90, 80], "requests": [100] * 4,
                          "io_us": [300.0, 400.0, 550.0, 600.0]})
    rows = predict.cache_curve([q03()], [cache], curve).to_dict("records")
    assert [(r["capacity_bytes"], r["admitting_predicted_s"], r["admitting_hit_pct"], r["lru_predicted_s"],
             r["placement_layout"], r["verdict"]) for r in rows] == [
        (2 * MIB, 8.4, 10.0, 6.8, "C", "cache"), (17 * MIB, 11.6, 80.0, 10.8, "C+O", "placement")]


def test_the_repeat_spearman_ranks_each_repetition_against_the_median_of_the_others():
    # the first repetition swaps O and C+O; the second and the third rank them as the others' medians do
    runs = {"None": [48.6, 48.0, 49.0], "O": [35.0, 33.0, 33.2], "C+O": [34.0, 34.5, 34.6], "ALL": [21.8, 22.0, 21.5]}
    assert predict.repeat_spearman(runs) == pytest.approx(1.0)
    # with O slow in the second repetition too, every repetition disagrees with the others' medians on them
    runs["O"][1] = 34.8
    assert predict.repeat_spearman(runs) == pytest.approx(0.8)


def test_the_repeat_spearman_needs_every_layout_twice_and_two_layouts():
    assert math.isnan(predict.repeat_spearman({"None": [48.6, 48.0], "O": [35.1]}))
    assert math.isnan(predict.repeat_spearman({"None": [48.6, 48.0]}))


def test_a_repetition_whose_times_are_all_equal_ranks_nothing():
    # against the others' medians the first two repetitions rank alike (+1) and the third not (-1); the fourth ran
    # both in 30 s and is left out: the median of +1, +1, -1. (Counted as 0 it would make 0.5.)
    runs = {"None": [22.0, 21.0, 13.0, 30.0], "O": [10.0, 11.0, 20.0, 30.0]}
    assert predict.repeat_spearman(runs) == pytest.approx(1.0)


def test_validation_ranks_predicted_against_measured_layouts_and_states_the_regret():
    measured = {"None": 48.6, "L": 40.2, "O": 35.1, "C+O": 34.0, "ALL": 21.8}
    predicted = {"None": 50.0, "L": 30.0, "O": 36.0, "C+O": 33.0, "ALL": 25.0}
    assert predict.validation(predicted, measured) == {
        "layouts": 5, "spearman": pytest.approx(0.7), "predicted_fastest": "ALL", "measured_fastest": "ALL", "regret_pct": 0.0}
    assert predict.validation({**predicted, "ALL": 60.0}, measured)["regret_pct"] == pytest.approx(100 * (40.2 / 21.8 - 1))


def test_layout_errors_set_each_layout_s_predictions_beside_its_runs_fastest_first():
    runs = {"None": [48.0, 48.6, 49.2], "O": [35.1, 34.0, 36.0], "ALL": [21.8, 22.0, 21.6]}
    predictions = [{"None": 50.0, "O": 33.0, "ALL": 22.0}, {"None": 47.0, "O": 36.0, "ALL": 24.0},
                   {"None": 49.0, "O": 34.0, "ALL": 23.0}]
    rows = predict.layout_errors(runs, predictions).to_dict("records")
    assert [(r["layout"], r["runs"], r["measured_s"], r["measured_min_s"], r["measured_max_s"], r["predicted_s"],
             r["predicted_min_s"], r["predicted_max_s"]) for r in rows] == [
        ("ALL", 3, 21.8, 21.6, 22.0, 23.0, 22.0, 24.0), ("O", 3, 35.1, 34.0, 36.0, 34.0, 33.0, 36.0),
        ("None", 3, 48.6, 48.0, 49.2, 49.0, 47.0, 50.0)]
    assert [r["error_pct"] for r in rows] == pytest.approx([100 * (23.0 / 21.8 - 1), 100 * (34.0 / 35.1 - 1),
                                                            100 * (49.0 / 48.6 - 1)])
