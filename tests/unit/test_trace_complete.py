"""A query's trace cut short (its end marker lost) is marked, not taken as the whole query."""

import pytest
from tiny_run import line, make_run, read

from tierlab.run_io import analyze, load_run


@pytest.mark.parametrize(("end_marker", "complete"), [(True, True), (False, False)])
def test_a_trace_is_complete_only_with_its_end_marker(tmp_path, end_marker, complete):
    body = line(1.0, "tracing_mark_write: tierlab start q03_try1") + read(1.1, 0) + read(1.2, 32)
    if end_marker:
        body += line(1.3, "tracing_mark_write: tierlab end q03_try1")
    tables = analyze(load_run(make_run(tmp_path, body)))
    assert tables["queries"]["trace_complete"].tolist() == [complete]
    assert tables["trace_counts"]["trace_complete"].tolist() == [complete]
    assert tables["query_metrics"]["read_requests"].tolist() == [2]
