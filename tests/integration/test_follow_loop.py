"""The query loop followed in one task (the run_queries role's tierlab_follow_loop), on this host through the
project's Ansible configuration: a real background job writes the progress log as the host agent's loop does."""

import os

from lab import ANSIBLE_ENV, ROOT, command

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
"""


def follow(tmp_path, lines: list[str], timeout_s: int = 60, end: str = "") -> str:
    """The playbook's output where the job writes lines to the log, 1 s apart, then does `end`."""
    log = tmp_path / "run.log"
    writes = "; ".join(f"sleep 1; echo {line!r} >> {log}" for line in lines)
    (tmp_path / "follow.yml").write_text(PLAYBOOK.format(script=repr(f"{writes}; {end or 'true'}"), log=log,
                                                         timeout_s=timeout_s))
    env = {**os.environ, **ANSIBLE_ENV, "ANSIBLE_ACTION_PLUGINS": str(PLUGINS),
           "ANSIBLE_REMOTE_TMP": str(tmp_path / "remote-tmp"), "ANSIBLE_ASYNC_DIR": str(tmp_path / "async")}
    done = command([str(ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", "localhost,", str(tmp_path / "follow.yml")],
                   "the follow playbook", 180, cwd=ROOT, env=env)
    return done.stdout


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
