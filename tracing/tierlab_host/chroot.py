"""The mounts a chroot needs to run a server on the host's tiers: /proc, and the host's directories
bind-mounted at the same paths inside it, each recorded before it is made so that teardown unmounts it."""

import json
from pathlib import Path

from . import record
from .system import mounted, run


def mount(root: str, paths: list[str]) -> dict:
    changes = []
    targets = [("proc", Path(root, "proc"))] + [(path, Path(root, path.lstrip("/"))) for path in paths]
    for source, target in targets:
        if mounted(target):
            continue
        target.mkdir(parents=True, exist_ok=True)
        record.add("mount", path=str(target))
        run(["mount", "-t", "proc", "proc", str(target)] if source == "proc" else ["mount", "--bind", source, str(target)])
        changes.append(f"mounted {source} on {target}")
    return {"changed": bool(changes), "changes": changes}


def main(root: str, paths: list[str]) -> None:
    print(json.dumps(mount(root, paths)))
