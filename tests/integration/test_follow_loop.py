"""The query loop followed in one task (the run_queries role's tierlab_follow_loop), on this host through the
project's Ansible configuration: a real background job writes the progress log as the host agent's loop does."""

import json
import os
import subprocess

from lab import ANSIBLE_ENV, ROOT, TIERLAB, command, count_playbook

from tiny_run import HEADER, line, read

PLUGINS = ROOT / "playbooks" / "roles" / "run_queries" / "action_plugins"
PLAYBOOK = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: "{{{{ ansible_playbook_python }}}}"
  tasks:
    - name: A loop that writes its progress log
      ansible.builtin.shell: {script}
      async: 60
      poll: 0
      register: job
    - name: Follow it
      tierlab_follow_loop:
        path: {log}
        pending: [q01_try1, q03_try1]
        jid: "{{{{ job.ansible_job_id }}}}"
        try_timeout_s: {timeout_s}
{analyze}"""


def follow(tmp_path, lines: list[str], timeout_s: int = 60, end: str = "", analyze: dict | None = None) -> str:
    """The playbook's output and warnings where the job writes lines to the log, 1 s apart, then does `end`."""
    log = tmp_path / "run.log"
    writes = "; ".join(f"sleep 1; echo {line!r} >> {log}" for line in lines)
    (tmp_path / "follow.yml").write_text(PLAYBOOK.format(
        script=repr(f"{writes}; {end or 'true'}"), log=log, timeout_s=timeout_s,
        analyze=f"        analyze: {json.dumps(analyze)}\n" if analyze else ""))
    env = {**os.environ, **ANSIBLE_ENV, "ANSIBLE_ACTION_PLUGINS": str(PLUGINS),
           "ANSIBLE_REMOTE_TMP": str(tmp_path / "remote-tmp"), "ANSIBLE_ASYNC_DIR": str(tmp_path / "async")}
    done = command([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "follow.yml")],
                   "the follow playbook", 180, cwd=ROOT, env=env)
    count_playbook("follow.yml", done.stdout)
    return done.stdout + done.stderr


def test_each_try_is_said_as_it_ends_and_the_task_ends_with_the_loop_s_done(tmp_path):
    out = follow(tmp_path, ["q01_try1 ok 0.512", "cut a row torn in its write", "q03_try1 error 1.250", "done"])
    assert "localhost: q01_try1 (1 of 2): ok in 0.51 s; about " in out, out
    assert "localhost: cut a row torn in its write" in out, out
    assert "localhost: q03_try1 (2 of 2): error in 1.25 s; about 0 s left" in out, out
    assert "failed=0" in out, out
    # the job's record on the host is gone with it
    assert list((tmp_path / "async").iterdir()) == []


def test_the_loop_s_own_failure_fails_the_task_with_its_reason(tmp_path):
    out = follow(tmp_path, ["q01_try1 ok 0.512", "failed: the server did not start"])
    assert "the query loop stopped: the server did not start" in out, out
    assert "failed=1" in out, out


def test_a_loop_whose_job_ended_without_done_fails_with_what_the_job_said(tmp_path):
    out = follow(tmp_path, ["q01_try1 ok 0.512"], end="echo 'killed by the OOM killer' >&2; exit 137")
    assert "the query loop ended without saying it was done (1 of 2 tries ended; rc 137): killed by the OOM killer" \
        in out, out


def test_a_loop_that_says_nothing_for_longer_than_a_try_may_take_is_called_hung(tmp_path):
    # the job outlasts the 3 s a try may take, and ends soon after
    out = follow(tmp_path, ["q01_try1 ok 0.512"], timeout_s=3, end="sleep 6")
    assert "no query try ended in 3 s (1 of 2 ended;" in out, out


def ftrace_window(label: str, start_s: float) -> str:
    """A raw-text ftrace window of two 16 KiB reads on device 7:1, between the query loop's markers."""
    return (HEADER + line(start_s, f"tracing_mark_write: tierlab start {label}") + read(start_s + 0.1, 0)
            + read(start_s + 0.2, 32) + line(start_s + 0.3, f"tracing_mark_write: tierlab end {label}"))


