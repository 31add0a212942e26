"""tierlab_follow_loop: follows the host's query loop through its raw/run.log and says each try as it ends, in one
task for the whole loop. A task per try forked a controller worker and ran a module on the host while the next
query ran; here each poll is a `tail` of the lines not yet seen.

Arguments: path (the host's run.log), pending (the labels of the tries the loop runs), jid (the loop's async job),
try_timeout_s (how long a try may take before the loop counts as hung). Ends when the loop's job has ended after
its `done`, with the job's record on the host removed (Ansible's async_status keeps one file per job there until
asked to clean it up). Fails with the loop's own `failed: WHY`; when the loop's job ended without `done` (killed,
or refused before its loop began), or failed after it, with what the job said; and when no try ends in
try_timeout_s."""

import re
import shlex
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()

TRY_LINE = re.compile(r"^(?P<label>\S+) (?P<status>\S+) (?P<elapsed_s>\d+\.\d+)$")
FAILED = "failed: "
DONE = "done"
POLL_S = 1.0
# after a line the log is read again FIRST_POLL_S later, then at twice the wait each time up to POLL_S: a tiny run's
# tries end within a second of each other and its `done` just after the last, which a poll a second would see half
# a second late, and the loop's job ends just after its `done`
FIRST_POLL_S = 0.05
# a loop quiet for this long is asked whether its job still runs: a module run on the host, so not every poll
# (once every 10 s beside a long query, against four tasks per try before), yet a dead loop is told within 10 s
JOB_CHECK_S = 10.0
# the loop's process ends within this long of its last line (its clean-up: the tracing instance, the emulated cache)
JOB_END_S = 120.0


def _longer(wait: float) -> float:
    """The wait after a poll that found nothing new."""
    return min(POLL_S, 2 * wait)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "pending", "jid", "try_timeout_s"))

    def _new_lines(self, path: str, seen: int) -> list[str]:
        """The whole lines of path after its first `seen` (a line still being written waits for the next poll)."""
        done = self._low_level_execute_command(f"tail -n +{seen + 1} {shlex.quote(path)} 2>/dev/null", sudoable=False)
        text = done.get("stdout", "")
        return text.split("\n")[:-1]

    def _async_status(self, jid: str, task_vars: dict, mode: str) -> dict:
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args={"jid": jid, "mode": mode, "_async_dir": async_dir})

    def _job_ended(self, jid: str, task_vars: dict) -> dict | None:
        """The loop's async job's result once it has ended, else None (as async_status finds it); an ended job's
        record is removed."""
        job = self._async_status(jid, task_vars, "status")
        if not job.get("finished"):
            return None
        self._async_status(jid, task_vars, "cleanup")
        return job

    def _ended_soon(self, jid: str, task_vars: dict) -> dict | None:
        """The job's result (its record removed) once it has ended, within JOB_END_S: the loop says done, or
        failed, just before its process exits; None if it has not ended by then."""
        waited, wait = time.monotonic(), FIRST_POLL_S
        while (job := self._job_ended(jid, task_vars)) is None and time.monotonic() - waited < JOB_END_S:
            time.sleep(wait)
            wait = _longer(wait)
        return job

    def _said(self, job: dict) -> str:
        return " ".join(str(job.get("stderr") or job.get("msg") or "").split())[-2000:] or "it said nothing"

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        path, jid = self._task.args["path"], self._task.args["jid"]
        pending = list(self._task.args["pending"])
        try_timeout_s = float(self._task.args["try_timeout_s"])
        host = task_vars.get("inventory_hostname", "")
        started = last_end = last_line = last_check = time.monotonic()
        seen, ended, job, wait = 0, 0, None, FIRST_POLL_S
        while True:
            lines = self._new_lines(path, seen)
            seen += len(lines)
            now = time.monotonic()
            wait = FIRST_POLL_S if lines else _longer(wait)
            if lines:
                last_line = now
            for line in lines:
                if line == DONE:
                    job = self._ended_soon(jid, task_vars)
                    if job is None:
                        raise AnsibleActionFail(f"the query loop said it was done but its process had not ended "
                                                f"{JOB_END_S:.0f} s later")
                    if job.get("failed") or job.get("rc"):
                        raise AnsibleActionFail(f"the query loop said it was done, then failed (rc {job.get('rc')}): "
                                                f"{self._said(job)}")
                    result.update(changed=False, tries=ended, wall_s=round(time.monotonic() - started, 3))
                    return result
                if line.startswith(FAILED):
                    self._ended_soon(jid, task_vars)
                    raise AnsibleActionFail(f"the query loop stopped: {line.removeprefix(FAILED)}")
                found = TRY_LINE.match(line)
                if not found or found["label"] not in pending:
                    display.display(f"{host}: {line}")
                    continue
                ended += 1
                last_end = now
                display.display(
                    f"{host}: {found['label']} ({ended} of {len(pending)}): {found['status']} in "
                    f"{float(found['elapsed_s']):.2f} s; about {round((now - started) / ended * (len(pending) - ended))} "
                    "s left (from the wall time of the tries so far)")
            if job is not None:
                raise AnsibleActionFail(f"the query loop ended without saying it was done ({ended} of {len(pending)} "
                                        f"tries ended; rc {job.get('rc')}): {self._said(job)}")
            if now - last_end > try_timeout_s:
                raise AnsibleActionFail(f"no query try ended in {try_timeout_s:.0f} s ({ended} of {len(pending)} "
                                        f"ended; {path} says no more): the query loop hangs")
            if now - last_line > JOB_CHECK_S and now - last_check > JOB_CHECK_S:
                last_check = now
                # read run.log once more after the job's end: its last lines were written before it ended
                job = self._job_ended(jid, task_vars)
                if job is not None:
                    continue
            time.sleep(wait)
