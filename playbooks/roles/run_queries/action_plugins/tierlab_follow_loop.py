"""tierlab_follow_loop: follows the host's query loop through its raw/run.log and says each try as it ends, in one
task for the whole loop. A task per try forked a controller worker and ran a module on the host while the next
query ran; here each poll is a `tail` of the lines not yet seen.

Arguments: path (the host's run.log), pending (the labels of the tries the loop runs), try_timeout_s (how long a
try may take before the loop counts as hung). Fails with the loop's own `failed: WHY`, or when no try ends in
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


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("path", "pending", "try_timeout_s"))

    def _new_lines(self, path: str, seen: int) -> list[str]:
        """The whole lines of path after its first `seen` (a line still being written waits for the next poll)."""
        done = self._low_level_execute_command(f"tail -n +{seen + 1} {shlex.quote(path)} 2>/dev/null", sudoable=False)
        text = done.get("stdout", "")
        return text[:text.rfind("\n") + 1].splitlines()

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        path = self._task.args["path"]
        pending = list(self._task.args["pending"])
        try_timeout_s = float(self._task.args["try_timeout_s"])
        host = task_vars.get("inventory_hostname", "")
        started = last_end = time.monotonic()
        seen, ended = 0, 0
        while True:
            lines = self._new_lines(path, seen)
            seen += len(lines)
            for line in lines:
                if line == DONE:
                    result.update(changed=False, tries=ended, wall_s=round(time.monotonic() - started, 3))
                    return result
                if line.startswith(FAILED):
                    raise AnsibleActionFail(f"the query loop stopped: {line.removeprefix(FAILED)}")
                found = TRY_LINE.match(line)
                if not found or found["label"] not in pending:
                    display.display(f"{host}: {line}")
                    continue
                ended += 1
                last_end = time.monotonic()
                per_try_s = (last_end - started) / ended
                display.display(
                    f"{host}: {found['label']} ({ended} of {len(pending)}): {found['status']} in "
                    f"{float(found['elapsed_s']):.2f} s; about {round(per_try_s * (len(pending) - ended))} s left "
                    "(from the wall time of the tries so far)")
            if time.monotonic() - last_end > try_timeout_s:
                raise AnsibleActionFail(f"no query try ended in {try_timeout_s:.0f} s ({ended} of {len(pending)} "
                                        f"ended; {path} says no more): the query loop hangs")
            time.sleep(POLL_S)
