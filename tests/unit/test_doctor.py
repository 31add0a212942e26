"""What a run needs of its host, judged from the host agent's probe (tierlab.runs.doctor): each item a host may lack,
simulated in the probe's answer, with its verdict and fix as `tierlab doctor` prints them and a playbook refuses
with; and `tierlab doctor` itself on this host."""

from pathlib import Path

import pytest
import yaml

from tierlab.cli import main
from tierlab.errors import HostCheckError, InputError
from tierlab.runs import doctor
from tierlab.runs.doctor import Item, judge, probe_arguments, refuse_missing, warnings
from tierlab.runs.settings import validate, validate_tiers
from tierlab_host import probes

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "playbooks" / "roles"
GIB = 1 << 30
MIB = 1 << 20
TIERLAB_ROOT = "/var/lib/tierlab"
CHROOT_SERVER = f"{TIERLAB_ROOT}/chroots/debian-sid/usr/sbin/mysqld"
RELEASE = "http://deb.debian.org/debian/dists/sid/Release"
INSTALLED = {"installed": "1.0-1", "candidate": "1.0-1"}
NONE = {"installed": None, "candidate": None}


def host() -> dict:
    """The probe of a Debian 12 host that has everything: root, cgroup v2 with both controllers, no lockdown, 16 GiB
    of memory and 100 GiB free; no MySQL package (Debian 12 has none), and no image or data made yet."""
    return {
        "host": "db1", "boot_id": "b1", "uid": 0, "root": TIERLAB_ROOT,
        "paths": {"/dev/loop-control": True, "/dev/fuse": True, CHROOT_SERVER: False},
        "tools": {"losetup": "/usr/sbin/losetup", "fusermount3": "/usr/bin/fusermount3", "blktrace": "/usr/sbin/blktrace"},
        "packages": {"util-linux": INSTALLED, "fuse3": INSTALLED, "blktrace": INSTALLED, "mariadb-server": INSTALLED,
                     "postgresql-15": INSTALLED, "mysql-server": NONE},
        "archives": {RELEASE: {"status": 200}},
        "cgroups": {"mode": "v2", "memory": {"version": 2, "hierarchy": "/sys/fs/cgroup"},
                    "io": {"version": 2, "hierarchy": "/sys/fs/cgroup"}},
        "tracing": {"tracefs": "/sys/kernel/tracing", "debugfs": "/sys/kernel/debug", "filesystems": ["tracefs", "debugfs"]},
        "lockdown": {"level": "none", "source": "/sys/kernel/security/lockdown"},
        "machine": {"distribution": "Debian GNU/Linux 12 (bookworm)", "kernel": "6.1.0-28-amd64", "python": "3.11.2",
                    "cpus": 8, "memory_bytes": 16 * GIB},
        "memory": {"total_bytes": 16 * GIB, "available_bytes": 12 * GIB},
        "disk": {"path": "/var/lib", "free_bytes": 100 * GIB, "size_bytes": 200 * GIB},
        "images": {}, "data": {}, "lost_loops": {}, "cached": True,
    }


def tiers(emulation="model") -> list[dict]:
    """The default inventory's tiers (optane 6G fast, nand 16G capacity, nand with a throttle) emulated so; or, for
    `none`, the real devices of the example inventory."""
    name, host = ("real.example.yml", "dbhost1") if emulation == "none" else ("local.yml", "localhost")
    inventory = yaml.safe_load((ROOT / "playbooks" / "inventory" / name).read_text())
    return validate_tiers(inventory["all"]["hosts"][host]["tiers"], emulation, "ext4")


def judged(probe: dict, emulation="model", **values) -> dict[str, Item]:
    return {item.name: item for item in judge(probe, validate(values), tiers(emulation))}


def test_a_host_with_everything_passes_every_item_a_default_run_needs_and_only_those():
    items = judge(host(), validate({}), tiers())
    assert [(item.name, item.verdict) for item in items] == [
        ("root", "ok"), ("loop devices", "ok"), ("FUSE", "ok"), ("tracefs", "ok"), ("blktrace", "ok"),
        ("engine package", "ok"), ("disk", "ok"), ("memory", "ok")]
    assert warnings(items) == []
    refuse_missing(host(), items)


def test_a_user_other_than_root_is_refused():
    probe = host()
    probe["uid"] = 1000
    assert judged(probe)["root"] == Item("root", "loop devices, mounts, cgroups, servers", "uid 1000", "missing",
                                         "run as root (in the inventory: ansible_user: root, or ansible_become: true)")


