import json
import math

import pandas as pd
import pytest

from tierlab.devices import profiles as device_profile
from tierlab.metrics.contract import RULES, contract
from tierlab.report.run import contract_tables
from tierlab.runs.analyze import analyze
from tierlab.runs.results import load_run
from tiny_run import line, make_run, read

OPTANE, NAND = (device_profile.load(device_profile.profile_path(name)) for name in ("optane", "nand"))


def tier_row(tier="optane", **given):
    row = {"query": "q03", "try": 1, "tier": tier, "requests": 1000, "read_requests": 1000, "write_requests": 0,
           "read_bytes": 1000 * 16384, "write_bytes": 0, "random_pct": 10.0, "tiny_pct": 0.0, "misaligned_pct": 0.0,
           "inflight_mean": 1.0, "inflight_max": 1, "latency_p50_us": 40.0, "crowded_pct": 0.0,
           "reads_beside_writes_pct": 0.0}
    return {**row, **given}


def judged(rows, profiles=None, trace_counts=None):
    counts = pd.DataFrame(trace_counts or [{"query": "q03", "try": 1, "trace_complete": True, "lost_events": 0}])
    found = contract(pd.DataFrame(rows), counts, profiles if profiles is not None else {"optane": OPTANE, "nand": NAND})
    return {(r["tier"], r["rule"]): r for r in found.to_dict("records")}


def test_every_rule_is_judged_for_every_tier_a_query_touched():
    found = judged([tier_row("optane"), tier_row("nand")])
    assert sorted(found) == sorted((tier, rule) for tier in ("optane", "nand") for rule in RULES)


def test_more_requests_in_flight_than_the_device_serves_at_once_break_the_request_scale():
    # 16 KiB reads on optane: 8.4 us + 6.55 us transfer over 6.55 us of link, so the link is busy at 2.28 in flight
    found = judged([tier_row(inflight_mean=32.0, inflight_max=64)])[("optane", "low request scale")]
    assert (found["verdict"], found["measured"], found["limit"]) == ("broken", 32.0, 2.28)
    assert "the device is busy at 2.3 (4 channels, 2500 MB/s)" in found["evidence"]


def test_in_flight_within_the_device_s_parallelism_keeps_the_request_scale():
    found = judged([tier_row("nand", inflight_mean=12.0)])[("nand", "low request scale")]
    assert (found["verdict"], found["limit"]) == ("kept", 17.22)


def test_mostly_random_reads_break_half_bad_random_access_on_nand_only():
    found = judged([tier_row("optane", random_pct=80.0), tier_row("nand", random_pct=80.0)])
    assert found[("optane", "random access is only half-bad")]["verdict"] == "kept"
    nand = found[("nand", "random access is only half-bad")]
    assert nand["verdict"] == "broken"
    assert "a random read costs 10.3x a sequential one on this device" in nand["evidence"]


@pytest.mark.parametrize(("column", "rule"), [("tiny_pct", "avoid tiny accesses"),
                                              ("misaligned_pct", "issue 4 KiB-aligned requests"),
                                              ("crowded_pct", "avoid crowded accesses")])
def test_more_than_one_percent_of_stray_requests_breaks_their_rule(column, rule):
    found = judged([tier_row(**{column: 1.0}), tier_row("nand", **{column: 1.5})])
    assert (found[("optane", rule)]["verdict"], found[("nand", rule)]["verdict"]) == ("kept", "broken")


def test_reads_beside_writes_break_the_overall_load_rule_and_a_tier_without_reads_is_not_judged():
    found = judged([tier_row("optane", reads_beside_writes_pct=25.0), tier_row("nand", reads_beside_writes_pct=float("nan"))])
    assert found[("optane", "control overall load")]["verdict"] == "broken"
    assert found[("nand", "control overall load")]["verdict"] == "not judged"


def test_writes_in_the_garbage_collection_regime_break_its_rule_on_nand_and_optane_has_none():
    found = judged([tier_row("optane", write_requests=900, write_bytes=600 << 20, model_write_gc_requests=0.0),
                    tier_row("nand", write_requests=900, write_bytes=600 << 20, model_write_gc_requests=300.0)])
    assert found[("optane", "forget garbage collection")]["verdict"] == "kept"
    assert "no garbage-collection regime" in found[("optane", "forget garbage collection")]["evidence"]
    nand = found[("nand", "forget garbage collection")]
    assert (nand["verdict"], nand["measured"]) == ("broken", 300.0)


