"""Observe an instance tierlab did not start while it serves its own traffic: its devices block-traced for a window
of intervals, the engine's counters read at each interval's ends, and its objects' extents mapped before the first
interval and after the last.

The run directory is the query loop's: each interval is a step (`i0001`, ...) with a row in raw/queries.jsonl, its
trace in raw/traces/ and its counters in raw/counters/, so a run stopped half-way keeps its intervals and a resumed
one observes the rest. The intervals the spec leaves untraced are observed by their counters only: the engine's rate
of work in them against the traced ones is the tracing's cost to the instance (tierlab analyze says it).

The two extent maps are merged into raw/extents.json: an extent in either is attributed to its object; where the two
maps give the same sectors to different objects (a file dropped and its space taken by another during the window),
those sectors are attributed to no object, and every object whose extents changed is listed with how
(extents.json's `changed`), so that nothing is attributed by a map that no longer held.

A window of hours keeps its raw traces within the spec's limit: the oldest traced intervals' are deleted as newer ones
are written (raw/rotated.json says which), while every interval keeps its counters.
"""

import json
import time
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from . import record, trace
from .clients import STOP
from .extents import map_files
from .observed import observed
from .probes import machine, memory
from .runner import _append, _done_tries, _progress, locked_loop, run_recorded
from .system import SYS_DEV_BLOCK, device_model, device_name, device_of_path, mount_facts, whole_disk

# how often a stop is looked for while an interval lasts
STOP_CHECK_S = 0.2
# the intervals whose raw traces were deleted to keep within the run's limit, with the bytes each held
ROTATED = "rotated.json"


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _wall(monotonic: float) -> str:
    """A time.monotonic() reading as the wall-clock time it was, as _now() writes it."""
    return datetime.fromtimestamp(time.time() - (time.monotonic() - monotonic), UTC).isoformat(timespec="milliseconds")


def tiers_of(files: list[dict]) -> list[dict]:
    """The disks under the instance's files, each a tier of the run (role capacity: the storage the instance has
    now), with the partitions and file systems that hold its files."""
    disks: dict[str, dict] = {}
    for item in files:
        device = device_of_path(item["path"])
        disk, start = whole_disk(device)
        tier = disks.setdefault(disk, {"name": device_name(disk), "role": "capacity", "device": disk,
                                       "emulation": "none", "model": device_model(disk), "partitions": {},
                                       "filesystems": {}})
        if start:
            tier["partitions"][device_name(device)] = {"device": device, "start_bytes": start}
        fs, source = mount_facts(item["path"])
        tier["filesystems"][source] = fs
    return sorted(disks.values(), key=lambda tier: tier["name"])


def map_observed(files: list[dict]) -> tuple[list[dict], list[str]]:
    """The files' extents (extents.map_files), each on the disk block traces name, a partition's offsets moved by
    the partition's start; and the paths that were gone by the time they were mapped (dropped meanwhile)."""
    by_path: dict[str, list[dict]] = defaultdict(list)
    for item in files:
        by_path[item["path"]].append(item)
    mapped, gone = [], []
    for path, items in by_path.items():
        try:
            entries = map_files(items)
        except FileNotFoundError:
            gone.append(path)
            continue
        for entry in entries:
            disk, start = whole_disk(entry["device"])
            mapped.append({**entry, "device": disk, "tier": device_name(disk),
                           "extents": [[logical, physical + start, stored] for logical, physical, stored in entry["extents"]]})
    return mapped, gone


def _spans(files: list[dict], which: str) -> list[tuple]:
    """(device, first byte, end byte, logical byte, file key, which map) of every extent."""
    return [(f["device"], physical, physical + stored, logical, (f["object"], f["path"], f["offset_bytes"]), which)
            for f in files for logical, physical, stored in f["extents"]]


