"""The playbook command as users type it, with the virtual environment activated: from the repository's root and
from playbooks/, each reaching the run's validation (a bad layout, refused before anything is touched)."""

import os
import subprocess
from pathlib import Path

import pytest
from lab import count_playbook

ROOT = Path(__file__).resolve().parents[2]
REFUSED = "layout 'C+X': unknown table code(s) 'X'; allowed: None, ALL, or codes C O L PS P S N R joined by '+'"


# where Ansible keeps its temporary files: the suite's own (conftest.py), not the default root's
KEPT = ("ANSIBLE_REMOTE_TMP", "ANSIBLE_ASYNC_DIR")


def activated() -> dict:
    """The environment `. .venv/bin/activate` makes, without the variables the Makefile and the tests set but
    those that keep Ansible's temporary files out of the default root."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("ANSIBLE_") or key in KEPT}
    return {**env, "VIRTUAL_ENV": str(ROOT / ".venv"), "PATH": f"{ROOT / '.venv' / 'bin'}:{env['PATH']}"}


@pytest.mark.parametrize(("where", "playbook"), [(ROOT, "playbooks/tpch.yml"), (ROOT / "playbooks", "tpch.yml")])
def test_the_playbook_runs_from_the_root_and_from_playbooks(where, playbook):
    done = subprocess.run(["ansible-playbook", playbook, "-e", "layout=C+X"], cwd=where, env=activated(),
                          capture_output=True, text=True, timeout=300)
    count_playbook(playbook, done.stdout)
    assert done.returncode == 2, done.stdout[-3000:] + done.stderr[-2000:]
    assert REFUSED in done.stdout
    assert "TASK [run : Check the run's settings and the layout's fit on the fast tier]" in done.stdout
