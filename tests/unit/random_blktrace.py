"""Binary blktrace traces made up at random for the decoder's tests (in time order, per CPU)."""

import numpy as np

from tierlab.traces.blk import BLK_TC_PC, BLK_TC_READ
from tierlab.traces.blktrace import write_blktrace

T0 = 5_000_000_000_000          # trace clock of the first event, ns (5000 s)
DEV = "8:16"


def random_trace(seed=7, requests=1500, cpus=2):
    """Per-CPU event lists (each in time order) of a busy two-device trace: overlapping requests to the
    same sectors, every RWBS flavour, flushes and zero-length requests (at sector 0, where blkparse prints
    no sector), passthrough at sector 0, completions of requests dispatched before the trace, requests
    never completed, a pid without a process note, messages. All times distinct."""
    rng = np.random.default_rng(seed)
    pids = {4242: "mariadbd", 4243: "mariadbd", 777: "kworker/u8:2", 31337: None}
    flavours = ["R", "RS", "W", "WS", "WFS", "FWFS", "RA", "RSM", "WM", "DS", "FN", "W0", "PC"]
    weights = np.array([20, 15, 15, 15, 3, 3, 5, 3, 2, 2, 3, 2, 2], dtype=float)
    used: set[int] = set()

    def unique(t):
        while t in used:
            t += 1
        used.add(t)
        return t

    per_cpu = {cpu: [] for cpu in range(cpus)}
    for index, (pid, name) in enumerate(pids.items()):
        if name is not None:
            per_cpu[0].append(("process", unique(T0 - 10_000 + index), DEV, pid, name, 0))
    for i in range(requests):
        flavour = flavours[rng.choice(len(flavours), p=weights / weights.sum())]
        dev = DEV if rng.random() < 0.7 else "259:0"
        sector = int(rng.integers(0, 6) * 8) if rng.random() < 0.3 else int(rng.integers(1, 1 << 30)) * 8
        nbytes = int(rng.choice([1, 8, 16, 256])) * 512
        rwbs = flavour
        if flavour in ("FN", "W0", "PC"):
            sector, nbytes = 0, (0 if flavour != "PC" else nbytes)
            rwbs = {"FN": "FN", "W0": "W", "PC": BLK_TC_PC | BLK_TC_READ}[flavour]
        pid = int(rng.choice(list(pids)))
        start = unique(T0 + 2_000 * i + int(rng.integers(0, 1_000)))
        d_cpu, c_cpu = int(rng.integers(0, cpus)), int(rng.integers(0, cpus))
        per_cpu[d_cpu].append(("D", start, dev, sector, nbytes, rwbs, pid, d_cpu))
        if i < requests - 5:     # the last five never complete
            end = unique(start + int(rng.integers(1_000, 300_000)))
            per_cpu[c_cpu].append(("C", end, dev, sector, nbytes, rwbs, 0, c_cpu))
    for k in range(3):           # completions of requests dispatched before the trace began
        per_cpu[k % cpus].append(("C", unique(T0 + 500 + k), DEV, (1 << 33) + 8 * k, 4096, "R", 0, k % cpus))
    per_cpu[1 % cpus].append(("message", unique(T0 + 1_234_567), DEV, "tierlab start q07_try2", 1 % cpus))
    per_cpu[0].append(("message", unique(T0 + 2_345_678), "259:0", "bfq0 dispatch", 0))
    for events in per_cpu.values():
        events.sort(key=lambda event: event[1])
    return per_cpu


def write_per_cpu(tmp_path, per_cpu, name="trace", byteorder="<"):
    for cpu, events in per_cpu.items():
        write_blktrace(tmp_path / f"{name}.blktrace.{cpu}", events, byteorder=byteorder, cpu=cpu)
    return tmp_path / name
