"""The request frame every trace parser gives: one row per dispatched data request, matched with its
completion; what the parsers count beside it; and the bounds of a physically possible request. pandas is
imported where frames are made: the compiled trace-stats pass (traces/native.py) reads the bounds without it."""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

REQUEST_COLUMNS = ["ts_s", "device", "op", "rwbs", "sector", "size_sectors", "latency_us", "pid", "process"]
# the text columns are categoricals (few distinct values): their categories are the values that occur, sorted
REQUEST_DTYPES = {"ts_s": "float64", "device": "category", "op": "category", "rwbs": "category", "sector": "int64",
                  "size_sectors": "int64", "latency_us": "float64", "pid": "int64", "process": "category"}
CATEGORICAL_COLUMNS = [name for name, dtype in REQUEST_DTYPES.items() if dtype == "category"]
# A request's byte offsets fit a loff_t (below 2^63) and its length the kernel's unsigned int __data_len
# (below 2^32): a sector or size beyond is a corrupt field, and the request is counted (beyond_bounds), not used.
MAX_END_SECTOR = ((1 << 63) - 1) // 512
MAX_SIZE_SECTORS = ((1 << 32) - 1) // 512
# No device takes a request this long: the block layer splits what it is given at the queue's max_sectors_kb
# (1280 KiB or 4 MiB by default; raised at most to what the hardware allows, a few MiB to 32 MiB on real disks). A
# longer one is a corrupt length, counted (beyond_bounds) and left out: summed, one such record of 4 GiB would read as
# more than the whole trace moved.
MAX_REQUEST_SECTORS = (128 << 20) // 512
# the most a sector or size read from text is taken as, so that it fits the matcher's 64-bit fields
LARGEST_SECTOR = (1 << 64) - 1
# The block layer times a request out after 30 s by default; a completion more than ten times that after
# its dispatch, or before it, has a time field out of step: the request is counted (time_jumps), without a latency.
MAX_LATENCY_US = 300e6


@dataclass
class BlockTrace:
    requests: "pd.DataFrame"
    markers: list[tuple[float, str]]
    counts: dict = field(default_factory=dict)


def event_extent(sector: np.ndarray, size: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The matcher's sector and bytes of events read from text (sector and size in sectors, as uint64, each
    at most LARGEST_SECTOR): a size the block layer cannot carry moves the request beyond every bound,
    where the matcher counts it (beyond_bounds), with its completion alike."""
    sector = np.where(size > MAX_SIZE_SECTORS, np.uint64(LARGEST_SECTOR), sector)
    return sector, (np.minimum(size, MAX_SIZE_SECTORS) * 512).astype(np.uint32)


def concat_requests(frames: list["pd.DataFrame"]) -> "pd.DataFrame":
    """pd.concat of request frames (further columns allowed), ignoring their indexes; categorical
    columns stay categorical, over the union of the frames' categories (pd.concat alone falls back
    to object where the categories differ)."""
    import pandas as pd

    frames = list(frames)
    for column in CATEGORICAL_COLUMNS:
        if all(isinstance(frame[column].dtype, pd.CategoricalDtype) for frame in frames):
            categories = sorted(set().union(*(frame[column].cat.categories for frame in frames)))
            frames = [frame.assign(**{column: frame[column].cat.set_categories(categories)}) for frame in frames]
    return pd.concat(frames, ignore_index=True)
