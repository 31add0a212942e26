"""A second checkout (as after cloning again to update) on a root the first one made: the instances keep their
passwords with them under the root, so the second logs in to them as the first does."""

import json
import os
import stat
from pathlib import Path

import pytest
from lab import ANSIBLE_ENV, ROOT, command, count_playbook


# the fixture whose runs made the engine's instance through this checkout
@pytest.mark.parametrize("engine,made_by", [("mariadb", "layouts"), ("postgresql", "postgresql_runs")])
def test_a_second_checkout_logs_in_to_the_instances_the_first_made(lab, tmp_path, request, engine, made_by):
    request.getfixturevalue(made_by)
    instance = "mariadb-16k" if engine == "mariadb" else "postgresql-8k"
    kept = Path(lab.root, "instances", instance, "root.password" if engine == "mariadb" else "postgres.password")
    password = kept.read_bytes()
    clone = tmp_path / "clone"
    done = command(["git", "clone", "-q", str(ROOT), str(clone)], "git clone", 300)
    assert done.returncode == 0, done.stderr
    variables = {"tierlab_root": lab.root, "results_dir": str(lab.results_dir), **lab.settings, "engine": engine,
                 "layout": "None"}
    done = command([str(ROOT / ".venv/bin/ansible-playbook"), "playbooks/tpch.yml", "--tags", "engine", "-e",
                    json.dumps(variables)], "the second checkout's playbook", 900, cwd=clone,
                   env={**os.environ, **ANSIBLE_ENV, "ANSIBLE_CONFIG": str(clone / "ansible.cfg")})
    count_playbook("tpch.yml", done.stdout)
    assert done.returncode == 0, done.stdout[-6000:]
    assert not (clone / ".secrets").exists()
    # the same password, unchanged, and the same data: the instance was neither given a new password nor made anew
    assert kept.read_bytes() == password
    assert stat.S_IMODE(os.stat(kept).st_mode) == 0o600
    answer = lab.execute(instance, "SELECT COUNT(*) FROM nation;", 60, tmp_path / "nation.tsv")
    assert answer["status"] == "ok", answer
    assert (tmp_path / "nation.tsv").read_text().split() == ["25"]
