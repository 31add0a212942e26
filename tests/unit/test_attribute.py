import pandas as pd

from tierlab.metrics.attribute import attribute, extent_table
from tierlab.metrics.patterns import Pieces, access_summary, mark_sequential

FILES = [
    # lineitem.ibd: two extents, the second one physically before the first
    {"object": "lineitem", "path": "/t/nand/lineitem.ibd", "device": "7:1",
     "extents": [[0, 1_048_576, 65536], [65536, 524_288, 32768]]},
    {"object": "orders", "path": "/t/optane/orders.ibd", "device": "7:0", "extents": [[0, 1_048_576, 65536]]},
]


def frame(rows):
    return pd.DataFrame([{"ts_s": float(i), "device": dev, "op": "R", "rwbs": "R", "sector": sector, "size_sectors": 32,
                          "latency_us": 80.0, "pid": 1, "process": "mariadbd"} for i, (dev, sector) in enumerate(rows)])


def test_sectors_map_to_the_table_and_its_file_offset():
    out = attribute(frame([("7:1", 2048 + 64)]), extent_table(FILES), {"7:1": "nand"})
    assert (out["object"].iloc[0], out["file_offset_bytes"].iloc[0], out["tier"].iloc[0]) == ("lineitem", 32768.0, "nand")


def test_a_later_extent_maps_to_its_logical_offset():
    out = attribute(frame([("7:1", 1024)]), extent_table(FILES), {"7:1": "nand"})
    assert (out["object"].iloc[0], out["file_offset_bytes"].iloc[0]) == ("lineitem", 65536.0)


def test_the_same_sector_on_another_device_is_another_file():
    out = attribute(frame([("7:0", 2048)]), extent_table(FILES), {"7:0": "optane"})
    assert (out["object"].iloc[0], out["tier"].iloc[0]) == ("orders", "optane")


def test_sectors_outside_every_file_are_other_and_kept():
    out = attribute(frame([("7:1", 0), ("7:1", 2048 + 128), ("7:2", 2048)]), extent_table(FILES), {"7:1": "nand"})
    assert out["object"].tolist() == ["other", "other", "other"]
    assert out["file_offset_bytes"].isna().all()
    assert out["tier"].tolist() == ["nand", "nand", "unknown"]


PART = {"object": "part", "path": "/t/nand/part.ibd", "device": "7:1", "extents": [[0, 557_056, 16384]]}


def test_a_request_spanning_two_files_is_cut_into_a_piece_per_file():
    files = FILES + [PART]
    # lineitem's second extent is sectors 1024..1087, part's file sectors 1088..1119:
    # 32 sectors from 1072 end lineitem's extent and begin part's file
    request = frame([("7:1", 1072)])
    out = attribute(request, extent_table(files), {"7:1": "nand"})
    assert out[["request", "piece", "object", "sector", "size_sectors", "request_size_sectors"]].values.tolist() == [
        [0, 0, "lineitem", 1072, 16, 32],
        [0, 1, "part", 1088, 16, 32],
    ]
    assert out["file_offset_bytes"].tolist() == [65536.0 + 24576.0, 0.0]


def test_a_request_running_past_a_file_into_unmapped_space_keeps_the_rest_as_other():
    out = attribute(frame([("7:1", 1080)]), extent_table(FILES), {"7:1": "nand"})
    assert out[["piece", "object", "size_sectors"]].values.tolist() == [[0, "lineitem", 8], [1, "other", 24]]


def test_a_request_spanning_two_files_is_one_request_touching_a_page_of_each():
    out = attribute(frame([("7:1", 1072)]), extent_table(FILES + [PART]), {"7:1": "nand"})
    out["sequential"] = mark_sequential(out, 16384)
    summary = access_summary(Pieces.of(out, 16384))
    assert (summary["requests"], summary["read_requests"], summary["read_bytes"]) == (1, 1, 16384)
    assert (summary["pages"], summary["distinct_pages"]) == (2, 2)
    assert out["sequential"].tolist() == [False, False]
