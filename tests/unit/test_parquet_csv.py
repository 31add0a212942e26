"""A workload directory's Parquet data file written as the CSV both engines load (docs/workload-dir.md)."""

import datetime
import decimal
import importlib.util
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("parquet_csv", ROOT / "playbooks/roles/datagen/files/parquet_csv.py")
parquet_csv = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(parquet_csv)


def test_texts_are_quoted_nulls_are_the_word_and_numbers_dates_and_truths_are_as_the_engines_read_them(tmp_path):
    table = pa.table({
        "id": pa.array([1, 2, 3], pa.int32()),
        "name": ['Product "1", large', "NULL", None],
        "price": pa.array([decimal.Decimal("224.23"), None, decimal.Decimal("0.50")], pa.decimal128(10, 2)),
        "ratio": [0.25, 1.5, None],
        "on_sale": [True, False, None],
        "added": [datetime.date(2024, 1, 2), None, datetime.date(2025, 12, 31)],
        "seen": [datetime.datetime(2024, 1, 2, 3, 4, 5, 600000), None, datetime.datetime(2025, 1, 1)],
    })
    pq.write_table(table, tmp_path / "products.parquet", row_group_size=2)
    assert parquet_csv.convert(str(tmp_path / "products.parquet"), str(tmp_path / "products.csv")) == 3
    assert (tmp_path / "products.csv").read_text().splitlines() == [
        '"id","name","price","ratio","on_sale","added","seen"',
        '1,"Product ""1"", large",224.23,0.25,1,2024-01-02,2024-01-02 03:04:05.600000',
        '2,"NULL",NULL,1.5,0,NULL,NULL',
        '3,NULL,0.50,NULL,NULL,2025-12-31,2025-01-01 00:00:00']
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".partial")] == []


def test_a_binary_column_is_refused_with_what_to_do(tmp_path):
    pq.write_table(pa.table({"blob": [b"\x00\x01"]}), tmp_path / "files.parquet")
    with pytest.raises(ValueError, match="a binary column: neither engine reads bytes from CSV the same way"):
        parquet_csv.convert(str(tmp_path / "files.parquet"), str(tmp_path / "files.csv"))
    assert [p.name for p in tmp_path.iterdir()] == ["files.parquet"]
