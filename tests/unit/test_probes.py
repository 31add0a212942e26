"""The host agent's probe (tierlab_host.probes) on files laid out as the kernel and Debian show them: what it reads,
what it asks apt and the network, and what it keeps between probes."""

import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tierlab_host import cgroups, probes, record, system, trace
from tierlab_host.system import HostError

GIB = 1 << 30
RELEASE = "http://deb.debian.org/debian/dists/sid/Release"
POLICY = """\
fuse3:
  Installed: 3.14.0-4
  Candidate: 3.14.0-4
  Version table:
 *** 3.14.0-4 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
mysql-server:
  Installed: (none)
  Candidate: (none)
  Version table:
"""


@pytest.fixture
def kernel(tmp_path, monkeypatch):
    """The kernel's files of a host that has no securityfs mounted, no kernel configuration to read and a plain boot
    command line; its tierlab root (which does not exist yet) under tmp_path."""
    for name, value in (("LOCKDOWN", tmp_path / "security" / "lockdown"), ("CMDLINE", tmp_path / "cmdline"),
                        ("KERNEL_CONFIGS", (tmp_path / "config.gz", tmp_path / "config"))):
        monkeypatch.setattr(trace, name, value)
    (tmp_path / "cmdline").write_text("console=ttyS0 quiet\n")
    monkeypatch.setattr(probes, "BOOT_ID", tmp_path / "boot_id")
    (tmp_path / "boot_id").write_text("boot-1\n")
    for name in ("APT_LISTS", "DPKG_STATUS"):
        monkeypatch.setattr(probes, name, tmp_path / name.lower())
    (tmp_path / "apt_lists").mkdir()
    (tmp_path / "dpkg_status").write_text("")
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "root" / "state")
    return tmp_path


# the kernel's lockdown, which decides whether blktrace can trace

def test_the_lockdown_level_in_force_is_the_bracketed_one_of_securityfs(kernel):
    (kernel / "security").mkdir()
    (kernel / "security" / "lockdown").write_text("none [integrity] confidentiality\n")
    assert trace.lockdown() == {"level": "integrity", "source": str(kernel / "security" / "lockdown")}


def test_without_securityfs_the_level_the_kernel_s_build_forces_is_in_force(kernel):
    (kernel / "config.gz").write_bytes(gzip.compress(b"CONFIG_SECURITY_LOCKDOWN_LSM=y\n"
                                                     b"# CONFIG_LOCK_DOWN_KERNEL_FORCE_NONE is not set\n"
                                                     b"CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY=y\n"))
    assert trace.lockdown() == {"level": "integrity",
                                "source": f"CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY in {kernel / 'config.gz'}"}


def test_a_boot_that_asks_for_more_than_the_build_forces_has_it(kernel):
    (kernel / "config").write_text("CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY=y\n")
    (kernel / "cmdline").write_text("quiet lockdown=confidentiality\n")
    assert trace.lockdown() == {"level": "confidentiality", "source": f"lockdown=confidentiality in {kernel / 'cmdline'}"}


def test_without_securityfs_a_kernel_that_forces_none_has_an_unknown_level(kernel):
    (kernel / "config").write_text("CONFIG_LOCK_DOWN_KERNEL_FORCE_NONE=y\n")
    assert trace.lockdown() == {"level": None,
                                "source": f"no {kernel / 'security' / 'lockdown'}: securityfs is not mounted"}


def test_under_lockdown_the_auto_backend_does_not_try_blktrace(kernel, monkeypatch):
    (kernel / "security").mkdir()
    (kernel / "security" / "lockdown").write_text("none [integrity] confidentiality\n")
    monkeypatch.setattr(trace.subprocess, "run", lambda cmd, **kwargs: subprocess.CompletedProcess(cmd, 0, "", ""))

    def no_debugfs():
        raise AssertionError("blktrace was tried")
    monkeypatch.setattr(trace, "_debugfs", no_debugfs)
    assert trace.blktrace_works(["7:0"]) is False


