"""Jinja filters that hand the playbooks' questions to the tierlab package (one implementation): the catalog's
declarations, the run settings' checks, what follows from the settings."""

import json
import os
from functools import wraps
from pathlib import Path

from ansible.errors import AnsibleFilterError

from tierlab.catalog.engines import ENGINES
from tierlab.catalog.values import parse_bytes
from tierlab.catalog.variables import group
from tierlab.catalog.workloads import workload_of
from tierlab.checkout import PROJECT
from tierlab.errors import TierlabError
from tierlab.runs.doctor import judge, probe_arguments, refuse_missing, warnings
from tierlab.runs.lock_holder import holder
from tierlab.runs.manifest import read_run_config
from tierlab.runs.observing import validate_observe
from tierlab.runs.settings import (
    buffer_pool_bytes,
    connections,
    estimated_table_bytes,
    memory_limit_bytes,
    os_cache_bytes,
    resume_conflicts,
    validate,
    validate_dilation,
    validate_tiers,
)


def _refusing(function):
    """The function, with tierlab's errors as Ansible's (the task fails with the error's own words)."""
    @wraps(function)
    def checked(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except TierlabError as exc:
            raise AnsibleFilterError(str(exc)) from None
    return checked


def tierlab_variable_names(groups):
    """The names of the catalog's variables of these groups (run, tiers, results)."""
    return [name for g in groups for name in group(g)]


def tierlab_engine(name):
    return ENGINES[name].facts()


def _plain(value):
    """A value of the play's as plain Python (Ansible's containers refuse to be copied, as dataclasses copy)."""
    return json.loads(json.dumps(value))


def tierlab_workload(settings):
    """What the catalog, or the run's workload directory, declares of the run's workload."""
    return workload_of(_plain(settings)).facts()


def tierlab_run_settings(values, fast_tier_bytes=None, tier_filesystems=None, tier_emulations=None):
    return validate(dict(values), fast_tier_bytes, tier_filesystems, tier_emulations)


def tierlab_resume_conflicts(recorded, values, fast_tier_bytes=None, tier_filesystems=None, tier_emulations=None):
    """The variables the run to resume was started with otherwise, as text ('' when none)."""
    conflicts = resume_conflicts(dict(recorded), dict(values), fast_tier_bytes, tier_filesystems, tier_emulations)
    return "; ".join(f"{name} was {then!r}, now {now!r}" for name, (then, now) in conflicts.items())


def tierlab_recorded_settings(run_dir):
    """The settings a run was started with (its config/run.json), or None when there is no such run."""
    config = read_run_config(Path(run_dir))
    return None if config is None else config["settings"]


def tierlab_probe_arguments(settings, tiers, root):
    """The host agent's arguments that probe what the run needs of its host."""
    return probe_arguments(dict(settings), list(tiers), root)


def tierlab_host_check(probe, settings, tiers):
    """The host's warnings for the run; refused, with every missing item and its fix, where it lacks anything."""
    items = judge(dict(probe), dict(settings), list(tiers))
    refuse_missing(probe, items)
    return warnings(items)


def tierlab_query_files(settings, dialect):
    """The SQL files of the run's queries and of its co-running query (a writer has none): the dialect's own where
    the dialects differ, else the one every engine runs (the catalog says where to look)."""
    workload = workload_of(_plain(settings))
    corun = [settings["corun"]] if settings["corun"] not in (None, "none", "writer") else []
    queries = list(dict.fromkeys([*settings["queries"], *corun]))
    found = []
    for query in queries:
        candidates = [PROJECT / path for path in workload.query_files(query, dialect)]
        path = next((p for p in candidates if p.is_file()), None)
        if path is None:
            raise AnsibleFilterError(f"query {query} of {workload.name}: none of {', '.join(map(str, candidates))} exists")
        found.append(str(path))
    return found


class FilterModule:
    def filters(self):
        return {
            "tierlab_variable_names": tierlab_variable_names,
            "tierlab_engine": tierlab_engine,
            "tierlab_workload": tierlab_workload,
            "tierlab_run_settings": _refusing(tierlab_run_settings),
            "tierlab_observe_settings": _refusing(lambda values: validate_observe(dict(values))),
            "tierlab_resume_conflicts": _refusing(tierlab_resume_conflicts),
            "tierlab_recorded_settings": _refusing(tierlab_recorded_settings),
            "tierlab_query_files": tierlab_query_files,
            "tierlab_probe_arguments": tierlab_probe_arguments,
            "tierlab_host_check": _refusing(tierlab_host_check),
            "tierlab_tiers": _refusing(lambda tiers, emulation, filesystem: validate_tiers(list(tiers), emulation, filesystem)),
            "tierlab_dilation": _refusing(validate_dilation),
            "tierlab_bytes": _refusing(lambda value, name="size": parse_bytes(name, value)),
            "tierlab_buffer_pool_bytes": buffer_pool_bytes,
            "tierlab_memory_limit_bytes": memory_limit_bytes,
            "tierlab_os_cache_bytes": os_cache_bytes,
            "tierlab_connections": connections,
            "tierlab_table_bytes": lambda settings: estimated_table_bytes(_plain(settings)),
            # the controller's process that holds the root's lock: `{{ run_id | tierlab_lock_holder }}`
            "tierlab_lock_holder": lambda run_id: {**holder(os.getpid()), "run_id": run_id or ""},
        }
