"""A study of many runs (`tierlab study`): one workload over a matrix of variables, each point a run
directory of results/<study_id>/, the points run one after the other by the workload's playbook and
recorded in results/<study_id>/study.json as they end, so that a study stopped half-way resumes point
by point. The study file (YAML):

    name: e5-plans                    # the study's name: letters, digits, . _ -
    workload: ssb                     # tpch, ssb or sysbench: playbooks/<workload>.yml
    variables:                        # the same in every run (the run variables, docs/variables.md)
      engine: postgresql
      queries: 1.1,3.4
    matrix:                           # every combination of these, the last varying fastest
      layout: [None, ALL]
      join_plan: [optimizer, hash, index]
    repetitions: 1                    # runs of each point

Every point's variables are checked, as the playbook checks them, before the first run starts. A point
whose run fails goes on record and the study goes on, unless it failed before its run opened (the root,
the tiers, the engine), which the next points would too. An interrupt (Ctrl-C) lets the point that runs finish, then
stops: the playbook runs in a session of its own, so that the signal does not cut a run in half.

With several hosts in the inventory the points are spread over them: each host runs one point at a time
(its playbook limited to it), taking the next point not yet taken, and its runs land in the same study
directory on the controller. A failed point is resumed on the host that ran it. A run whose tries did not all
end without an error (a server that died under a query, a client that failed) leaves its point failed: the resume
runs those tries again (retry_failed), the failed rows kept.

A resume can run points again that have an ok run (`--again`, when something that run measured was wrong): the new
run takes the point's place in study.json and the earlier one, which stays in the directory, goes into the point's
`superseded` list, so that what reads the study reads the new run and the record keeps that there was another.

A study can run some of its points only (`--points`): a study spread over sessions or machines, whose other points
ran in a directory no longer at hand and are published (`tierlab findings` carries them from docs/findings/), or
are left for a later --resume.
"""

import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd
import yaml

from ..catalog.variables import BY_NAME, RUN_VARIABLES
from ..catalog.workloads import WORKLOAD_DIR, WORKLOADS, playbook
from ..checkout import PROJECT, require_checkout
from ..errors import InputError, RunDirError
from ..files import replace_text
from ..runs.inventory import ANSIBLE_ENV, ANSIBLE_PLAYBOOK, inventory_hosts
from ..runs.manifest import query_rows, read_run_config
from ..runs.settings import default_text, validate

STUDY_KEYS = ("name", "workload", "variables", "matrix", "repetitions")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SCHEMA_VERSION = 1
# the playbook's line for each query try as it ends (`HOST: q03_try1 (2 of 22): ok in ...`, the run_queries role's
# tierlab_follow_loop), which the study passes on as it comes
PROGRESS_LINE = re.compile(r"^\S+: (\S+ \(\d+ of \d+\): .*)$")