def test_emulated_tiers_need_loop_devices():
    probe = host()
    probe["paths"]["/dev/loop-control"] = False
    assert judged(probe, "throttle")["loop devices"] == Item(
        "loop devices", "tiers optane, nand (throttle)", "no /dev/loop-control; /usr/sbin/losetup", "missing",
        "a kernel with loop devices (CONFIG_BLK_DEV_LOOP, or modprobe loop); in a container, give it "
        "/dev/loop-control and the /dev/loopN devices")


def test_a_tool_the_host_lacks_is_installed_by_the_run_where_apt_offers_its_package():
    probe = host()
    probe["tools"]["losetup"] = None
    probe["packages"]["util-linux"] = {"installed": None, "candidate": "2.38.1-5+deb12u3"}
    assert judged(probe)["loop devices"] == Item(
        "loop devices", "tiers optane, nand (model)",
        "/dev/loop-control, no losetup (the run installs util-linux 2.38.1-5+deb12u3)", "ok")
    probe["packages"]["util-linux"] = NONE
    assert judged(probe)["loop devices"] == Item(
        "loop devices", "tiers optane, nand (model)",
        "/dev/loop-control, no losetup, and apt offers no util-linux (no candidate)", "missing",
        "add a Debian archive that has util-linux to the host's apt sources, then apt-get update")


def test_modelled_tiers_need_fuse_and_throttled_ones_do_not():
    probe = host()
    probe["paths"]["/dev/fuse"] = False
    assert judged(probe)["FUSE"] == Item(
        "FUSE", "tiers optane, nand (model)", "no /dev/fuse; /usr/bin/fusermount3", "missing",
        "a kernel with FUSE (CONFIG_FUSE_FS, or modprobe fuse); in a container, give it /dev/fuse; or give "
        "tiers_emulation=throttle")
    assert "FUSE" not in judged(probe, "throttle")
    probe["tools"]["fusermount3"] = None
    probe["packages"]["fuse3"] = NONE
    assert judged(probe)["FUSE"].fix.endswith("; or give tiers_emulation=throttle; add a Debian archive that has fuse3 "
                                              "to the host's apt sources, then apt-get update")


def test_a_loop_device_left_on_a_dead_emulator_s_file_is_named_with_the_teardown_that_detaches_it():
    probe = host()
    probe["lost_loops"] = {"/dev/loop2": "/var/lib/tierlab/emulator/mnt/nand/device (Transport endpoint is not "
                                         "connected)"}
    item = judged(probe)["loop devices on lost files"]
    assert (item.found, item.verdict) == ("/dev/loop2 on /var/lib/tierlab/emulator/mnt/nand/device (Transport "
                                          "endpoint is not connected)", "warn")
    assert "make teardown" in item.fix and "-e tierlab_root=ROOT" in item.fix
    assert warnings([item])[0].startswith("loop devices on lost files, needed for making btrfs tiers")


def test_real_tiers_need_neither_loop_devices_nor_fuse():
    assert [name for name in judged(host(), "none")] == ["root", "tracefs", "blktrace", "engine package", "disk",
                                                         "memory"]


LACKING_MEMORY = {"lacking": "neither cgroup v1's memory controller (no cgroup mount with it in /proc/self/mountinfo) "
                             "nor a cgroup v2 hierarchy with 'memory' in /sys/fs/cgroup/cgroup.controllers",
                  "fix": "enable it in the kernel (a kernel booted with cgroup_disable=memory has none; Raspberry Pi "
                         "OS needs cgroup_enable=memory), or give os_cache=unbounded to run with the page cache "
                         "unbounded (recorded in the run's manifest)"}


def test_postgresql_needs_a_memory_controller_unless_its_page_cache_is_unbounded():
    probe = host()
    probe["cgroups"]["memory"] = LACKING_MEMORY
    assert judged(probe, engine="postgresql")["cgroup memory"] == Item(
        "cgroup memory", "engine=postgresql: its page cache bound (os_cache)",
        f"{LACKING_MEMORY['lacking']} (cgroup mode v2)", "missing", LACKING_MEMORY["fix"])
    assert "cgroup memory" not in judged(probe, engine="postgresql", os_cache="unbounded")
    assert "cgroup memory" not in judged(probe)


