"""Where the host mounts no debugfs, each tierlab root traces through a debugfs mount of its own, so that one
root's teardown does not take it from another. (An integration test: it mounts debugfs, which needs root.)"""

import os

import pytest

from tierlab_host import record, teardown, trace


@pytest.fixture
def roots(tmp_path, monkeypatch):
    """Two roots on a host that mounts neither tracefs nor debugfs at their usual places; each root's record is
    emptied after the test."""
    monkeypatch.setattr(trace, "TRACEFS", tmp_path / "sys-kernel-tracing")
    monkeypatch.setattr(trace, "DEBUGFS", tmp_path / "sys-kernel-debug")
    made = [tmp_path / "root-a", tmp_path / "root-b"]
    yield made
    for root in made:
        use_root(root, monkeypatch)
        teardown.down()


def use_root(root, monkeypatch) -> None:
    monkeypatch.setattr(record, "STATE_DIR", root / "state")
    monkeypatch.setattr(record, "RECORD_PATH", root / "state" / "created.json")


def test_each_root_mounts_debugfs_of_its_own_and_records_it(roots, monkeypatch):
    for root in roots:
        use_root(root, monkeypatch)
        assert trace._debugfs() == root / "debugfs"
        assert record.entries() == [{"kind": "dir", "path": str(root / "debugfs")},
                                    {"kind": "mount", "path": str(root / "debugfs")}]
        assert (root / "debugfs" / "tracing" / "instances").is_dir()


def test_a_root_s_teardown_leaves_another_root_s_debugfs_mounted(roots, monkeypatch):
    root_a, root_b = roots
    for root in roots:
        use_root(root, monkeypatch)
        trace._debugfs()
    teardown.down()
    assert not (root_b / "debugfs").exists()
    assert os.path.ismount(root_a / "debugfs")
    use_root(root_a, monkeypatch)
    assert trace._tracefs() == root_a / "debugfs" / "tracing"


def test_a_host_that_mounts_tracefs_is_traced_there_and_nothing_is_mounted(roots, tmp_path, monkeypatch):
    (tmp_path / "sys-kernel-tracing" / "instances").mkdir(parents=True)
    use_root(roots[0], monkeypatch)
    assert trace._tracefs() == tmp_path / "sys-kernel-tracing"
    assert record.entries() == []
