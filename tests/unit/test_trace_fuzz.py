"""The four trace formats, mutated as damage does it (flipped bytes, cut files, reordered events, a CPU's events
twice): every case ends as a refusal, a flagged counter or figures, as JSON that strict parsers take; never a
traceback, and never more memory than MEMORY_PER_INPUT_BYTE times the input beside a fixed FIXED_MEMORY_BYTES
(tracemalloc's peak, which numpy's arrays are counted in)."""

import json
import random
import shutil
import subprocess
import tracemalloc
from pathlib import Path

import pytest

from tierlab.cli import json_text
from tierlab.errors import TierlabError
from tierlab.traces.blktrace import write_blktrace
from tierlab.traces.ftrace_raw import write_ftrace_raw
from tierlab.traces.stats import trace_stats

REQUESTS = 2000
CASES_PER_FORMAT = 16
# measured: at most 6.4 MiB for 0.6 MB of input (10.5 bytes per byte, the interpreter's own allocations included)
MEMORY_PER_INPUT_BYTE = 16
FIXED_MEMORY_BYTES = 4 << 20
# the counters that flag a trace as damaged (a cut or flipped file must raise one, or be refused)
FLAGS = ("bad_lines", "bad_records", "bad_pages", "lost_events", "beyond_bounds", "time_jumps",
         "dispatch_without_completion", "completion_without_dispatch", "truncated")


def requests(rng: random.Random) -> list[tuple[int, int, int, str]]:
    """(dispatch ns, sector, sectors, op) of REQUESTS reads and writes, a third of them sequential runs."""
    made, sector, time_ns = [], 0, 10**9
    for _ in range(REQUESTS):
        sector = sector + 32 if rng.random() < 0.33 else rng.randrange(0, 1 << 24) * 8
        time_ns += rng.randrange(20_000, 200_000)
        made.append((time_ns, sector, 32, "R" if rng.random() < 0.8 else "W"))
    return made


def binary(directory: Path, made) -> list[Path]:
    """Per-CPU blktrace files: each request dispatched on CPU 0 and completed on CPU 1."""
    dispatches = [("D", t, "7:1", s, n * 512, op, 4242, 0) for t, s, n, op in made]
    completions = [("C", t + 90_000, "7:1", s, n * 512, op, 0, 1) for t, s, n, op in made]
    return [write_blktrace(directory / "q.blktrace.0", dispatches, cpu=0),
            write_blktrace(directory / "q.blktrace.1", completions, cpu=1)]


def ftrace(directory: Path, made) -> list[Path]:
    lines = ["# tracer: nop\n#\n"]
    for t, s, n, op in made:
        lines.append(f"        mariadbd-4242    [000] .....   {t / 1e9:.6f}: block_rq_issue: 7,1 {op} {n * 512} () "
                     f"{s} + {n} be,0,4 [mariadbd]\n")
        lines.append(f"          <idle>-0       [001] ..s1.   {(t + 90_000) / 1e9:.6f}: block_rq_complete: 7,1 {op} () "
                     f"{s} + {n} be,0,4 [0]\n")
    path = directory / "q.ftrace"
    path.write_text("".join(lines))
    return [path]


def ftrace_raw(directory: Path, made) -> list[Path]:
    issues = [("issue", t, 4242, "7:1", s, n, op, "mariadbd") for t, s, n, op in made]
    completes = [("complete", t + 90_000, 0, "7:1", s, n, op) for t, s, n, op in made]
    return [write_ftrace_raw(directory / "q.ftrace-raw", [issues, completes])]


def blkparse(directory: Path, made) -> list[Path]:
    """blkparse's own text of the binary trace."""
    binary(directory, made)
    path = directory / "q.txt"
    with open(path, "w") as out:
        subprocess.run(["blkparse", "-i", str(directory / "q")], stdout=out, check=True, timeout=120)
    for cpu in (0, 1):
        (directory / f"q.blktrace.{cpu}").unlink()
    return [path]


FORMATS = {"binary": binary, "blkparse": blkparse, "ftrace": ftrace, "ftrace-raw": ftrace_raw}


def flip(data: bytearray, rng: random.Random) -> str:
    for _ in range(rng.randrange(1, 20)):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    return "flipped"


def cut(data: bytearray, rng: random.Random) -> str:
    del data[rng.randrange(1, len(data)):]
    return "cut"


def reorder(data: bytearray, rng: random.Random) -> str:
    """Two spans of the file swapped: lines of a text trace, records or pages of a binary one."""
    size = rng.choice([64, 4096, 100])
    a, b = sorted(rng.sample(range(0, len(data) - size), 2))
    if b < a + size:
        return reorder(data, rng)
    data[a:a + size], data[b:b + size] = data[b:b + size], data[a:a + size]
    return "reordered"


def twice(data: bytearray, rng: random.Random) -> str:
    """A stretch of the file (a CPU's records, pages or lines) written again after itself."""
    start = rng.randrange(0, len(data) // 2)
    end = start + rng.randrange(1, len(data) // 2)
    data[end:end] = data[start:end]
    return "duplicated"


MUTATIONS = (flip, cut, reorder, twice)


def measured(directory: Path, tolerate: bool) -> tuple[str, dict | None, int]:
    """(outcome, figures, tracemalloc's peak bytes) of trace-stats on the trace in directory (per-CPU blktrace
    files by their prefix)."""
    (name,) = {path.name.partition(".blktrace.")[0] for path in directory.iterdir()}
    tracemalloc.start()
    try:
        figures = trace_stats([str(directory / name)], "auto", tolerate, 4096)
        outcome = "figures"
    except TierlabError:
        figures, outcome = None, "refused"
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return outcome, figures, peak


@pytest.mark.parametrize("fmt", FORMATS)
def test_damaged_traces_are_refused_flagged_or_measured_within_a_memory_bound(fmt, tmp_path):
    rng = random.Random(f"fuzz-{fmt}")
    made = requests(rng)
    base = tmp_path / "base"
    base.mkdir()
    FORMATS[fmt](base, made)
    outcome, figures, _ = measured(base, tolerate=False)
    # the undamaged trace: exact figures, nothing flagged
    assert outcome == "figures"
    assert (figures["requests"], figures["read_requests"] + figures["write_requests"]) == (REQUESTS, REQUESTS)
    assert all(figures["counts"].get(flag, 0) == 0 for flag in FLAGS), figures["counts"]
    seen = set()
    for case in range(CASES_PER_FORMAT):
        directory = tmp_path / f"case{case}"
        shutil.copytree(base, directory)
        paths = sorted(directory.iterdir())
        victim = rng.choice(paths)
        data = bytearray(victim.read_bytes())
        mutation = MUTATIONS[case % len(MUTATIONS)](data, rng)
        victim.write_bytes(bytes(data))
        input_bytes = sum(p.stat().st_size for p in paths)
        for tolerate in (False, True):
            outcome, figures, peak = measured(directory, tolerate)
            seen.add((mutation, tolerate, outcome))
            assert peak <= MEMORY_PER_INPUT_BYTE * input_bytes + FIXED_MEMORY_BYTES, (mutation, peak, input_bytes)
            if figures is not None:
                json.loads(json_text(figures))
                flagged = any(figures["counts"].get(flag, 0) for flag in FLAGS)
                if mutation == "cut":
                    assert flagged or figures["requests"] < REQUESTS, figures["counts"]
    # a damaged trace is refused unless told to keep its good part
    assert ("cut", False, "refused") in seen or ("flipped", False, "refused") in seen, seen
