"""Everything tierlab does with cgroups: where the host has the controllers it uses, the groups it makes there, the
limits it writes, the servers it puts in them, and their removal at teardown.

tierlab uses two controllers, named here as cgroup v2 names them: `memory` (PostgreSQL's page cache bound) and
`io` (the tiers' throttle emulation; cgroup v1 calls it `blkio`). Each is taken where the host has it: a cgroup v1
hierarchy of its own (legacy hosts, and hybrid ones, whose unified hierarchy at <root>/unified usually has no
controllers), else the cgroup v2 hierarchy, when its root lists it in cgroup.controllers.

The groups (a root's name is its directory's: /var/lib/tierlab -> tierlab):

  v1  <blkio mount>/<root name>                the tiers' throttle; every server of the root is put in it
      <memory mount>/<root name>-<instance>    a server's memory bound
  v2  <base>/tierlab-<root name>               the tiers' throttle (io.max); it holds no process, since a v2
                                               group that enables controllers for the groups below it may not
      <base>/tierlab-<root name>/<instance>    a server's leaf (a process is in one v2 group only), with its
                                               memory bound (memory.max) when it has one

<base> is the v2 hierarchy's root, or on a host systemd runs (which owns that tree and allows others only the
subtrees it delegates: systemd's "Control Group APIs and Delegation"), the group of a transient service of
tierlab's own, started with Delegate=yes.

Every group is recorded before it is made and removed at teardown (newest first, after the servers in it are
stopped); so are the controllers tierlab enables in a parent it does not own, and the service it starts. What
tierlab writes inside its own groups goes with them.
"""

import errno
import os
from dataclasses import dataclass
from pathlib import Path

from . import record, system
from .system import HostError, mounts, run

ROOT = Path("/sys/fs/cgroup")
# present where systemd is the init system (sd_booted())
SYSTEMD_RUNTIME = Path("/run/systemd/system")
# one set of groups per tierlab root (/var/lib/tierlab -> "tierlab"), so a test root never shares one
ROOT_NAME = record.STATE_DIR.parent.name
V1_NAMES = {"memory": "memory", "io": "blkio"}
# v1: a file per throttle key; v2: one io.max line per device, its keys in the order the kernel shows them
IO_V1_FILES = {"read_iops": "blkio.throttle.read_iops_device", "write_iops": "blkio.throttle.write_iops_device",
               "read_bps": "blkio.throttle.read_bps_device", "write_bps": "blkio.throttle.write_bps_device"}
IO_V2_KEYS = {"read_bps": "rbps", "write_bps": "wbps", "read_iops": "riops", "write_iops": "wiops"}
# why each controller is needed, and what to do instead without it
NEEDED_FOR = {
    "memory": ("engine=postgresql bounds its OS page cache with a cgroup memory controller",
               "a kernel booted with cgroup_disable=memory has none; Raspberry Pi OS needs cgroup_enable=memory",
               "give os_cache=unbounded to run with the page cache unbounded (recorded in the run's manifest)"),
    "io": ("tiers_emulation=throttle slows a tier with a cgroup I/O controller",
           "a kernel built without CONFIG_BLK_DEV_THROTTLING has none",
           "give the tier no throttle (throttle: {}), or emulate it with a device model (tiers_emulation=model)"),
}
# the leaf that the process of tierlab's service (on a host systemd runs) moves to, so that the rest of the
# service's subtree can have controllers
UNIT_KEEPER = "keeper"
KINDS = ("cgroup", "subtree_control", "systemd_unit")


@dataclass(frozen=True)
class Hierarchy:
    """Where a controller is: a cgroup v1 hierarchy of its own, or the v2 one (mount: the hierarchy's root)."""
    version: int
    mount: Path


def mode() -> str:
    """The host's cgroup setup, from what is mounted at the cgroup root: `v2` (cgroup2 there), `hybrid` (a tmpfs
    with v1 hierarchies and a cgroup2 at <root>/unified), `v1` (v1 hierarchies only) or `none`."""
    by_point = {Path(m.point): m.fs for m in mounts()}
    if by_point.get(ROOT) == "cgroup2":
        return "v2"
    if by_point.get(ROOT / "unified") == "cgroup2":
        return "hybrid"
    return "v1" if "cgroup" in by_point.values() else "none"


def _unified() -> Path | None:
    """The root of the v2 hierarchy, where one is mounted."""
    return {"v2": ROOT, "hybrid": ROOT / "unified"}.get(mode())


