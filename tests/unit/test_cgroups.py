"""The host agent's cgroups (tierlab_host.cgroups) on hierarchies laid out in a temporary directory as the kernel
shows them: cgroup v1 (a mount per controller), v2 (unified) and hybrid (v1 controllers beside a cgroup2 mount
with none), without systemd and with it.

The test plays the kernel's part where a plain directory cannot: mkdir fills a new group with the files the kernel
would show (from the hierarchy's mount; in v2, from what its parent's cgroup.subtree_control enables, which it then
shows as the kernel does: the names enabled, without the '+' tierlab wrote), and rmdir takes them along, refusing a
group that holds a process. Every other file holds what tierlab last wrote to it."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tierlab_host import cgroups, page_cache, record, system, teardown, tiers
from tierlab_host.engines import server
from tierlab_host.system import HostError

GIB = 1 << 30
MEMORY_LIMIT = 200 << 20
PID = 4321
HOST = os.uname().nodename
V2_CONTROLLERS = "cpuset cpu io memory hugetlb pids rdma misc"
BLKIO_FILES = ("blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device",
               "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device")


def kernel_applies_subtree_control(group):
    """The controllers group enables for the groups below it, its cgroup.subtree_control rewritten as the kernel
    shows them: the names it showed, with what tierlab last wrote applied ('+name' enables, '-name' disables)."""
    enabled = [name.lstrip("+") for name in (group / "cgroup.subtree_control").read_text().split()
               if not name.startswith("-")]
    (group / "cgroup.subtree_control").write_text(" ".join(enabled) + "\n" if enabled else "")
    return enabled


def kernel_mkdir(group):
    group.mkdir()
    (group / "cgroup.procs").write_text("")
    mount = max((m for m in system.mounts() if str(group).startswith(m.point + "/")), key=lambda m: len(m.point))
    if mount.fs == "cgroup":
        if "memory" in mount.options:
            (group / "memory.limit_in_bytes").write_text("9223372036854771712\n")
        if "blkio" in mount.options:
            for name in BLKIO_FILES:
                (group / name).write_text("")
        return
    enabled = kernel_applies_subtree_control(group.parent)
    (group / "cgroup.controllers").write_text(" ".join(enabled) + "\n")
    (group / "cgroup.subtree_control").write_text("")
    if "memory" in enabled:
        (group / "memory.max").write_text("max\n")
    if "io" in enabled:
        (group / "io.max").write_text("")


def kernel_rmdir(group):
    if (group / "cgroup.procs").read_text().split():
        raise OSError(16, "Device or resource busy", str(group))
    for item in group.iterdir():
        if item.is_file():
            item.unlink()
    group.rmdir()


@pytest.fixture
def root(tmp_path, monkeypatch):
    """The cgroup root of a host that mounts nothing there yet and runs no systemd; the root's record is empty."""
    cgroup_root = tmp_path / "sys" / "fs" / "cgroup"
    cgroup_root.mkdir(parents=True)
    monkeypatch.setattr(cgroups, "ROOT", cgroup_root)
    monkeypatch.setattr(cgroups, "ROOT_NAME", "tierlab")
    monkeypatch.setattr(cgroups, "SYSTEMD_RUNTIME", tmp_path / "run" / "systemd" / "system")
    monkeypatch.setattr(cgroups, "_make_group", kernel_mkdir)
    monkeypatch.setattr(cgroups, "_remove_group", kernel_rmdir)
    monkeypatch.setattr(system, "MOUNTINFO", tmp_path / "mountinfo")
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(record, "RECORD_PATH", tmp_path / "state" / "created.json")
    (tmp_path / "mountinfo").write_text(f"22 1 259:1 / / rw,relatime - ext4 /dev/vda rw\n"
                                        f"23 22 0:21 / {tmp_path}/sys rw,relatime - sysfs sysfs rw\n")
    return cgroup_root


