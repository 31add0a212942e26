"""Block trace capture, one trace file per query window.

Backends:
  blktrace  the `blktrace` tool; used where its relay files open (it hangs
            where kernel lockdown refuses them, so it is probed under a timeout)
  ftrace    a private tracing instance with block_rq_issue/block_rq_complete
            filtered to the tier devices; query windows are marked through the
            instance's own trace_marker. Each window is kept as the ring
            buffer's own pages (trace_pipe_raw of every CPU), after a header
            with the events' binary layout from tracefs: no text is formatted
            by the kernel, and the analysis decodes the records as they are
            (see analysis/tierlab/traces/ftrace_raw.py for the file's format).
            The pages are taken out of the buffer while the window lasts, so
            a long query does not overrun it (a SF 1 query of 5 million
            requests lost 7 million events when the buffer was read at its end).
"""

import gzip
import json
import os
import re
import select
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from . import record
from .system import HostError, device_name, ftrace_dev, run

TRACEFS = Path("/sys/kernel/tracing")
DEBUGFS = Path("/sys/kernel/debug")
EVENTS = ("block_rq_issue", "block_rq_complete")
# the first line of a raw ftrace window; the second is the JSON layout (raw_layout)
RAW_MAGIC = b"tierlab ftrace-raw 1\n"
# the formats the raw records are decoded with: the ring buffer's page header, the block events', and
# the trace_marker's (ftrace/print)
RAW_FORMATS = {"header_page": "header_page", "block_rq_issue": "block/block_rq_issue/format",
               "block_rq_complete": "block/block_rq_complete/format", "print": "ftrace/print/format"}
_FIELD = re.compile(r"field:\s*(?P<declaration>[^;]*?)\s*;\s*offset:(?P<offset>\d+);\s*size:(?P<size>\d+);")
# a window's pages are taken out of the ring buffer while it lasts, when a CPU's buffer is this full, and at
# least this often
BUFFER_PERCENT = 25
DRAIN_INTERVAL_S = 0.2
BLKTRACE_PROBE_TIMEOUT_S = 5
BLKTRACE_STOP_TIMEOUT_S = 30
# where the kernel shows its lockdown level ("none [integrity] confidentiality": the bracketed one is in force), where
# securityfs is mounted; else the level its build forces (CONFIG_LOCK_DOWN_KERNEL_FORCE_*), or its boot asks for
# (lockdown=), is in force at least: levels only rise
LOCKDOWN = Path("/sys/kernel/security/lockdown")
KERNEL_CONFIGS = (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}"))
CMDLINE = Path("/proc/cmdline")
LOCKDOWN_LEVELS = ("none", "integrity", "confidentiality")


def mounted_debugfs() -> Path | None:
    """The debugfs tracing uses where one is mounted: the root's own, else the host's at /sys/kernel/debug."""
    return next((path for path in (record.STATE_DIR.parent / "debugfs", DEBUGFS) if os.path.ismount(path)), None)


def _debugfs() -> Path:
    """debugfs: a mount of the root's own where the host has none at /sys/kernel/debug. Teardown unmounts
    what the root's record holds, and a mount at /sys/kernel/debug, which every root shares, went with the
    first root torn down, from under the others' traces."""
    mounted = mounted_debugfs()
    if mounted is not None:
        return mounted
    private = record.STATE_DIR.parent / "debugfs"
    if not private.is_dir():
        private.mkdir(parents=True)
        record.add("dir", path=str(private))
    # recorded before it is made: a process killed in between (a host whose connection drops) leaves no mount
    # that teardown does not know of, and teardown skips a recorded path that is not mounted
    record.add("mount", path=str(private))
    run(["mount", "-t", "debugfs", "none", str(private)])
    return private


def _tracefs() -> Path:
    if (TRACEFS / "instances").is_dir():
        return TRACEFS
    in_debugfs = _debugfs() / "tracing"
    if (in_debugfs / "instances").is_dir():
        return in_debugfs
    raise HostError(f"no tracefs found at {TRACEFS} or in debugfs; the kernel needs CONFIG_FTRACE")


def _kernel_config() -> tuple[Path, str] | None:
    for path in KERNEL_CONFIGS:
        if path.exists():
            return path, (gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text())
    return None


