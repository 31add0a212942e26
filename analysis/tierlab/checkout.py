"""Where the checkout tierlab runs from keeps what is not Python: its playbooks, the emulator and its profiles.

tierlab installed without its checkout (`pip install .`) analyses traces and runs, but cannot run playbooks or
device models: what needs them says so."""

from pathlib import Path

from .errors import TierlabError

PROJECT = Path(__file__).resolve().parents[2]


def require_checkout(what: str) -> Path:
    """The checkout's root, or a refusal naming what needs it where tierlab is installed without one."""
    if not ((PROJECT / "playbooks").is_dir() and (PROJECT / "emulator").is_dir()):
        raise TierlabError(f"{what} needs tierlab's checkout (its playbooks/ and emulator/), and this tierlab "
                           f"({Path(__file__).parent}) is installed without one: run it from a clone of the "
                           "repository, where `make setup` installs it into the clone's .venv")
    return PROJECT