def hierarchy(controller: str) -> Hierarchy | None:
    """Where the host has the controller (`memory` or `io`), or None."""
    for mount in mounts():
        if mount.fs == "cgroup" and V1_NAMES[controller] in mount.options:
            return Hierarchy(1, Path(mount.point))
    unified = _unified()
    if unified is not None and controller in (unified / "cgroup.controllers").read_text().split():
        return Hierarchy(2, unified)
    return None


def lacking(controller: str) -> str:
    """What the host lacks where it has no such controller."""
    return (f"neither cgroup v1's {V1_NAMES[controller]} controller (no cgroup mount with it in {system.MOUNTINFO}) "
            f"nor a cgroup v2 hierarchy with '{controller}' in {_unified() or ROOT}/cgroup.controllers")


def fix(controller: str) -> str:
    """What to do on a host without the controller."""
    _, enable, instead = NEEDED_FOR[controller]
    return f"enable it in the kernel ({enable}), or {instead}"


def require(controller: str) -> Hierarchy:
    """Where the host has the controller; refused, saying why it is needed and what to do, where it has none."""
    found = hierarchy(controller)
    if found is None:
        raise HostError(f"{NEEDED_FOR[controller][0]}: this host ({os.uname().nodename}, cgroup mode {mode()}) has "
                        f"{lacking(controller)}; {fix(controller)}")
    return found


def _v2_controllers() -> list[str]:
    """tierlab's controllers that the host has in its v2 hierarchy."""
    return [name for name in V1_NAMES if (found := hierarchy(name)) is not None and found.version == 2]


def _make_group(group: Path) -> None:
    """mkdir in a cgroup file system, where the kernel fills the new directory with the group's files."""
    group.mkdir()


def _remove_group(group: Path) -> None:
    """rmdir in a cgroup file system, which takes the group's files along (refused while it holds a process)."""
    group.rmdir()


def _ensure_group(group: Path, version: int) -> bool:
    """Make a group unless it exists, recorded first so that teardown removes it; True if made. One that exists must
    be in the record: another root's (a tierlab_root of the same name elsewhere) is refused, as tierlab stops what is
    in its groups."""
    if group.is_dir():
        if not any(entry["path"] == str(group) for entry in record.entries("cgroup")):
            raise HostError(f"the cgroup {group} exists but this tierlab root did not make it (a root elsewhere whose "
                            "directory has this root's name, or one a failed teardown left: rmdir it once it holds no "
                            "process); give tierlab_root a directory name of its own")
        return False
    record.add("cgroup", path=str(group), version=version)
    _make_group(group)
    return True


def _enable(parent: Path, controllers: list[str], recorded: bool) -> None:
    """Enable the controllers parent lacks for the groups below it, in one write to its cgroup.subtree_control;
    recorded, with what was enabled before, where parent is not tierlab's to remove."""
    offered = (parent / "cgroup.controllers").read_text().split()
    missing = [name for name in controllers if name not in offered]
    if missing:
        raise HostError(f"{parent} does not offer the {' and '.join(missing)} controller to groups below it (its "
                        f"cgroup.controllers: {' '.join(offered) or 'none'}), so tierlab cannot bound or throttle its "
                        "servers there; enable it for that group in its parent's cgroup.subtree_control")
    enabled = (parent / "cgroup.subtree_control").read_text().split()
    wanted = [name for name in controllers if name not in enabled]
    if not wanted:
        return
    if recorded:
        record.add("subtree_control", path=str(parent), enabled=wanted, previous=" ".join(enabled))
    (parent / "cgroup.subtree_control").write_text(" ".join(f"+{name}" for name in wanted) + "\n")


def systemd_unit() -> str:
    """The transient service that holds tierlab's delegated subtree on a host systemd runs."""
    return f"tierlab-{ROOT_NAME}.service"


def systemd_run_command() -> list[str]:
    """What starts tierlab's service: its only process sleeps, and systemd removes the service's groups (tierlab's
    below them included) when it stops; --collect unloads it even when it failed, so that its name is free again."""
    return ["systemd-run", f"--unit={systemd_unit()}", f"--description=tierlab's cgroups ({ROOT_NAME})",
            "--property=Delegate=yes", "--collect", "--quiet", "/bin/sleep", "infinity"]


def _control_group(unit: str) -> str:
    """A unit's group in the v2 hierarchy as systemd gives it ('' when the unit does not run): how unit names map
    to groups is not systemd's API."""
    return run(["systemctl", "show", "--property=ControlGroup", "--value", unit]).stdout.strip()


def _unit_group(unified: Path) -> Path | None:
    control_group = _control_group(systemd_unit())
    return unified / control_group.lstrip("/") if control_group else None


