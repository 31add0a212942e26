"""Which index each page of an InnoDB tablespace file belongs to, from the pages' own headers.

Every InnoDB page starts with a file header whose page type says what it holds; a B-tree page
(FIL_PAGE_INDEX, or FIL_PAGE_RTREE) carries the id of its index in its page header. A table's .ibd
then splits into runs of pages of one index, so that a traced request can be attributed to the
clustered index (the table's rows) or to a secondary index. Every other page (the file's space and
segment headers, bitmaps, large objects, free pages) belongs to the table as a whole.
"""

import os
import struct

# storage/innobase/include/fil0types.h: FIL_PAGE_TYPE at byte 24 of the page; the page header
# (page0page.h) starts at FIL_PAGE_DATA = 38 and holds PAGE_INDEX_ID at 28 from there
PAGE_TYPE_OFFSET = 24
INDEX_ID_OFFSET = 38 + 28
HEADER = struct.Struct(">H40xQ")
INDEX_PAGE_TYPES = (17855, 17854)  # FIL_PAGE_INDEX, FIL_PAGE_RTREE
# the table as a whole, for pages of no index
NO_INDEX = 0
# pages read at a time
CHUNK_PAGES = 1024


def index_runs(path: str, page_bytes: int) -> list[tuple[int, int, int]]:
    """[(first page, pages, index id or NO_INDEX), ...] covering every page of the file, in file order."""
    runs = []
    with open(path, "rb", buffering=0) as f:
        page = 0
        while chunk := f.read(CHUNK_PAGES * page_bytes):
            for start in range(0, len(chunk) - page_bytes + 1, page_bytes):
                kind, index_id = HEADER.unpack_from(chunk, start + PAGE_TYPE_OFFSET)
                owner = index_id if kind in INDEX_PAGE_TYPES else NO_INDEX
                if runs and runs[-1][2] == owner:
                    runs[-1][1] += 1
                else:
                    runs.append([page, 1, owner])
                page += 1
        # the headers were read once; they need not stay in the page cache the study measures
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return [tuple(run) for run in runs]


def object_ranges(runs: list[tuple[int, int, int]], page_bytes: int, names: dict[int, str],
                  table: str) -> dict[str, list[list[int]]]:
    """{object: [[first byte, bytes], ...]} of a file's runs: an index id's pages under its object's name
    (names), every other page (and pages of an index the dictionary does not know) under the table's."""
    ranges = {}
    for first, pages, owner in runs:
        name = names.get(owner, table)
        spans = ranges.setdefault(name, [])
        if spans and spans[-1][0] + spans[-1][1] == first * page_bytes:
            spans[-1][1] += pages * page_bytes
        else:
            spans.append([first * page_bytes, pages * page_bytes])
    return ranges
