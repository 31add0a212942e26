"""Device profiles: the parameters of a device model, in emulator/profiles/*.toml.

The emulator (tierlab-emu) reads the same files with its own parser of this
TOML subset; both refuse a profile with a missing, repeated or unknown key.
"""

import tomllib
from pathlib import Path

from ..checkout import PROJECT, require_checkout
from ..errors import DeviceProfileError

PROFILES_DIR = PROJECT / "emulator" / "profiles"
# parameters that are whole numbers; every other one is a number >= 0
COUNT_KEYS = ("channels", "streams")
NUMBER_KEYS = (
    "read_random_us", "read_sequential_us", "write_us", "read_bandwidth_mb_s", "write_bandwidth_mb_s",
    "readahead_kb", "write_buffer_mb", "sustained_write_mb_s", "gc_pause_us", "gc_pause_every_kb",
    "read_during_write_us",
)
TEXT_KEYS = ("model", "description")


def profile_names() -> list[str]:
    require_checkout("a device profile by its name (the shipped profiles are emulator/profiles/*.toml)")
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def profile_path(profile: str) -> Path:
    """A shipped profile's name (optane, nand, ...) or the path of a profile file."""
    if profile.endswith(".toml"):
        path = Path(profile).resolve()
        if not path.is_file():
            raise DeviceProfileError(f"profile {profile!r}: no such file")
        return path
    if profile not in profile_names():
        raise DeviceProfileError(
            f"profile={profile!r} is not allowed; allowed: {', '.join(profile_names())}, or the path of a .toml profile"
        )
    return PROFILES_DIR / f"{profile}.toml"


def load(path: Path) -> dict:
    """The parameters of the profile file at path, checked (see parse)."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise DeviceProfileError(f"{path}: {exc}") from None
    return parse(text, str(path))


def parse(text: str, path: str) -> dict:
    """A profile's parameters, checked: every key present, none unknown, numbers >= 0. path names the text
    in errors."""
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise DeviceProfileError(f"{path}: {exc}") from None
    known = (*TEXT_KEYS, *COUNT_KEYS, *NUMBER_KEYS)
    unknown = sorted(set(values) - set(known))
    if unknown:
        raise DeviceProfileError(f"{path}: unknown key {unknown[0]}; allowed: {', '.join(known)}")
    missing = [key for key in (TEXT_KEYS[0], *COUNT_KEYS, *NUMBER_KEYS) if key not in values]
    if missing:
        raise DeviceProfileError(f"{path}: missing key {missing[0]}")
    for key in COUNT_KEYS:
        if not isinstance(values[key], int) or values[key] < 0:
            raise DeviceProfileError(f"{path}: {key} must be a whole number >= 0, got {values[key]!r}")
    for key in NUMBER_KEYS:
        if isinstance(values[key], bool) or not isinstance(values[key], int | float) or values[key] < 0:
            raise DeviceProfileError(f"{path}: {key} must be a number >= 0, got {values[key]!r}")
    # the model's own checks (emulator/src/model.c: model_check)
    for problem, wrong in (("channels must be at most 256 (0 means unlimited)", values["channels"] > 256),
                           ("streams must be at most 64", values["streams"] > 64),
                           ("a write buffer needs sustained_write_mb_s > 0 to drain",
                            values["write_buffer_mb"] > 0 and values["sustained_write_mb_s"] <= 0),
                           ("gc_pause_us needs gc_pause_every_kb > 0",
                            values["gc_pause_us"] > 0 and values["gc_pause_every_kb"] <= 0)):
        if wrong:
            raise DeviceProfileError(f"{path}: {problem}")
    return values


def copy_bytes_per_s(source: dict, target: dict) -> float:
    """The rate of a long copy from one modelled device to another: the slower of the source's read
    bandwidth and the target's sustained write rate (past its write buffer, if it has one)."""
    target_write_mb_s = target["write_bandwidth_mb_s"]
    if target["write_buffer_mb"] > 0:
        target_write_mb_s = min(target_write_mb_s, target["sustained_write_mb_s"])
    return min(source["read_bandwidth_mb_s"], target_write_mb_s) * 1e6
