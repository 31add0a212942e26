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


def restrict(extents: list[list[int]], ranges: list[list[int]]) -> list[list[int]]:
    """The parts of a file's extents ([logical, physical, length], in logical order) inside its byte
    ranges ([first, length], in order)."""
    parts, k = [], 0
    for first, length in ranges:
        end = first + length
        while k < len(extents) and extents[k][0] + extents[k][2] <= first:
            k += 1
        j = k
        while j < len(extents) and extents[j][0] < end:
            logical, physical, size = extents[j]
            start, stop = max(first, logical), min(end, logical + size)
            parts.append([start, physical + start - logical, stop - start])
            j += 1
    return parts


def map_files(files: list[dict]) -> list[dict]:
    """Each {path, object, tier} gains device, size_bytes and extents; an object that holds only some
    byte ranges of its file (`ranges`: an InnoDB index in its table's file) gains those ranges' extents."""
    mapped, extents = [], {}
    for item in files:
        path = item["path"]
        if path not in extents:
            extents[path] = file_extents(path)
        entry = {key: value for key, value in item.items() if key != "ranges"}
        if "ranges" in item:
            entry.update(size_bytes=sum(length for _, length in item["ranges"]),
                         extents=restrict(extents[path], item["ranges"]))
        else:
            entry.update(size_bytes=os.path.getsize(path), extents=extents[path])
        mapped.append({**entry, "device": device_of_path(path)})
    return mapped
