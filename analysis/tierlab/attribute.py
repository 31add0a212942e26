"""Attribute requests to objects (tables) and tiers through the run's extent map.

An extent map is what the host agent wrote to raw/extents.json: per file, its
object, tier, device and physical extents [logical_bytes, physical_bytes,
length_bytes]. A request is attributed by its first sector; what maps to no
table file is `other`, never dropped.
"""

import numpy as np
import pandas as pd

SECTOR_BYTES = 512
OTHER = "other"


def extent_table(files: list[dict]) -> pd.DataFrame:
    """One row per extent, sorted by device and start sector."""
    rows = []
    for item in files:
        for logical, physical, length in item["extents"]:
            rows.append((item["device"], physical // SECTOR_BYTES, (physical + length) // SECTOR_BYTES,
                         logical, item["object"], item["path"]))
    table = pd.DataFrame(rows, columns=["device", "start_sector", "end_sector", "logical_bytes", "object", "path"])
    return table.sort_values(["device", "start_sector"]).reset_index(drop=True)


def attribute(requests: pd.DataFrame, extents: pd.DataFrame, tier_by_device: dict[str, str]) -> pd.DataFrame:
    """requests + object, file_offset_bytes (NaN where unmapped) and tier."""
    out = requests.copy()
    objects = np.full(len(out), OTHER, dtype=object)
    offsets = np.full(len(out), np.nan)
    sectors = out["sector"].to_numpy()
    devices = out["device"].to_numpy()
    for device, ext in extents.groupby("device"):
        mask = devices == device
        if not mask.any():
            continue
        starts = ext["start_sector"].to_numpy()
        idx = np.searchsorted(starts, sectors[mask], side="right") - 1
        valid = idx >= 0
        clipped = np.where(valid, idx, 0)
        inside = valid & (sectors[mask] < ext["end_sector"].to_numpy()[clipped])
        positions = np.flatnonzero(mask)[inside]
        hit = clipped[inside]
        objects[positions] = ext["object"].to_numpy()[hit]
        offsets[positions] = (ext["logical_bytes"].to_numpy()[hit]
                              + (sectors[positions] - starts[hit]) * SECTOR_BYTES)
    out["object"] = pd.Series(objects, dtype="string")
    out["file_offset_bytes"] = offsets
    out["tier"] = out["device"].map(tier_by_device).fillna("unknown").astype("string")
    return out
