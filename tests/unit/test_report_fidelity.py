"""What a run's report says of its tiers' fidelity, from the manifest and tier_metrics (the lead's caveat when they
were not faithful: test_report_lead.py)."""

import pandas as pd

from tierlab.report.run import fidelity
from tierlab.runs.manifest import tiers_fidelity

TIERS = [{"name": "optane", "calibration": {"dilation": 8.5}}, {"name": "nand", "calibration": {"dilation": 8.5}}]
FAITHFUL = {"verdict": "faithful", "tiers": {"optane": "faithful", "nand": "faithful"}, "reasons": []}
DEGRADED = {"verdict": "degraded", "tiers": {"optane": "degraded", "nand": "faithful"},
            "reasons": ["optane random/sequential read latency, 4 KiB QD1 (device): host noise: read 4 KiB QD1 p50 68.1 us "
                        "against 85.34 us"]}
LATE = pd.DataFrame({"query": ["q03", "q03"], "try": [1, 1], "tier": ["nand", "optane"], "model_late_pct": [0.5, 0.0]})


def manifest(verdicts: dict) -> dict:
    return {"tiers": TIERS, "tiers_check": {"checked_at": "2026-11-23T09:16:34+00:00", "fidelity": verdicts}}


def test_faithful_tiers_state_the_dilation_and_what_it_does():
    lines, late = fidelity(manifest(FAITHFUL), LATE)
    assert lines[0].startswith("Self-check of the tiers (2026-11-23T09:16:34+00:00): faithful (optane: faithful, "
                               "nand: faithful).")
    assert lines[1].startswith("Modelled time was dilated 8.5x:")
    assert "io_time_undilated_s the same divided by 8.5" in lines[1]
    assert "I/O takes a larger share of each query's time here" in lines[1]
    assert late.to_dict("records") == [{"query": "q03", "try": 1, "late % on nand": 0.5, "late % on optane": 0.0}]


def test_degraded_tiers_are_given_with_the_reason_in_the_fidelity_section():
    lines, _ = fidelity(manifest(DEGRADED), LATE)
    assert lines[0].startswith("Self-check of the tiers (2026-11-23T09:16:34+00:00): degraded (optane: degraded, ")
    assert "Not faithful or degraded: optane random/sequential read latency, 4 KiB QD1 (device): host noise" in lines[1]


def test_a_run_on_real_tiers_has_no_fidelity_section():
    lines, late = fidelity({"tiers": [{"name": "nvme", "calibration": None}], "tiers_check": None}, pd.DataFrame())
    assert (lines, late.empty) == ([], True)


def test_the_manifest_carries_the_dilation_and_the_verdicts():
    assert tiers_fidelity(TIERS, {"fidelity": DEGRADED}) == {"dilation": 8.5, **DEGRADED}
    assert tiers_fidelity([{"name": "nvme", "calibration": None}], None) == \
        {"dilation": None, "verdict": None, "tiers": {}, "reasons": []}
