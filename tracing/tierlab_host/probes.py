"""What a host has that a run may need, read on the host (`python3 -m tierlab_host probe`): one JSON object of
facts and no verdict. The controller (tierlab.runs.doctor) decides what a run's settings need, asks for the paths,
tools, packages and URLs they depend on, and judges what is missing.

Most facts are file reads, made at every probe since they change: the user, the machine (distribution, kernel,
CPUs, memory), device nodes, tools, cgroup controllers, tracefs and debugfs, the kernel's lockdown, the free memory
and the free space of the tierlab root's file system, what the root's tier images and data cache hold already,
the loop devices whose files are lost, and the packages its runs found installed (tierlab_host.packages).
Two cost more, and are kept in the root's state directory (probe.json), so that a probe of a host probed before
takes milliseconds:

  packages  `apt-cache policy` of the packages asked (over half a second): kept until the host's package lists
            (/var/lib/apt/lists) or its installed packages (/var/lib/dpkg/status) change
  archives  an HTTP HEAD of each URL asked (up to HEAD_TIMEOUT_S): an answer is kept, a failure for
            ARCHIVE_RETRY_S, so that a host that cannot reach it does not wait at every run

A new boot (/proc/sys/kernel/random/boot_id) drops both. Where the tierlab root does not exist yet, nothing is
written.
"""

import json
import os
import platform
import shutil
import time
import urllib.error
import urllib.request
from http.client import HTTPException
from pathlib import Path

from . import cgroups, record, tiers, trace
from .packages import DPKG_STATUS, found_installed
from .system import HostError, changed_at, run

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
MEMINFO = Path("/proc/meminfo")
OS_RELEASE = Path("/etc/os-release")
FILESYSTEMS = Path("/proc/filesystems")
APT_LISTS = Path("/var/lib/apt/lists")
# tools in sbin are looked for there too, whatever PATH the probe is given
TOOL_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/local/sbin", "/usr/sbin", "/sbin"])
HEAD_TIMEOUT_S = 5
ARCHIVE_RETRY_S = 600
# below the tierlab root: the tiers' images (the tiers role's tiers_image_root) and the generated data, one
# directory per workload and scale (the datagen role's datagen_cache_root)
IMAGES_DIR = "images"
DATA_DIR = "data"
CACHE_NAME = "probe.json"


def memory() -> dict:
    fields = dict(line.split(":", 1) for line in MEMINFO.read_text().splitlines())
    # "MemTotal:       24683888 kB"
    kib = {name: int(fields[name].split()[0]) << 10 for name in ("MemTotal", "MemAvailable")}
    return {"total_bytes": kib["MemTotal"], "available_bytes": kib["MemAvailable"]}


def machine(memory_bytes: int) -> dict:
    """What a run records of the host it ran on: the distribution, as os-release names it, the kernel, the agent's
    Python, the number of CPUs and the memory (memory()'s total, which the caller has read)."""
    fields = dict(line.split("=", 1) for line in OS_RELEASE.read_text().splitlines() if "=" in line)
    return {"distribution": fields.get("PRETTY_NAME", "unknown").strip('"'), "kernel": os.uname().release,
            "python": platform.python_version(), "cpus": os.cpu_count(), "memory_bytes": memory_bytes}


def disk(root: Path) -> dict:
    """The free space of the file system the root is on, or will be: its nearest directory that exists."""
    path = root
    while not path.exists():
        path = path.parent
    stat = os.statvfs(path)
    return {"path": str(path), "free_bytes": stat.f_bavail * stat.f_frsize, "size_bytes": stat.f_blocks * stat.f_frsize}


def images(root: Path) -> dict:
    """Each tier image's size and the bytes it takes (images are sparse: what was written to them)."""
    return {path.stem: {"size_bytes": path.stat().st_size, "allocated_bytes": path.stat().st_blocks * 512}
            for path in sorted((root / IMAGES_DIR).glob("*.img"))}


def data(root: Path) -> dict:
    """The tables generated completely in the root's data cache, by workload and scale ('tpch/sf0.1'; a workload
    directory's scale with its revision, 'shop/sf0.1-1a2b3c4d'): their .tbl or .csv files' marks."""
    found: dict[str, list[str]] = {}
    for done in sorted((root / DATA_DIR).glob("*/*/*.complete")):
        found.setdefault(f"{done.parent.parent.name}/{done.parent.name}", []).append(done.name.split(".")[0])
    return found


def tracing() -> dict:
    """Where tracing would find tracefs and debugfs mounted, and which of them the kernel has."""
    available = FILESYSTEMS.read_text().split()
    debugfs = trace.mounted_debugfs()
    return {"tracefs": str(trace.TRACEFS) if (trace.TRACEFS / "instances").is_dir() else None,
            "debugfs": None if debugfs is None else str(debugfs),
            "filesystems": [name for name in ("tracefs", "debugfs") if name in available]}


