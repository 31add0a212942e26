"""An InnoDB file split by its pages' headers into its indexes, and those byte ranges mapped to extents."""

import struct

from tierlab_host.extents import restrict
from tierlab_host.innodb_pages import index_runs, object_ranges

PAGE = 16384
# page types (fil0types.h)
FSP_HDR, IBUF_BITMAP, INODE, INDEX, ALLOCATED, BLOB = 8, 5, 3, 17855, 0, 10


def page(kind: int, index_id: int = 0) -> bytes:
    """A page with its type at byte 24 and, in its page header, an index id at byte 66."""
    data = bytearray(b"\xa5" * PAGE)
    struct.pack_into(">H", data, 24, kind)
    struct.pack_into(">Q", data, 66, index_id)
    return bytes(data)


def test_each_run_of_pages_belongs_to_its_index_and_other_pages_to_the_table(tmp_path):
    path = tmp_path / "orders.ibd"
    path.write_bytes(b"".join([page(FSP_HDR), page(IBUF_BITMAP), page(INODE), page(INDEX, 100), page(INDEX, 101),
                               page(INDEX, 100), page(INDEX, 100), page(ALLOCATED, 101), page(BLOB, 100)]))
    assert index_runs(str(path), PAGE) == [(0, 3, 0), (3, 1, 100), (4, 1, 101), (5, 2, 100), (7, 2, 0)]


def test_a_cut_last_page_is_left_out(tmp_path):
    path = tmp_path / "orders.ibd"
    path.write_bytes(page(INDEX, 100) + page(INDEX, 100)[:PAGE // 2])
    assert index_runs(str(path), PAGE) == [(0, 1, 100)]


def test_the_clustered_index_s_pages_and_unknown_indexes_join_the_table_s_object():
    runs = [(0, 3, 0), (3, 1, 100), (4, 1, 101), (5, 2, 100), (7, 1, 0), (8, 1, 999)]
    assert object_ranges(runs, PAGE, {100: "orders", 101: "orders_custkey"}, "orders") == {
        "orders": [[0, 4 * PAGE], [5 * PAGE, 4 * PAGE]],
        "orders_custkey": [[4 * PAGE, PAGE]]}


def test_byte_ranges_keep_the_parts_of_the_extents_they_cover():
    # [logical, physical, length, stored]: two extents of 64 KiB, far apart on the device
    extents = [[0, 1 << 20, 65536, 65536], [65536, 8 << 20, 65536, 65536]]
    assert restrict(extents, [[16384, 16384], [49152, 32768], [114688, 16384]]) == [
        [16384, (1 << 20) + 16384, 16384, 16384],
        [49152, (1 << 20) + 49152, 16384, 16384], [65536, 8 << 20, 16384, 16384],
        [114688, (8 << 20) + 49152, 16384, 16384]]


def test_a_range_of_a_compressed_extent_holds_its_share_of_the_stored_bytes():
    # 128 KiB of the file stored compressed in 32 KiB: a quarter of it is a quarter of those
    extents = [[0, 1 << 20, 131072, 32768]]
    assert restrict(extents, [[32768, 32768]]) == [[32768, (1 << 20) + 8192, 32768, 8192]]
