"""Writes a Parquet file's rows as the CSV tierlab loads (docs/workload-dir.md): a header row, then a line per row with
every text quoted ('"' doubled inside), a null as the unquoted word NULL, numbers and dates as the engines read them.
Run in the host's generator environment (pyarrow), a row group at a time:

    python parquet_csv.py TABLE.parquet TABLE.csv
"""

import os
import sys
from datetime import date, datetime, time

import pyarrow.parquet as pq


def field(value) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, str):
        return '"' + value.replace('"', '""') + '"'
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, datetime | date | time):
        return value.isoformat(sep=" ") if isinstance(value, datetime) else value.isoformat()
    if isinstance(value, bytes):
        raise ValueError("a binary column: neither engine reads bytes from CSV the same way; cast it to text first")
    return str(value)


def convert(source: str, target: str) -> int:
    """The rows written (the file whole or not at all)."""
    parquet = pq.ParquetFile(source)
    rows = 0
    partial = target + ".partial"
    try:
        with open(partial, "w", encoding="utf-8") as out:
            out.write(",".join(field(name) for name in parquet.schema_arrow.names) + "\n")
            for batch in parquet.iter_batches():
                for row in zip(*(column.to_pylist() for column in batch.columns), strict=True):
                    out.write(",".join(map(field, row)) + "\n")
                rows += batch.num_rows
    except BaseException:
        os.unlink(partial)
        raise
    os.replace(partial, target)
    return rows


if __name__ == "__main__":
    convert(sys.argv[1], sys.argv[2])
