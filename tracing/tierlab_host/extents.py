"""Physical extents of files: through the FIEMAP ioctl (what `filefrag -e` reads), and on btrfs through
its tree-search ioctl, which also tells the device offset and the stored size of each extent.

An extent is [logical_bytes, physical_bytes, length_bytes, stored_bytes]: the file's bytes from
logical_bytes on, for length_bytes, are held by the device's stored_bytes from physical_bytes on, bytes
from the start of the block device holding the file system (so sector = physical_bytes // 512). stored_bytes
is less than length_bytes where the file system compressed the extent; it is read and written whole.
"""

import fcntl
import os
import struct

from .system import HostError, device_of_path, mount_facts

FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_LAST = 0x1
HEADER = struct.Struct("=QQLLLL")
EXTENT = struct.Struct("=QQQ16xL12x")
BATCH = 512

# btrfs: _IOWR(0x94, 17, struct btrfs_ioctl_search_args), a 104-byte key and a 3992-byte result buffer
BTRFS_IOC_TREE_SEARCH = 0xD0009411
SEARCH_ARGS_BYTES = 4096
SEARCH_KEY = struct.Struct("=7Q4L4Q")
SEARCH_HEADER = struct.Struct("=3Q2L")
CHUNK_TREE, FIRST_CHUNK_TREE_OBJECTID, CHUNK_ITEM = 3, 256, 228
SUBVOLUME_OF_FD, EXTENT_DATA = 0, 108
# btrfs_chunk (length, owner, stripe_len, type, io_align, io_width, sector_size, num_stripes, sub_stripes),
# then its stripes (devid, offset, dev_uuid)
CHUNK = struct.Struct("=4Q3L2H")
STRIPE = struct.Struct("=2Q16x")
# btrfs_file_extent_item (generation, ram_bytes, compression, encryption, other_encoding, type) and, unless
# the data is inline in the tree, disk_bytenr, disk_num_bytes, offset, num_bytes
FILE_EXTENT = struct.Struct("=2Q2BHB4Q")
TYPE_BYTE, INLINE = 20, 0
U64_MAX = 2**64 - 1


def file_extents(path: str) -> list[list[int]]:
    """The file's extents (see above), in logical order."""
    if mount_facts(path)[0] == "btrfs":
        return _btrfs_extents(path)
    return [[logical, physical, length, length] for logical, physical, length in _fiemap(path)]


def _fiemap(path: str) -> list[list[int]]:
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


def _tree_items(fd: int, tree: int, objectid: int, item_type: int):
    """(key offset, item bytes) of a btrfs tree's items of one object and type, in key order."""
    offset = 0
    while True:
        key = SEARCH_KEY.pack(tree, objectid, objectid, offset, U64_MAX, 0, U64_MAX, item_type, item_type,
                              SEARCH_ARGS_BYTES, 0, 0, 0, 0, 0)
        buf = bytearray(key + bytes(SEARCH_ARGS_BYTES - SEARCH_KEY.size))
        fcntl.ioctl(fd, BTRFS_IOC_TREE_SEARCH, buf)
        found = SEARCH_KEY.unpack_from(buf)[9]
        if found == 0:
            return
        position = SEARCH_KEY.size
        for _ in range(found):
            _, _, offset, _, length = SEARCH_HEADER.unpack_from(buf, position)
            position += SEARCH_HEADER.size
            yield offset, bytes(buf[position:position + length])
            position += length
        if offset == U64_MAX:
            return
        offset += 1


def _chunks(fd: int) -> list[tuple[int, int, int, int]]:
    """(logical start, length, device offset of the first stripe, stripes) of every chunk, by logical start."""
    chunks = []
    for logical, item in _tree_items(fd, CHUNK_TREE, FIRST_CHUNK_TREE_OBJECTID, CHUNK_ITEM):
        length, *_, stripes, _ = CHUNK.unpack_from(item)
        _, device_offset = STRIPE.unpack_from(item, CHUNK.size)
        chunks.append((logical, length, device_offset, stripes))
    return chunks


def _device_offset(chunks: list[tuple[int, int, int, int]], address: int, path: str) -> int:
    for logical, length, device_offset, stripes in chunks:
        if logical <= address < logical + length:
            if stripes != 1:
                raise HostError(f"{path}: its data is in a btrfs chunk of {stripes} stripes; tierlab maps the "
                                "extents of single-device btrfs with the single data profile (mkfs.btrfs's default)")
            return device_offset + address - logical
    raise HostError(f"{path}: btrfs address {address} is in no chunk of its file system")


def _btrfs_extents(path: str) -> list[list[int]]:
    with open(path, "rb") as f:
        # the file's extent items are in the tree only once its delayed writes are
        os.fsync(f.fileno())
        chunks = _chunks(f.fileno())
        extents = []
        for logical, item in _tree_items(f.fileno(), SUBVOLUME_OF_FD, os.fstat(f.fileno()).st_ino, EXTENT_DATA):
            if item[TYPE_BYTE] == INLINE:
                continue
            _, _, compression, _, _, _, disk_start, disk_bytes, offset, length = FILE_EXTENT.unpack_from(item)
            if disk_start == 0:
                continue
            if compression:
                extents.append([logical, _device_offset(chunks, disk_start, path), length, disk_bytes])
            else:
                extents.append([logical, _device_offset(chunks, disk_start + offset, path), length, length])
    return extents


def restrict(extents: list[list[int]], ranges: list[list[int]]) -> list[list[int]]:
    """The parts of a file's extents (in logical order) inside its byte ranges ([first, length], in order).
    A compressed extent is read whole, so its part is the range's share of its stored bytes."""
    parts, k = [], 0
    for first, length in ranges:
        end = first + length
        while k < len(extents) and extents[k][0] + extents[k][2] <= first:
            k += 1
        j = k
        while j < len(extents) and extents[j][0] < end:
            logical, physical, size, stored = extents[j]
            start, stop = max(first, logical), min(end, logical + size)
            low = physical + (start - logical) * stored // size
            high = physical + (stop - logical) * stored // size
            parts.append([start, low, stop - start, high - low])
            j += 1
    return parts


def map_files(files: list[dict]) -> list[dict]:
    """Each {path, object, tier} gains device, size_bytes and extents ([logical, physical, stored], so
    their stored bytes add up to what the file holds on the device); an object that holds only some byte
    ranges of its file (`ranges`: an InnoDB index in its table's file) gains those ranges' extents."""
    mapped, extents = [], {}
    for item in files:
        path = item["path"]
        if path not in extents:
            extents[path] = file_extents(path)
        entry = {key: value for key, value in item.items() if key != "ranges"}
        if "ranges" in item:
            parts = restrict(extents[path], item["ranges"])
            entry["size_bytes"] = sum(length for _, length in item["ranges"])
        else:
            parts = extents[path]
            entry["size_bytes"] = os.path.getsize(path)
        entry["extents"] = [[logical, physical, stored] for logical, physical, _, stored in parts]
        mapped.append({**entry, "device": device_of_path(path)})
    return mapped
