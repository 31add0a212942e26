"""Jinja filters that hand the study's input checks to the tierlab package (one implementation)."""

from ansible.errors import AnsibleFilterError

from tierlab.errors import StudyInputError
from tierlab.study_vars import (
    buffer_pool_bytes,
    connections,
    memory_limit_bytes,
    parse_bytes,
    resume_conflicts,
    validate,
    validate_dilation,
    validate_tiers,
)


def tierlab_study(values, fast_tier_bytes=None, tier_filesystems=None, tier_emulations=None):
    try:
        return validate(dict(values), fast_tier_bytes, tier_filesystems, tier_emulations)
    except StudyInputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_resume_conflicts(recorded, values, fast_tier_bytes=None, tier_filesystems=None, tier_emulations=None):
    """The variables the run to resume was started with otherwise, as text ('' when none)."""
    try:
        conflicts = resume_conflicts(dict(recorded), dict(values), fast_tier_bytes, tier_filesystems, tier_emulations)
    except StudyInputError as exc:
        raise AnsibleFilterError(str(exc)) from None
    return "; ".join(f"{name} was {then!r}, now {now!r}" for name, (then, now) in conflicts.items())


def tierlab_tiers(tiers, default_emulation, default_filesystem):
    try:
        return validate_tiers(list(tiers), default_emulation, default_filesystem)
    except StudyInputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_dilation(value):
    try:
        return validate_dilation(value)
    except StudyInputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_bytes(value, name="size"):
    try:
        return parse_bytes(name, value)
    except StudyInputError as exc:
        raise AnsibleFilterError(str(exc)) from None


def tierlab_buffer_pool_bytes(study):
    return buffer_pool_bytes(study)


def tierlab_memory_limit_bytes(study):
    return memory_limit_bytes(study)


def tierlab_connections(study):
    return connections(study)


class FilterModule:
    def filters(self):
        return {
            "tierlab_study": tierlab_study,
            "tierlab_resume_conflicts": tierlab_resume_conflicts,
            "tierlab_tiers": tierlab_tiers,
            "tierlab_dilation": tierlab_dilation,
            "tierlab_bytes": tierlab_bytes,
            "tierlab_buffer_pool_bytes": tierlab_buffer_pool_bytes,
            "tierlab_memory_limit_bytes": tierlab_memory_limit_bytes,
            "tierlab_connections": tierlab_connections,
        }
