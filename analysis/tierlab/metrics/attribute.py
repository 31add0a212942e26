"""Attribute requests to objects (tables) and tiers through the run's extent map.

An extent map is what the host agent wrote to raw/extents.json: per file, its
object, tier, device, the file's offset in its object (offset_bytes: a
PostgreSQL relation's segment after the first starts 1 GiB further on), and
physical extents [logical_bytes, physical_bytes, length_bytes]. A request is attributed by its first sector; what maps to no
table file is `other`, never dropped.
"""

import numpy as np
import pandas as pd

from .patterns import SECTOR_BYTES

OTHER = "other"
UNKNOWN = "unknown"


def extent_table(files: list[dict]) -> pd.DataFrame:
    """One row per extent, sorted by device and start sector."""
    rows = []
    for item in files:
        # runs written before objects had several files have no offset_bytes: their one file starts at 0
        offset = item.get("offset_bytes", 0)
        for logical, physical, length in item["extents"]:
            rows.append((item["device"], physical // SECTOR_BYTES, (physical + length) // SECTOR_BYTES,
                         offset + logical, item["object"], item["path"]))
    table = pd.DataFrame(rows, columns=["device", "start_sector", "end_sector", "logical_bytes", "object", "path"])
    return table.sort_values(["device", "start_sector"]).reset_index(drop=True)


def _pieces(row: dict, starts: np.ndarray, ends: np.ndarray, ext: pd.DataFrame) -> list[dict]:
    """A request cut at the file extents it crosses; gaps between extents are `other`."""
    begin, stop = row["sector"], row["sector"] + row["size_sectors"]
    cuts = []
    position = begin
    k = int(np.searchsorted(ends, begin, side="right"))
    while k < len(starts) and starts[k] < stop:
        if starts[k] > position:
            cuts.append((position, starts[k], None))
        piece_end = min(stop, ends[k])
        cuts.append((max(position, starts[k]), piece_end, k))
        position = piece_end
        k += 1
    if position < stop:
        cuts.append((position, stop, None))
    pieces = []
    for number, (first, last, k) in enumerate(cuts):
        mapped = k is not None
        pieces.append({**row, "piece": number, "sector": int(first), "size_sectors": int(last - first),
                       "object": ext["object"].iat[k] if mapped else OTHER,
                       "file_offset_bytes": float(ext["logical_bytes"].iat[k] + (first - starts[k]) * SECTOR_BYTES)
                       if mapped else np.nan})
    return pieces


def attribute(requests: pd.DataFrame, extents: pd.DataFrame, tier_by_device: dict[str, str]) -> pd.DataFrame:
    """requests + object, file_offset_bytes (NaN where unmapped), tier, and the pieces of requests
    that cross a file boundary.

    A request that covers sectors of more than one file (or of a file and unmapped space) is
    cut at the extent boundaries into pieces 0, 1, ... with their own sector, size, object
    and offset; `request` numbers the requests and `request_size_sectors` keeps the whole size,
    so request-level metrics read piece 0 and page metrics read every piece."""
    out = requests.reset_index(drop=True).copy()
    out["request"] = np.arange(len(out), dtype=np.int64)
    out["piece"] = np.int64(0)
    out["request_size_sectors"] = out["size_sectors"]
    names = sorted({OTHER, *extents["object"]})
    objects = np.full(len(out), names.index(OTHER), dtype=np.int32)
    offsets = np.full(len(out), np.nan)
    crossing = np.zeros(len(out), dtype=bool)
    sectors = out["sector"].to_numpy()
    request_ends = sectors + out["size_sectors"].to_numpy()
    devices = out["device"].astype("category")
    device_codes = devices.cat.codes.to_numpy()
    by_device = {device: ext.reset_index(drop=True) for device, ext in extents.groupby("device")}
    for device, ext in by_device.items():
        if device not in devices.cat.categories:
            continue
        mask = device_codes == devices.cat.categories.get_loc(device)
        starts = ext["start_sector"].to_numpy()
        ends = ext["end_sector"].to_numpy()
        idx = np.searchsorted(starts, sectors[mask], side="right") - 1
        clipped = np.where(idx >= 0, idx, 0)
        inside = (idx >= 0) & (sectors[mask] < ends[clipped])
        next_start = np.append(starts, np.iinfo(np.int64).max)[idx + 1]
        crossing[np.flatnonzero(mask)] = np.where(inside, request_ends[mask] > ends[clipped],
                                                  request_ends[mask] > next_start)
        positions = np.flatnonzero(mask)[inside]
        hit = clipped[inside]
        objects[positions] = np.searchsorted(names, ext["object"].to_numpy())[hit]
        offsets[positions] = (ext["logical_bytes"].to_numpy()[hit]
                              + (sectors[positions] - starts[hit]) * SECTOR_BYTES)
    out["object"] = pd.Categorical.from_codes(objects, names)
    out["file_offset_bytes"] = offsets
    if crossing.any():
        pieces = []
        for row in out[crossing].to_dict("records"):
            ext = by_device[row["device"]]
            pieces += _pieces(row, ext["start_sector"].to_numpy(), ext["end_sector"].to_numpy(), ext)
        pieces = pd.DataFrame(pieces, columns=out.columns).astype(out.dtypes.to_dict())    # categoricals stay
        out = pd.concat([out[~crossing], pieces], ignore_index=True)
        out = out.sort_values(["request", "piece"], kind="stable").reset_index(drop=True)
    devices = out["device"].astype("category")
    tiers = [tier_by_device.get(device, UNKNOWN) for device in devices.cat.categories]
    tier_names = sorted({UNKNOWN, *tiers})
    tier_codes = np.searchsorted(tier_names, np.array(tiers, dtype=object)).astype(np.int32)
    out["tier"] = pd.Categorical.from_codes(tier_codes[devices.cat.codes.to_numpy()], tier_names)
    return out
