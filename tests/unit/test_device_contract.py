"""What breaking each rule of the contract costs on a device, from the device suite's jobs, and E6's findings
made of a device suite's results directory."""

import json
import math

from tierlab.devices import fit as device_fit
from tierlab.devices.contract import rule_costs
from tierlab.studies.findings import gather, read_gathered, study_findings, write_gathered


def side(p50_us: float, iops: float = 0.0, mean_us: float | None = None) -> dict:
    return {"iops": iops, "bw_bytes": iops * 4096, "mean_us": p50_us if mean_us is None else mean_us,
            "lat_us": {"p50": p50_us, "p90": p50_us, "p99": 2 * p50_us, "p99.9": 2 * p50_us}}


# a device whose random reads cost twice its sequential ones, busy at queue depth 4, slowed 2.5x by writes beside
# its reads, 6x per byte by 512 B reads, 1.5x by misaligned ones, whose sustained writes fall to a quarter
TIER = {"name": "flash", "role": "capacity", "emulation": "real", "dilation": 1.0, "jobs": [
    {"kind": "latency", "rw": "read", "block_bytes": 4096, "iodepth": 1, "read": side(10.0)},
    {"kind": "latency", "rw": "randread", "block_bytes": 4096, "iodepth": 1, "read": side(20.0)},
    {"kind": "latency", "rw": "write", "block_bytes": 4096, "iodepth": 1, "write": side(30.0)},
    {"kind": "latency", "rw": "randwrite", "block_bytes": 4096, "iodepth": 1, "write": side(30.0)},
    {"kind": "small", "rw": "randread", "block_bytes": 512, "iodepth": 1, "read": side(15.0)},
    {"kind": "small", "rw": "randread", "block_bytes": 1024, "iodepth": 1, "error": "fio: invalid block size"},
    {"kind": "misaligned", "rw": "randread", "block_bytes": 4096, "iodepth": 1, "align_bytes": 512,
     "read": side(30.0)},
    {"kind": "mixed", "rw": "randrw", "block_bytes": 4096, "iodepth": 4, "write_pct": 0, "read": side(20.0)},
    {"kind": "mixed", "rw": "randrw", "block_bytes": 4096, "iodepth": 4, "write_pct": 50, "read": side(50.0),
     "write": side(40.0)},
    {"kind": "sustained", "rw": "write", "block_bytes": 131072, "iodepth": 32, "log_interval_s": 0.1,
     "bandwidth_log": [(0.1 * (i + 1), 1000e6 if i < 10 else 250e6) for i in range(30)], "write": side(500.0)},
    *[{"kind": "bandwidth", "rw": "randread", "block_bytes": 4096, "iodepth": depth,
       "read": side(mean, iops, mean)} for depth, iops, mean in
      ((1, 1000.0, 10.0), (4, 3800.0, 10.5), (16, 4000.0, 40.0), (64, 4000.0, 160.0), (256, 4000.0, 640.0))],
    {"kind": "bandwidth", "rw": "randwrite", "block_bytes": 4096, "iodepth": 1, "write": side(30.0, 30000.0)},
]}
SUITE = {"measured_at": "2026-11-28T07:00:00+00:00", "runtime_s": 1, "sustained_s": 3, "scratch_bytes": 256 << 20,
         "tiers": [TIER]}


def test_each_rule_is_costed_by_a_job_that_keeps_it_beside_one_that_breaks_it():
    costs = rule_costs(SUITE).set_index("rule")
    assert costs["cost_x"].round(2).fillna(-1).to_dict() == {
        "low request scale": 60.95, "random access is only half-bad": 2.0, "avoid crowded accesses": -1,
        "control overall load": 2.5, "avoid tiny accesses": 6.0, "issue 4 KiB-aligned requests": 1.5,
        "forget garbage collection": 4.0}
    assert costs.loc["low request scale", "evidence"] == (
        "busy at QD4 (3800 IOPS, 95% of the most); at QD256 4000 IOPS, each read 640 us against 10 us")
    assert costs.loc["avoid tiny accesses", "evidence"] == (
        "512 B random reads, QD1 15 us against 4 KiB random reads, QD1 20 us, means: 6.00x per byte")
    assert costs.loc["forget garbage collection", "evidence"] == (
        "128 KiB writes at QD32 for 3 s: 1000 MB/s at best, 250 MB/s over the last third")
    assert math.isnan(costs.loc["avoid crowded accesses", "kept"])


