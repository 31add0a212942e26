"""What a run needs of its host, and whether the host has it: `tierlab doctor`, and the first check of every
playbook run (the `tierlab_probe_arguments` and `tierlab_host_check` filters), one implementation.

The host agent's probe (tierlab_host.probes) reads the host; `probe_arguments` says what to ask it for a run's
settings and tiers, and `judge` weighs its answer: one item per thing the run needs, with what it is needed for,
what was found, a verdict (`ok`; `missing`: the run is refused; `warn`: it may go on, and what may go wrong) and
the fix. What a run does not need is left out.
"""

import json
import os
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..catalog.values import parse_bytes
from ..catalog.variables import BY_NAME, group
from ..checkout import require_checkout
from ..errors import HostCheckError, InputError
from .inventory import ANSIBLE_ENV, ANSIBLE_PLAYBOOK, PROJECT, host_variables
from .settings import (
    buffer_pool_bytes,
    estimated_generated_bytes,
    estimated_table_bytes,
    human_bytes,
    memory_limit_bytes,
    validate,
    validate_dilation,
    validate_tiers,
)
from .tiers_check import HOST_PYTHON

# The Debian packages that bring the tools looked for (the tiers role installs them where the host lacks them) and
# each engine's server (the first package its role installs); tests/unit/test_doctor.py checks that the roles agree
TOOL_PACKAGES = {"losetup": "util-linux", "fusermount3": "fuse3", "blktrace": "blktrace"}
SERVER_PACKAGES = {"mariadb": "mariadb-server", "mysql": "mysql-server", "postgresql": "postgresql-15"}
# Oracle MySQL where the host's distribution has none: the mysql role makes a chroot of this suite from this mirror,
# under the tierlab root
CHROOT_MIRROR = "http://deb.debian.org/debian"
CHROOT_SUITE = "sid"
LOOP_CONTROL = "/dev/loop-control"
FUSE_DEVICE = "/dev/fuse"
LOCKED_DOWN = ("integrity", "confidentiality")
DEFAULT_ROOT = "/var/lib/tierlab"
COLUMNS = ("item", "needed for", "found", "verdict", "fix")


@dataclass(frozen=True)
class Item:
    name: str
    needed_for: str
    found: str
    # ok, missing (the run is refused) or warn (it may go on)
    verdict: str
    fix: str = ""


def release_url() -> str:
    return f"{CHROOT_MIRROR}/dists/{CHROOT_SUITE}/Release"


def chroot_server(root: str | Path) -> str:
    """The MySQL server of the root's chroot, once the mysql role has made it."""
    return f"{root}/chroots/debian-{CHROOT_SUITE}/usr/sbin/mysqld"


def _emulated(tiers: list[dict], *emulations: str) -> list[dict]:
    return [tier for tier in tiers if tier["emulation"] in emulations]


def _tiers_text(tiers: list[dict]) -> str:
    """'tiers optane, nand (model)'; 'tiers optane (model), nand (throttle)'."""
    names = [tier["name"] for tier in tiers]
    emulations = [tier["emulation"] for tier in tiers]
    listed = (f"{', '.join(names)} ({emulations[0]})" if len(set(emulations)) == 1
              else ", ".join(f"{name} ({emulation})" for name, emulation in zip(names, emulations, strict=True)))
    return ("tier " if len(tiers) == 1 else "tiers ") + listed


def _tools(settings: dict, tiers: list[dict]) -> list[str]:
    tools = []
    if _emulated(tiers, "model", "throttle"):
        tools.append("losetup")
    if _emulated(tiers, "model"):
        tools.append("fusermount3")
    if settings["trace"] and settings["trace_backend"] != "ftrace":
        tools.append("blktrace")
    return tools


def probe_arguments(settings: dict, tiers: list[dict], root: str | Path) -> list[str]:
    """The host agent's arguments (after `python3 -m tierlab_host`) that probe what these settings need."""
    tools = _tools(settings, tiers)
    asked = {"path": [LOOP_CONTROL, FUSE_DEVICE], "tool": tools,
             "package": [TOOL_PACKAGES[tool] for tool in tools] + [SERVER_PACKAGES[settings["engine"]]], "url": []}
    if settings["engine"] == "mysql":
        asked["path"].append(chroot_server(root))
        asked["url"].append(release_url())
    return ["probe"] + [word for name, values in asked.items() for value in values for word in (f"--{name}", value)]