def a_run_going_on(tmp_path):
    """The host's run directory with q01_try1 traced and q03_try1 untraced, and the run's results directory as the
    playbook has made it by the time the queries run: the host's and the results' paths."""
    host, results = tmp_path / "host", tmp_path / "results" / "20261129T100000Z_mariadb_tpch-sf0.1_None"
    (host / "raw" / "traces").mkdir(parents=True)
    (results / "config").mkdir(parents=True)
    (results / "raw").mkdir()
    row = {"status": "ok", "error": "", "elapsed_s": 1.0, "rows": 1, "cache": "cold",
           "started_at": "2026-11-29T10:00:01Z", "events_lost": 0}
    (host / "raw" / "queries.jsonl").write_text(
        json.dumps({"query": "q01", "try": 1, **row, "trace_files": ["q01_try1.ftrace"]}) + "\n"
        + json.dumps({"query": "q03", "try": 1, **row, "trace_files": []}) + "\n")
    (host / "raw" / "traces" / "q01_try1.ftrace").write_text(ftrace_window("q01_try1", 1.0))
    (host / "raw" / "extents.json").write_text(json.dumps({"files": [
        {"object": "lineitem", "kind": "table", "table": "lineitem", "path": "/t/lineitem.ibd", "device": "7:1",
         "offset_bytes": 0, "extents": [[0, 0, 1 << 20]]}]}))
    (results / "manifest.json").write_text(json.dumps({"schema_version": 3, "run_id": results.name}))
    (results / "config" / "run.json").write_text(json.dumps({
        "run_id": results.name, "started_at": "2026-11-29T10:00:00Z", "host": "localhost", "versions": {},
        "tiers": [], "settings": {"engine": "mariadb", "workload": "tpch", "scale_factor": 0.1,
                                  "queries": ["q01", "q03"], "tries": 1, "cold": True, "query_timeout_s": 60,
                                  "layout": "None", "page_size_bytes": 16384, "placement": {"lineitem": "capacity"}}}))
    (results / "raw" / "tiers.json").write_text(json.dumps([{"name": "nand", "role": "capacity", "device": "7:1"}]))
    return host, results


def test_each_traced_try_is_fetched_into_the_results_and_summed_up_while_the_loop_goes_on(tmp_path):
    host, results = a_run_going_on(tmp_path)
    out = follow(tmp_path, ["q01_try1 ok 1.000", "q03_try1 ok 1.000", "done"], analyze={
        "argv": [TIERLAB, "analyze", str(results), "--follow"], "results_dir": str(results), "host_dir": str(host)})
    assert "failed=0" in out, out
    assert "not analysed during the run" not in out and "is left to the analysis" not in out, out
    # the traced try's files are the host's, in the results; the untraced one has none to sum up
    assert (results / "raw" / "traces" / "q01_try1.ftrace").read_text() == ftrace_window("q01_try1", 1.0)
    assert sorted(p.name for p in (results / "tables" / "windows").iterdir()) == ["q01_try1.json", "q01_try1.parquet"]
    analysed = subprocess.run([TIERLAB, "analyze", str(results)], capture_output=True, text=True, timeout=120)
    assert analysed.returncode == 0, analysed.stderr
    assert "[1/1] reading q01_try1 (analysed during the run)" in analysed.stderr


def test_an_analysis_that_cannot_follow_the_run_is_warned_of_and_the_loop_still_followed_to_its_end(tmp_path):
    host, results = a_run_going_on(tmp_path)
    (results / "manifest.json").unlink()
    out = follow(tmp_path, ["q01_try1 ok 1.000", "q03_try1 ok 1.000", "done"], analyze={
        "argv": [TIERLAB, "analyze", str(results), "--follow"], "results_dir": str(results), "host_dir": str(host)})
    assert "localhost: q03_try1 (2 of 2): ok in 1.00 s" in out, out
    assert "failed=0" in out, out
    # the analysis ended at its start, before or after q01_try1 was handed to it
    assert f"[WARNING]: tierlab analyze: {results / 'manifest.json'} is missing" in out, out