def merge_maps(start: list[dict], end: list[dict]) -> tuple[list[dict], list[dict]]:
    """One extent map from the window's first and last (see the module's doc), and the objects that changed."""
    entries = {(f["object"], f["path"], f["offset_bytes"]): {**f, "extents": []} for f in start}
    for f in end:
        entries[(f["object"], f["path"], f["offset_bytes"])] = {**f, "extents": []}
    spans = sorted(_spans(start, "start") + _spans(end, "end"), key=lambda s: (s[0], s[1], s[5] != "end"))
    kept: list[list] = []
    ambiguous: dict[str, int] = defaultdict(int)
    for device, first, stop, logical, key, which in spans:
        last = kept[-1] if kept else None
        if last is None or last[0] != device or first >= last[2]:
            kept.append([device, first, stop, logical, key, which])
        elif last[4] is not None and last[4][0] == key[0] and last[1] - last[3] == first - logical:
            # the same object's extent in both maps, or grown in place
            last[2] = max(last[2], stop)
        else:
            # sectors two objects held (or one at two places in its files): the span goes to none of them
            ambiguous[key[0]] += stop - first
            if last[4] is not None:
                ambiguous[last[4][0]] += last[2] - last[1]
            last[2] = max(last[2], stop)
            last[4] = None
    for _, first, stop, logical, key, _ in kept:
        if key is not None:
            entries[key]["extents"].append([logical, first, stop - first])
    objects_start = _extents_by_object(start)
    objects_end = _extents_by_object(end)
    changed = []
    for obj in sorted(set(objects_start) | set(objects_end)):
        before, after = objects_start.get(obj, set()), objects_end.get(obj, set())
        if obj in ambiguous:
            how = "ambiguous"
        elif before == after:
            continue
        elif not before:
            how = "created"
        elif not after:
            how = "dropped"
        else:
            how = "grew" if sum(s for _, _, s in after) > sum(s for _, _, s in before) else "moved"
        changed.append({"object": obj, "change": how, "bytes_before": sum(s for _, _, s in before),
                        "bytes_after": sum(s for _, _, s in after), "ambiguous_bytes": ambiguous.get(obj, 0)})
    files = [{**entry, "extents": sorted(entry["extents"])} for entry in entries.values()]
    return files, changed


def _extents_by_object(files: list[dict]) -> dict[str, set]:
    found: dict[str, set] = defaultdict(set)
    for f in files:
        found[f["object"]] |= {(f["device"], physical, stored) for _, physical, stored in f["extents"]}
    return found


def probe(spec: dict) -> dict:
    """What observing the instance would trace, refused here (before a run is opened) where it cannot be: the
    connection, the grants, the databases, the devices under its files."""
    instance = observed(spec)
    access = instance.require()
    facts = instance.facts()
    files = instance.object_files(facts)
    return {"changed": False, "access": access, "engine": facts, "tiers": tiers_of(files),
            "objects": len({f["object"] for f in files}), "files": len({f["path"] for f in files}),
            "machine": machine(memory()["total_bytes"])}


def _map(instance, facts: dict, path: Path) -> dict:
    files, gone = map_observed(instance.object_files(facts))
    taken = {"taken_at": _now(), "files": files, "gone": gone}
    path.write_text(json.dumps(taken, indent=1))
    return taken


