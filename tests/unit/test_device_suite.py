"""The device suite's jobs, run with the real fio on a file of the test's own."""


from tierlab_host import device_suite, fio

# long enough that a job completes requests on a host whose disk is busy with others' (a 50 ms window there could end
# before the first one does)
RUNTIME_S = 0.2


def test_the_two_read_latency_jobs_run_in_rounds_and_each_is_kept_from_its_least_disturbed_round(tmp_path):
    scratch = tmp_path / "scratch"
    fio.write_scratch(scratch, 16 << 20)
    (reads, *_) = device_suite.plan()
    assert [job["rw"] for job in reads] == ["read", "randread"]

    measured = device_suite.measure_group(str(scratch), reads, RUNTIME_S, 1)

    assert [(job["rw"], job["rounds"]) for job in measured] == [("read", 5), ("randread", 5)]
    for job in measured:
        by_round = job["p50_us_by_round"]["read"]
        assert len(by_round) == 5
        assert job["read"]["lat_us"]["p50"] == min(by_round)
        assert "write" not in job


def test_the_least_disturbed_round_is_kept_whole():
    rounds = [{"iops": 100.0, "lat_us": {"p50": 30.0, "p99": 90.0}}, {"iops": 300.0, "lat_us": {"p50": 10.0, "p99": 95.0}},
              {"iops": 200.0, "lat_us": {"p50": 20.0, "p99": 40.0}}]
    # the middle round's p50 is least: its iops and p99 come with it, not the other rounds' best
    assert fio.least_disturbed_round(rounds) == {"iops": 300.0, "lat_us": {"p50": 10.0, "p99": 95.0}}


def test_every_other_job_of_the_suite_runs_once(tmp_path):
    groups = device_suite.plan()
    assert [len(group) for group in groups] == [2] + [1] * 52
    scratch = tmp_path / "scratch"
    fio.write_scratch(scratch, 16 << 20)
    (write,) = device_suite.measure_group(str(scratch), groups[1], RUNTIME_S, 1)
    assert (write["rw"], write["runtime_s"], "rounds" in write) == ("write", RUNTIME_S, False)
    assert write["write"]["iops"] > 0
