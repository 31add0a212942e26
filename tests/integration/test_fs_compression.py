"""The file system's compression (compression=zstd) on btrfs tiers, for MariaDB and PostgreSQL: the two hosts' study
(conftest.py), whose tiers are btrfs (plain loop devices, the capacity tier throttled), a database compressed on every
tier."""

import json
import subprocess
from pathlib import Path

import pytest
from lab import read_csv

import tierlab

pytestmark = [pytest.mark.mariadb, pytest.mark.postgresql]


@pytest.fixture(scope="module")
def btrfs_runs(two_hosts):
    """Q6 under C+O on each engine, its database compressed by btrfs: the two hosts' study's runs."""
    return two_hosts["runs"]


def manifest(run_dir):
    return json.loads((run_dir / "manifest.json").read_text())


@pytest.mark.parametrize("engine", ["mariadb", "postgresql"])
def test_the_tiers_are_btrfs_and_the_run_records_the_compression(btrfs_runs, engine):
    run = manifest(btrfs_runs[engine])
    assert {t["fs"] for t in run["tiers"]} == {"btrfs"}
    assert run["load"]["compression"] == "zstd"


@pytest.mark.parametrize("engine", ["mariadb", "postgresql"])
def test_the_database_s_directory_on_every_tier_compresses_with_zstd(btrfs_runs, engine):
    tables = manifest(btrfs_runs[engine])["layout"]["tables"]
    directories = {str(Path(f["path"]).parent) for t in tables.values() for f in t["files"]}
    assert len({d.split("/tiers/")[1].split("/")[0] for d in directories}) == 2
    for directory in directories:
        done = subprocess.run(["btrfs", "property", "get", directory, "compression"], capture_output=True, text=True, timeout=120)
        assert done.stdout.strip() == "compression=zstd", directory


@pytest.mark.parametrize("engine", ["mariadb", "postgresql"])
def test_lineitem_stores_fewer_bytes_than_its_files_hold(btrfs_runs, engine):
    lineitem = manifest(btrfs_runs[engine])["layout"]["tables"]["lineitem"]
    assert 0 < lineitem["stored_bytes"] < lineitem["size_bytes"] * 3 / 4


@pytest.mark.parametrize("engine", ["mariadb", "postgresql"])
def test_q6_s_reads_of_lineitem_are_attributed_to_it_on_the_capacity_tier(btrfs_runs, engine):
    requests = tierlab.load_run(btrfs_runs[engine]).requests()
    reads = requests[(requests["query"] == "q06") & (requests["op"] == "R")]
    assert set(reads.loc[reads["object"].str.startswith("lineitem"), "tier"]) == {"nand"}
    assert reads.loc[reads["object"] == "lineitem", "size_sectors"].sum() > reads["size_sectors"].sum() / 2


@pytest.mark.parametrize("engine", ["mariadb", "postgresql"])
def test_the_device_reads_fewer_bytes_than_the_engine_reads_pages(btrfs_runs, engine):
    q06 = read_csv(btrfs_runs[engine] / "tables" / "query_metrics.csv").set_index("query").loc["q06"]
    page_bytes = manifest(btrfs_runs[engine])["settings"]["page_size_bytes"]
    assert 0 < q06["read_bytes"] < q06["engine_pages_read"] * page_bytes * 3 / 4