def _start_unit(unified: Path) -> Path:
    """Start tierlab's service (recorded first, so that teardown stops it) and move its process to a leaf of its own:
    a v2 group with controllers enabled for the groups below it must hold no process."""
    unit = systemd_unit()
    record.add("systemd_unit", unit=unit)
    run(systemd_run_command())
    group = _unit_group(unified)
    if group is None:
        raise HostError(f"systemd started {unit} but shows no control group of it; see journalctl -u {unit}")
    keeper = group / UNIT_KEEPER
    # not recorded: systemd removes it with the service
    _make_group(keeper)
    main_pid = run(["systemctl", "show", "--property=MainPID", "--value", unit]).stdout.strip()
    (keeper / "cgroup.procs").write_text(f"{main_pid}\n")
    return group


def _v2_base(make: bool) -> Path | None:
    """Where tierlab's v2 groups go: the v2 hierarchy's root, or on a host systemd runs, the group of tierlab's
    delegated service (started if make; else None while it does not run)."""
    unified = _unified()
    if unified is None or not SYSTEMD_RUNTIME.is_dir():
        return unified
    if {"kind": "systemd_unit", "unit": systemd_unit()} not in record.entries("systemd_unit"):
        if not make:
            return None
        if _unit_group(unified) is not None:
            raise HostError(f"the systemd unit {systemd_unit()} runs but this tierlab root did not start it (a root "
                            "elsewhere whose directory has this root's name); give tierlab_root a directory name of "
                            "its own")
        return _start_unit(unified)
    group = _unit_group(unified)
    # recorded but not running: the host rebooted since
    return _start_unit(unified) if group is None and make else group


def _v2_parent(changes: list[str]) -> Path:
    """tierlab's v2 group of this root, made where need be, with every controller tierlab takes from v2 enabled for
    it: all at once, so that the base's change is recorded before the group and teardown (newest first) undoes it
    once the group is gone. A service's group goes with the service, so its change is not recorded."""
    base = _v2_base(make=True)
    _enable(base, _v2_controllers(), recorded=base == _unified())
    parent = base / f"tierlab-{ROOT_NAME}"
    if _ensure_group(parent, 2):
        changes.append(f"created cgroup {parent}")
    return parent


def _existing_v2_parent() -> Path | None:
    if not _v2_controllers():
        return None
    base = _v2_base(make=False)
    parent = None if base is None else base / f"tierlab-{ROOT_NAME}"
    return parent if parent is not None and parent.is_dir() else None


def throttle(device: str, limits: dict, changes: list[str]) -> None:
    """Throttle the I/O of every server of the root on a device ('major:minor'): a tier's throttle (read_iops,
    write_iops, read_bps, write_bps)."""
    unknown = sorted(set(limits) - set(IO_V1_FILES))
    if unknown:
        raise HostError(f"unknown throttle setting {unknown[0]!r}; allowed: {', '.join(IO_V1_FILES)}")
    io = require("io")
    if io.version == 1:
        group = io.mount / ROOT_NAME
        if _ensure_group(group, 1):
            changes.append(f"created cgroup {group}")
        for key, value in limits.items():
            knob = group / IO_V1_FILES[key]
            line = f"{device} {int(value)}"
            if line not in knob.read_text().split("\n"):
                knob.write_text(line + "\n")
                changes.append(f"throttled {device} {key}={value}")
        return
    knob = _v2_parent(changes) / "io.max"
    # a key not given, or 0 (no limit in v1's files), is no limit
    line = device + "".join(f" {key}={int(limits[name]) if limits.get(name) else 'max'}"
                            for name, key in IO_V2_KEYS.items())
    if line not in knob.read_text().splitlines():
        knob.write_text(line + "\n")
        changes.append(f"throttled {line} (io.max)")


def _v1_memory_group(memory: Hierarchy, instance: str) -> Path:
    return memory.mount / f"{ROOT_NAME}-{instance}"


def server_groups(instance: str, memory_limit_bytes: int | None) -> list[Path]:
    """A server's groups of its own, made where need be, with its memory bound when it has one (None: unbounded):
    on v1, its memory group; on v2, its leaf below tierlab's group, when its memory is bounded or tierlab's group
    is there for the tiers' throttle. The tiers' v1 throttle group is every server's (join)."""
    memory = None if memory_limit_bytes is None else require("memory")
    groups = []
    if memory is not None and memory.version == 1:
        group = _v1_memory_group(memory, instance)
        _ensure_group(group, 1)
        (group / "memory.limit_in_bytes").write_text(f"{memory_limit_bytes}\n")
        groups.append(group)
    bounded_v2 = memory is not None and memory.version == 2
    parent = _v2_parent([]) if bounded_v2 else _existing_v2_parent()
    if parent is not None:
        if bounded_v2:
            _enable(parent, ["memory"], recorded=False)
        leaf = parent / instance
        _ensure_group(leaf, 2)
        if bounded_v2:
            (leaf / "memory.max").write_text(f"{memory_limit_bytes}\n")
        elif (leaf / "memory.max").exists():
            # the bound of an earlier start goes when the server's memory is no longer bounded (os_cache=unbounded)
            (leaf / "memory.max").write_text("max\n")
        groups.append(leaf)
    return groups