# what the probe reads

def test_memory_is_read_from_meminfo(tmp_path, monkeypatch):
    monkeypatch.setattr(probes, "MEMINFO", tmp_path / "meminfo")
    (tmp_path / "meminfo").write_text("MemTotal:       24683888 kB\nMemFree:        19638904 kB\n"
                                      "MemAvailable:   23881464 kB\nBuffers:          123456 kB\n")
    assert probes.memory() == {"total_bytes": 24683888 * 1024, "available_bytes": 23881464 * 1024}


def test_a_run_records_os_release_s_pretty_name_the_kernel_the_agent_s_python_the_cpus_and_the_memory(tmp_path,
                                                                                                       monkeypatch):
    monkeypatch.setattr(probes, "OS_RELEASE", tmp_path / "os-release")
    monkeypatch.setattr(probes, "MEMINFO", tmp_path / "meminfo")
    (tmp_path / "os-release").write_text('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n'
                                         'VERSION_ID="12"\n\nID=debian\n')
    (tmp_path / "meminfo").write_text("MemTotal:       24683888 kB\nMemAvailable:   23881464 kB\n")
    assert probes.machine(probes.memory()["total_bytes"]) == {
        "distribution": "Debian GNU/Linux 12 (bookworm)", "kernel": os.uname().release,
        "python": ".".join(map(str, sys.version_info[:3])), "cpus": os.cpu_count(), "memory_bytes": 24683888 * 1024}


def test_the_free_disk_of_a_root_not_made_yet_is_that_of_its_nearest_directory(tmp_path):
    found = probes.disk(tmp_path / "var" / "lib" / "tierlab")
    assert found["path"] == str(tmp_path)
    assert found["size_bytes"] == shutil.disk_usage(tmp_path).total
    assert 0 < found["free_bytes"] <= found["size_bytes"]


def test_the_root_s_images_and_generated_tables_are_read(tmp_path):
    (tmp_path / "images").mkdir()
    with open(tmp_path / "images" / "nand.img", "wb") as image:
        image.truncate(16 * GIB)
        image.write(b"x" * 8192)
    for table in ("nation", "region"):
        (tmp_path / "data" / "tpch" / "sf1").mkdir(parents=True, exist_ok=True)
        (tmp_path / "data" / "tpch" / "sf1" / f"{table}.tbl.complete").write_text("tpchgen-cli 4.0.0\n")
    # a table whose generation was cut short has no .complete
    (tmp_path / "data" / "tpch" / "sf1" / "lineitem.tbl").write_text("1|")
    found = probes.images(tmp_path)
    assert found["nand"]["size_bytes"] == 16 * GIB
    assert 8192 <= found["nand"]["allocated_bytes"] < GIB
    assert probes.data(tmp_path) == {"tpch/sf1": ["nation", "region"]}


def test_tracing_finds_what_is_mounted_and_what_the_kernel_has(tmp_path, monkeypatch):
    monkeypatch.setattr(probes, "FILESYSTEMS", tmp_path / "filesystems")
    (tmp_path / "filesystems").write_text("nodev\tsysfs\nnodev\ttmpfs\nnodev\tdebugfs\n\text4\n")
    monkeypatch.setattr(trace, "TRACEFS", tmp_path / "tracing")
    monkeypatch.setattr(trace, "DEBUGFS", tmp_path / "debug")
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "root" / "state")
    assert probes.tracing() == {"tracefs": None, "debugfs": None, "filesystems": ["debugfs"]}
    (tmp_path / "tracing" / "instances").mkdir(parents=True)
    assert probes.tracing()["tracefs"] == str(tmp_path / "tracing")