def test_the_throttle_emulation_needs_an_io_controller_for_the_tiers_that_have_a_throttle():
    probe = host()
    assert judged(probe, "throttle")["cgroup io"] == Item(
        "cgroup io", "the throttle of tier nand (throttle)", "cgroup v2 at /sys/fs/cgroup (cgroup mode v2)", "ok")
    assert "cgroup io" not in judged(probe)


def test_tracing_needs_tracefs_or_a_debugfs_to_mount():
    probe = host()
    probe["tracing"] = {"tracefs": None, "debugfs": None, "filesystems": ["debugfs"]}
    assert judged(probe)["tracefs"] == Item("tracefs", "trace=true: ftrace reads tracefs, blktrace debugfs",
                                            "debugfs, which the run mounts (none is mounted)", "ok")
    probe["tracing"]["filesystems"] = []
    assert judged(probe)["tracefs"] == Item(
        "tracefs", "trace=true: ftrace reads tracefs, blktrace debugfs",
        "no tracefs or debugfs mounted, and the kernel has no debugfs (its file systems include neither)", "missing",
        "a kernel with CONFIG_DEBUG_FS and CONFIG_FTRACE, or give trace=false")
    assert not {"tracefs", "blktrace"} & set(judged(probe, trace="false"))


INTEGRITY = {"level": "integrity", "source": "CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY in /proc/config.gz"}


def test_under_lockdown_auto_traces_with_ftrace_and_blktrace_is_refused():
    probe = host()
    probe["lockdown"] = INTEGRITY
    assert judged(probe)["blktrace"] == Item(
        "blktrace", "trace_backend=auto",
        "lockdown integrity (CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY in /proc/config.gz): blktrace is refused, auto "
        "traces with ftrace", "ok")
    assert judged(probe, trace_backend="blktrace")["blktrace"] == Item(
        "blktrace", "trace_backend=blktrace",
        "lockdown integrity (CONFIG_LOCK_DOWN_KERNEL_FORCE_INTEGRITY in /proc/config.gz): the kernel refuses "
        "blktrace's relay files", "missing", "give trace_backend=auto (which traces with ftrace here) or trace_backend=ftrace")
    assert "blktrace" not in judged(probe, trace_backend="ftrace")


def test_without_lockdown_auto_traces_with_blktrace():
    assert judged(host())["blktrace"] == Item(
        "blktrace", "trace_backend=auto", "lockdown none (/sys/kernel/security/lockdown); /usr/sbin/blktrace: auto "
        "traces with blktrace where its relay files open, else with ftrace", "ok")


def test_blktrace_where_the_lockdown_is_unknown_is_a_warning():
    probe = host()
    probe["lockdown"] = {"level": None, "source": "no /sys/kernel/security/lockdown: securityfs is not mounted"}
    item = judged(probe, trace_backend="blktrace")["blktrace"]
    assert item == Item(
        "blktrace", "trace_backend=blktrace", "lockdown unknown (no /sys/kernel/security/lockdown: securityfs is not "
        "mounted); /usr/sbin/blktrace", "warn",
        "mount securityfs to see the kernel's lockdown (mount -t securityfs securityfs /sys/kernel/security): under "
        "lockdown blktrace traces nothing; or give trace_backend=auto")
    assert warnings([item]) == [f"blktrace, needed for trace_backend=blktrace: {item.found}; {item.fix}"]


def test_an_engine_whose_package_apt_does_not_offer_is_refused():
    probe = host()
    probe["packages"]["mariadb-server"] = NONE
    assert judged(probe)["engine package"] == Item(
        "engine package", "engine=mariadb", "apt offers no mariadb-server (no candidate)", "missing",
        "apt-get update, or use a host whose distribution packages mariadb-server (Debian 12 does)")
    probe["packages"]["mariadb-server"] = {"installed": None, "candidate": "1:10.11.19-0+deb12u1"}
    assert judged(probe)["engine package"].found == "mariadb-server 1:10.11.19-0+deb12u1 (the run installs it)"


def test_mysql_without_a_package_comes_from_debian_sid_in_a_chroot():
    items = judged(host(), engine="mysql")
    assert items["engine package"] == Item("engine package", "engine=mysql",
                                           "apt offers no mysql-server (no candidate): Debian sid's, in a chroot", "ok")
    assert items["Debian sid archive"] == Item("Debian sid archive", "engine=mysql: the chroot of Debian sid's mysql-server",
                                               f"{RELEASE}: HTTP 200", "ok")


