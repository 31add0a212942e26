"""The file system's compression of a database: btrfs compresses what is written in a directory whose
`compression` property is set, so each tier's directory of the database gets it before its files are made.
What an engine preallocates (InnoDB extends its files with fallocate) btrfs writes in place, uncompressed, so
once the database is filled its files are rewritten compressed (defragmented with compression)."""

import shutil
from pathlib import Path

from .system import HostError, mount_facts, run

# the compressions a file system does, and the file system that does them (the study's FS_COMPRESSIONS)
FILESYSTEMS = {"zstd": "btrfs"}


def compress_dirs(dirs: list[Path], user: str, compression: str) -> list[dict]:
    """Make each directory (the engine's user's) and have btrfs compress what is written in it."""
    done = []
    for directory in dirs:
        filesystem = mount_facts(directory.parent)[0]
        if filesystem != FILESYSTEMS[compression]:
            raise HostError(f"{directory.parent} is on {filesystem}: compression={compression} needs "
                            f"{FILESYSTEMS[compression]} tiers (tiers_filesystem={FILESYSTEMS[compression]})")
        directory.mkdir(mode=0o700, exist_ok=True)
        shutil.chown(directory, user, user)
        run(["btrfs", "property", "set", str(directory), "compression", compression])
        done.append({"dir": str(directory), "compression": compression})
    return done


def compress_files(dirs: list[Path], compression: str) -> list[dict]:
    """Rewrite every file in the directories compressed; the data stays what it was."""
    for directory in dirs:
        run(["btrfs", "filesystem", "defragment", "-r", f"-c{compression}", str(directory)], timeout_s=24 * 3600)
    return [{"dir": str(directory), "rewritten": compression} for directory in dirs]
