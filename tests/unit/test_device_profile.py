"""Device profiles: both readers (the emulator's C parser and tierlab.devices.profiles) refuse the same mistakes."""

import subprocess
from pathlib import Path

import pytest

from tierlab.devices import profiles as device_profile
from tierlab.errors import DeviceProfileError

EMULATOR = Path(__file__).resolve().parents[2] / "emulator"
NAND = EMULATOR / "profiles" / "nand.toml"


@pytest.fixture(scope="module")
def binary() -> Path:
    subprocess.run(["make", "-s", "-C", str(EMULATOR)], check=True, timeout=300)
    return EMULATOR / "tierlab-emu"


def emulator_error(binary: Path, profile: Path) -> str:
    done = subprocess.run([str(binary), "--profile", str(profile), "--simulate"], input="", capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2
    return done.stderr.strip()


def without_key(tmp_path: Path, key: str) -> Path:
    path = tmp_path / f"without_{key}.toml"
    path.write_text("".join(line + "\n" for line in NAND.read_text().splitlines() if not line.startswith(f"{key} =")))
    return path


def test_the_shipped_profiles_are_optane_nand_and_passthrough():
    assert device_profile.profile_names() == ["nand", "optane", "passthrough"]


def test_every_shipped_profile_loads_in_both_readers(binary):
    for name in device_profile.profile_names():
        path = device_profile.profile_path(name)
        assert device_profile.load(path)["model"] == name
        done = subprocess.run([str(binary), "--profile", str(path), "--simulate"], input="", capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr


# every model parameter of a profile (model and description are names, not parameters), as nand.toml sets them
PARAMETERS = ["channels", "read_random_us", "read_sequential_us", "write_us", "read_bandwidth_mb_s",
              "write_bandwidth_mb_s", "streams", "readahead_kb", "write_buffer_mb", "sustained_write_mb_s",
              "gc_pause_us", "gc_pause_every_kb", "read_during_write_us"]


def test_the_nand_profile_sets_every_parameter_once():
    assert sorted(line.split("=")[0].strip() for line in NAND.read_text().splitlines()
                  if "=" in line and not line.startswith(("#", "model", "description"))) == sorted(PARAMETERS)


@pytest.mark.parametrize("key", PARAMETERS)
def test_each_parameter_is_required_by_both_readers(binary, tmp_path, key):
    path = without_key(tmp_path, key)
    assert emulator_error(binary, path) == f"tierlab-emu: {path}: missing key {key}"
    with pytest.raises(DeviceProfileError) as err:
        device_profile.load(path)
    assert str(err.value) == f"{path}: missing key {key}"


def test_an_unknown_key_is_refused_with_its_line(binary, tmp_path):
    path = tmp_path / "typo.toml"
    path.write_text(NAND.read_text() + "read_randon_us = 80\n")
    line = len(path.read_text().splitlines())
    assert emulator_error(binary, path) == f"tierlab-emu: {path}:{line}: unknown key read_randon_us"
    with pytest.raises(DeviceProfileError, match="unknown key read_randon_us; allowed: model, description, channels"):
        device_profile.load(path)


@pytest.mark.parametrize(("line", "bad", "message"), [
    ("read_random_us = 88.6", "read_random_us = -1", "read_random_us must be a number >= 0, got -1"),
    ("channels = 32", "channels = 2.5", "channels must be a whole number >= 0, got 2.5"),
])
def test_a_bad_value_is_refused_by_both_readers(binary, tmp_path, line, bad, message):
    path = tmp_path / "bad.toml"
    path.write_text(NAND.read_text().replace(line, bad))
    assert message in emulator_error(binary, path)
    with pytest.raises(DeviceProfileError, match=message):
        device_profile.load(path)


def test_an_unknown_profile_name_lists_the_shipped_ones():
    with pytest.raises(DeviceProfileError) as err:
        device_profile.profile_path("hdd")
    assert str(err.value) == "profile='hdd' is not allowed; allowed: nand, optane, passthrough, or the path of a .toml profile"


@pytest.mark.parametrize(("line", "bad", "message"), [
    ("channels = 32", "channels = 300", "channels must be at most 256 (0 means unlimited)"),
    ("streams = 16", "streams = 65", "streams must be at most 64"),
    ("sustained_write_mb_s = 400", "sustained_write_mb_s = 0", "a write buffer needs sustained_write_mb_s > 0 to drain"),
    ("gc_pause_every_kb = 4096", "gc_pause_every_kb = 0", "gc_pause_us needs gc_pause_every_kb > 0"),
])
def test_a_profile_the_model_cannot_run_is_refused_by_both_readers(binary, tmp_path, line, bad, message):
    path = tmp_path / "unrunnable.toml"
    path.write_text(NAND.read_text().replace(line, bad))
    assert emulator_error(binary, path) == f"tierlab-emu: {path}: {message}"
    with pytest.raises(DeviceProfileError) as err:
        device_profile.load(path)
    assert str(err.value) == f"{path}: {message}"
