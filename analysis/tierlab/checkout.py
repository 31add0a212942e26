"""Where the checkout tierlab runs from keeps what is not Python: its playbooks, the emulator and its profiles."""

from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
