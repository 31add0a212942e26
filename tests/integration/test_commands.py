"""tierlab's commands as users run them on a root's tiers and runs: the tiers' self-check again, and runs compared."""


import pandas as pd
import pytest
from lab import cli

pytestmark = pytest.mark.mariadb


def test_tiers_check_measures_the_root_s_tiers_again_and_judges_them(lab, layouts):
    done = cli("tiers", "check", "--root", lab.root, "--runtime-s", "0.25", timeout_s=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].endswith("0.25 s per job in 1 interleaved rounds (figures: the median round), read-only on each "
                             "device (first 1024 MiB) and through each file system (a 128 MiB scratch file, removed after)")
    assert lines[1].startswith("modelled time dilated ")
    jobs = [line.split()[:5] for line in lines[3:] if line.startswith(("optane ", "nand "))]
    assert {(tier, medium) for tier, medium, *_ in jobs} == {(tier, medium) for tier in ("optane", "nand")
                                                              for medium in ("device", "file")}
    contrasts = [line for line in lines if line.endswith(("faithful", "degraded"))]
    assert len(contrasts) == 16
    assert [line for line in lines if line.startswith("fidelity: ")][0].split()[1] in ("faithful", "degraded",
                                                                                       "not")


def test_compare_puts_the_layouts_side_by_side_with_their_measured_times(layout_runs, tmp_path):
    runs = [layout_runs["None"], layout_runs["ALL"]]
    done = cli("compare", *map(str, runs), "--out", str(tmp_path / "compared"))
    assert done.returncode == 0, done.stderr
    side = pd.read_csv(tmp_path / "compared" / "compare.csv")
    for run_dir in runs:
        measured = pd.read_csv(run_dir / "tables" / "queries.csv")
        mine = side[side["run"] == run_dir.name]
        assert list(mine["query"]) == ["q01", "q03"]
        assert list(mine["elapsed_s"]) == pytest.approx(list(measured["elapsed_s"]), rel=1e-5)
    page = (tmp_path / "compared" / "report.html").read_text()
    assert all(run_dir.name in page for run_dir in runs)
    assert page.count("<svg") >= 1
