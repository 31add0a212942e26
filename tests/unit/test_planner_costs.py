"""PostgreSQL's tablespace costs from the device models: a page's time on each tier, in sequential-page units."""

import subprocess

import pytest

from tierlab.cli import main
from tierlab.devices import cost_model
from tierlab.devices.profiles import profile_path
from tierlab.errors import InputError
from tierlab.placement.planner_costs import planner_costs, run_variables

PROFILES = {"fast": profile_path("optane"), "capacity": profile_path("nand")}
# a request's latency at depth 1 is the profile's latency plus its transfer at the read bandwidth (bytes/us)
NAND_SCAN_PAGE_US = (8.6 + 131072 / 3000) / 16
NAND_RANDOM_PAGE_US = 88.6 + 8192 / 3000
OPTANE_SCAN_PAGE_US = (8.4 + 131072 / 2500) / 16
OPTANE_RANDOM_PAGE_US = 8.4 + 8192 / 2500


@pytest.fixture(scope="module", autouse=True)
def emulator():
    subprocess.run(["make", "-s", "-C", str(cost_model.EMULATOR.parent)], check=True, timeout=300)


def test_a_page_costs_its_time_over_the_capacity_tier_s_sequential_page():
    tiers = planner_costs(PROFILES)
    assert tiers["capacity"]["seq_page_us"] == pytest.approx(NAND_SCAN_PAGE_US, abs=0.01)
    assert tiers["capacity"]["random_page_us"] == pytest.approx(NAND_RANDOM_PAGE_US, abs=0.01)
    assert (tiers["capacity"]["seq_page_cost"], tiers["capacity"]["random_page_cost"]) == (
        1, round(NAND_RANDOM_PAGE_US / NAND_SCAN_PAGE_US, 2))
    assert (tiers["fast"]["seq_page_cost"], tiers["fast"]["random_page_cost"]) == (
        round(OPTANE_SCAN_PAGE_US / NAND_SCAN_PAGE_US, 2), round(OPTANE_RANDOM_PAGE_US / NAND_SCAN_PAGE_US, 2))


def test_a_scan_of_larger_requests_makes_its_pages_cheaper_and_random_pages_dearer():
    tiers = planner_costs(PROFILES, scan_request_bytes=512 << 10)
    assert tiers["capacity"]["random_page_cost"] == round(NAND_RANDOM_PAGE_US / ((8.6 + (512 << 10) / 3000) / 64), 2)


def test_prefetch_depth_is_where_random_reads_stop_gaining_rate():
    # optane: 4 channels, capped by its 2500 MB/s from depth 4; nand: 32 channels below its bandwidth
    tiers = planner_costs(PROFILES)
    assert (tiers["fast"]["effective_io_concurrency"], tiers["capacity"]["effective_io_concurrency"]) == (4, 32)


def test_the_costs_are_given_as_the_playbooks_variables():
    assert run_variables(planner_costs(PROFILES)) == [
        "fast_seq_page_cost=1.16", "fast_random_page_cost=3.57", "fast_effective_io_concurrency=4",
        "capacity_seq_page_cost=1", "capacity_random_page_cost=27.95", "capacity_effective_io_concurrency=32"]


def test_a_scan_request_smaller_than_a_page_is_refused():
    with pytest.raises(InputError) as err:
        planner_costs(PROFILES, page_bytes=8192, scan_request_bytes=4096)
    assert str(err.value) == ("a scan's request of 4096 bytes is smaller than a page of 8192 bytes; allowed: a "
                              "request of at least one page")


def test_the_command_refuses_a_profile_list_without_both_tiers():
    with pytest.raises(SystemExit) as exit_:
        main(["planner-costs", "--profiles", "fast=optane"])
    assert str(exit_.value).startswith("tierlab planner-costs: --profiles 'fast=optane': give "
                                       "fast=PROFILE,capacity=PROFILE")


def test_the_command_prints_each_tier_s_costs_and_the_playbook_command_that_sets_them(capsys):
    main(["planner-costs"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines[2:5]] == [
        ["tier", "seq", "page", "us", "random", "page", "us", "seq_page_cost", "random_page_cost",
         "effective_io_concurrency", "profile"],
        ["fast", "3.80", "11.68", "1.16", "3.57", "4", str(PROFILES["fast"])],
        ["capacity", "3.27", "91.33", "1", "27.95", "32", str(PROFILES["capacity"])]]
    assert lines[-1] == ("ansible-playbook playbooks/ssb.yml -e engine=postgresql -e fast_seq_page_cost=1.16 "
                         "-e fast_random_page_cost=3.57 -e fast_effective_io_concurrency=4 -e capacity_seq_page_cost=1 "
                         "-e capacity_random_page_cost=27.95 -e capacity_effective_io_concurrency=32")