def test_mysql_without_a_package_nor_the_sid_archive_is_refused_unless_its_chroot_is_made():
    probe = host()
    probe["archives"][RELEASE] = {"error": "timed out", "checked_at": 1000.0}
    assert judged(probe, engine="mysql")["Debian sid archive"] == Item(
        "Debian sid archive", "engine=mysql: the chroot of Debian sid's mysql-server", f"{RELEASE}: timed out",
        "missing", "let the host reach http://deb.debian.org/debian (through a proxy: http_proxy in its environment), "
        "or use a host whose distribution packages mysql-server")
    probe["paths"][CHROOT_SERVER] = True
    assert judged(probe, engine="mysql")["Debian sid archive"].verdict == "ok"
    probe["packages"]["mysql-server"] = INSTALLED
    assert "Debian sid archive" not in judged(probe, engine="mysql")


def test_the_disk_must_hold_the_data_to_generate_and_the_database_the_images_will_hold():
    """TPC-H at SF 1 with lineitem on optane: 1.03 GiB of .tbl files, then lineitem (1.32 GiB with the estimate's
    margin) in optane's image and the rest (622.7 MiB) in nand's."""
    probe = host()
    probe["disk"]["free_bytes"] = 2 * GIB
    assert judged(probe, scale_factor="1", layout="L")["disk"] == Item(
        "disk", "2.96 GiB: tpch sf1 data 1.03 GiB + database in the tier images 1.93 GiB", "2.00 GiB free at /var/lib",
        "missing", "free 979.4 MiB more there, give tierlab_root a larger file system, or choose a smaller scale_factor")


def test_what_the_data_cache_and_the_images_hold_already_is_not_needed_again():
    probe = host()
    probe["disk"]["free_bytes"] = 2 * GIB
    tables = ["region", "nation", "part", "supplier", "partsupp", "customer", "orders"]
    probe["data"] = {"tpch/sf1": tables}
    probe["images"] = {"optane": {"size_bytes": 6 * GIB, "allocated_bytes": 1 * GIB},
                       "nand": {"size_bytes": 16 * GIB, "allocated_bytes": 1 * GIB}}
    item = judged(probe, scale_factor="1", layout="L")["disk"]
    # lineitem's .tbl (724.7 MiB) and what optane's image lacks of lineitem (331.0 MiB); nand's holds its tables
    assert item.needed_for == "1.03 GiB: tpch sf1 data 724.7 MiB + database in the tier images 331.0 MiB"
    assert item.verdict == "warn"
    assert item.fix == ("the tier images may grow to their full size, 20.71 GiB in all with the data: free space "
                        "there, or give the tiers a smaller size in the inventory")


def test_a_buffer_pool_larger_than_the_host_s_memory_is_refused_with_the_figures():
    probe = host()
    probe["memory"] = {"total_bytes": 25276502016, "available_bytes": 24504049664}
    assert judged(probe, buffer_pool="1T")["memory"] == Item(
        "memory", "innodb_buffer_pool_size 1024.00 GiB (buffer_pool=1024.00 GiB)",
        "MemTotal 23.54 GiB, MemAvailable 22.82 GiB", "missing", "give a smaller buffer_pool: all of it within 23.54 GiB")


def test_postgresql_s_memory_bound_counts_shared_buffers_os_cache_and_its_processes():
    probe = host()
    probe["memory"]["available_bytes"] = 100 * MIB
    assert judged(probe, engine="postgresql")["memory"] == Item(
        "memory", "the server's memory bound 184.0 MiB: shared_buffers 8.0 MiB (buffer_pool=5% of the data), "
        "os_cache=64.0 MiB and its processes", "MemTotal 16.00 GiB, MemAvailable 100.0 MiB", "warn",
        "other processes hold the rest of the memory now: stop them, or give a smaller buffer_pool or os_cache")
    assert judged(probe, engine="postgresql", os_cache="unbounded")["memory"].needed_for == \
        "shared_buffers 8.0 MiB (buffer_pool=5% of the data)"


def test_a_host_that_lacks_anything_is_refused_with_every_missing_item_and_its_fix():
    probe = host()
    probe["uid"] = 1000
    probe["paths"]["/dev/fuse"] = False
    with pytest.raises(HostCheckError) as err:
        refuse_missing(probe, judge(probe, validate({}), tiers()))
    assert str(err.value) == (
        "db1 lacks what this run needs (tierlab doctor shows every check): [1] root, needed for loop devices, mounts, "
        "cgroups, servers: uid 1000; fix: run as root (in the inventory: ansible_user: root, or ansible_become: true). "
        "[2] FUSE, needed for tiers optane, nand (model): no /dev/fuse; /usr/bin/fusermount3; fix: a kernel with FUSE "
        "(CONFIG_FUSE_FS, or modprobe fuse); in a container, give it /dev/fuse; or give tiers_emulation=throttle.")


