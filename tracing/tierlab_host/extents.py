"""Physical extents of files, through the FIEMAP ioctl (what `filefrag -e` reads)."""

import fcntl
import os
import struct

from .system import device_of_path

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
HEADER = struct.Struct("=QQLLLL")
EXTENT = struct.Struct("=QQQ16xL12x")
BATCH = 512


def file_extents(path: str) -> list[list[int]]:
    """[[logical_bytes, physical_bytes, length_bytes], ...] in logical order.

    Physical offsets are bytes from the start of the block device holding the
    file system, so sector = physical_bytes // 512.
    """
    extents = []
    start = 0
    with open(path, "rb") as f:
        while True:
            buf = bytearray(HEADER.pack(start, 2**64 - 1 - start, FIEMAP_FLAG_SYNC, 0, BATCH, 0))
            buf += bytes(EXTENT.size * BATCH)
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, buf)
            mapped = HEADER.unpack_from(buf)[3]
            last = False
            for i in range(mapped):
                logical, physical, length, flags = EXTENT.unpack_from(buf, HEADER.size + i * EXTENT.size)
                extents.append([logical, physical, length])
                last = bool(flags & FIEMAP_EXTENT_LAST)
                start = logical + length
            if mapped == 0 or last:
                return extents


def map_files(files: list[dict]) -> list[dict]:
    """Each {path, object, tier} gains device, size_bytes and extents."""
    mapped = []
    for item in files:
        mapped.append({
            **item,
            "device": device_of_path(item["path"]),
            "size_bytes": os.path.getsize(item["path"]),
            "extents": file_extents(item["path"]),
        })
    return mapped
