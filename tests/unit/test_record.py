import pytest

from tierlab_host.system import HostError, ensure_cgroup


def test_record_keeps_entries_in_creation_order_and_removes_exactly_one(tmp_path, monkeypatch):
    from tierlab_host import record
    monkeypatch.setattr(record, "STATE_DIR", tmp_path)
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "created.json")
    record.add("loop", device="/dev/loop7", image="/x/a.img")
    record.add("mount", path="/x/a")
    record.add("mount", path="/x/a")
    assert record.entries() == [{"kind": "loop", "device": "/dev/loop7", "image": "/x/a.img"},
                                {"kind": "mount", "path": "/x/a"}]
    record.remove({"kind": "loop", "device": "/dev/loop7", "image": "/x/a.img"})
    assert record.entries("mount") == [{"kind": "mount", "path": "/x/a"}]
    assert record.entries("loop") == []


def test_a_cgroup_that_exists_but_is_not_in_the_record_is_refused_and_one_that_is_kept(tmp_path, monkeypatch):
    from tierlab_host import record
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "state" / "created.json")
    group = tmp_path / "tierlab-postgresql-8k"
    assert ensure_cgroup(group) is True
    assert ensure_cgroup(group) is False
    assert record.entries() == [{"kind": "cgroup", "path": str(group)}]
    record.remove({"kind": "cgroup", "path": str(group)})
    with pytest.raises(HostError) as err:
        ensure_cgroup(group)
    assert str(err.value) == (f"the cgroup {group} exists but this tierlab root did not make it (a root elsewhere whose "
                              "directory has this root's name, or one a failed teardown left: rmdir it once it holds no "
                              "process); give tierlab_root a directory name of its own")
