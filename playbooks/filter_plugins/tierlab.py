"""Jinja filters that hand the run settings' checks to the tierlab package (one implementation)."""

from pathlib import Path

from ansible.errors import AnsibleFilterError

from tierlab.errors import InputError, TierlabError
from tierlab.runs.manifest import read_run_config
from tierlab.runs.settings import (
    buffer_pool_bytes,
    connections,
    memory_limit_bytes,
    parse_bytes,
    resume_conflicts,
    validate,
    validate_dilation,
    validate_tiers,
)


def tierlab_run_settings(values, fast_tier_bytes=None, tier_filesystems=None, tier_emulations=None):
    try:
        return validate(dict(values), fast_tier_bytes, tier_filesystems, tier_emulations)
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_resume_conflicts(recorded, values, fast_tier_bytes=None, tier_filesystems=None, tier_emulations=None):
    """The variables the run to resume was started with otherwise, as text ('' when none)."""
    try:
        conflicts = resume_conflicts(dict(recorded), dict(values), fast_tier_bytes, tier_filesystems, tier_emulations)
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return "; ".join(f"{name} was {then!r}, now {now!r}" for name, (then, now) in conflicts.items())


def tierlab_recorded_settings(run_dir):
    """The settings a run was started with (its config/run.json), or None when there is no such run."""
    try:
        config = read_run_config(Path(run_dir))
    except TierlabError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return None if config is None else config["settings"]


def tierlab_tiers(tiers, default_emulation, default_filesystem):
    try:
        return validate_tiers(list(tiers), default_emulation, default_filesystem)
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_dilation(value):
    try:
        return validate_dilation(value)
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_bytes(value, name="size"):
    try:
        return parse_bytes(name, value)
    except InputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_buffer_pool_bytes(settings):
    return buffer_pool_bytes(settings)


def tierlab_memory_limit_bytes(settings):
    return memory_limit_bytes(settings)


def tierlab_connections(settings):
    return connections(settings)


class FilterModule:
    def filters(self):
        return {
            "tierlab_run_settings": tierlab_run_settings,
            "tierlab_resume_conflicts": tierlab_resume_conflicts,
            "tierlab_recorded_settings": tierlab_recorded_settings,
            "tierlab_tiers": tierlab_tiers,
            "tierlab_dilation": tierlab_dilation,
            "tierlab_bytes": tierlab_bytes,
            "tierlab_buffer_pool_bytes": tierlab_buffer_pool_bytes,
            "tierlab_memory_limit_bytes": tierlab_memory_limit_bytes,
            "tierlab_connections": tierlab_connections,
        }