def test_a_cgroup_controller_the_host_lacks_comes_with_what_it_lacks_and_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(cgroups, "ROOT", tmp_path / "cgroup")
    monkeypatch.setattr(system, "MOUNTINFO", tmp_path / "mountinfo")
    (tmp_path / "mountinfo").write_text(f"31 23 0:28 / {tmp_path}/cgroup rw - tmpfs tmpfs rw,mode=755\n"
                                        f"35 31 0:32 / {tmp_path}/cgroup/memory rw - cgroup cgroup rw,memory\n")
    assert probes.cgroup_controllers() == {
        "mode": "v1",
        "memory": {"version": 1, "hierarchy": f"{tmp_path}/cgroup/memory"},
        "io": {"lacking": f"neither cgroup v1's blkio controller (no cgroup mount with it in {tmp_path}/mountinfo) "
                          f"nor a cgroup v2 hierarchy with 'io' in {tmp_path}/cgroup/cgroup.controllers",
               "fix": "enable it in the kernel (a kernel built without CONFIG_BLK_DEV_THROTTLING has none), or give "
                      "the tier no throttle (throttle: {}), or emulate it with a device model (tiers_emulation=model)"},
    }


# what it asks apt and the network

def test_apt_s_policy_gives_each_package_s_installed_and_candidate_versions(monkeypatch):
    asked = []

    def apt_cache(cmd, timeout_s):
        asked.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, POLICY, "N: Unable to locate package nosuch\n")
    monkeypatch.setattr(probes, "run", apt_cache)
    assert probes.apt_policy(["fuse3", "mysql-server", "nosuch"]) == {
        "fuse3": {"installed": "3.14.0-4", "candidate": "3.14.0-4"},
        "mysql-server": {"installed": None, "candidate": None},
        "nosuch": {"installed": None, "candidate": None},
    }
    assert asked == [["env", "LC_ALL=C", "apt-cache", "policy", "fuse3", "mysql-server", "nosuch"]]


def test_a_host_without_apt_says_so_for_every_package(monkeypatch):
    def no_apt(cmd, timeout_s):
        raise HostError("env is not installed on this host")
    monkeypatch.setattr(probes, "run", no_apt)
    assert probes.apt_policy(["fuse3"]) == {"fuse3": {"error": "env is not installed on this host"}}


def test_an_unreachable_archive_says_why(monkeypatch):
    monkeypatch.setattr(probes, "HEAD_TIMEOUT_S", 0.5)
    monkeypatch.setattr(probes.time, "time", lambda: 1000.0)
    assert probes.head("http://127.0.0.1:9/debian/dists/sid/Release") == {"error": "[Errno 111] Connection refused",
                                                                        "checked_at": 1000.0}


# what it keeps

class Asked:
    """apt-cache and HEAD as the probe asks them: what it asked, and the answers it gets."""

    def __init__(self, monkeypatch, archive=None):
        self.packages, self.urls = [], []
        self.archive = archive or {"status": 200}
        monkeypatch.setattr(probes, "apt_policy", self.apt_policy)
        monkeypatch.setattr(probes, "head", self.head)

    def apt_policy(self, packages):
        self.packages.append(packages)
        return {package: {"installed": "1.0", "candidate": "1.0"} for package in packages}

    def head(self, url):
        self.urls.append(url)
        return self.archive


def test_a_second_probe_asks_apt_and_the_network_nothing(kernel, monkeypatch):
    (kernel / "root").mkdir()
    asked = Asked(monkeypatch)
    first = probes.probe(["/dev/null"], ["sh"], ["fuse3"], [RELEASE])
    second = probes.probe(["/dev/null"], ["sh"], ["fuse3"], [RELEASE])
    assert (first["cached"], second["cached"]) == (False, True)
    assert (asked.packages, asked.urls) == ([["fuse3"]], [RELEASE])
    assert second["packages"] == {"fuse3": {"installed": "1.0", "candidate": "1.0"}}
    assert second["archives"] == {RELEASE: {"status": 200}}
    assert second["paths"] == {"/dev/null": True}
    assert second["tools"]["sh"].endswith("/sh")


def test_a_package_not_asked_before_is_asked_alone(kernel, monkeypatch):
    (kernel / "root").mkdir()
    asked = Asked(monkeypatch)
    probes.probe([], [], ["fuse3"], [])
    probes.probe([], [], ["fuse3", "blktrace"], [])
    assert asked.packages == [["fuse3"], ["blktrace"]]


