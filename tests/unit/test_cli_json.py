"""What tierlab's commands print with --json is JSON as RFC 8259 has it: an undefined figure is null, never NaN."""

import json

import numpy as np

from tierlab.cli import json_text, main
from tierlab.traces.blktrace import write_blktrace

T0 = 5_000_000_000_000


def test_undefined_and_infinite_figures_are_null_and_numpy_s_numbers_plain():
    text = json_text({"mean": float("nan"), "peak": np.float64(1.5), "count": np.int64(3), "edges": [float("inf"), 2.0]})
    assert json.loads(text) == {"mean": None, "peak": 1.5, "count": 3, "edges": [None, 2.0]}
    assert "NaN" not in text and "Infinity" not in text


def test_trace_stats_of_a_trace_without_data_requests_prints_strict_json(tmp_path, capsys):
    # one bare flush, dispatched and completed: no data request, so every pattern figure is undefined
    trace = write_blktrace(tmp_path / "q1_try1.blktrace.0",
                           [("D", T0, "8:16", 0, 0, "FN", 1, 0), ("C", T0 + 1000, "8:16", 0, 0, "FN", 0, 0)])
    main(["trace-stats", "--json", str(trace)])
    stats = json.loads(capsys.readouterr().out)
    assert (stats["requests"], stats["counts"]["flush"]) == (0, 1)
    assert (stats["sequential_pct"], stats["repeat_access_rate"], stats["latency_us"]["p50"]) == (None, None, None)
