import pytest

from tierlab.devices.profiles import PROFILES_DIR
from tierlab.errors import InputError
from tierlab.runs.settings import validate_dilation, validate_tiers

OPTANE = {"name": "optane", "role": "fast", "size": "6G", "read_ahead_kb": 128, "profile": "optane", "throttle": {}}
NAND = {"name": "nand", "role": "capacity", "size": "16G", "profile": "nand", "throttle": {"read_iops": 2000}}


def test_the_default_inventory_tiers_are_modelled_with_their_profile_files():
    assert validate_tiers([OPTANE, NAND], "model", "ext4") == [
        {**OPTANE, "emulation": "model", "filesystem": "ext4", "profile_file": str(PROFILES_DIR / "optane.toml")},
        {**NAND, "emulation": "model", "filesystem": "ext4", "profile_file": str(PROFILES_DIR / "nand.toml")},
    ]


def test_the_default_emulation_can_be_the_throttle():
    assert [t["emulation"] for t in validate_tiers([OPTANE, NAND], "throttle", "ext4")] == ["throttle", "throttle"]


def test_a_tier_s_own_emulation_wins_over_the_default():
    real = {"name": "nvme", "role": "capacity", "emulation": "none", "path": "/mnt/nvme"}
    assert [t["emulation"] for t in validate_tiers([OPTANE, real], "model", "ext4")] == ["model", "none"]


def test_an_unknown_default_emulation_names_the_allowed_ones():
    with pytest.raises(InputError) as err:
        validate_tiers([OPTANE, NAND], "loop", "ext4")
    assert str(err.value) == "tiers_emulation='loop' is not allowed; allowed: model, throttle, none"


def test_a_modelled_tier_needs_a_known_profile():
    with pytest.raises(InputError) as err:
        validate_tiers([OPTANE, {**NAND, "profile": "hdd"}], "model", "ext4")
    assert str(err.value) == ("tier 'nand': profile='hdd' is not allowed; allowed: nand, optane, passthrough, "
                              "or the path of a .toml profile")


def test_a_modelled_tier_without_a_profile_is_refused():
    with pytest.raises(InputError, match="tier 'nand' profile=None is not allowed; allowed: nand, optane, passthrough"):
        validate_tiers([OPTANE, {**NAND, "profile": None}], "model", "ext4")


def test_a_profile_file_is_checked_before_anything_runs(tmp_path):
    broken = tmp_path / "mine.toml"
    broken.write_text('model = "mine"\nchannels = 4\n')
    with pytest.raises(InputError) as err:
        validate_tiers([OPTANE, {**NAND, "profile": str(broken)}], "model", "ext4")
    assert str(err.value) == f"tier 'nand': {broken}: missing key streams"


def test_a_real_tier_needs_a_path_or_a_device():
    real = {"name": "nvme", "role": "capacity", "emulation": "none"}
    with pytest.raises(InputError) as err:
        validate_tiers([OPTANE, real], "model", "ext4")
    assert str(err.value) == "tier 'nvme' (emulation none) needs 'path' (a mounted file system) or 'device' (to format and mount)"


def test_two_fast_tiers_are_refused():
    with pytest.raises(InputError, match="exactly one tier with role 'fast' and one with role 'capacity'; given roles: "
                                              r"\['fast', 'fast'\]"):
        validate_tiers([OPTANE, {**NAND, "role": "fast"}], "model", "ext4")


def test_an_unknown_throttle_key_names_the_allowed_ones():
    with pytest.raises(InputError, match=r"allowed: read_iops, write_iops, read_bps, write_bps"):
        validate_tiers([OPTANE, {**NAND, "throttle": {"iops": 5}}], "throttle", "ext4")


def test_an_emulated_tier_needs_a_size():
    with pytest.raises(InputError, match="tier 'nand' size=None is not allowed"):
        validate_tiers([OPTANE, {**NAND, "size": None}], "model", "ext4")


def test_tier_names_are_unique():
    with pytest.raises(InputError, match="named twice"):
        validate_tiers([OPTANE, {**NAND, "name": "optane"}], "model", "ext4")


def test_the_dilation_is_auto_or_a_number_from_1_to_1000():
    assert (validate_dilation("auto"), validate_dilation("8"), validate_dilation(2.5)) == ("auto", 8.0, 2.5)


@pytest.mark.parametrize("given", ["0.5", "fast", "1001"])
def test_a_dilation_outside_its_range_names_what_is_allowed(given):
    with pytest.raises(InputError) as err:
        validate_dilation(given)
    assert str(err.value) == (f"tiers_dilation={given!r} is not allowed; allowed: auto, or a number from 1 to 1000 "
                              "(modelled time stretched that many times on every tier)")


def test_tiers_tierlab_formats_take_the_default_file_system_and_a_mounted_path_only_its_own():
    real = {"name": "nvme", "role": "capacity", "emulation": "none", "path": "/mnt/nvme"}
    device = {**real, "path": None, "device": "/dev/nvme0n1", "format": True}
    assert [t["filesystem"] for t in validate_tiers([OPTANE, real], "model", "btrfs")] == ["btrfs", None]
    assert [t["filesystem"] for t in validate_tiers([OPTANE, device], "model", "btrfs")] == ["btrfs", "btrfs"]
    assert [t["filesystem"] for t in validate_tiers([OPTANE, {**real, "filesystem": "btrfs"}], "model", "ext4")] == [
        "ext4", "btrfs"]


def test_an_unknown_file_system_names_the_allowed_ones():
    with pytest.raises(InputError) as err:
        validate_tiers([OPTANE, {**NAND, "filesystem": "xfs"}], "model", "ext4")
    assert str(err.value) == "tier 'nand' filesystem='xfs' is not allowed; allowed: ext4, btrfs"