def join(pid: int, groups: list[Path]) -> None:
    """Put a server in the tiers' v1 throttle group, where there is one, and in its own groups (server_groups)."""
    io = hierarchy("io")
    throttled = io.mount / ROOT_NAME if io is not None and io.version == 1 else None
    shared = [throttled] if throttled is not None and throttled.is_dir() else []
    for group in shared + groups:
        (group / "cgroup.procs").write_text(f"{pid}\n")


def memory_group(instance: str) -> dict | None:
    """The group that bounds a server's memory, as the manifest records it ({version, path}), or None."""
    memory = hierarchy("memory")
    if memory is None:
        return None
    if memory.version == 1:
        group = _v1_memory_group(memory, instance)
    else:
        parent = _existing_v2_parent()
        group = None if parent is None else parent / instance
    return {"version": memory.version, "path": str(group)} if group is not None and group.is_dir() else None


def memory_held(group: dict) -> tuple[int, int]:
    """What a server's memory group (as memory_group names it) holds: all of it, and its page cache, the file pages
    its processes read and do not map (those they map are their programs). Shared memory (shared_buffers) is not
    page cache: the kernel keeps it with anonymous memory, and counts it in the mapped pages too."""
    path = Path(group["path"])
    stat = dict(line.split() for line in (path / "memory.stat").read_text().splitlines())
    total = int((path / ("memory.usage_in_bytes" if group["version"] == 1 else "memory.current")).read_text())
    mapped = int(stat["mapped_file" if group["version"] == 1 else "file_mapped"]) - int(stat["shmem"])
    page_cache = int(stat["active_file"]) + int(stat["inactive_file"]) - max(0, mapped)
    return total, max(0, page_cache)


def drop_page_cache(group: dict, excess_bytes: int, limit_bytes: int) -> None:
    """Have the kernel drop excess_bytes of a server's memory group's page cache (memory_held), the pages it would
    evict first, the group's bound (limit_bytes) left as it is. cgroup v2 does it through memory.reclaim. cgroup v1
    has no such file: a limit written below what the group holds is set only once the kernel has reclaimed down to
    it, while the group's limit is still the old one, so the limit is written that much lower and then given back
    (between the two writes a charge reclaims page cache of its own, of which the group has os_cache). Without swap
    the kernel reclaims only page cache: the processes' own memory and shared memory stay. A drop refused because
    the pages are dirty and not yet written (v1: EBUSY, v2: EAGAIN) waits for the next."""
    path = Path(group["path"])
    if group["version"] == 2:
        try:
            (path / "memory.reclaim").write_text(f"{excess_bytes}\n")
        except OSError as error:
            if error.errno != errno.EAGAIN:
                raise
        return
    try:
        (path / "memory.limit_in_bytes").write_text(f"{memory_held(group)[0] - excess_bytes}\n")
    except OSError as error:
        if error.errno != errno.EBUSY:
            raise
    finally:
        (path / "memory.limit_in_bytes").write_text(f"{limit_bytes}\n")


def remove_recorded(entry: dict) -> str | None:
    """Undo one recorded cgroup change (teardown, newest first: the servers in a group are stopped by then); what
    is left as it is and why, or None."""
    if entry["kind"] == "cgroup":
        if Path(entry["path"]).is_dir():
            _remove_group(Path(entry["path"]))
    elif entry["kind"] == "subtree_control":
        parent = Path(entry["path"])
        # disabling a controller takes it from every group below: from others' too, which may have come since
        others = sorted(child.name for child in parent.iterdir() if child.is_dir())
        if others:
            return (f"left {' '.join(entry['enabled'])} enabled in {parent}/cgroup.subtree_control: groups tierlab did "
                    f"not make are below it ({', '.join(others)})")
        (parent / "cgroup.subtree_control").write_text(" ".join(f"-{name}" for name in entry["enabled"]) + "\n")
    elif entry["kind"] == "systemd_unit":
        if _control_group(entry["unit"]):
            run(["systemctl", "stop", entry["unit"]])
    return None
