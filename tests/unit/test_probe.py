"""tierlab-probe, the self-check's job runner: its figures' form and its refusals (its figures against fio's are
held in the integration tests, on the emulated tiers)."""

import json
import subprocess
from pathlib import Path

import pytest

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
SPAN_BYTES = 16 << 20


@pytest.fixture(scope="module")
def probe() -> str:
    subprocess.run(["make", "-s", "-C", str(EMULATOR), "tierlab-probe"], check=True, timeout=300)
    return str(EMULATOR / "tierlab-probe")


@pytest.fixture
def target(tmp_path: Path) -> str:
    path = tmp_path / "scratch"
    path.write_bytes(b"\x5a" * SPAN_BYTES)
    return str(path)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("rw, iodepth", [("read", 1), ("randread", 8)])
def test_a_job_reports_its_requests_rate_and_ordered_latency_percentiles(probe, target, rw, iodepth):
    done = run(probe, target, rw, "4096", str(iodepth), "0.2", str(SPAN_BYTES))
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert (found["rw"], found["block_bytes"], found["iodepth"]) == (rw, 4096, iodepth)
    assert found["requests"] > 0
    assert 0.2 <= found["runtime_s"] < 1.2
    # iops is printed to a tenth and runtime_s to a microsecond: below 10,000 IOPS a tenth is more than 1e-5 of it
    assert found["iops"] == pytest.approx(found["requests"] / found["runtime_s"], rel=1e-5, abs=0.1)
    lat = found["lat_us"]
    assert list(lat) == ["p50", "p90", "p99", "p99.9"]
    assert 0 < lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["p99.9"]


@pytest.mark.parametrize("args", [
    ["write", "4096", "1", "0.2", str(SPAN_BYTES)],
    ["read", "1000", "1", "0.2", str(SPAN_BYTES)],
    ["read", "4096", "0", "0.2", str(SPAN_BYTES)],
    ["read", "4096", "257", "0.2", str(SPAN_BYTES)],
    ["read", "4096", "1", "0", str(SPAN_BYTES)],
    ["read", "4096", "1", "0.2", "2048"],
    ["read", "4096", "1", "0.2"],
    ["read", "4096", "1", "0.2s", str(SPAN_BYTES)],
    ["read", "4096", "1", "0.2", "16M"],
    ["read", "", "1", "0.2", str(SPAN_BYTES)],
    ["read", "4096", "1", "0.2", "-1"],
    ["read", " 4096", "1", "0.2", str(SPAN_BYTES)],
])
def test_a_job_it_cannot_run_as_given_is_refused_with_its_usage(probe, target, args):
    done = run(probe, target, *args)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("usage: tierlab-probe TARGET read|randread BLOCK_BYTES IODEPTH RUNTIME_S SPAN_BYTES")


def test_a_target_it_cannot_open_is_named(probe, tmp_path):
    done = run(probe, str(tmp_path / "absent"), "read", "4096", "1", "0.2", str(SPAN_BYTES))
    assert done.returncode == 1
    assert done.stderr == f"tierlab-probe: {tmp_path / 'absent'}: No such file or directory\n"