def mount(root, point, fs, options):
    with open(system.MOUNTINFO, "a") as mountinfo:
        mountinfo.write(f"{30 + len(system.mounts())} 23 0:{40 + len(system.mounts())} / {point} rw,relatime - "
                        f"{fs} {fs} {options}\n")


def legacy(root, controllers=("memory", "blkio", "cpu,cpuacct")):
    """cgroup v1: a tmpfs at the root, a hierarchy mounted below it per controller (or set of them)."""
    mount(root, root, "tmpfs", "rw,mode=755")
    for names in controllers:
        (root / names).mkdir()
        mount(root, root / names, "cgroup", f"rw,{names}")
        (root / names / "cgroup.procs").write_text("1\n")
    if "memory" in controllers:
        (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")


def unified(point, controllers=V2_CONTROLLERS):
    """cgroup v2 mounted at point, its root offering these controllers to the groups below it."""
    point.mkdir(exist_ok=True)
    mount(point, point, "cgroup2", "rw,nsdelegate,memory_recursiveprot")
    (point / "cgroup.controllers").write_text(controllers + "\n")
    (point / "cgroup.subtree_control").write_text("")
    (point / "cgroup.procs").write_text("1\n")


def hybrid(root, unified_controllers=""):
    """v1 controllers, and a cgroup2 at <root>/unified (systemd's hybrid mode: usually without controllers)."""
    legacy(root)
    unified(root / "unified", unified_controllers)


@pytest.mark.parametrize(("layout", "mode"), [(legacy, "v1"), (hybrid, "hybrid"), (unified, "v2")])
def test_the_mode_is_read_from_what_is_mounted_at_the_cgroup_root(root, layout, mode):
    layout(root)
    assert cgroups.mode() == mode


def test_a_host_without_cgroups_mounted_has_mode_none(root):
    assert cgroups.mode() == "none"


def test_a_hybrid_host_s_controllers_are_its_v1_ones_not_the_unified_hierarchy_s(root):
    hybrid(root, unified_controllers="memory io")
    assert (cgroups.hierarchy("memory"), cgroups.hierarchy("io")) == (
        cgroups.Hierarchy(1, root / "memory"), cgroups.Hierarchy(1, root / "blkio"))


def test_a_hybrid_host_s_controller_without_a_v1_mount_is_taken_from_the_unified_hierarchy_that_offers_it(root):
    legacy(root, controllers=("blkio",))
    unified(root / "unified", "memory")
    assert (cgroups.hierarchy("memory"), cgroups.hierarchy("io")) == (
        cgroups.Hierarchy(2, root / "unified"), cgroups.Hierarchy(1, root / "blkio"))


# cgroup v1

def test_a_v1_throttle_is_the_root_s_blkio_group_with_a_line_per_key(root):
    legacy(root)
    changes = []
    cgroups.throttle("7:1", {"read_iops": 2000, "write_bps": 500000000}, changes)
    group = root / "blkio" / "tierlab"
    assert [(group / name).read_text() for name in BLKIO_FILES] == ["7:1 2000\n", "", "", "7:1 500000000\n"]
    assert changes == [f"created cgroup {group}", "throttled 7:1 read_iops=2000", "throttled 7:1 write_bps=500000000"]
    assert record.entries() == [{"kind": "cgroup", "path": str(group), "version": 1}]


def test_a_v1_throttle_already_in_place_changes_nothing(root):
    legacy(root)
    cgroups.throttle("7:1", {"read_iops": 2000}, [])
    changes = []
    cgroups.throttle("7:1", {"read_iops": 2000}, changes)
    assert changes == []
    assert len(record.entries()) == 1


def test_a_v1_memory_bound_is_a_memory_group_per_instance_with_its_limit(root):
    legacy(root)
    group = root / "memory" / "tierlab-postgresql-8k"
    assert cgroups.server_groups("postgresql-8k", MEMORY_LIMIT) == [group]
    assert (group / "memory.limit_in_bytes").read_text() == "209715200\n"
    assert record.entries() == [{"kind": "cgroup", "path": str(group), "version": 1}]


def test_a_v1_server_joins_the_throttle_group_and_its_memory_group(root):
    legacy(root)
    cgroups.throttle("7:1", {"read_iops": 2000}, [])
    groups = cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    cgroups.join(PID, groups)
    assert (root / "blkio" / "tierlab" / "cgroup.procs").read_text() == "4321\n"
    assert (root / "memory" / "tierlab-postgresql-8k" / "cgroup.procs").read_text() == "4321\n"


def test_a_v1_server_without_a_memory_bound_has_no_group_of_its_own(root):
    legacy(root)
    assert cgroups.server_groups("postgresql-8k", None) == []
    assert sorted(p.name for p in (root / "memory").iterdir()) == ["cgroup.procs", "memory.limit_in_bytes"]
    assert record.entries() == []


def test_a_v1_group_that_exists_but_is_not_in_the_record_is_refused(root):
    legacy(root)
    kernel_mkdir(root / "memory" / "tierlab-postgresql-8k")
    with pytest.raises(HostError) as err:
        cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    assert str(err.value) == (
        f"the cgroup {root}/memory/tierlab-postgresql-8k exists but this tierlab root did not make it (a root elsewhere "
        "whose directory has this root's name, or one a failed teardown left: rmdir it once it holds no process); "
        "give tierlab_root a directory name of its own")


def test_v1_teardown_removes_the_groups_it_made_newest_first(root):
    legacy(root)
    cgroups.throttle("7:1", {"read_iops": 2000}, [])
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    made = record.entries()
    assert teardown.down() == {"changed": True, "removed": made[::-1], "left": []}
    assert not (root / "blkio" / "tierlab").exists() and not (root / "memory" / "tierlab-postgresql-8k").exists()
    assert record.entries() == []


def test_the_manifest_names_the_v1_group_that_bounds_a_server_s_memory(root):
    legacy(root)
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    assert cgroups.memory_group("postgresql-8k") == {"version": 1, "path": f"{root}/memory/tierlab-postgresql-8k"}


def v1_memory_stat(group, usage, active_file, inactive_file, mapped_file, shmem):
    """What the kernel shows in a v1 memory group's memory.stat (the lines tierlab reads among others) and
    memory.usage_in_bytes."""
    (group / "memory.stat").write_text(
        f"cache {active_file + inactive_file + shmem}\nrss 12582912\nrss_huge 0\nshmem {shmem}\n"
        f"mapped_file {mapped_file}\ndirty 4096\nwriteback 0\ninactive_anon 0\nactive_anon 12582912\n"
        f"inactive_file {inactive_file}\nactive_file {active_file}\nunevictable 0\n")
    (group / "memory.usage_in_bytes").write_text(f"{usage}\n")


def test_a_v1_group_s_page_cache_is_its_file_pages_less_those_its_processes_map_besides_shared_memory(root):
    legacy(root)
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    group = cgroups.memory_group("postgresql-8k")
    # 8 MiB of shared_buffers (all mapped), 3 MiB of mapped programs, 40 MiB of file pages in all
    v1_memory_stat(Path(group["path"]), 61 << 20, 30 << 20, 10 << 20, 11 << 20, 8 << 20)
    assert cgroups.memory_held(group) == (61 << 20, 37 << 20)


@pytest.fixture
def limit_writes(monkeypatch):
    """Every value written to a memory group's limit or reclaim file, in order: the kernel keeps only the last."""
    writes = []
    write_text = Path.write_text

    def logged(path, text, *args, **kwargs):
        if path.name in ("memory.limit_in_bytes", "memory.reclaim"):
            writes.append((path.name, int(text)))
        return write_text(path, text, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", logged)
    return writes


def test_a_v1_group_drops_page_cache_by_a_limit_that_much_below_what_it_holds_then_gets_its_bound_back(
        root, limit_writes):
    legacy(root)
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    group = cgroups.memory_group("postgresql-8k")
    v1_memory_stat(Path(group["path"]), 61 << 20, 30 << 20, 10 << 20, 11 << 20, 8 << 20)
    limit_writes.clear()
    cgroups.drop_page_cache(group, 20 << 20, MEMORY_LIMIT)
    assert limit_writes == [("memory.limit_in_bytes", 41 << 20), ("memory.limit_in_bytes", MEMORY_LIMIT)]


def test_the_page_cache_hold_drops_what_exceeds_os_cache_and_keeps_each_window_s_most(root, limit_writes):
    legacy(root)
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    group = cgroups.memory_group("postgresql-8k")
    path = Path(group["path"])
    hold = page_cache.PageCacheHold(group, 16 << 20, MEMORY_LIMIT)
    limit_writes.clear()
    # 24 MiB held by the processes (12 anonymous, 8 shared, 4 of programs) and 12 MiB of page cache: nothing to drop
    v1_memory_stat(path, 36 << 20, 10 << 20, 6 << 20, 12 << 20, 8 << 20)
    hold.hold_once()
    assert limit_writes == []
    # 30 MiB held by the processes and 62 MiB of page cache: 46 MiB over os_cache
    v1_memory_stat(path, 92 << 20, 40 << 20, 26 << 20, 12 << 20, 8 << 20)
    hold.hold_once()
    assert limit_writes == [("memory.limit_in_bytes", 46 << 20), ("memory.limit_in_bytes", MEMORY_LIMIT)]
    assert hold.window_figures() == {"page_cache_max_bytes": 62 << 20, "process_memory_max_bytes": 30 << 20}
    hold.start_window()
    v1_memory_stat(path, 36 << 20, 10 << 20, 6 << 20, 12 << 20, 8 << 20)
    hold.hold_once()
    assert hold.window_figures() == {"page_cache_max_bytes": 12 << 20, "process_memory_max_bytes": 24 << 20}


# cgroup v2, no systemd

def test_a_v2_memory_bound_is_a_leaf_below_tierlab_s_group_with_the_controllers_enabled_above_it(root):
    unified(root)
    parent, leaf = root / "tierlab-tierlab", root / "tierlab-tierlab" / "postgresql-8k"
    assert cgroups.server_groups("postgresql-8k", MEMORY_LIMIT) == [leaf]
    # every controller tierlab takes from v2 is enabled at once, so that the root's change is recorded before the group
    assert (root / "cgroup.subtree_control").read_text() == "memory io\n"
    assert (parent / "cgroup.subtree_control").read_text() == "memory\n"
    assert (leaf / "memory.max").read_text() == "209715200\n"
    assert record.entries() == [
        {"kind": "subtree_control", "path": str(root), "enabled": ["memory", "io"], "previous": ""},
        {"kind": "cgroup", "path": str(parent), "version": 2},
        {"kind": "cgroup", "path": str(leaf), "version": 2}]


def test_a_v2_root_s_controllers_enabled_before_tierlab_are_neither_written_nor_recorded(root):
    unified(root)
    (root / "cgroup.subtree_control").write_text("cpu io memory pids\n")
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    assert (root / "cgroup.subtree_control").read_text() == "cpu io memory pids\n"
    assert [entry["kind"] for entry in record.entries()] == ["cgroup", "cgroup"]


def test_a_v2_throttle_is_one_io_max_line_on_tierlab_s_group_with_the_keys_not_given_max(root):
    unified(root)
    changes = []
    cgroups.throttle("7:1", {"read_iops": 2000, "write_bps": 500000000}, changes)
    parent = root / "tierlab-tierlab"
    assert (parent / "io.max").read_text() == "7:1 rbps=max wbps=500000000 riops=2000 wiops=max\n"
    assert changes == [f"created cgroup {parent}", "throttled 7:1 rbps=max wbps=500000000 riops=2000 wiops=max (io.max)"]


def test_a_v2_throttle_already_in_place_changes_nothing(root):
    unified(root)
    cgroups.throttle("7:1", {"read_iops": 2000}, [])
    made = record.entries()
    changes = []
    cgroups.throttle("7:1", {"read_iops": 2000}, changes)
    assert changes == []
    assert record.entries() == made


def test_a_v2_server_without_a_memory_bound_on_throttled_tiers_gets_a_leaf_without_one(root):
    unified(root)
    cgroups.throttle("7:1", {"read_iops": 2000}, [])
    leaf = root / "tierlab-tierlab" / "mariadb-16k"
    groups = cgroups.server_groups("mariadb-16k", None)
    cgroups.join(PID, groups)
    assert groups == [leaf]
    assert sorted(p.name for p in leaf.iterdir()) == ["cgroup.controllers", "cgroup.procs", "cgroup.subtree_control"]
    assert (leaf / "cgroup.procs").read_text() == "4321\n"


def test_a_v2_server_whose_memory_is_no_longer_bounded_has_its_leaf_s_bound_lifted(root):
    unified(root)
    leaf = root / "tierlab-tierlab" / "postgresql-8k"
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    assert cgroups.server_groups("postgresql-8k", None) == [leaf]
    assert (leaf / "memory.max").read_text() == "max\n"


def test_a_v2_server_neither_bounded_nor_throttled_gets_no_group(root):
    unified(root)
    assert cgroups.server_groups("mariadb-16k", None) == []
    assert record.entries() == []
    assert (root / "cgroup.subtree_control").read_text() == ""


def test_v2_teardown_removes_the_groups_and_disables_the_controllers_it_enabled(root):
    unified(root)
    cgroups.throttle("7:1", {"read_iops": 2000}, [])
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    made = record.entries()
    assert teardown.down() == {"changed": True, "removed": made[::-1], "left": []}
    assert not (root / "tierlab-tierlab").exists()
    assert (root / "cgroup.subtree_control").read_text() == "-memory -io\n"


def test_v2_teardown_leaves_the_controllers_enabled_where_groups_tierlab_did_not_make_remain(root):
    unified(root)
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    kernel_mkdir(root / "init.scope")
    assert teardown.down()["left"] == [
        f"left memory io enabled in {root}/cgroup.subtree_control: groups tierlab did not make are below it "
        "(init.scope)"]
    assert (root / "cgroup.subtree_control").read_text() == "memory io\n"
    assert record.entries() == []


def test_the_manifest_names_the_v2_leaf_that_bounds_a_server_s_memory(root):
    unified(root)
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    assert cgroups.memory_group("postgresql-8k") == {"version": 2, "path": f"{root}/tierlab-tierlab/postgresql-8k"}


def test_a_server_started_with_a_memory_bound_on_v2_runs_in_its_leaf_which_its_record_names(root, tmp_path):
    unified(root)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    marker = f"--config-file={tmp_path}/postgresql.conf"
    started = server.start("postgresql-8k", "postgresql", [sys.executable, "-c", "import time; time.sleep(60)", marker],
                           marker, str(tmp_path / "server.log"), lambda: True, port, ["SIGTERM"],
                           memory_limit_bytes=MEMORY_LIMIT)
    leaf = root / "tierlab-tierlab" / "postgresql-8k"
    try:
        assert (leaf / "cgroup.procs").read_text() == f"{started['pid']}\n"
        assert (leaf / "memory.max").read_text() == "209715200\n"
        (entry,) = record.entries("process")
        assert entry["groups"] == [str(leaf / "cgroup.procs")]
    finally:
        # the kernel drops a process that ends from its group: stop must not find its pid there afterwards
        (leaf / "cgroup.procs").write_text("")
        server.stop("postgresql-8k")


def test_a_v2_group_drops_page_cache_through_memory_reclaim_its_bound_left_as_it_is(root, limit_writes):
    unified(root)
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    group = cgroups.memory_group("postgresql-8k")
    leaf = Path(group["path"])
    (leaf / "memory.stat").write_text(
        "anon 12582912\nfile 50331648\nkernel 1048576\nshmem 8388608\nfile_mapped 11534336\nfile_dirty 0\n"
        "inactive_anon 0\nactive_anon 20971520\ninactive_file 10485760\nactive_file 31457280\nunevictable 0\n")
    (leaf / "memory.current").write_text(f"{62 << 20}\n")
    assert cgroups.memory_held(group) == (62 << 20, 37 << 20)
    cgroups.drop_page_cache(group, 20 << 20, MEMORY_LIMIT)
    assert limit_writes == [("memory.reclaim", 20 << 20)]
    assert (leaf / "memory.max").read_text() == "209715200\n"


# what a host lacks

def test_a_v2_host_without_the_memory_controller_is_refused_with_what_to_do(root):
    unified(root, "cpu io pids")
    with pytest.raises(HostError) as err:
        cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    assert str(err.value) == (
        f"engine=postgresql bounds its OS page cache with a cgroup memory controller: this host ({HOST}, cgroup mode "
        f"v2) has neither cgroup v1's memory controller (no cgroup mount with it in {system.MOUNTINFO}) nor a cgroup v2 "
        f"hierarchy with 'memory' in {root}/cgroup.controllers; enable it in the kernel (a kernel booted with "
        "cgroup_disable=memory has none; Raspberry Pi OS needs cgroup_enable=memory), or give os_cache=unbounded to "
        "run with the page cache unbounded (recorded in the run's manifest)")
    assert record.entries() == []


def test_a_hybrid_host_without_v1_memory_or_memory_in_the_unified_hierarchy_is_refused(root):
    legacy(root, controllers=("blkio",))
    unified(root / "unified", "")
    with pytest.raises(HostError) as err:
        cgroups.require("memory")
    assert f"(no cgroup mount with it in {system.MOUNTINFO}) nor a cgroup v2 hierarchy with 'memory' in " \
        f"{root}/unified/cgroup.controllers;" in str(err.value)
    assert f"this host ({HOST}, cgroup mode hybrid)" in str(err.value)


def test_throttled_tiers_on_a_host_without_an_io_controller_are_refused_before_anything_is_made(root, tmp_path):
    legacy(root, controllers=("memory", "cpu,cpuacct"))
    spec = {"name": "nand", "role": "capacity", "path": str(tmp_path / "nand"), "emulation": "throttle",
            "image": str(tmp_path / "images" / "nand.img"), "size_bytes": GIB, "filesystem": "ext4",
            "throttle": {"read_iops": 2000}}
    with pytest.raises(HostError) as err:
        tiers.up([spec])
    assert str(err.value) == (
        f"tiers_emulation=throttle slows a tier with a cgroup I/O controller: this host ({HOST}, cgroup mode v1) has "
        f"neither cgroup v1's blkio controller (no cgroup mount with it in {system.MOUNTINFO}) nor a cgroup v2 "
        f"hierarchy with 'io' in {root}/cgroup.controllers; enable it in the kernel (a kernel built without "
        "CONFIG_BLK_DEV_THROTTLING has none), or give the tier no throttle (throttle: {}), or emulate it with a "
        "device model (tiers_emulation=model)")
    assert record.entries() == []
    assert not (tmp_path / "images").exists()


# cgroup v2 on a host systemd runs

UNIT = "tierlab-tierlab.service"
UNIT_CONTROL_GROUP = f"/system.slice/{UNIT}"
SLEEPER = 777


class Systemd:
    """systemd-run and systemctl as far as tierlab asks them: the commands it was given, in order. Starting the
    service makes its group (systemd delegates it the controllers it has, its process in it); stopping it removes
    the group and everything below it."""

    def __init__(self, root):
        self.root = root
        self.commands = []
        self.running = False

    def run(self, cmd, timeout_s=600, check=True):
        self.commands.append(cmd)
        group = self.root / UNIT_CONTROL_GROUP.lstrip("/")
        output = ""
        if cmd[0] == "systemd-run":
            group.mkdir(parents=True)
            (group / "cgroup.controllers").write_text("cpu io memory pids\n")
            (group / "cgroup.subtree_control").write_text("")
            (group / "cgroup.procs").write_text(f"{SLEEPER}\n")
            self.running = True
        elif cmd[:2] == ["systemctl", "stop"]:
            for path in sorted(group.rglob("*"), key=lambda p: -len(p.parts)):
                path.unlink() if path.is_file() else path.rmdir()
            group.rmdir()
            self.running = False
        elif "--property=ControlGroup" in cmd:
            output = UNIT_CONTROL_GROUP if self.running else ""
        elif "--property=MainPID" in cmd:
            output = str(SLEEPER)
        return subprocess.CompletedProcess(cmd, 0, output + "\n", "")


@pytest.fixture
def systemd(root, monkeypatch):
    unified(root)
    cgroups.SYSTEMD_RUNTIME.mkdir(parents=True)
    manager = Systemd(root)
    monkeypatch.setattr(cgroups, "run", manager.run)
    return manager


def test_the_service_that_holds_tierlab_s_delegated_subtree_is_started_so():
    assert cgroups.systemd_run_command() == [
        "systemd-run", f"--unit={UNIT}", "--description=tierlab's cgroups (tierlab)", "--property=Delegate=yes",
        "--collect", "--quiet", "/bin/sleep", "infinity"]


def test_on_a_systemd_host_tierlab_s_groups_are_made_in_a_delegated_service_of_its_own(root, systemd):
    service = root / "system.slice" / UNIT
    leaf = service / "tierlab-tierlab" / "postgresql-8k"
    assert cgroups.server_groups("postgresql-8k", MEMORY_LIMIT) == [leaf]
    show = ["systemctl", "show", "--property=ControlGroup", "--value", UNIT]
    assert systemd.commands == [show, cgroups.systemd_run_command(), show,
                                ["systemctl", "show", "--property=MainPID", "--value", UNIT]]
    # its process leaves the service's group for a leaf, so that the groups below can have controllers
    assert (service / "keeper" / "cgroup.procs").read_text() == "777\n"
    assert (service / "cgroup.subtree_control").read_text() == "memory io\n"
    assert (leaf / "memory.max").read_text() == "209715200\n"
    assert (root / "cgroup.subtree_control").read_text() == ""
    # the service's own group goes with the service: only tierlab's groups in it are recorded
    assert record.entries() == [{"kind": "systemd_unit", "unit": UNIT},
                                {"kind": "cgroup", "path": str(service / "tierlab-tierlab"), "version": 2},
                                {"kind": "cgroup", "path": str(leaf), "version": 2}]


def test_on_a_systemd_host_teardown_removes_tierlab_s_groups_then_stops_its_service(root, systemd):
    cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    systemd.commands.clear()
    assert teardown.down()["left"] == []
    assert systemd.commands == [["systemctl", "show", "--property=ControlGroup", "--value", UNIT],
                                ["systemctl", "stop", UNIT]]
    assert not (root / "system.slice" / UNIT).exists()
    assert record.entries() == []


def test_on_a_systemd_host_a_service_of_that_name_tierlab_did_not_start_is_refused(root, systemd):
    systemd.run(cgroups.systemd_run_command())
    with pytest.raises(HostError) as err:
        cgroups.server_groups("postgresql-8k", MEMORY_LIMIT)
    assert str(err.value) == (f"the systemd unit {UNIT} runs but this tierlab root did not start it (a root elsewhere "
                              "whose directory has this root's name); give tierlab_root a directory name of its own")
