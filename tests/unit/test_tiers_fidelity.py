"""The self-check's contrasts and verdicts, on hand-made job results (the host agent's pure functions)."""

import pytest

from tierlab_host.system import HostError
from tierlab_host.tiers_check import check, contrasts, fidelity, round_count


def job(medium: str, rw: str, block_bytes: int, iodepth: int, p50_us: float, iops: float,
        model_p50_us: float, model_iops: float, late_share: float = 0.0) -> dict:
    return {"medium": medium, "rw": rw, "block_bytes": block_bytes, "iodepth": iodepth, "iops": iops,
            "lat_us": {"p50": p50_us}, "late_share": late_share,
            "target": {"p50_us": model_p50_us * 8, "iops": model_iops / 8, "model_p50_us": model_p50_us,
                       "model_iops": model_iops}}


def tier(name: str, role: str, random_us: float, sequential_us: float, measured: dict) -> dict:
    """A tier whose jobs measured `measured` (by job key) and otherwise exactly its model times 8."""
    jobs = []
    for medium in ("device", "file"):
        for block_bytes in (4096, 16384):
            for rw, model_us in (("read", sequential_us), ("randread", random_us)):
                p50 = measured.get((medium, rw, block_bytes, 1), model_us * 8)
                jobs.append(job(medium, rw, block_bytes, 1, p50, 1e6 / p50, model_us, 1e6 / model_us,
                                measured.get((medium, rw, block_bytes, "late"), 0.0)))
        deep = measured.get((medium, "randread", 16384, 32), 10 * 1e6 / (random_us * 8))
        jobs.append(job(medium, "randread", 16384, 32, 1000.0, deep, 1000.0 / 8, 10 * 1e6 / random_us))
    return {"name": name, "role": role, "emulation": "model", "jobs": jobs}


def test_a_tier_that_delivers_its_model_times_the_dilation_is_faithful():
    tiers = [tier("optane", "fast", 10, 10, {}), tier("nand", "capacity", 90, 10, {})]
    found = contrasts(tiers)
    assert len(found) == 16
    assert {c["verdict"] for c in found} == {"faithful"}
    assert fidelity(tiers, found) == {"verdict": "faithful", "tiers": {"optane": "faithful", "nand": "faithful"},
                                      "reasons": []}


def test_sequential_reads_held_up_by_the_host_floor_make_the_contrast_unfaithful_and_say_why():
    # nand's 4 KiB sequential reads on the device came back at 400 us against 80: random/sequential is 1.8, not 9
    tiers = [tier("optane", "fast", 10, 10, {}),
             tier("nand", "capacity", 90, 10, {("device", "read", 4096, 1): 400.0, ("device", "read", 4096, "late"): 0.9})]
    (bad,) = [c for c in contrasts(tiers) if c["verdict"] != "faithful"]
    assert (bad["name"], bad["medium"], bad["target"], bad["measured"], bad["verdict"]) == \
        ("nand random/sequential read latency, 4 KiB QD1", "device", 9.0, 1.8, "not faithful")
    assert bad["reason"] == ("host floor: 90% of the emulator's replies in read 4 KiB QD1 were due before the host "
                             "could send them (a larger dilation would hold them)")
    assert fidelity(tiers, contrasts(tiers))["tiers"] == {"optane": "faithful", "nand": "not faithful"}


def test_a_deep_queue_the_host_cannot_carry_degrades_the_scaling_contrast_with_the_host_s_throughput_named():
    tiers = [tier("optane", "fast", 10, 10, {("file", "randread", 16384, 32): 80000.0}), tier("nand", "capacity", 90, 10, {})]
    (bad,) = [c for c in contrasts(tiers) if c["verdict"] != "faithful"]
    assert (bad["name"], bad["medium"], bad["verdict"]) == ("optane QD32/QD1 random read IOPS, 16 KiB", "file", "degraded")
    assert bad["reason"] == "host throughput: 80000 IOPS at QD32 against the dilated model's 125000 (the emulator ran out of CPU)"
    assert fidelity(tiers, contrasts(tiers))["verdict"] == "degraded"


def test_a_tier_that_is_not_modelled_has_no_contrasts_and_no_verdict():
    real = {"name": "nvme", "role": "capacity", "emulation": "none", "jobs": []}
    tiers = [tier("optane", "fast", 10, 10, {}), real]
    found = contrasts(tiers)
    assert {c["tiers"][0] for c in found} == {"optane"}
    assert fidelity(tiers, found)["tiers"] == {"optane": "faithful"}


@pytest.mark.parametrize(("runtime_s", "rounds"), [(10, 8), (1, 8), (0.79, 7), (0.5, 5), (0.25, 2), (0.05, 1)])
def test_a_job_is_measured_in_up_to_eight_rounds_of_at_least_a_tenth_of_a_second(runtime_s, rounds):
    assert round_count(runtime_s) == rounds


def test_tiers_brought_up_without_the_probe_are_refused_before_any_job_with_how_to_build_it(tmp_path):
    specs = [{"name": "optane", "emulation": "model", "path": str(tmp_path)},
             {"name": "nand", "emulation": "model", "path": str(tmp_path), "probe": str(tmp_path / "tierlab-probe")}]
    with pytest.raises(HostError) as refused:
        check(specs, 1.0)
    assert str(refused.value) == ("tiers optane, nand: tierlab-probe, which measures them, is not built under this root "
                                  "(tiers brought up by an older tierlab); run `make tiers` (or any playbook) on it first")
