import pandas as pd

from tierlab.attribute import attribute, extent_table

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
