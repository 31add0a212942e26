"""The Debian packages a role needs (the run role's packages.yml): which of them the host lacks, by one dpkg-query
(`python3 -m tierlab_host packages-check PACKAGE...`), and which this root's runs have found installed, kept in the
root's state directory (packages.json) while dpkg's status file is unchanged (an install or a removal rewrites
it). The host probe reports that list, so that a role whose packages were all found before skips its check."""

import json
import os
from pathlib import Path

from . import record
from .system import run

DPKG_STATUS = Path("/var/lib/dpkg/status")


def _record_file() -> Path:
    return record.STATE_DIR / "packages.json"


def _status() -> int | None:
    return DPKG_STATUS.stat().st_mtime_ns if DPKG_STATUS.exists() else None


def found_installed() -> list[str]:
    """The packages this root's runs found installed since dpkg's status last changed."""
    try:
        kept = json.loads(_record_file().read_text())
    except (FileNotFoundError, ValueError):
        return []
    return kept["installed"] if kept.get("dpkg_status") == _status() else []


def check(packages: list[str]) -> dict:
    """The packages the host lacks (in the order asked); those it has join the root's record."""
    status = _status()
    # "installed NAME" per package dpkg knows; it exits 1 and names on stderr each package it does not know
    out = run(["dpkg-query", "-W", "-f=${db:Status-Status} ${Package}\n", *packages], check=False).stdout
    installed = {line.removeprefix("installed ") for line in out.splitlines() if line.startswith("installed ")}
    if record.STATE_DIR.parent.is_dir():
        record.STATE_DIR.mkdir(exist_ok=True)
        tmp = _record_file().with_suffix(".tmp")
        tmp.write_text(json.dumps({"dpkg_status": status, "installed": sorted(installed | set(found_installed()))}))
        os.replace(tmp, _record_file())
    return {"missing": [package for package in dict.fromkeys(packages) if package not in installed]}


def main(packages: list[str]) -> None:
    print(json.dumps(check(packages)))
