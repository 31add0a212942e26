"""The Debian packages a role needs (the run role's packages.yml): which of them the host lacks, by one dpkg-query
(`python3 -m tierlab_host packages-check PACKAGE...`), and which this root's runs have found installed, kept in the
root's state directory (packages.json) while dpkg's status file is unchanged (an install or a removal rewrites
it). The host probe reports that list, so that a role whose packages were all found before skips its check."""

import json
from pathlib import Path

from . import record
from .system import changed_at, run

DPKG_STATUS = Path("/var/lib/dpkg/status")
RECORD_NAME = "packages.json"


def _kept(status: int | None) -> list[str]:
    kept = record.read_state(RECORD_NAME)
    return kept["installed"] if kept and kept.get("dpkg_status") == status else []


def found_installed() -> list[str]:
    """The packages this root's runs found installed since dpkg's status last changed."""
    return _kept(changed_at(DPKG_STATUS))


def check(packages: list[str]) -> dict:
    """The packages the host lacks (in the order asked); those it has join the root's record."""
    status = changed_at(DPKG_STATUS)
    # "installed NAME" per package dpkg knows; it exits 1 and names on stderr each package it does not know
    out = run(["dpkg-query", "-W", "-f=${db:Status-Status} ${Package}\n", *packages], check=False).stdout
    installed = {line.removeprefix("installed ") for line in out.splitlines() if line.startswith("installed ")}
    record.write_state(RECORD_NAME, {"dpkg_status": status, "installed": sorted(installed | set(_kept(status)))})
    return {"missing": [package for package in dict.fromkeys(packages) if package not in installed]}


def main(packages: list[str]) -> None:
    print(json.dumps(check(packages)))
