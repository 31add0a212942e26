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