def test_a_trace_that_lost_events_leaves_the_in_flight_rules_unjudged():
    found = judged([tier_row(inflight_mean=32.0)],
                   trace_counts=[{"query": "q03", "try": 1, "trace_complete": True, "lost_events": 7289863}])
    assert {rule: r["verdict"] for (_, rule), r in found.items()} == {
        "low request scale": "not judged", "random access is only half-bad": "kept",
        "avoid crowded accesses": "not judged", "control overall load": "not judged", "avoid tiny accesses": "kept",
        "issue 4 KiB-aligned requests": "kept", "forget garbage collection": "kept"}
    assert found[("optane", "low request scale")]["evidence"].startswith("the trace lost 7289863 events (trace_counts.csv)")


def test_a_query_s_few_requests_on_a_tier_are_not_judged():
    found = judged([tier_row("nand", requests=99, random_pct=80.0)])
    assert {r["verdict"] for r in found.values()} == {"not judged"}
    assert found[("nand", "random access is only half-bad")]["evidence"].startswith("only 99 requests on this tier: ")


def test_a_tier_without_a_device_profile_leaves_the_device_rules_unjudged():
    found = judged([tier_row("real")], profiles={"real": None})
    assert [rule for (_, rule), r in found.items() if r["verdict"] == "not judged"] == [
        "low request scale", "random access is only half-bad", "forget garbage collection"]
    assert math.isnan(found[("real", "low request scale")]["limit"])


def test_analyze_judges_each_query_on_each_tier_against_the_profile_its_emulator_ran(tmp_path):
    reads = "".join(read(1.1 + i / 1000, 1000 * i) for i in range(100))
    run = make_run(tmp_path, line(1.0, "tracing_mark_write: tierlab start q03_try1") + reads
                   + line(1.3, "tracing_mark_write: tierlab end q03_try1"))
    (run / "raw" / "tiers.json").write_text(json.dumps([{"name": "nand", "role": "capacity", "device": "7:1", "profile": {
        "name": "nand", "text": device_profile.profile_path("nand").read_text()}}]))
    found = analyze(load_run(run))["contract"]
    assert found[["query", "tier", "rule", "verdict"]].values.tolist() == [
        ["q03", "nand", "low request scale", "kept"], ["q03", "nand", "random access is only half-bad", "broken"],
        ["q03", "nand", "avoid crowded accesses", "kept"], ["q03", "nand", "control overall load", "kept"],
        ["q03", "nand", "avoid tiny accesses", "kept"], ["q03", "nand", "issue 4 KiB-aligned requests", "kept"],
        ["q03", "nand", "forget garbage collection", "kept"]]


def test_a_real_device_is_judged_against_the_profile_given_for_its_role_and_the_parameters_name_it(tmp_path):
    reads = "".join(read(1.1 + i / 1000, 1000 * i) for i in range(100))
    run = make_run(tmp_path, line(1.0, "tracing_mark_write: tierlab start q03_try1") + reads
                   + line(1.3, "tracing_mark_write: tierlab end q03_try1"))
    unjudged = analyze(load_run(run))["contract"]
    assert unjudged.loc[unjudged["rule"] == "random access is only half-bad", "verdict"].tolist() == ["not judged"]
    fitted = device_profile.profile_path("nand")
    tables = analyze(load_run(run), profiles={"capacity": fitted})
    found = tables["contract"]
    assert found.loc[found["rule"] == "random access is only half-bad", "verdict"].tolist() == ["broken"]
    assert tables["parameters"]["profile_nand"].tolist() == [str(fitted)]


def test_the_report_shows_a_row_of_verdicts_per_query_and_tier_and_the_evidence_of_all_but_kept():
    verdicts, flagged = contract_tables(contract(pd.DataFrame([tier_row("optane"), tier_row("nand", random_pct=80.0)]),
                                                 pd.DataFrame(), {"optane": OPTANE, "nand": NAND}))
    assert verdicts.columns.tolist() == ["query", "try", "tier", *RULES]
    assert verdicts["tier"].tolist() == ["nand", "optane"]
    assert flagged[["tier", "rule", "verdict"]].values.tolist() == [["nand", "random access is only half-bad", "broken"]]