def lockdown() -> dict:
    """The kernel's lockdown level (`none`, `integrity`, `confidentiality`) and where it was read; level None where
    securityfs is not mounted and neither the kernel's build nor its boot says more than `none`, which a later
    raise (or, on some distributions, secure boot) may have left behind."""
    if LOCKDOWN.exists():
        return {"level": re.search(r"\[(\w+)\]", LOCKDOWN.read_text())[1], "source": str(LOCKDOWN)}
    found = [("none", "")]
    config = _kernel_config()
    if config is not None:
        forced = re.search(r"^CONFIG_LOCK_DOWN_KERNEL_FORCE_(\w+)=y$", config[1], re.MULTILINE)
        if forced:
            found.append((forced[1].lower(), f"CONFIG_LOCK_DOWN_KERNEL_FORCE_{forced[1]} in {config[0]}"))
    asked = re.search(r"(?:^|\s)lockdown=(\w+)", CMDLINE.read_text())
    if asked and asked[1] in LOCKDOWN_LEVELS:
        found.append((asked[1], f"lockdown={asked[1]} in {CMDLINE}"))
    level, source = max(found, key=lambda pair: LOCKDOWN_LEVELS.index(pair[0]))
    if level == "none":
        return {"level": None, "source": f"no {LOCKDOWN}: securityfs is not mounted"}
    return {"level": level, "source": source}


def blktrace_works(devices: list[str]) -> bool:
    if subprocess.run(["which", "blktrace"], capture_output=True).returncode != 0:
        return False
    if lockdown()["level"] in ("integrity", "confidentiality"):
        # the kernel refuses its relay files: no need to wait for the tool to fail, or hang, as it may
        return False
    with tempfile.TemporaryDirectory() as tmp:
        cmd = ["timeout", str(BLKTRACE_PROBE_TIMEOUT_S), "blktrace", "-r", str(_debugfs()), "-w", "1", "-D", tmp]
        for device in devices:
            cmd += ["-d", f"/dev/{device_name(device)}"]
        done = subprocess.run(cmd, capture_output=True, text=True)
        # where the relay files are refused it still exits 0, but writes no per-CPU files
        return done.returncode == 0 and "FAILED" not in done.stdout + done.stderr and any(Path(tmp).iterdir())


def raw_layout(tracefs: Path) -> dict:
    """The binary layout of what a raw window holds, from tracefs' format files: the ring buffer page's
    size, and per format its id and each field's [offset, size] by name."""
    layout = {"page_bytes": os.sysconf("SC_PAGE_SIZE"), "formats": {}}
    for name, relative in RAW_FORMATS.items():
        text = (tracefs / "events" / relative).read_text()
        fields = {}
        for match in _FIELD.finditer(text):
            field = re.sub(r"\[\d*\]$", "", match["declaration"]).split()[-1]
            fields[field] = [int(match["offset"]), int(match["size"])]
        event_id = re.search(r"^ID: (\d+)$", text, re.MULTILINE)
        layout["formats"][name] = {"id": int(event_id[1]) if event_id else None, "fields": fields}
    return layout


class FtraceInstance:
    name = "ftrace"

    def __init__(self, instance: str, devices: list[str], buffer_size_kb: int):
        self._out = None
        tracefs = _tracefs()
        self.dir = tracefs / "instances" / instance
        if not self.dir.is_dir():
            self.dir.mkdir()
            record.add("tracing_instance", path=str(self.dir))
        (self.dir / "tracing_on").write_text("0\n")
        (self.dir / "buffer_size_kb").write_text(f"{buffer_size_kb}\n")
        (self.dir / "trace_clock").write_text("mono\n")
        if (self.dir / "buffer_percent").exists():
            # kernels before 5.0 have no such knob: their windows are drained every DRAIN_INTERVAL_S only
            (self.dir / "buffer_percent").write_text(f"{BUFFER_PERCENT}\n")
        self.header = RAW_MAGIC + json.dumps(raw_layout(tracefs)).encode() + b"\n"
        dev_filter = " || ".join(f"dev == {ftrace_dev(d)}" for d in devices)
        for event in EVENTS:
            event_dir = self.dir / "events" / "block" / event
            (event_dir / "filter").write_text(dev_filter + "\n")
            (event_dir / "enable").write_text("1\n")

    def _lost_events(self) -> int:
        lost = 0
        for stats in (self.dir / "per_cpu").glob("cpu*/stats"):
            for line in stats.read_text().splitlines():
                key, _, value = line.partition(":")
                if key in ("overrun", "dropped events"):
                    lost += int(value)
        return lost

    def start(self, label: str, out_dir: Path) -> None:
        """Trace a window into out_dir/<label>.ftrace-raw: the pages are taken out of the ring buffer while the
        window lasts (see _drain_while_tracing), so that a window of any length fits a buffer of any size."""
        # opening `trace` for writing empties the ring buffer and its counters
        open(self.dir / "trace", "w").close()
        out = open(out_dir / f"{label}.ftrace-raw", "wb")
        try:
            out.write(self.header)
            self._pipes = [os.open(cpu / "trace_pipe_raw", os.O_RDONLY | os.O_NONBLOCK)
                           for cpu in sorted((self.dir / "per_cpu").glob("cpu*"))]
        except OSError:
            out.close()
            raise
        self._out, self._stopping, self._failure = out, threading.Event(), None
        # the end of the window wakes the drainer through this pipe, however long its poll would wait
        self._wake_read, self._wake_write = os.pipe()
        self._drainer = threading.Thread(target=self._drain_while_tracing, daemon=True)
        # started before the writes below, which can fail: close() then ends the window it opened
        self._drainer.start()
        (self.dir / "tracing_on").write_text("1\n")
        (self.dir / "trace_marker").write_text(f"tierlab start {label}\n")

    def mark(self, text: str) -> None:
        """A line in the window's trace, on its clock, in order with the requests (nothing while none is traced)."""
        (self.dir / "trace_marker").write_text(f"{text}\n")

    def stop(self, label: str, out_dir: Path) -> dict:
        (self.dir / "trace_marker").write_text(f"tierlab end {label}\n")
        (self.dir / "tracing_on").write_text("0\n")
        out = Path(self._out.name)
        self._end_window(drain=True)
        return {"files": [out.name], "events_lost": self._lost_events()}

    def _drain_while_tracing(self) -> None:
        """Drain when a CPU's buffer is buffer_percent full (the kernel wakes poll then), or at least every
        DRAIN_INTERVAL_S."""
        poller = select.poll()
        for fd in (*self._pipes, self._wake_read):
            poller.register(fd, select.POLLIN)
        try:
            while not self._stopping.is_set():
                poller.poll(DRAIN_INTERVAL_S * 1000)
                self._drain()
        except OSError as exc:
            self._failure = exc

    def _drain(self) -> None:
        """Every page each CPU's ring buffer holds (the last one partly filled), as the kernel keeps them;
        reading takes them out of the buffer, and an empty buffer answers at once instead of waiting."""
        for fd in self._pipes:
            while True:
                try:
                    page = os.read(fd, 1 << 20)
                except BlockingIOError:
                    break
                if not page:
                    break
                self._out.write(page)

    def _end_window(self, drain: bool) -> None:
        """Stop the drainer, take what the buffer still holds (if drain), and let go of the window's files."""
        self._stopping.set()
        os.write(self._wake_write, b"\0")
        self._drainer.join()
        try:
            if self._failure:
                raise HostError(f"writing the trace {self._out.name} failed while tracing: {self._failure}")
            if drain:
                self._drain()
        finally:
            for fd in (*self._pipes, self._wake_read, self._wake_write):
                os.close(fd)
            self._out.close()
            self._out = None

    def close(self) -> None:
        if self._out:
            # a window left open by a failure: its file keeps what was traced so far
            self._end_window(drain=False)
        remove_instance({"kind": "tracing_instance", "path": str(self.dir)})


