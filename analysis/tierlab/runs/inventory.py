"""The inventory's hosts and their variables, as Ansible reads them (ansible-inventory, with the playbooks'
group_vars): for `tierlab study`, which spreads its points over the hosts, and `tierlab doctor`, which takes a host's
tiers and tierlab root."""

import json
import os
import subprocess
import sys
from pathlib import Path

from ..checkout import PROJECT
from ..errors import InputError

ANSIBLE_INVENTORY = Path(sys.executable).with_name("ansible-inventory")
ANSIBLE_PLAYBOOK = Path(sys.executable).with_name("ansible-playbook")
ANSIBLE_ENV = {"ANSIBLE_CONFIG": str(PROJECT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}


def host_variables(inventory: Path | None) -> dict[str, dict]:
    """Each host's variables (as written: templates are not rendered), in the inventory's order (ansible.cfg's
    inventory unless one is given)."""
    if inventory and not inventory.exists():
        raise InputError(f"inventory {inventory}: no such file or directory")
    command = [str(ANSIBLE_INVENTORY), "--list", "--playbook-dir", str(PROJECT / "playbooks"),
               *(["-i", str(inventory)] if inventory else [])]
    done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, env={**os.environ, **ANSIBLE_ENV},
                          timeout=120)
    if done.returncode != 0:
        raise InputError(f"inventory {inventory or '(ansible.cfg)'}: ansible-inventory failed: "
                              f"{done.stderr.strip().splitlines()[-1:] or done.returncode}")
    groups = json.loads(done.stdout)
    hosts: list[str] = []

    def walk(group: str) -> None:
        for host in groups.get(group, {}).get("hosts", []):
            if host not in hosts:
                hosts.append(host)
        for child in groups.get(group, {}).get("children", []):
            walk(child)

    walk("all")
    if not hosts:
        raise InputError(f"inventory {inventory or '(ansible.cfg)'} has no hosts; give an inventory that names "
                              "at least one (playbooks/inventory/local.yml is this host)")
    variables = groups.get("_meta", {}).get("hostvars", {})
    return {host: variables.get(host, {}) for host in hosts}


def inventory_hosts(inventory: Path | None) -> list[str]:
    """The inventory's hosts in its order (ansible.cfg's inventory unless one is given)."""
    return list(host_variables(inventory))