def _tool(probe: dict, tool: str) -> tuple[str, str, str]:
    """A tool's (found, verdict, fix): where the host lacks it, the run installs its package, if apt has one."""
    if probe["tools"][tool]:
        return probe["tools"][tool], "ok", ""
    package = TOOL_PACKAGES[tool]
    answer = probe["packages"][package]
    if answer.get("candidate"):
        return f"no {tool} (the run installs {package} {answer['candidate']})", "ok", ""
    return (f"no {tool}, and apt offers no {package} ({answer.get('error') or 'no candidate'})", "missing",
            f"add a Debian archive that has {package} to the host's apt sources, then apt-get update")


def _device(probe: dict, name: str, needed_for: str, node: str, node_fix: str, tool: str) -> Item:
    found, verdict, fix = _tool(probe, tool)
    if not probe["paths"][node]:
        return Item(name, needed_for, f"no {node}; {found}", "missing", "; ".join(part for part in (node_fix, fix) if part))
    return Item(name, needed_for, f"{node}, {found}", verdict, fix)


def _root(probe: dict, settings: dict, tiers: list[dict]) -> Item:
    needed_for = "loop devices, mounts, cgroups, servers"
    if probe["uid"] == 0:
        return Item("root", needed_for, "uid 0", "ok")
    return Item("root", needed_for, f"uid {probe['uid']}", "missing",
                "run as root (in the inventory: ansible_user: root, or ansible_become: true)")