def _scalar(where: str, value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if not isinstance(value, str | int | float) or isinstance(value, float) and value != value:
        raise InputError(f"{where}: {value!r} is not a single value (a string or a number)")
    return str(value)


def read_study(path: str | Path, overrides: dict[str, str] | None = None, repetitions: int | None = None) -> dict:
    """The study file, checked (see checked_study); with overrides, its variables given other values (a smaller
    scale factor, say) and with repetitions its repetitions, checked as the file's own."""
    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
    except OSError as error:
        raise InputError(f"{path}: cannot read the study file ({error.strerror})") from None
    except yaml.YAMLError as error:
        raise InputError(f"{path} is not valid YAML ({error})") from None
    if isinstance(spec, dict) and (overrides or repetitions is not None):
        varied = sorted(set(overrides or {}) & set(spec.get("matrix") or {}))
        if varied:
            raise InputError(f"--set {', '.join(varied)}: the study's matrix varies it; --set gives a variable one "
                             "value in every run")
        spec = {**spec, "variables": {**(spec.get("variables") or {}), **(overrides or {})}}
        if repetitions is not None:
            spec["repetitions"] = repetitions
    return checked_study(spec, path)


def read_study_record(study_dir: Path) -> dict:
    """A study's study.json, its study checked again (the variables' rules may have changed since)."""
    path = study_dir / "study.json"
    try:
        record = json.loads(path.read_text())
    except OSError as error:
        raise RunDirError(f"{path}: cannot read it ({error.strerror}); give a study directory, "
                          "results/<study_id>") from None
    except ValueError as error:
        raise RunDirError(f"{path} is not valid JSON ({error}); it was damaged after the study wrote it") from None
    if record.get("schema_version") != SCHEMA_VERSION:
        raise RunDirError(f"{path}: study schema_version {record.get('schema_version')!r} is not one this tierlab "
                          f"reads (it reads {SCHEMA_VERSION})")
    checked_study(record["study"], path)
    return record


def checked_study(spec, path: Path) -> dict:
    """A study from its file's mapping: its keys, its variables' names, and every point's values checked
    as the playbook checks them."""
    if not isinstance(spec, dict):
        raise InputError(f"{path}: a study file is a mapping with {', '.join(STUDY_KEYS)}")
    unknown = sorted(set(spec) - set(STUDY_KEYS))
    if unknown:
        raise InputError(f"{path}: unknown key(s) {', '.join(unknown)}; a study file has {', '.join(STUDY_KEYS)}")
    name = str(spec.get("name", ""))
    if not NAME.fullmatch(name):
        raise InputError(f"{path}: name {name!r} is not allowed; allowed: letters, digits, '.', '_' and '-', "
                              "starting with a letter or digit, at most 64")
    workload = spec.get("workload")
    if workload not in (*WORKLOADS, WORKLOAD_DIR):
        raise InputError(f"{path}: workload {workload!r} is not allowed; allowed: {', '.join(WORKLOADS)}, "
                         f"{WORKLOAD_DIR} (with variables: workload_dir: /path/to/it)")
    variables, matrix = spec.get("variables") or {}, spec.get("matrix") or {}
    if not isinstance(variables, dict) or not isinstance(matrix, dict):
        raise InputError(f"{path}: variables and matrix are mappings of variable names")
    for variable in [*variables, *matrix]:
        if variable not in RUN_VARIABLES:
            raise InputError(f"{path}: {variable!r} is not a run variable; the run variables are "
                                  f"{', '.join(RUN_VARIABLES)}")
    both = sorted(set(variables) & set(matrix))
    if both:
        raise InputError(f"{path}: {', '.join(both)} in both variables and matrix; give each in one of them")
    for variable, values in matrix.items():
        if not isinstance(values, list) or not values:
            raise InputError(f"{path}: matrix {variable}: give a list of one or more values, e.g. [None, ALL]")
    repetitions = spec.get("repetitions", 1)
    if not isinstance(repetitions, int) or isinstance(repetitions, bool) or not 1 <= repetitions <= 100:
        raise InputError(f"{path}: repetitions {repetitions!r} is not allowed; allowed: a whole number from 1 to 100")
    study = {"name": name, "workload": workload,
             "variables": {k: _scalar(f"{path}: variables {k}", v) for k, v in variables.items()},
             "matrix": {k: [_scalar(f"{path}: matrix {k}", v) for v in values] for k, values in matrix.items()},
             "repetitions": repetitions}
    for point in points(study):
        try:
            validate({**point["variables"], "workload": workload})
        except InputError as error:
            where = " ".join(f"{k}={v}" for k, v in point["variables"].items() if k in matrix)
            raise InputError(f"{path}: point {point['point']} ({where}): {error}") from None
    return study


def points(study: dict) -> list[dict]:
    """Every point of the matrix, each repetition apart: number (from 1), repetition, variables."""
    names = list(study["matrix"])
    combinations = list(itertools.product(*study["matrix"].values())) or [()]
    return [{"point": number, "repetition": repetition,
             "variables": {**study["variables"], **dict(zip(names, values, strict=True))}}
            for number, (values, repetition) in enumerate(
                ((values, r) for values in combinations for r in range(1, study["repetitions"] + 1)), 1)]


def _write(study_dir: Path, record: dict) -> None:
    """study.json, replaced whole (a reader never sees half of it)."""
    replace_text(study_dir / "study.json", json.dumps(record, indent=1) + "\n")


def _run_dirs(study_dir: Path, host: str) -> set[str]:
    """The runs in study_dir that host ran (each run's config/run.json says which host)."""
    found = set()
    for run_dir in study_dir.iterdir():
        try:
            config = read_run_config(run_dir) if run_dir.is_dir() else None
        except RunDirError:
            continue
        if config is not None and config.get("host", {}).get("name") == host:
            found.add(run_dir.name)
    return found


def _run_outcome(run_dir: Path) -> tuple[str, str | None]:
    """The run's status and error, as its manifest says; a run that ended with tries whose client or server failed
    (error rows, which a resume with retry_failed runs again) lacks those, so its point is failed too. A timed-out
    try is a measurement (the query ran past its limit), not a failure."""
    try:
        manifest = json.loads((run_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return "unknown", None
    status = manifest.get("status", "unknown")
    tries = manifest.get("queries") or {}
    by_status = tries.get("by_status", {})
    lacking = tries.get("expected_tries", 0) - (sum(by_status.values()) - by_status.get("error", 0))
    if status == "ok" and lacking > 0:
        failed = [f"{row['query']}_try{row['try']}" for row in query_rows(run_dir) if row["status"] == "error"]
        return "failed", (f"{lacking} of {tries['expected_tries']} tries failed, with no try in their place "
                          f"({', '.join(failed)}: tables/queries.csv says why); --resume runs them again")
    return status, manifest.get("error") or None


def _label(point: dict, study: dict) -> str:
    varied = " ".join(f"{k}={point['variables'][k]}" for k in study["matrix"])
    return (varied or "the only point") + (f" (repetition {point['repetition']})" if study["repetitions"] > 1 else "")


def run_point(study: dict, point: dict, study_dir: Path, host: str, inventory: Path | None, resume_run: str | None,
              extra: dict, say) -> dict:
    """One point's run by its playbook on host; what study.json records of it."""
    log = study_dir / "logs" / f"point-{point['point']:03d}.log"
    log.parent.mkdir(exist_ok=True)
    variables = {**extra, **point["variables"], "results_dir": str(study_dir)}
    if resume_run:
        # and its failed tries run again: a point is done when each of its tries has a run that did not fail
        variables.update(resume=resume_run, retry_failed=True)
    before = _run_dirs(study_dir, host)
    started = time.monotonic()
    command = [str(ANSIBLE_PLAYBOOK), playbook(study["workload"]), *(["-i", str(inventory)] if inventory else []),
               "--limit", host, "-e", json.dumps(variables)]
    with open(log, "a") as sink:
        sink.write(f"$ {' '.join(command)}\n")
        sink.flush()
        child = subprocess.Popen(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 start_new_session=True, env={**os.environ, **ANSIBLE_ENV})
        # this attempt's failures: the log holds the point's earlier attempts too
        fatal, errors = [], []
        for line in child.stdout:
            sink.write(line)
            if (shown := PROGRESS_LINE.match(line)) is not None:
                say(f"    {shown[1]}")
            if "fatal:" in line:
                fatal.append(line.strip())
            elif line.startswith("[ERROR]:"):
                errors.append(line.strip())
        returncode = child.wait()
    new = sorted(_run_dirs(study_dir, host) - before)
    run_id = resume_run or (new[0] if len(new) == 1 else None)
    status, error = _run_outcome(study_dir / run_id) if run_id else ("failed", None)
    if returncode != 0 and status == "ok":
        status = "failed"
    if status != "ok" and not error:
        error = (fatal or errors or [f"ansible-playbook exited with {returncode}"])[-1]
    if error:
        error += f" (log: {log})"
    return {**point, "host": host, "run_id": run_id, "status": status, "error": error,
            "seconds": round(time.monotonic() - started, 1)}


def _open_record(study: dict, study_dir: Path, extra: dict) -> dict:
    """The study's record in study_dir: the one there, refused if it is another study's or was started with other
    host variables (extra), else a new one."""
    record_file = study_dir / "study.json"
    if not record_file.exists():
        return {"schema_version": SCHEMA_VERSION, "study_id": study_dir.name, "study": study, "extra_vars": extra,
                "started_at": datetime.now(UTC).isoformat(timespec="seconds"), "points": []}
    record = json.loads(record_file.read_text())
    # the matrix's order too: it numbers the points
    if record["study"] != study or list(record["study"]["matrix"]) != list(study["matrix"]):
        raise InputError(f"{study_dir} holds another study (its study.json differs from the study file); "
                         "resume it with the study file it was started with, or start a new study")
    # a study.json written before studies kept their host variables takes those given now
    started_with = record.setdefault("extra_vars", extra)
    if extra and extra != started_with:
        raise InputError(f"--extra-vars {json.dumps(extra)}: {study_dir} was started with "
                         + (f"--extra-vars {json.dumps(started_with)}" if started_with else "none")
                         + ", and its points run with the host variables it started with (another "
                           "tiers_dilation would make its runs incomparable); give those, or none")
    return record


def run_study(study: dict, study_dir: Path, extra: dict, out=sys.stdout, inventory: Path | None = None,
              stop_after: float | None = None, again: frozenset[int] = frozenset(), only: frozenset[int] | None = None) -> dict:
    """Run every point of the study (of those in only, if given) that has no ok run yet in study_dir, and the points
    numbered in again anew, on the inventory's hosts, a point at a time on each, recording each as it ends; an
    interrupt stops the study once the points that run have ended, and so does stop_after seconds: no point starts
    after them, so a long study runs in chunks that resume. extra: the host variables of every point
    (--extra-vars), kept in study.json, so that a resume runs its points with those the study started with."""
    given = sorted(set(extra) & {*RUN_VARIABLES, "results_dir", "resume"})
    if given:
        raise InputError(f"--extra-vars {', '.join(given)}: a run variable belongs in the study file (variables or "
                              "matrix), so that study.json says what each run had; results_dir and resume are the study's")
    study_dir = study_dir.resolve()     # the playbook runs from the project, which may not be the current directory
    require_checkout("a study (it runs the playbooks)")
    if not ANSIBLE_PLAYBOOK.exists():
        raise InputError(f"{ANSIBLE_PLAYBOOK} is missing: a study runs the playbooks with the ansible installed "
                              "beside tierlab (make setup installs it)")
    inventory = inventory.resolve() if inventory else None
    hosts = inventory_hosts(inventory)
    study_dir.mkdir(parents=True, exist_ok=True)
    record = _open_record(study, study_dir, extra)
    resumed_with = record["extra_vars"] if not extra else {}
    extra = record["extra_vars"]
    done = {p["point"]: _judged(p, study_dir) for p in record["points"]}
    every = points(study)
    todo = _points_to_run(every, study_dir, done, again, only)
    unended, total = len(todo), len(every)
    lock = threading.Lock()
    spent: list[float] = []
    stop: list[int] = []
    deadline = time.monotonic() + stop_after if stop_after is not None else None

    def say(host: str, text: str) -> None:
        print((f"[{host}] " if len(hosts) > 1 else "") + text, file=out, flush=True)

    if resumed_with:
        print(f"every point with the --extra-vars the study started with: {json.dumps(resumed_with)}", file=out,
              flush=True)

    def take(host: str) -> tuple[dict | None, str | None]:
        """The next point for host, and the run of it to resume: a point's failed run is resumed on the host
        that ran it (another host of the inventory leaves it to that one), or run anew if that host is gone.
        A point recorded without its host ran when studies ran on one host: the inventory's first."""
        for point in todo:
            earlier = done.get(point["point"], {})
            # an ok run is run again anew, never resumed
            owner = earlier.get("host", hosts[0]) if earlier.get("run_id") and earlier["status"] != "ok" else None
            if owner == host or owner not in hosts:
                todo.remove(point)
                return point, earlier["run_id"] if owner == host else None
        return None, None

    def work(host: str) -> None:
        nonlocal unended
        while True:
            with lock:
                if deadline is not None and time.monotonic() >= deadline and todo and not stop:
                    stop.append(0)
                    say(host, f"--stop-after {stop_after:.0f} s has passed: no more points start; "
                              f"{unended} of {total} points are left for --resume")
                point, resume_run = (None, None) if stop else take(host)
                if point is None:
                    return
                say(host, f"point {point['point']} of {total}: {_label(point, study)}")
            result = run_point(study, point, study_dir, host, inventory, resume_run, extra, lambda text: say(host, text))
            with lock:
                done[point["point"]] = _with_earlier(result, done.get(point["point"]))
                record["points"] = [done[number] for number in sorted(done)]
                _write(study_dir, record)
                spent.append(result["seconds"])
                unended -= 1
                left = sum(spent) / len(spent) * unended / len(hosts)
                say(host, f"point {point['point']} of {total}: {result['status']} in {result['seconds']:.0f} s, run "
                          f"{result['run_id'] or '(none)'}" + (f"; about {left:.0f} s left" if unended else "")
                          + (f"\n    {result['error']}" if result["error"] else ""))
                if result["run_id"] is None:
                    say(host, "this host stops: the point failed before its run opened (its root, tiers or engine), and "
                              "the points after it would fail alike; mend the cause, then --resume")
                    return

    def interrupted(signum, frame) -> None:
        stop.append(signum)
        print("interrupted: the study stops when the points that run have ended", file=out, flush=True)

    previous = signal.signal(signal.SIGINT, interrupted)
    try:
        workers = [threading.Thread(target=work, args=(host,), name=f"study-{host}") for host in hosts]
        for worker in workers:
            worker.start()
        for worker in workers:
            # in short waits: only the main thread runs signal handlers, and a SIGINT the kernel hands to a
            # worker would otherwise wait for the main thread to wake, which a plain join does at the end
            while worker.is_alive():
                worker.join(timeout=0.2)
    finally:
        signal.signal(signal.SIGINT, previous)
    # a study resumed with nothing left to run keeps its end
    if len(record["points"]) == total and spent:
        record["ended_at"] = datetime.now(UTC).isoformat(timespec="seconds")
    _write(study_dir, record)
    return record


def _judged(point: dict, study_dir: Path) -> dict:
    """A recorded point as its run is judged now: one recorded ok before studies judged its tries is failed where
    its run has tries that failed, so that a resume runs them again."""
    if point["status"] != "ok":
        return point
    status, error = _run_outcome(study_dir / point["run_id"])
    return {**point, "status": status, "error": error} if status == "failed" else point


def _points_to_run(every: list[dict], study_dir: Path, done: dict[int, dict], again: frozenset[int],
                   only: frozenset[int] | None = None) -> list[dict]:
    """The points of every one (of those numbered in only, where given) that have no ok run in done, and those
    numbered in again."""
    for option, numbers in (("--again", again), ("--points", only or frozenset())):
        unknown = sorted(numbers - {point["point"] for point in every})
        if unknown:
            raise InputError(f"{option} {','.join(map(str, unknown))}: {study_dir} has points 1 to {len(every)}")
    return [point for point in every if (only is None or point["point"] in only)
            and (point["point"] in again or done.get(point["point"], {}).get("status") != "ok")]


def _with_earlier(result: dict, earlier: dict | None) -> dict:
    """A point's new record, which keeps the runs it superseded: the earlier ones', and the earlier run itself
    where that was ok (an ok run is run again anew with --again, never resumed)."""
    if earlier is None:
        return result
    superseded = earlier.get("superseded", [])
    if earlier["status"] == "ok":
        superseded = [*superseded, {key: value for key, value in earlier.items() if key != "superseded"}]
    return {**result, "superseded": superseded} if superseded else result


def new_study_dir(results_dir: Path, study: dict) -> Path:
    return results_dir / f"{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}_{study['name']}"


def fastest(study: dict, record: dict, side: pd.DataFrame) -> pd.DataFrame:
    """Per query (or sysbench test) and combination of the matrix's other variables, the value of its last
    variable that ran it fastest (median over repetitions), and the default value's figure beside it (did
    the engine's own choice, join_plan=optimizer say, or the default setting, win?). side: compare.csv
    (query, run, elapsed_s; and tps, by which a timed workload's tests are judged: the most is the best)."""
    compared = list(study["matrix"])[-1]
    # every run names its engine (the matrix's or the default), which is a group of its own unless it is compared
    groups = [v for v in dict.fromkeys(["engine", *study["matrix"]]) if v != compared]
    runs = pd.DataFrame([{**{k: p["variables"][k] for k in study["matrix"]}, "engine": p["variables"].get(
        "engine", BY_NAME["engine"].default), "run": p["run_id"]} for p in record["points"] if p["status"] == "ok"])
    if runs.empty:
        return pd.DataFrame()
    by_tps = "tps" in side.columns
    figure, unit = ("tps", "tps") if by_tps else ("elapsed_s", "s")
    figures = side[["query", "run", figure]].merge(runs, on="run")
    figures = figures.groupby(["query", *groups, compared], sort=False)[figure].median().reset_index()
    rows = []
    for key, group in figures.groupby(["query", *groups], sort=False):
        best = group.loc[group[figure].idxmax() if by_tps else group[figure].idxmin()]
        named = dict(zip(["query", *groups], key, strict=True))
        default = default_text(compared, named.get("engine", BY_NAME["engine"].default))
        at_default = group.loc[group[compared] == default, figure]
        default_figure = float(at_default.iloc[0]) if len(at_default) else float("nan")
        slower, faster = (default_figure, best[figure]) if not by_tps else (best[figure], default_figure)
        rows.append({**named,
                     f"fastest {compared}": best[compared], f"fastest_{unit}": best[figure],
                     f"default {compared}": default, f"default_{unit}": default_figure,
                     "default_over_fastest": slower / faster if faster > 0 else float("nan")})
    return pd.DataFrame(rows)
