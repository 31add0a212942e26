import pytest

from tierlab.errors import StudyInputError
from tierlab.study_vars import validate_tiers

OPTANE = {"name": "optane", "role": "fast", "emulation": "loop", "size": "6G", "read_ahead_kb": 128, "throttle": {}}
NAND = {"name": "nand", "role": "capacity", "emulation": "loop", "size": "16G", "throttle": {"read_iops": 2000}}


def test_the_default_inventory_tiers_are_valid():
    assert validate_tiers([OPTANE, NAND]) == [OPTANE, NAND]


def test_a_real_tier_needs_a_path_or_a_device():
    real = {"name": "nvme", "role": "capacity", "emulation": "none"}
    with pytest.raises(StudyInputError) as err:
        validate_tiers([OPTANE, real])
    assert str(err.value) == "tier 'nvme' (emulation none) needs 'path' (a mounted file system) or 'device' (to format and mount)"


def test_two_fast_tiers_are_refused():
    with pytest.raises(StudyInputError, match="exactly one tier with role 'fast' and one with role 'capacity'; given roles: "
                                              r"\['fast', 'fast'\]"):
        validate_tiers([OPTANE, {**NAND, "role": "fast"}])


def test_an_unknown_throttle_key_names_the_allowed_ones():
    with pytest.raises(StudyInputError, match=r"allowed: read_iops, write_iops, read_bps, write_bps"):
        validate_tiers([OPTANE, {**NAND, "throttle": {"iops": 5}}])


def test_a_loop_tier_needs_a_size():
    with pytest.raises(StudyInputError, match="tier 'nand' size=None is not allowed"):
        validate_tiers([OPTANE, {**NAND, "size": None}])


def test_tier_names_are_unique():
    with pytest.raises(StudyInputError, match="named twice"):
        validate_tiers([OPTANE, {**NAND, "name": "optane"}])