def cgroup_controllers() -> dict:
    """The cgroup mode, and per controller tierlab uses its hierarchy, or what the host lacks and what to do."""
    found = {"mode": cgroups.mode()}
    for controller in cgroups.V1_NAMES:
        where = cgroups.hierarchy(controller)
        found[controller] = ({"version": where.version, "hierarchy": str(where.mount)} if where is not None
                             else {"lacking": cgroups.lacking(controller), "fix": cgroups.fix(controller)})
    return found


def apt_policy(packages: list[str]) -> dict:
    """Per package, the version installed and the candidate apt would install (None: none), from the package lists
    the host has (no update)."""
    try:
        # the C locale: apt translates the words parsed here
        out = run(["env", "LC_ALL=C", "apt-cache", "policy", *packages], timeout_s=60).stdout
    except HostError as exc:
        return {package: {"error": str(exc)} for package in packages}
    found: dict[str, dict] = {}
    current = None
    for line in out.splitlines():
        if not line.startswith(" ") and line.endswith(":"):
            current = found.setdefault(line[:-1], {})
        elif current is not None and line.strip().startswith(("Installed:", "Candidate:")):
            key, value = line.strip().split(":", 1)
            current[key.lower()] = None if value.strip() == "(none)" else value.strip()
    # apt-cache says nothing of a package no list names
    return {package: found.get(package, {"installed": None, "candidate": None}) for package in packages}


def head(url: str) -> dict:
    """The HTTP status of a HEAD request of url, or why there was none."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=HEAD_TIMEOUT_S) as answer:
            return {"status": answer.status}
    except urllib.error.HTTPError as exc:
        return {"error": f"HTTP {exc.code} {exc.reason}", "checked_at": time.time()}
    except (OSError, HTTPException) as exc:
        return {"error": str(getattr(exc, "reason", exc)), "checked_at": time.time()}


def _cached(boot_id: str, packages_key: list) -> dict:
    """The cache's packages and archives that still hold."""
    cache = record.read_state(CACHE_NAME)
    if not cache or cache.get("boot_id") != boot_id:
        return {"packages": {}, "archives": {}}
    return {"packages": cache["packages"] if cache.get("packages_key") == packages_key else {},
            "archives": {url: answer for url, answer in cache["archives"].items()
                         if "status" in answer or time.time() - answer["checked_at"] < ARCHIVE_RETRY_S}}


def probe(paths: list[str], tools: list[str], packages: list[str], urls: list[str]) -> dict:
    """The host's facts, with whether each path asked exists, where each tool is, each package's versions and each
    URL's answer. `cached`: whether the packages and URLs asked were all answered by the cache."""
    root = record.STATE_DIR.parent
    boot_id = BOOT_ID.read_text().strip()
    packages_key = [changed_at(APT_LISTS), changed_at(DPKG_STATUS)]
    cache = _cached(boot_id, packages_key)
    unknown = [package for package in dict.fromkeys(packages) if package not in cache["packages"]]
    cache["packages"].update(apt_policy(unknown) if unknown else {})
    asked = [url for url in dict.fromkeys(urls) if url not in cache["archives"]]
    cache["archives"].update({url: head(url) for url in asked})
    if unknown or asked:
        # apt's errors are not kept: the next probe asks again
        record.write_state(CACHE_NAME, {
            "boot_id": boot_id, "packages_key": packages_key, "archives": cache["archives"],
            "packages": {name: answer for name, answer in cache["packages"].items() if "error" not in answer}})
    found_memory = memory()
    return {
        "host": os.uname().nodename, "boot_id": boot_id, "uid": os.geteuid(),
        "root": str(root),
        "paths": {path: os.path.exists(path) for path in paths},
        "tools": {tool: shutil.which(tool, path=TOOL_PATH) for tool in tools},
        "packages": {package: cache["packages"][package] for package in packages},
        "archives": {url: cache["archives"][url] for url in urls},
        "cgroups": cgroup_controllers(), "tracing": tracing(), "lockdown": trace.lockdown(),
        "machine": machine(found_memory["total_bytes"]), "memory": found_memory,
        "disk": disk(root), "images": images(root), "data": data(root), "lost_loops": tiers.loops_on_lost_files(),
        "packages_found": found_installed(), "cached": not unknown and not asked,
    }


def main(paths: list[str], tools: list[str], packages: list[str], urls: list[str]) -> None:
    print(json.dumps(probe(paths, tools, packages, urls)))
