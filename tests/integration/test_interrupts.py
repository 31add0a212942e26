"""A playbook interrupted at each phase, by Ctrl-C (SIGINT to its process group, as a terminal sends it) and by
SIGTERM (to ansible-playbook alone, as `kill` sends it), then resumed: the run is kept partial, and the resume
finishes it, every query with its row (make test-long: sixteen playbook runs)."""

import json
import os
import signal
import subprocess

import pytest
from lab import ANSIBLE_ENV, PLAYBOOK_TIMEOUT_S, ROOT, SCALE_FACTOR, Lines, read_csv

pytestmark = pytest.mark.mariadb

# the line a phase starts with in the playbook's output; the load phase is interrupted while it loads a database of
# its own scale factor (one per signal), the others on the shared one
PHASES = {"tiers": "TASK [tiers : ", "load": "TASK [load : Bulk-load each table from the generated data]",
          "run": "TASK [run_queries : Wait for q03_try1 to end]", "collect": "TASK [collect : "}
SIGNALS = {"ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM}
LOAD_SCALE_FACTORS = {"ctrl-c": 0.02, "sigterm": 0.03}


def interrupted_run(lab, phase: str, how: str) -> tuple[str, dict]:
    """tpch.yml, interrupted once its output reaches the phase: its run id and variables."""
    variables = {"tierlab_root": lab.root, "results_dir": str(lab.results_dir), **lab.settings, "layout": "C+O",
                 "queries": "1,3", "scale_factor": LOAD_SCALE_FACTORS[how] if phase == "load" else SCALE_FACTOR}
    before = lab.run_ids()
    playbook = subprocess.Popen([str(ROOT / ".venv/bin/ansible-playbook"), "playbooks/tpch.yml", "-e",
                                 json.dumps(variables)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, start_new_session=True,
                                env={**os.environ, **ANSIBLE_ENV, "PYTHONUNBUFFERED": "1"})
    lines = Lines(playbook)
    try:
        while not lines.next(PLAYBOOK_TIMEOUT_S).startswith(PHASES[phase]):
            pass
        if how == "ctrl-c":
            os.killpg(playbook.pid, signal.SIGINT)
        else:
            playbook.send_signal(signal.SIGTERM)
        said = lines.rest(300)
    finally:
        if playbook.poll() is None:
            os.killpg(playbook.pid, signal.SIGKILL)
            playbook.wait(timeout=60)
    assert playbook.returncode != 0, said
    (run_id,) = lab.run_ids() - before
    return run_id, variables


@pytest.fixture(scope="module")
def interrupted(lab, layouts):
    """Each (phase, how): the run's manifest as the interrupt left it, and its query rows after the resume."""
    found = {}
    for how in SIGNALS:
        for phase in PHASES:
            run_id, variables = interrupted_run(lab, phase, how)
            left = json.loads((lab.results_dir / run_id / "manifest.json").read_text())
            extra = {k: v for k, v in variables.items() if k not in ("tierlab_root", "results_dir", *lab.settings)}
            lab.playbook("tpch.yml", resume=run_id, **extra)
            found[(phase, how)] = {"left": left, "manifest": json.loads((lab.results_dir / run_id / "manifest.json")
                                                                        .read_text()),
                                   "rows": read_csv(lab.results_dir / run_id / "tables" / "queries.csv")}
    return found


@pytest.mark.parametrize("how", SIGNALS)
@pytest.mark.parametrize("phase", PHASES)
def test_a_run_interrupted_at_a_phase_is_left_partial_and_its_resume_finishes_it(interrupted, phase, how):
    case = interrupted[(phase, how)]
    assert case["left"]["status"] == "partial"
    assert case["manifest"]["status"] == "ok"
    rows = case["rows"]
    assert sorted(zip(rows["query"], rows["status"], strict=True)) == [("q01", "ok"), ("q03", "ok")]