def _wait(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        STOP.check()
        time.sleep(min(left, STOP_CHECK_S))


def observe(spec: dict) -> dict:
    return locked_loop(spec, ("traces", "counters"), _observe_locked)


def _observe_locked(spec: dict, raw: Path) -> dict:
    rows_file = raw / "queries.jsonl"
    done = _done_tries(rows_file)
    instance = observed(spec)
    instance.require()
    facts = instance.facts()
    (raw / "engine.json").write_text(json.dumps(facts, indent=1))
    start_file = raw / "extents_start.json"
    start = json.loads(start_file.read_text()) if start_file.exists() else _map(instance, facts, start_file)
    devices = [tier["device"] for tier in spec["tiers"]]
    backend = trace.open_backend(spec["trace"]["backend"], spec["trace"]["instance"], devices,
                                 spec["trace"]["buffer_size_kb"])
    (raw / "trace_backend.json").write_text(json.dumps({"backend": backend.name, "devices": devices}))
    try:
        for step in [step for step in spec["queries"] if (step, 1) not in done]:
            STOP.check()
            label = f"{step}_try1"
            traced = step not in spec["untraced"]
            before = instance.counters()
            started_at, started = _now(), time.monotonic()
            if traced:
                backend.start(label, raw / "traces")
            # the kernel's own count of the disks' requests, inside the traced window
            disks_before = disk_stats(devices)
            try:
                _wait(spec["interval_s"])
            finally:
                disks_after = disk_stats(devices)
                info = backend.stop(label, raw / "traces") if traced else {"files": [], "events_lost": 0}
            elapsed = time.monotonic() - started
            after = instance.counters()
            # the reads bracket more than the interval (the trace's start and stop, a busy host's waits): the work
            # they count is divided by the seconds between them, not by the interval's
            counted = {"from": _wall(before["read_at"]), "seconds": after.pop("read_at") - before.pop("read_at")}
            deltas = {part: _delta(before[part], after[part]) for part in before}
            deltas["disks"] = _delta(disks_before, disks_after)
            (raw / "counters" / f"{label}.json").write_text(json.dumps(
                {"before": before["instance"], "after": after["instance"], "delta": deltas["instance"],
                 "counted": counted, **{part: deltas[part] for part in deltas if part != "instance"}}, indent=1))
            _append(rows_file, {"query": step, "try": 1, "status": "ok", "error": "", "elapsed_s": elapsed,
                                "rows": None, "cache": "warm", "started_at": started_at, "traced": traced,
                                "trace_files": info["files"], "events_lost": info["events_lost"]})
            _progress(raw, f"{label} ok {elapsed:.3f}")
            if spec["raw_trace_limit_bytes"]:
                rotate(raw, spec["raw_trace_limit_bytes"])
    finally:
        backend.close()
    end = _map(instance, facts, raw / "extents_end.json")
    files, changed = merge_maps(start["files"], end["files"])
    (raw / "extents.json").write_text(json.dumps({"taken_at": end["taken_at"], "files": files, "changed": changed,
                                                  "gone": sorted(set(start["gone"]) | set(end["gone"]))}, indent=1))
    return {"changed": True, "rows_file": str(rows_file), "objects_changed": len(changed)}


def rotate(raw: Path, limit_bytes: int) -> None:
    """Keep the window's raw traces within limit_bytes: the oldest traced intervals' traces are deleted (the newest
    is always kept), each recorded in raw/rotated.json with the bytes it held, its row left with no trace files. The
    record and the rows are written (whole) before a file is deleted, so that a stop between the two leaves files
    no row lists, never a row whose files are gone."""
    rows_file, record_file = raw / "queries.jsonl", raw / ROTATED
    rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    sizes = [sum((raw / "traces" / name).stat().st_size for name in row["trace_files"]) for row in rows]
    total = sum(sizes)
    rotated = json.loads(record_file.read_text()) if record_file.exists() else {}
    gone = []
    for index in [i for i, row in enumerate(rows) if row["trace_files"]][:-1]:
        if total <= limit_bytes:
            break
        row = rows[index]
        rotated[f"{row['query']}_try{row['try']}"] = sizes[index]
        gone += row["trace_files"]
        rows[index] = {**row, "trace_files": []}
        total -= sizes[index]
    if not gone:
        return
    record.replace_json(record_file, rotated)
    record.replace_text(rows_file, "".join(json.dumps(row) + "\n" for row in rows))
    for name in gone:
        (raw / "traces" / name).unlink()


def disk_stats(devices: list[str]) -> dict[str, dict[str, int]]:
    """Each disk's requests and sectors completed so far, as the kernel counts them (Documentation/block/stat.rst:
    reads, read sectors, writes, written sectors are fields 1, 3, 5 and 7)."""
    found = {}
    for device in devices:
        fields = [int(value) for value in (SYS_DEV_BLOCK / device / "stat").read_text().split()]
        found[device] = {"read_requests": fields[0], "read_sectors": fields[2], "write_requests": fields[4],
                         "write_sectors": fields[6]}
    return found


def _delta(before: dict, after: dict) -> dict:
    """after - before of each counter both have; nested per object (or file) where the counters are."""
    return {name: (_delta(before[name], value) if isinstance(value, dict) else value - before[name])
            for name, value in after.items() if name in before}


def main(spec_file: str) -> None:
    run_recorded(spec_file, observe)


def main_probe(spec_file: str) -> None:
    print(json.dumps(probe(json.loads(Path(spec_file).read_text()))))
