"""make soak: a study of 30 points at TPC-H's tiny scale factor under its own root, with faults injected at random
moments (the database server killed, an emulator killed, Ctrl-C to the study, the fast tier filled up), resumed
until every point is ok. Then: each point with a run directory of its own and none lost, and the host left as
the root's record says (nothing once torn down). Prints its figures."""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT_DIR = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT_DIR / "tests" / "integration"))
from lab import ANSIBLE_ENV, FILLER, PLAYBOOK_TIMEOUT_S, TIERLAB, fast_tier, fill_up, remove_torn_down_root  # noqa: E402

ROOT = "/var/lib/tierlab-soak"
SETTINGS = {"tierlab_root": ROOT, "mysql_port_base": {"mariadb": 4100, "mysql": 4200}, "postgresql_port": 5519}
STUDY = """name: soak
workload: tpch
variables: {scale_factor: 0.01, queries: "1,3"}
matrix:
  layout: [None, C+O, L, ALL, O, C]
  buffer_pool: [8M, 16M, 32M, 64M, 128M]
"""
FAULTS = ("server", "emulator", "ctrl-c", "full tier")
# faults stop after this many, so that the study ends; each lands 20-120 s after the one before it (or after the
# start of the study's process that a Ctrl-C ended)
MAX_FAULTS = 8
MAX_RESUMES = 20


def record() -> list[dict]:
    return json.loads(Path(ROOT, "state", "created.json").read_text())


def inject(fault: str, study: subprocess.Popen) -> bool:
    """The fault, on what the root's record holds now; False when there was nothing to inject it into."""
    if fault == "ctrl-c":
        os.killpg(study.pid, signal.SIGINT)
        return True
    if fault == "full tier":
        return fill_up(fast_tier(ROOT), 1 << 20).returncode == 0
    kind, match = ("process", "mariadb") if fault == "server" else ("emulator", "")
    found = [e for e in record() if e["kind"] == kind and match in e.get("instance", "")]
    if not found:
        return False
    try:
        os.kill(random.choice(found)["pid"], signal.SIGKILL)
    except ProcessLookupError:
        return False
    return True


def next_fault(rng: random.Random, injected: list) -> tuple[str | None, float]:
    """The next fault and when it lands (20-120 s from now), while fewer than MAX_FAULTS were injected."""
    if len(injected) >= MAX_FAULTS:
        return None, 0.0
    return rng.choice(FAULTS), time.monotonic() + rng.uniform(20, 120)


def playbook(name: str, **extra) -> None:
    done = subprocess.run([str(ROOT_DIR / ".venv/bin/ansible-playbook"), f"playbooks/{name}", "-e",
                           json.dumps({**SETTINGS, **extra})], cwd=ROOT_DIR, capture_output=True, text=True,
                          env={**os.environ, **ANSIBLE_ENV}, timeout=PLAYBOOK_TIMEOUT_S)
    if done.returncode != 0:
        sys.exit(f"playbooks/{name} failed:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}")


def main() -> None:
    rng = random.Random(int(os.environ.get("SOAK_SEED", "20261127")))
    results = Path(os.environ.get("SOAK_RESULTS", ROOT_DIR / "results")).resolve()
    spec = results / "soak-study.yml"
    results.mkdir(parents=True, exist_ok=True)
    spec.write_text(STUDY)
    started = time.monotonic()
    injected: list[tuple[float, str]] = []
    resumes, study_dir = 0, None
    while True:
        args = ["--resume", str(study_dir)] if study_dir else [str(spec), "--results-dir", str(results)]
        study = subprocess.Popen([TIERLAB, "study", *args, "--extra-vars", json.dumps(SETTINGS)], cwd=ROOT_DIR,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        emulator_killed = False
        fault, at = next_fault(rng, injected)
        for line in study.stdout:
            print(line, end="", flush=True)
            if study_dir is None and line.startswith("study "):
                study_dir = (ROOT_DIR / line.split()[1]).resolve()
            if fault and time.monotonic() > at and Path(ROOT, "tiers.json").exists() and inject(fault, study):
                injected.append((round(time.monotonic() - started), fault))
                print(f"soak: injected {fault}", flush=True)
                emulator_killed = emulator_killed or fault == "emulator"
                # the study goes on after any fault but Ctrl-C, and the next may land in it
                fault, at = next_fault(rng, injected) if fault != "ctrl-c" else (None, 0.0)
        study.wait(timeout=PLAYBOOK_TIMEOUT_S)
        (fast_tier(ROOT) / FILLER).unlink(missing_ok=True)
        points = json.loads((study_dir / "study.json").read_text())["points"]
        if len(points) == 30 and all(p["status"] == "ok" for p in points):
            break
        if resumes == MAX_RESUMES:
            sys.exit(f"soak: not done after {resumes} resumes")
        if emulator_killed:
            # a dead emulator's tiers are torn down before they can come up again (the data cache is kept)
            playbook("teardown.yml")
        resumes += 1
    wall_s = time.monotonic() - started
    runs = [p["run_id"] for p in points]
    assert len(set(runs)) == len(runs), "two points share a run"
    assert all((study_dir / run / "manifest.json").exists() for run in runs), "a point's run directory is lost"
    playbook("teardown.yml", purge=True)
    remove_torn_down_root(ROOT)
    print(f"soak: {len(points)} points, all ok; faults injected: {len(injected)} "
          f"({', '.join(f'{fault} at {at} s' for at, fault in injected)}); resumes: {resumes}; wall time {wall_s:.0f} s")


if __name__ == "__main__":
    main()
