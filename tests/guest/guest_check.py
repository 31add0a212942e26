"""Run inside the Debian 12 guest (tests/guest/test_cgroup_v2.py), as root, at boot, by systemd: tierlab's host agent
on a host that boots with cgroup v2 only, under systemd. A throttled tier brought up as `tiers_emulation=throttle`
does, a server's memory bound as PostgreSQL's is, and teardown; what each did, as one JSON object on stdout."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path("/var/lib/tierlab-guest")
os.environ["TIERLAB_STATE_DIR"] = str(ROOT / "state")
sys.path.insert(0, str(Path(__file__).parent))

from tierlab_host import cgroups, record, teardown, tiers  # noqa: E402

MIB = 1 << 20
READ_BPS = 16 * MIB
READ_BYTES = 64 * MIB
MEMORY_MAX = 64 * MIB
FILE_BYTES = 256 * MIB
# the guest emulates its CPU: generous
COMMAND_TIMEOUT_S = 300


def timed_read(argv: list[str], groups: list[Path]) -> float:
    """Seconds argv takes, run in the given groups (none: where this process is)."""
    started = time.monotonic()
    subprocess.run(argv, check=True, timeout=COMMAND_TIMEOUT_S,
                   preexec_fn=(lambda: cgroups.join(os.getpid(), groups)) if groups else None)
    return time.monotonic() - started


def main() -> None:
    found: dict = {"mode": cgroups.mode(), "systemd": cgroups.SYSTEMD_RUNTIME.is_dir(),
                   "kernel": os.uname().release}
    spec = {"name": "nand", "role": "capacity", "emulation": "throttle", "image": str(ROOT / "images" / "nand.img"),
            "size_bytes": 512 * MIB, "path": str(ROOT / "tiers" / "nand"), "filesystem": "ext4",
            "throttle": {"read_bps": READ_BPS}}
    up = tiers.up([spec])
    (tier,) = up["tiers"]
    found["changes"] = up["changes"]
    groups = cgroups.server_groups("reader", MEMORY_MAX)
    found["groups"] = [str(g) for g in groups]
    found["io_max"] = (groups[0].parent / "io.max").read_text()
    found["memory_max"] = (groups[0] / "memory.max").read_text().strip()
    read = ["dd", f"if={tier['block_device']}", "of=/dev/null", "bs=1M", f"count={READ_BYTES // MIB}",
            "iflag=direct", "status=none"]
    found["unthrottled_read_s"] = timed_read(read, [])
    found["throttled_read_s"] = timed_read(read, groups)
    big = Path(spec["path"]) / "big"
    subprocess.run(["dd", "if=/dev/zero", f"of={big}", "bs=1M", f"count={FILE_BYTES // MIB}", "conv=fsync",
                    "status=none"], check=True, timeout=COMMAND_TIMEOUT_S)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")
    timed_read(["dd", f"if={big}", "of=/dev/null", "bs=1M", "status=none"], groups)
    stat = dict(line.split() for line in (groups[0] / "memory.stat").read_text().splitlines())
    found["reader_file_bytes"] = int(stat["file"])
    found["reader_peak_bytes"] = int((groups[0] / "memory.peak").read_text())
    big.unlink()
    found["recorded"] = [entry["kind"] for entry in record.entries()]
    found["teardown"] = teardown.down()
    found["left"] = {str(g): g.is_dir() for g in [*groups, groups[0].parent]}
    found["unit_after"] = subprocess.run(["systemctl", "show", "--property=ActiveState", "--value",
                                          cgroups.systemd_unit()], capture_output=True, text=True,
                                         timeout=COMMAND_TIMEOUT_S).stdout.strip()
    found["record_after"] = record.entries()
    print(json.dumps(found))


if __name__ == "__main__":
    main()