def test_the_probe_is_asked_for_what_the_settings_need():
    assert probe_arguments(validate({}), tiers(), TIERLAB_ROOT) == [
        "probe", "--path", "/dev/loop-control", "--path", "/dev/fuse", "--tool", "losetup", "--tool", "fusermount3",
        "--tool", "blktrace", "--package", "util-linux", "--package", "fuse3", "--package", "blktrace",
        "--package", "mariadb-server"]
    assert probe_arguments(validate({"engine": "mysql", "trace_backend": "ftrace"}), tiers("none"), TIERLAB_ROOT) == [
        "probe", "--path", "/dev/loop-control", "--path", "/dev/fuse", "--path", CHROOT_SERVER,
        "--package", "mysql-server", "--url", RELEASE]


# what the doctor knows of the roles, and the roles agree

def _defaults(role: str) -> dict:
    return yaml.safe_load((ROLES / role / "defaults" / "main.yml").read_text())


def test_the_roles_install_the_packages_the_doctor_looks_for():
    tiers_defaults = _defaults("tiers")
    installed = tiers_defaults["tiers_packages"] + tiers_defaults["tiers_emulator_packages"]
    assert [package for package in doctor.TOOL_PACKAGES.values() if package not in installed] == []
    mysql = _defaults("mysql")
    assert {engine: mysql["mysql_engines"][engine]["packages"][0] for engine in ("mariadb", "mysql")} == \
        {engine: doctor.SERVER_PACKAGES[engine] for engine in ("mariadb", "mysql")}
    postgresql = _defaults("postgresql")
    assert postgresql["postgresql_packages"][0].replace("{{ postgresql_version }}", str(postgresql["postgresql_version"])) \
        == doctor.SERVER_PACKAGES["postgresql"]


def test_the_roles_make_the_chroot_images_and_data_cache_where_the_doctor_looks():
    mysql = _defaults("mysql")
    assert (mysql["mysql_chroot_mirror"], mysql["mysql_chroot_suite"]) == (doctor.CHROOT_MIRROR, doctor.CHROOT_SUITE)
    assert doctor.chroot_server("{{ tierlab_root }}") == \
        mysql["mysql_chroot_dir"].replace("{{ mysql_chroot_suite }}", mysql["mysql_chroot_suite"]) + \
        mysql["mysql_engines"]["mysql"]["server"]
    assert _defaults("tiers")["tiers_image_root"] == f"{{{{ tierlab_root }}}}/{probes.IMAGES_DIR}"
    assert _defaults("datagen")["datagen_cache_root"] == f"{{{{ tierlab_root }}}}/{probes.DATA_DIR}"


# tierlab doctor

def test_doctor_refuses_a_variable_no_run_takes():
    with pytest.raises(InputError) as err:
        doctor.doctor(["engine=postgresql", "buffer_pol=1G"], None, None, None)
    assert str(err.value).startswith("-e 'buffer_pol=1G': give name=value, a run's or its tiers' variable "
                                     "(docs/variables.md); allowed names: workload, engine, layout, ")


def test_doctor_on_this_host_prints_one_table_of_what_a_run_needs(tmp_path, capsys):
    """The real probe of this host (no root needed; the root does not exist, so nothing is written): the table's
    rows are this run's items, whatever this host has."""
    try:
        main(["doctor", "--root", str(tmp_path / "root"), "-e", "trace=false"])
    except SystemExit as done:
        assert done.code == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith(f"tierlab root {tmp_path / 'root'}), with the tiers of inventory host localhost: optane "
                             "(fast, model, 6G), nand (capacity, model, 16G)")
    assert lines[1] == ("engine=mariadb workload=tpch scale=sf0.1 layout=None buffer_pool=5% of the data trace=false")
    assert lines[4].split() == ["item", "needed", "for", "found", "verdict", "fix"]
    assert [line.split("  ")[0] for line in lines[5:]] == ["root", "loop devices", "FUSE", "engine package", "disk",
                                                           "memory"]
    assert not (tmp_path / "root").exists()
