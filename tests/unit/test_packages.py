"""The host agent's package check (tierlab_host.packages): which packages the host lacks, by dpkg's own answer, and
the record of those found installed that lets later runs on the root skip the check."""

import os

import pytest

from tierlab_host import packages, record

ABSENT = "tierlab-no-such-package"


@pytest.fixture
def root(tmp_path, monkeypatch):
    """A tierlab root whose record is keyed on a status file of its own (dpkg-query still reads the host's)."""
    monkeypatch.setattr(packages, "DPKG_STATUS", tmp_path / "status")
    (tmp_path / "status").write_text("")
    (tmp_path / "root").mkdir()
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "root" / "state")
    return tmp_path


def test_the_check_names_the_packages_the_host_lacks_in_the_order_asked(root):
    assert packages.check([ABSENT, "dpkg", "tierlab-other-package", ABSENT]) == {
        "missing": [ABSENT, "tierlab-other-package"]}


def test_the_packages_found_installed_are_kept_until_dpkg_s_status_changes(root):
    packages.check(["dpkg", ABSENT])
    packages.check(["coreutils"])
    assert packages.found_installed() == ["coreutils", "dpkg"]
    # an install or a removal rewrites dpkg's status file
    os.utime(root / "status", ns=(0, 0))
    assert packages.found_installed() == []


def test_a_host_without_the_root_keeps_no_record(root):
    (root / "root").rmdir()
    assert packages.check(["dpkg"]) == {"missing": []}
    assert not (root / "root").exists()
