"""Traced queries read from analyzed runs as the cost model takes them: the runs checked, each query's
requests named by table, the device profiles to cost them on."""

import ctypes
from pathlib import Path

import pandas as pd

from ..catalog.layout import CAPACITY, FAST
from ..devices import cost_model, profiles
from ..errors import InputError, RunDirError
from ..runs.manifest import tiers_dilation
from ..runs.results import read_manifest, request_chunks
from .predict import TracedQuery


def device_profiles(text: str | None, tiers: list[dict], scratch: Path) -> dict[str, Path]:
    """Each role's device profile file: --profiles fast=NAME|FILE,capacity=NAME|FILE, else the traced tiers'
    (written to scratch)."""
    if text:
        given = dict(item.partition("=")[::2] for item in text.split(","))
        if set(given) != {FAST, CAPACITY}:
            raise InputError(f"--profiles {text!r}: give fast=PROFILE,capacity=PROFILE "
                             f"(a profile: {', '.join(profiles.profile_names())}, or a .toml file)")
        return {role: profiles.profile_path(profile) for role, profile in given.items()}
    found = {}
    for tier in tiers:
        if not (tier.get("profile") or {}).get("text"):
            raise InputError(f"tier {tier['name']} has no device model (a real device): give --profiles "
                             "fast=PROFILE,capacity=PROFILE, e.g. from playbooks/devices.yml's measurements")
        path = scratch / f"{tier['role']}.toml"
        path.write_text(tier["profile"]["text"])
        found[tier["role"]] = path
    return found


def traced_runs(run_dirs: list[str]) -> list[tuple[Path, dict]]:
    """The runs to predict from, each with its manifest: traced, of one engine and workload, on the same tiers."""
    runs = [(Path(d), read_manifest(Path(d))) for d in run_dirs]
    first_dir, first = runs[0]
    for run_dir, m in runs:
        if not m["settings"].get("trace"):
            raise RunDirError(f"{run_dir} ran its queries untraced (trace=false); recommend needs traced runs")
        for key in ("engine", "workload"):
            if (m[key].get("name"), m[key].get("scale_factor")) != (first[key].get("name"), first[key].get("scale_factor")):
                raise RunDirError(f"{run_dir} ran another {key} than {first_dir}; recommend one engine's one workload")
        if [t.get("profile") for t in m["tiers"]] != [t.get("profile") for t in first["tiers"]]:
            raise RunDirError(f"{run_dir} ran on other tiers than {first_dir}; recommend from runs on the same tiers")
    return runs


def window(run_dir: Path, m: dict, row: dict, units: dict | None = None) -> cost_model.Window:
    """A traced query's requests as the cost model takes them, each object named by its table (or by its unit, where
    units split the tables as placement.objects does; `other` for none), with the tiers' roles and the run's
    dilation."""
    object_table = {f["object"]: t for t, v in (units or m["layout"]["tables"]).items() for f in v["files"]}

    def by_table(requests: pd.DataFrame) -> pd.DataFrame:
        # each object (and a request of none) named by its table, as categories: a chunk has a million requests
        objects = requests["object"].cat
        tables = pd.Index([object_table.get(o, cost_model.OTHER) for o in objects.categories] + [cost_model.OTHER])
        names = tables.unique()
        requests["object"] = pd.Categorical.from_codes(names.get_indexer(tables)[objects.codes], categories=names)
        return requests

    chunks = map(by_table, request_chunks(run_dir, row["query"], int(row["try"])))
    return cost_model.Window.of(chunks, {t["name"]: t["role"] for t in m["tiers"]}, tiers_dilation(m["tiers"]) or 1.0)


def traced_query(run_dir: Path, m: dict, row: dict, profile_files: dict[str, Path],
                 weight: float = 1.0) -> tuple[cost_model.Window, TracedQuery]:
    """A traced query of a run as recommend costs it: its window and its TracedQuery."""
    requests = window(run_dir, m, row)
    traced = {t: v["tier"] for t, v in m["layout"]["tables"].items()}
    return requests, TracedQuery(m["run_id"], row["query"], weight, row["elapsed_s"], row["io_time_s"], traced,
                                 cost_model.layout_costs(requests, profile_files), emulated_dilation(m, profile_files))


def emulated_dilation(m: dict, profile_files: dict[str, Path]) -> float | None:
    """The dilation of the run's emulated tiers when each role's profile is its tier's own model (what the
    emulator ran), else None."""
    own = {t["role"]: (t.get("profile") or {}).get("text") for t in m["tiers"]}
    given = {role: path.read_text() for role, path in profile_files.items()}
    return tiers_dilation(m["tiers"]) if own == given else None


# glibc's mallopt parameter: the size from which a block gets a mapping of its own, given back when freed
M_MMAP_THRESHOLD = -3


def give_back_freed_memory() -> None:
    """Arrays let go are given back to the system at once, so that peak memory follows what is alive. The cost
    model reads a window of millions of requests in parts of a few MB: glibc's malloc would keep the parts'
    memory in its heap (its threshold for a mapping of a block's own rises to 32 MB as such blocks are
    freed), and arrow's allocator its own: recommend on 10^7 requests peaked at about 1 GB, with this 0.75 GB."""
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is not None:
        mallopt(M_MMAP_THRESHOLD, 1 << 20)
