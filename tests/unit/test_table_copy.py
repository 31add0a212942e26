"""A table's file copied to another tier (an offline InnoDB move) keeps its holes: page compression's savings."""

import os

from tierlab_host.system import copy_keeping_holes

KIB = 1024


def test_a_page_compressed_file_s_holes_stay_holes_and_its_data_and_size_stay_the_same(tmp_path):
    # three 16 KiB pages, each compressed to 4 KiB with the rest punched out, and the file's unused tail
    src, dst = tmp_path / "sbtest1.ibd", tmp_path / "sbtest1.ibd.moving"
    with open(src, "wb") as f:
        for page in range(3):
            f.seek(page * 16 * KIB)
            f.write(bytes([page + 1]) * 4 * KIB)
        f.truncate(1024 * KIB)
    dst.write_bytes(b"an earlier, half-made copy " * 10_000)
    copy_keeping_holes(src, dst)
    assert dst.read_bytes() == src.read_bytes()
    assert os.stat(dst).st_size == 1024 * KIB
    assert os.stat(dst).st_blocks * 512 == os.stat(src).st_blocks * 512 == 3 * 4 * KIB


def test_a_file_without_holes_is_copied_whole(tmp_path):
    src, dst = tmp_path / "full.ibd", tmp_path / "full.ibd.moving"
    src.write_bytes(os.urandom(300 * KIB))
    copy_keeping_holes(src, dst)
    assert dst.read_bytes() == src.read_bytes()


def test_a_file_that_is_all_hole_is_copied_as_one(tmp_path):
    src, dst = tmp_path / "empty.ibd", tmp_path / "empty.ibd.moving"
    with open(src, "wb") as f:
        f.truncate(64 * KIB)
    copy_keeping_holes(src, dst)
    assert (os.stat(dst).st_size, os.stat(dst).st_blocks) == (64 * KIB, 0)
