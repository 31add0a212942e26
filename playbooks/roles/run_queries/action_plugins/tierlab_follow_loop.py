"""tierlab_follow_loop: follows the host's query loop through its raw/run.log and says each try as it ends, in one
task for the whole loop. A task per try forked a controller worker and ran a module on the host while the next
query ran; here each poll is a `tail` of the lines not yet seen.

Arguments: path (the host's run.log), pending (the labels of the tries the loop runs), jid (the loop's async job),
try_timeout_s (how long a try may take before the loop counts as hung), and analyze (optional: argv, results_dir,
host_dir), the controller's `tierlab analyze --follow` that sums up each traced try's window while the next query
runs: as a try ends its row and trace files are fetched from the host's run directory into the run's results
directory and its label handed to that command, which the task waits for after the loop's `done` (the last
window's analysis). Ends when the loop's job has ended after
its `done`, with the job's record on the host removed (Ansible's async_status keeps one file per job there until
asked to clean it up). Fails with the loop's own `failed: WHY`; when the loop's job ended without `done` (killed,
or refused before its loop began), or failed after it, with what the job said; and when no try ends in
try_timeout_s."""

import json
import re
import shlex
import subprocess
import time
from pathlib import Path

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


# the window analysis' process is given this long to end after the loop's `done` (it sums up the last window)
ANALYSIS_END_S = 600.0


class _WindowAnalysis:
    """The controller's `tierlab analyze --follow` beside the query loop, fed a traced try at a time."""

    def __init__(self, action: ActionBase, argv: list[str], results_dir: str, host_dir: str):
        self.action, self.results, self.host = action, Path(results_dir), host_dir
        (self.results / "raw" / "traces").mkdir(parents=True, exist_ok=True)
        self.fetched_extents = False
        # why the windows stopped being handed on: the analysis after the last query reads the rest from their traces
        self.broken = ""
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)

    def _fetch(self, name: str) -> None:
        self.action._connection.fetch_file(f"{self.host}/raw/{name}", str(self.results / "raw" / name))

    def ended(self, label: str) -> None:
        """A try has ended: its window handed on, unless an earlier one could not be (the run goes on either way)."""
        if self.broken:
            return
        try:
            self._hand_on(label)
        except Exception as error:  # the run's measurements do not depend on it: said at the end
            self.broken = f"{label} and the windows after it were not analysed during the run: {error}"

    def _hand_on(self, label: str) -> None:
        """The try's trace files (none for an untraced try) fetched, its label handed to the analysis."""
        self._fetch("queries.jsonl")
        rows = [json.loads(line) for line in (self.results / "raw" / "queries.jsonl").read_text().splitlines()
                if line.strip()]
        names = next((row.get("trace_files") or [] for row in reversed(rows)
                      if f"{row['query']}_try{row['try']}" == label), [])
        if not names:
            return
        if not self.fetched_extents:
            self._fetch("extents.json")
            self.fetched_extents = True
        for name in names:
            self._fetch(f"traces/{name}")
        self.process.stdin.write(label + "\n")
        self.process.stdin.flush()

    def finish(self) -> str:
        """Wait for the last window's analysis; what the analysis warned of, and why windows were not handed on."""
        try:
            _, said = self.process.communicate(timeout=ANALYSIS_END_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            _, said = self.process.communicate()
            said += f"\nthe analysis of the windows did not end within {ANALYSIS_END_S:.0f} s of the loop's end"
        return "\n".join(text for text in (said.strip(), self.broken) if text)

    def stop(self) -> None:
        """The loop failed: the analysis is ended (what it kept stays for the analysis of the whole run)."""
        self.process.kill()
        self.process.communicate()


def _longer(wait: float) -> float:
    """The wait after a poll that found nothing new."""
    return min(POLL_S, 2 * wait)


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "pending", "jid", "try_timeout_s", "analyze"))

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
        analyze = self._task.args.get("analyze")
        analysis = _WindowAnalysis(self, **analyze) if analyze else None
        try:
            result.update(self._follow(task_vars, analysis))
        except BaseException:
            if analysis:
                analysis.stop()
            raise
        if analysis:
            done = time.monotonic()
            said = analysis.finish()
            # how long the play waited after the loop's end for the last window's analysis
            result["analysis_wait_s"] = round(time.monotonic() - done, 3)
            if said:
                display.warning(said)
        return result

    def _follow(self, task_vars: dict, analysis: _WindowAnalysis | None) -> dict:
        """Follow the loop to its `done`: the tries that ended and the wall time, or the failure raised."""
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
                    return {"changed": False, "tries": ended, "wall_s": round(time.monotonic() - started, 3)}
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
                if analysis:
                    analysis.ended(found["label"])
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