def remove_instance(entry: dict) -> None:
    path = Path(entry["path"])
    if path.is_dir():
        (path / "tracing_on").write_text("0\n")
        for event in EVENTS:
            (path / "events" / "block" / event / "enable").write_text("0\n")
        path.rmdir()
    record.remove(entry)


class Blktrace:
    name = "blktrace"

    def __init__(self, devices: list[str]):
        self.devices = [f"/dev/{device_name(d)}" for d in devices]
        self.debugfs = _debugfs()
        self.proc: subprocess.Popen | None = None

    def start(self, label: str, out_dir: Path) -> None:
        # with several devices blktrace names its files <device>.blktrace.<cpu>, so each window gets a directory
        (out_dir / label).mkdir(exist_ok=True)
        cmd = ["blktrace", "-r", str(self.debugfs), "-D", str(out_dir / label)]
        for device in self.devices:
            cmd += ["-d", device]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        # blktrace needs a moment to set up its per-CPU relay channels
        time.sleep(0.5)
        if self.proc.poll() is not None:
            raise HostError(f"blktrace exited at start: {self.proc.stdout.read().decode().strip()}")

    def stop(self, label: str, out_dir: Path) -> dict:
        self.proc.send_signal(signal.SIGINT)
        try:
            out, _ = self.proc.communicate(timeout=BLKTRACE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            self.proc.kill()
            self.proc.communicate()
            raise HostError(f"blktrace did not stop within {BLKTRACE_STOP_TIMEOUT_S} s and was killed") from exc
        # its summary line reads "Total:  N events (dropped D),  K KiB data"
        lost = sum(int(m) for m in re.findall(r"Total:.*\(dropped (\d+)\)", out.decode()))
        files = sorted(f"{label}/{p.name}" for p in (out_dir / label).glob("*.blktrace.*"))
        return {"files": files, "events_lost": lost}

    def mark(self, text: str) -> None:
        """blktrace records no text of user space's: its windows have no marks."""

    def close(self) -> None:
        pass


def open_backend(choice: str, instance: str, devices: list[str], buffer_size_kb: int):
    if choice not in ("auto", "blktrace", "ftrace"):
        raise HostError(f"trace backend {choice!r} is unknown; allowed: auto, blktrace, ftrace")
    if choice == "blktrace" or (choice == "auto" and blktrace_works(devices)):
        return Blktrace(devices)
    return FtraceInstance(instance, devices, buffer_size_kb)