def test_a_device_still_gaining_at_the_deepest_queue_costs_nothing_for_its_request_scale():
    deeper = {**TIER, "jobs": [{**job, "read": side(100.0, 8000.0, 100.0)}
                               if job["kind"] == "bandwidth" and job["iodepth"] == 256 else job
                               for job in TIER["jobs"]]}
    row = rule_costs({**SUITE, "tiers": [deeper]}).set_index("rule").loc["low request scale"]
    assert (row["kept_by"], row["broken_by"], row["cost_x"]) == (
        "4 KiB random reads, QD256", "4 KiB random reads, QD256", 1.0)
    assert row["evidence"] == ("IOPS still grew up to the deepest queue tried (QD256: 8000 IOPS, each read 100 us): "
                               "no depth of the suite only waits")


def test_a_job_fio_refused_leaves_its_rule_not_measured_with_why():
    refused = {**TIER, "jobs": [{**job, "error": "fio: O_DIRECT refused"} if job["kind"] == "misaligned" else job
                                for job in TIER["jobs"]]}
    row = rule_costs({**SUITE, "tiers": [refused]}).set_index("rule").loc["issue 4 KiB-aligned requests"]
    assert math.isnan(row["cost_x"])
    assert row["evidence"] == "not measured: a job of the two failed (raw/devices.json has fio's error)"


def test_a_device_suite_s_directory_is_e6_s_study_and_its_answer_names_the_rules_worth_keeping(tmp_path):
    run_dir = tmp_path / "devices_20261128T070000Z_lab_host"
    (run_dir / "raw").mkdir(parents=True)
    (run_dir / "raw" / "devices.json").write_text(json.dumps(SUITE))
    out = write_gathered(gather(run_dir), tmp_path / "findings")
    assert out.name == "e6-devices-lab_host"
    assert sorted(path.name for path in out.iterdir()) == [
        "contract.csv", "device_jobs.csv", "profiles.csv", "runs.csv", "study.json"]
    (tables,) = read_gathered(tmp_path / "findings")
    found = study_findings(tables)
    assert (found["experiment"], found["setup"]) == ("E6", (
        "the device suite (playbooks/devices.yml): fio with O_DIRECT on a scratch file on each tier, 1 s per job, "
        "sustained writes for 3 s; flash (capacity tier, real); measured 2026-11-28T07:00:00+00:00; suite "
        "devices_20261128T070000Z_lab_host"))
    assert found["answers"] == [
        "flash: breaking a rule costs low request scale 60.95x, avoid tiny accesses 6.00x, forget garbage collection "
        "4.00x, control overall load 2.50x, random access is only half-bad 2.00x, issue 4 KiB-aligned requests 1.50x; "
        "over 1.5x, so worth keeping here: low request scale, avoid tiny accesses, forget garbage collection, control "
        "overall load, random access is only half-bad; avoid crowded accesses: not measured: no job of the suite "
        "sends requests to one 4 KiB chunk at once"]
    assert found["runs"].to_dict("records") == [
        {"point": 1, "repetition": 1, "tier": "flash", "status": "ok", "run_id": "devices_20261128T070000Z_lab_host"}]


def test_an_emulated_tier_s_findings_name_the_fitted_parameters_that_miss_its_model(tmp_path):
    # the model the tier emulates: what the suite measured (it fits one channel, writes at 1000 MB/s and sustains
    # 250 MB/s), but for a deeper device that pauses to collect garbage, writes 20% faster (within the
    # tolerance) and sustains 40% more (beyond it)
    fitted = device_fit.fit(TIER)
    model = device_fit.profile_text(TIER, {**fitted, "channels": 2, "gc_pause_us": 3000, "gc_pause_every_kb": 4096,
                                           "write_bandwidth_mb_s": 1200, "sustained_write_mb_s": 350}, "a test")
    run_dir = tmp_path / "devices_20261128T070000Z_lab"
    (run_dir / "raw").mkdir(parents=True)
    (run_dir / "raw" / "devices.json").write_text(
        json.dumps({**SUITE, "tiers": [{**TIER, "emulation": "model", "profile": model}]}))
    write_gathered(gather(run_dir), tmp_path / "findings")
    (tables,) = read_gathered(tmp_path / "findings")
    assert study_findings(tables)["answers"][-1] == (
        "flash's profile fitted to the suite against the model it emulates: every parameter within 25% but "
        "channels 1 against 2, sustained_write_mb_s 250 against 350, gc_pause_us 0 against 3000, "
        "gc_pause_every_kb 0 against 4096")
