"""tierlab's commands as users run them on a root's tiers and runs: the tiers' self-check again, and runs compared."""

import json
from pathlib import Path

import pytest
from lab import cli, read_csv

pytestmark = pytest.mark.mariadb


def test_tiers_check_measures_the_root_s_tiers_again_and_judges_them(lab, layouts):
    record = Path(lab.root, "state", "tiers-check.json")
    kept = record.read_text()
    try:
        done = cli("tiers", "check", "--root", lab.root, "--runtime-s", "0.25", timeout_s=600)
        # the root keeps the latest self-check, for the runs that follow
        latest = json.loads(record.read_text())
    finally:
        record.write_text(kept)
    assert done.returncode == 0, done.stderr
    assert latest["runtime_s"] == 0.25
    lines = done.stdout.splitlines()
    assert lines[0].endswith("0.25 s per job in 2 interleaved rounds (figures: the median round), read-only on each "
                             "device (first 256 MiB) and through each file system (a 128 MiB scratch file, removed after)")
    assert lines[1].startswith(f"modelled time dilated {lab.tiers_check['dilation']:g}x on every modelled tier")
    jobs = {tuple(line.split()[:5]) for line in lines if line.split()[1:2] in (["device"], ["file"])}
    assert jobs == {(tier, medium, rw, block, qd) for tier in ("optane", "nand") for medium in ("device", "file")
                    for rw, block, qd in [("read", "4K", "1"), ("randread", "4K", "1"), ("read", "16K", "1"),
                                          ("randread", "16K", "1"), ("randread", "16K", "32")]}
    contrasts = [line for line in lines if line.endswith(("faithful", "degraded"))]
    assert len(contrasts) == 16
    # the host's verdict is its worst contrast's
    worst = next((verdict for verdict in ("not faithful", "degraded") if any(c.endswith(f"  {verdict}") for c in contrasts)),
                 "faithful")
    assert [line for line in lines if line.startswith("fidelity: ")][0].startswith(f"fidelity: {worst} (optane ")


def test_compare_puts_the_layouts_side_by_side_with_their_measured_times(layout_runs, tmp_path):
    runs = [layout_runs["None"], layout_runs["ALL"]]
    done = cli("compare", *map(str, runs), "--out", str(tmp_path / "compared"))
    assert done.returncode == 0, done.stderr
    side = read_csv(tmp_path / "compared" / "compare.csv")
    measured = {}
    for run_dir in runs:
        measured[run_dir.name] = read_csv(run_dir / "tables" / "queries.csv").set_index("query")["elapsed_s"]
        mine = side[side["run"] == run_dir.name]
        assert list(mine["query"]) == ["q01", "q03"]
        assert list(mine["elapsed_s"]) == pytest.approx(list(measured[run_dir.name]), rel=1e-5)
    # the first run given is the one the others are set against: a query's speedup is its time there over its time
    # here, and ALL runs Q3 faster than None by more than the runs' spread (test_study_of_runs)
    speedup = side.set_index(["run", "query"])["speedup"]
    first, other = (run_dir.name for run_dir in runs)
    for query in ("q01", "q03"):
        assert speedup[first, query] == 1.0
        assert speedup[other, query] == pytest.approx(measured[first][query] / measured[other][query], rel=1e-4)
    assert speedup[other, "q03"] > 1.0
    page = (tmp_path / "compared" / "report.html").read_text()
    assert all(run_dir.name in page for run_dir in runs)
    assert page.count("<svg") >= 1