def test_packages_installed_or_lists_refreshed_since_are_asked_again_but_not_the_archives(kernel, monkeypatch):
    (kernel / "root").mkdir()
    asked = Asked(monkeypatch)
    probes.probe([], [], ["fuse3"], [RELEASE])
    installed_at = (kernel / "dpkg_status").stat().st_mtime + 10
    os.utime(kernel / "dpkg_status", (installed_at, installed_at))
    probes.probe([], [], ["fuse3"], [RELEASE])
    assert (asked.packages, asked.urls) == ([["fuse3"], ["fuse3"]], [RELEASE])


def test_a_new_boot_drops_what_was_kept(kernel, monkeypatch):
    (kernel / "root").mkdir()
    asked = Asked(monkeypatch)
    probes.probe([], [], ["fuse3"], [RELEASE])
    (kernel / "boot_id").write_text("boot-2\n")
    probes.probe([], [], ["fuse3"], [RELEASE])
    assert (asked.packages, asked.urls) == ([["fuse3"], ["fuse3"]], [RELEASE, RELEASE])


def test_an_archive_that_did_not_answer_is_asked_again_after_a_while(kernel, monkeypatch):
    (kernel / "root").mkdir()
    now = [1000.0]
    monkeypatch.setattr(probes.time, "time", lambda: now[0])
    asked = Asked(monkeypatch, archive={"error": "timed out", "checked_at": 1000.0})
    probes.probe([], [], [], [RELEASE])
    now[0] += probes.ARCHIVE_RETRY_S - 1
    assert probes.probe([], [], [], [RELEASE])["archives"] == {RELEASE: {"error": "timed out", "checked_at": 1000.0}}
    now[0] += 2
    probes.probe([], [], [], [RELEASE])
    assert asked.urls == [RELEASE, RELEASE]


def test_where_there_is_no_tierlab_root_yet_the_probe_writes_nothing(kernel, monkeypatch):
    Asked(monkeypatch)
    probes.probe([], [], ["fuse3"], [RELEASE])
    assert not (kernel / "root").exists()


def test_the_real_probe_of_this_host_reads_and_writes_nothing(tmp_path, monkeypatch):
    """No package or URL asked: no subprocess, no network, no root needed."""
    monkeypatch.setattr(record, "STATE_DIR", tmp_path / "root" / "state")

    def refused(*args, **kwargs):
        raise AssertionError(f"the probe started a process or opened a URL: {args}")

    monkeypatch.setattr(subprocess, "Popen", refused)
    monkeypatch.setattr(probes.urllib.request, "urlopen", refused)
    found = probes.probe(["/dev/loop-control"], ["sh"], [], [])
    assert sorted(found) == ["archives", "boot_id", "cached", "cgroups", "data", "disk", "host", "images", "lockdown",
                             "lost_loops", "machine", "memory", "packages", "packages_found", "paths", "root", "tools",
                             "tracing", "uid"]
    assert found["memory"]["available_bytes"] <= found["memory"]["total_bytes"]
    # the cgroup setup as /proc/mounts shows it
    types = {fields[1]: fields[2] for fields in map(str.split, Path("/proc/mounts").read_text().splitlines())}
    expected = ("v2" if types.get("/sys/fs/cgroup") == "cgroup2" else
                "hybrid" if types.get("/sys/fs/cgroup/unified") == "cgroup2" else
                "v1" if "cgroup" in types.values() else "none")
    assert found["cgroups"]["mode"] == expected
    assert (found["images"], found["data"], found["cached"]) == ({}, {}, True)
    assert (found["uid"], found["paths"]) == (os.geteuid(), {"/dev/loop-control": os.path.exists("/dev/loop-control")})
    assert found["tools"] == {"sh": shutil.which("sh", path=probes.TOOL_PATH)}
    assert list(tmp_path.iterdir()) == []