def _loop_devices(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    emulated = _emulated(tiers, "model", "throttle")
    if not emulated:
        return None
    return _device(probe, "loop devices", _tiers_text(emulated), LOOP_CONTROL,
                   "a kernel with loop devices (CONFIG_BLK_DEV_LOOP, or modprobe loop); in a container, give it "
                   "/dev/loop-control and the /dev/loopN devices", "losetup")


def _fuse(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    modelled = _emulated(tiers, "model")
    if not modelled:
        return None
    return _device(probe, "FUSE", _tiers_text(modelled), FUSE_DEVICE,
                   "a kernel with FUSE (CONFIG_FUSE_FS, or modprobe fuse); in a container, give it /dev/fuse; or "
                   "give tiers_emulation=throttle", "fusermount3")


def _lost_loops(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    """Loop devices left on files that are gone or cannot be reached, by any root or tool: mkfs.btrfs refuses beside
    one whose FUSE server exited ("cannot check mount status ... Transport endpoint is not connected")."""
    if not probe["lost_loops"]:
        return None
    found = ", ".join(f"{device} on {name}" for device, name in probe["lost_loops"].items())
    return Item("loop devices on lost files", "making btrfs tiers: mkfs.btrfs looks at every loop device's file",
                found, "warn", "tear down the tierlab root that made them (make teardown; another root: "
                "ansible-playbook playbooks/teardown.yml -e tierlab_root=ROOT), which detaches its loop devices and "
                "unmounts its emulators; a loop device no tierlab root made: losetup -d it, then unmount its file's "
                "mount")


def _controller(probe: dict, controller: str, needed_for: str) -> Item:
    found, mode = probe["cgroups"][controller], probe["cgroups"]["mode"]
    if "hierarchy" in found:
        return Item(f"cgroup {controller}", needed_for,
                    f"cgroup v{found['version']} at {found['hierarchy']} (cgroup mode {mode})", "ok")
    return Item(f"cgroup {controller}", needed_for, f"{found['lacking']} (cgroup mode {mode})", "missing", found["fix"])


def _memory_controller(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    if settings["engine"] != "postgresql" or settings["os_cache"] == "unbounded":
        return None
    return _controller(probe, "memory", "engine=postgresql: its page cache bound (os_cache)")


def _io_controller(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    # as the host agent throttles: the tiers of emulation throttle that give a throttle
    throttled = [tier for tier in _emulated(tiers, "throttle") if tier.get("throttle")]
    if not throttled:
        return None
    return _controller(probe, "io", f"the throttle of {_tiers_text(throttled)}")


def _tracing(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    if not settings["trace"]:
        return None
    found = probe["tracing"]
    needed_for = "trace=true: ftrace reads tracefs, blktrace debugfs"
    if found["tracefs"] or found["debugfs"]:
        mounted = "tracefs" if found["tracefs"] else "debugfs"
        return Item("tracefs", needed_for, f"{mounted} at {found[mounted]}", "ok")
    if "debugfs" in found["filesystems"]:
        return Item("tracefs", needed_for, "debugfs, which the run mounts (none is mounted)", "ok")
    return Item("tracefs", needed_for, f"no tracefs or debugfs mounted, and the kernel has no debugfs (its file "
                f"systems include {' and '.join(found['filesystems']) or 'neither'})", "missing",
                "a kernel with CONFIG_DEBUG_FS and CONFIG_FTRACE, or give trace=false")


def _blktrace(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    backend = settings["trace_backend"]
    if not settings["trace"] or backend == "ftrace":
        return None
    needed_for = f"trace_backend={backend}"
    level, source = probe["lockdown"]["level"], probe["lockdown"]["source"]
    lockdown = f"lockdown {level or 'unknown'} ({source})"
    if level in LOCKED_DOWN:
        if backend == "auto":
            return Item("blktrace", needed_for, f"{lockdown}: blktrace is refused, auto traces with ftrace", "ok")
        return Item("blktrace", needed_for, f"{lockdown}: the kernel refuses blktrace's relay files", "missing",
                    "give trace_backend=auto (which traces with ftrace here) or trace_backend=ftrace")
    # the tiers role installs blktrace whatever the backend: its package must be there
    tool, verdict, fix = _tool(probe, "blktrace")
    if backend == "auto":
        return Item("blktrace", needed_for, f"{lockdown}; {tool}: auto traces with blktrace where its relay files "
                    "open, else with ftrace", verdict, fix)
    if level is None and verdict == "ok":
        return Item("blktrace", needed_for, f"{lockdown}; {tool}", "warn",
                    "mount securityfs to see the kernel's lockdown (mount -t securityfs securityfs "
                    "/sys/kernel/security): under lockdown blktrace traces nothing; or give trace_backend=auto")
    return Item("blktrace", needed_for, f"{lockdown}; {tool}", verdict, fix)


def _server_package(probe: dict, settings: dict) -> tuple[str, dict]:
    package = SERVER_PACKAGES[settings["engine"]]
    return package, probe["packages"][package]


def _engine_package(probe: dict, settings: dict, tiers: list[dict]) -> Item:
    engine = settings["engine"]
    package, answer = _server_package(probe, settings)
    needed_for = f"engine={engine}"
    if answer.get("installed"):
        return Item("engine package", needed_for, f"{package} {answer['installed']} installed", "ok")
    if answer.get("candidate"):
        return Item("engine package", needed_for, f"{package} {answer['candidate']} (the run installs it)", "ok")
    lacking = f"apt offers no {package} ({answer.get('error') or 'no candidate'})"
    if engine == "mysql":
        return Item("engine package", needed_for, f"{lacking}: Debian {CHROOT_SUITE}'s, in a chroot", "ok")
    return Item("engine package", needed_for, lacking, "missing",
                f"apt-get update, or use a host whose distribution packages {package} (Debian 12 does)")


def _sid_archive(probe: dict, settings: dict, tiers: list[dict]) -> Item | None:
    package, answer = _server_package(probe, settings)
    if settings["engine"] != "mysql" or answer.get("installed") or answer.get("candidate"):
        return None
    name = f"Debian {CHROOT_SUITE} archive"
    needed_for = f"engine=mysql: the chroot of Debian {CHROOT_SUITE}'s {package}"
    server = chroot_server(probe["root"])
    if probe["paths"][server]:
        return Item(name, needed_for, f"the chroot is made ({server})", "ok")
    head = probe["archives"][release_url()]
    if "status" in head:
        return Item(name, needed_for, f"{release_url()}: HTTP {head['status']}", "ok")
    return Item(name, needed_for, f"{release_url()}: {head['error']}", "missing",
                f"let the host reach {CHROOT_MIRROR} (through a proxy: http_proxy in its environment), or use a host "
                f"whose distribution packages {package}")


def _disk(probe: dict, settings: dict, tiers: list[dict]) -> Item:
    """The generated data the run adds to the root's data cache, and the database it writes into the tier images
    (sparse: an image takes what was written to it, up to its size; what it holds already is taken to be this
    database, so that a host is refused only for what the run surely writes)."""
    scale = f"{settings['workload']} {settings['scale']}"
    done = set(probe["data"].get(settings["data_cache"], []))
    data_bytes = sum(size for table, size in estimated_generated_bytes(settings).items() if table not in done)
    tables = estimated_table_bytes(settings)
    database_bytes, room_bytes = 0, 0
    for tier in _emulated(tiers, "model", "throttle"):
        taken = probe["images"].get(tier["name"], {"allocated_bytes": 0})["allocated_bytes"]
        room = max(0, parse_bytes(f"tier {tier['name']!r} size", tier["size"]) - taken)
        on_tier = sum(tables[table] for table, role in settings["placement"].items() if role == tier["role"])
        database_bytes += min(room, max(0, on_tier - taken))
        room_bytes += room
    needed = data_bytes + database_bytes
    needed_for = (f"{human_bytes(needed)}: {scale} data {human_bytes(data_bytes)} + database in the tier images "
                  f"{human_bytes(database_bytes)}")
    free, where = probe["disk"]["free_bytes"], probe["disk"]["path"]
    found = f"{human_bytes(free)} free at {where}"
    if free < needed:
        return Item("disk", needed_for, found, "missing",
                    f"free {human_bytes(needed - free)} more there, give tierlab_root a larger file system, or choose "
                    "a smaller scale_factor")
    if free < data_bytes + room_bytes:
        return Item("disk", needed_for, found, "warn",
                    f"the tier images may grow to their full size, {human_bytes(data_bytes + room_bytes)} in all "
                    "with the data: free space there, or give the tiers a smaller size in the inventory")
    return Item("disk", needed_for, found, "ok")


def _share_text(share: dict) -> str:
    return f"{share['percent']:g}% of the data" if "percent" in share else human_bytes(share["bytes"])


def _memory(probe: dict, settings: dict, tiers: list[dict]) -> Item:
    total, available = probe["memory"]["total_bytes"], probe["memory"]["available_bytes"]
    pool = buffer_pool_bytes(settings)
    buffer_pool = f"buffer_pool={_share_text(settings['buffer_pool'])}"
    bound = memory_limit_bytes(settings) if settings["engine"] == "postgresql" else None
    if settings["engine"] != "postgresql":
        needed, needed_for, what = pool, f"innodb_buffer_pool_size {human_bytes(pool)} ({buffer_pool})", "buffer_pool"
    elif bound is None:
        needed, needed_for, what = pool, f"shared_buffers {human_bytes(pool)} ({buffer_pool})", "buffer_pool"
    else:
        needed, what = bound, "buffer_pool or os_cache"
        needed_for = (f"the server's memory bound {human_bytes(bound)}: shared_buffers {human_bytes(pool)} "
                      f"({buffer_pool}), os_cache={_share_text(settings['os_cache'])} and its processes")
    found = f"MemTotal {human_bytes(total)}, MemAvailable {human_bytes(available)}"
    if needed > total:
        return Item("memory", needed_for, found, "missing", f"give a smaller {what}: all of it within {human_bytes(total)}")
    if needed > available:
        return Item("memory", needed_for, found, "warn",
                    f"other processes hold the rest of the memory now: stop them, or give a smaller {what}")
    return Item("memory", needed_for, found, "ok")


CHECKS = (_root, _loop_devices, _fuse, _lost_loops, _memory_controller, _io_controller, _tracing, _blktrace,
          _engine_package, _sid_archive, _disk, _memory)


def judge(probe: dict, settings: dict, tiers: list[dict]) -> list[Item]:
    """One item per thing a run with these settings and tiers needs of the host the probe read."""
    return [item for check in CHECKS if (item := check(probe, settings, tiers)) is not None]


def refuse_missing(probe: dict, items: list[Item]) -> None:
    """Refused, with every missing item and its fix, where the host lacks anything the run needs."""
    missing = [item for item in items if item.verdict == "missing"]
    if missing:
        listed = " ".join(f"[{n}] {item.name}, needed for {item.needed_for}: {item.found}; fix: {item.fix}."
                          for n, item in enumerate(missing, 1))
        raise HostCheckError(f"{probe['host']} lacks what this run needs (tierlab doctor shows every check): {listed}")


def warnings(items: list[Item]) -> list[str]:
    return [f"{item.name}, needed for {item.needed_for}: {item.found}; {item.fix}" for item in items
            if item.verdict == "warn"]


def format_table(items: list[Item]) -> str:
    rows = [COLUMNS] + [(item.name, item.needed_for, item.found, item.verdict, item.fix) for item in items]
    widths = [max(len(row[column]) for row in rows) for column in range(len(COLUMNS) - 1)]
    return "\n".join("  ".join([*(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)),
                                row[-1]]).rstrip() for row in rows)


def _values(assignments: list[str]) -> dict:
    """-e name=value, as the playbooks take a run's and its tiers' variables."""
    allowed = ("workload", *group("run"), *group("tiers"))
    values = {}
    for assignment in assignments:
        name, equals, value = assignment.partition("=")
        if not equals or name not in allowed:
            raise InputError(f"-e {assignment!r}: give name=value, a run's or its tiers' variable (docs/variables.md); "
                             f"allowed names: {', '.join(allowed)}")
        values[name] = value
    return values


def run_probe(arguments: list[str], root: Path) -> dict:
    """The host agent's probe of this host, from the checkout, with the root's state directory for its cache."""
    agent = require_checkout("tierlab doctor") / "tracing"
    command = [HOST_PYTHON, "-m", "tierlab_host", *arguments]
    done = subprocess.run(command, cwd=agent, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TIERLAB_STATE_DIR": str(root / "state")})
    if done.returncode != 0:
        raise HostCheckError(done.stderr.strip() or f"{' '.join(command)} failed with exit {done.returncode}")
    return json.loads(done.stdout)


def run_remote_probe(arguments: list[str], root: Path, inventory: Path | None, host: str) -> dict:
    """The host agent's probe on an inventory host, reached as the playbooks reach it: playbooks/doctor.yml installs
    the agent under its root, runs the probe there and brings its answer back."""
    with tempfile.TemporaryDirectory() as scratch:
        answer = Path(scratch) / "probe.json"
        variables = {"doctor_arguments": arguments, "doctor_answer": str(answer), "tierlab_root": str(root)}
        command = [str(ANSIBLE_PLAYBOOK), *(["-i", str(inventory)] if inventory else []), "--limit", host,
                   "playbooks/doctor.yml", "-e", json.dumps(variables)]
        done = subprocess.run(command, cwd=PROJECT, capture_output=True, text=True, timeout=600,
                              env={**os.environ, **ANSIBLE_ENV})
        if done.returncode != 0 or not answer.exists():
            said = [line for line in done.stdout.splitlines() if line.startswith(("fatal:", "failed:"))]
            through = inventory or "ansible.cfg's inventory"
            raise HostCheckError(f"the probe of {host} through {through} failed: "
                                 f"{' '.join(said) or done.stderr.strip() or done.returncode}")
        return json.loads(answer.read_text())


def doctor(assignments: list[str], inventory: Path | None, host: str | None, root: str | None) -> dict:
    """Probe an inventory host (its first by default) for a run with these -e values on its tiers, and judge it: this
    host directly where the inventory reaches it locally (ansible_connection local), another over Ansible."""
    values = _values(assignments)
    hosts = host_variables(inventory)
    name = host or next(iter(hosts))
    if name not in hosts:
        raise InputError(f"--host {name}: not in the inventory; its hosts: {', '.join(hosts)}")
    variables = hosts[name]
    tier_values = {key: values.get(key) or BY_NAME[key].default for key in group("tiers")}
    validate_dilation(tier_values["tiers_dilation"])
    tiers = validate_tiers(variables.get("tiers"), tier_values["tiers_emulation"], tier_values["tiers_filesystem"])
    fast = next(tier for tier in tiers if tier["role"] == "fast")
    settings = validate(values, parse_bytes("tiers size", fast["size"]) if fast["emulation"] != "none" else None,
                        {tier["role"]: tier["filesystem"] for tier in tiers},
                        {tier["role"]: tier["emulation"] for tier in tiers})
    root_dir = Path(root or variables.get("tierlab_root") or DEFAULT_ROOT)
    started = time.monotonic()
    arguments = probe_arguments(settings, tiers, root_dir)
    if variables.get("ansible_connection") == "local":
        probe = run_probe(arguments, root_dir)
    else:
        probe = run_remote_probe(arguments, root_dir, inventory, name)
    return {"inventory_host": name, "settings": settings, "tiers": tiers, "probe": probe,
            "probe_s": time.monotonic() - started, "items": [asdict(item) for item in judge(probe, settings, tiers)]}


def format_report(report: dict) -> str:
    settings, probe = report["settings"], report["probe"]
    tiers = ", ".join(f"{t['name']} ({t['role']}, {t['emulation']}{', ' + str(t['size']) if t.get('size') else ''})"
                      for t in report["tiers"])
    trace = f"trace_backend={settings['trace_backend']}" if settings["trace"] else "trace=false"
    os_cache = settings["os_cache"]
    os_cache = "" if os_cache is None else f" os_cache={os_cache if os_cache == 'unbounded' else _share_text(os_cache)}"
    lines = [f"this host ({probe['host']}, kernel {probe['machine']['kernel']}, tierlab root {probe['root']}), with the tiers of "
             f"inventory host {report['inventory_host']}: {tiers}",
             f"engine={settings['engine']} workload={settings['workload']} scale={settings['scale']} "
             f"layout={settings['layout']} buffer_pool={_share_text(settings['buffer_pool'])}{os_cache} {trace}",
             f"probed in {report['probe_s']:.2f} s" + (" (packages and archives from the cache)" if probe["cached"] else ""),
             "", format_table([Item(**item) for item in report["items"]])]
    return "\n".join(lines)
