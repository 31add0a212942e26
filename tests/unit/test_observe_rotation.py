"""A long observation's raw traces kept within their limit: the oldest traced intervals' traces deleted as new ones
are written, each recorded with its bytes, its row left without trace files; the newest always kept."""

import json

from tierlab_host.observe import rotate
from tierlab_host.runner import _append


def window(raw, rows: list[tuple[str, int]]) -> None:
    """Intervals as the loop records them: a row each, and a trace of the given bytes (none: untraced)."""
    (raw / "traces").mkdir(parents=True)
    for step, size in rows:
        files = [f"{step}_try1.ftrace-raw"] if size else []
        for name in files:
            (raw / "traces" / name).write_bytes(b"x" * size)
        _append(raw / "queries.jsonl", {"query": step, "try": 1, "status": "ok", "traced": bool(size),
                                        "trace_files": files})


def rows(raw) -> dict[str, list[str]]:
    return {row["query"]: row["trace_files"] for row in map(json.loads, (raw / "queries.jsonl").read_text().splitlines())}


def test_traces_within_the_limit_are_all_kept(tmp_path):
    window(tmp_path, [("i0001", 400), ("i0002", 0), ("i0003", 400)])
    rotate(tmp_path, 800)
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["i0001_try1.ftrace-raw", "i0003_try1.ftrace-raw"]
    assert not (tmp_path / "rotated.json").exists()


def test_the_oldest_traces_go_until_the_rest_fit_and_each_is_recorded(tmp_path):
    window(tmp_path, [("i0001", 400), ("i0002", 0), ("i0003", 300), ("i0004", 500)])
    rotate(tmp_path, 800)
    assert sorted(p.name for p in (tmp_path / "traces").iterdir()) == ["i0003_try1.ftrace-raw", "i0004_try1.ftrace-raw"]
    assert json.loads((tmp_path / "rotated.json").read_text()) == {"i0001_try1": 400}
    assert rows(tmp_path) == {"i0001": [], "i0002": [], "i0003": ["i0003_try1.ftrace-raw"],
                              "i0004": ["i0004_try1.ftrace-raw"]}


def test_the_newest_trace_is_kept_even_alone_over_the_limit_and_the_record_grows(tmp_path):
    window(tmp_path, [("i0001", 400), ("i0002", 300)])
    rotate(tmp_path, 350)
    (tmp_path / "traces" / "i0003_try1.ftrace-raw").write_bytes(b"x" * 900)
    _append(tmp_path / "queries.jsonl", {"query": "i0003", "try": 1, "status": "ok", "traced": True,
                                         "trace_files": ["i0003_try1.ftrace-raw"]})
    rotate(tmp_path, 350)
    assert [p.name for p in (tmp_path / "traces").iterdir()] == ["i0003_try1.ftrace-raw"]
    assert json.loads((tmp_path / "rotated.json").read_text()) == {"i0001_try1": 400, "i0002_try1": 300}
