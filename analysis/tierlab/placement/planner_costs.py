"""PostgreSQL's planner costs per tablespace, from the tiers' device models.

The planner prices every page a plan reads: seq_page_cost for a page of a sequential scan, random_page_cost
for a page read out of order (an index lookup's), in a unit where a sequential page costs 1 and its CPU
costs (cpu_tuple_cost 0.01, ...) are fractions of that page. Here both are the device model's times under
fio's closed loop (`tierlab-emu --job`), for reads as PostgreSQL makes them:

- a sequential scan's page: the kernel's read-ahead turns a scan into reads of the scan's request size, one
  after the other (depth 1), so a page costs such a read's latency over the pages it holds;
- a random page: one page read at depth 1, since an index lookup waits for its page;

each divided by the capacity tier's sequential page, the unit PostgreSQL's defaults assume, so that the CPU
costs keep their meaning. effective_io_concurrency, the pages a bitmap heap scan keeps in flight, is the
least depth at which the tier's random page reads reach SATURATION of their rate at the deepest depth:
deeper only queues.
"""

from pathlib import Path

from ..catalog.analysis import SCAN_REQUEST_BYTES
from ..catalog.layout import CAPACITY, FAST
from ..devices.cost_model import closed_loop
from ..errors import InputError

DEPTHS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
SATURATION = 0.9


def _tier(profile_file: Path, page_bytes: int, scan_request_bytes: int) -> dict:
    scan = closed_loop(profile_file, "read", scan_request_bytes, 1)["lat_us"]["p50"]
    random = {depth: closed_loop(profile_file, "randread", page_bytes, depth) for depth in DEPTHS}
    iops = {depth: job["iops"] for depth, job in random.items()}
    return {"profile": str(profile_file),
            "seq_page_us": scan * page_bytes / scan_request_bytes,
            "random_page_us": random[1]["lat_us"]["p50"],
            "random_page_iops": iops,
            "effective_io_concurrency": min(d for d in DEPTHS if iops[d] >= SATURATION * iops[DEPTHS[-1]])}


def planner_costs(profiles: dict[str, Path], page_bytes: int = 8192,
                  scan_request_bytes: int = SCAN_REQUEST_BYTES) -> dict[str, dict]:
    """Per tier role (fast, capacity): its page times on the model, and the tablespace options they give."""
    if scan_request_bytes < page_bytes:
        raise InputError(f"a scan's request of {scan_request_bytes} bytes is smaller than a page of "
                              f"{page_bytes} bytes; allowed: a request of at least one page")
    tiers = {role: _tier(profiles[role], page_bytes, scan_request_bytes) for role in (FAST, CAPACITY)}
    unit = tiers[CAPACITY]["seq_page_us"]
    for tier in tiers.values():
        tier["seq_page_cost"] = round(tier["seq_page_us"] / unit, 2)
        tier["random_page_cost"] = round(tier["random_page_us"] / unit, 2)
    return tiers


def run_variables(tiers: dict[str, dict]) -> list[str]:
    """The playbooks' -e variables that set these costs on a PostgreSQL run's tablespaces."""
    return [f"{role}_{name}={tiers[role][name]:g}" for role in (FAST, CAPACITY)
            for name in ("seq_page_cost", "random_page_cost", "effective_io_concurrency")]


def format_costs(tiers: dict[str, dict], page_bytes: int, scan_request_bytes: int) -> str:
    lines = [f"PostgreSQL tablespace costs from the device models ({page_bytes // 1024} KiB pages; sequential scans "
             f"read {scan_request_bytes // 1024} KiB at a time; 1 = a sequential page of the capacity tier)", "",
             f"{'tier':<9} {'seq page us':>11} {'random page us':>14} {'seq_page_cost':>13} {'random_page_cost':>16} "
             f"{'effective_io_concurrency':>24}  profile"]
    for role, tier in tiers.items():
        lines.append(f"{role:<9} {tier['seq_page_us']:>11.2f} {tier['random_page_us']:>14.2f} "
                     f"{tier['seq_page_cost']:>13g} {tier['random_page_cost']:>16g} "
                     f"{tier['effective_io_concurrency']:>24}  {tier['profile']}")
    return "\n".join([*lines, "", "ansible-playbook playbooks/ssb.yml -e engine=postgresql "
                      + " ".join(f"-e {v}" for v in run_variables(tiers))])
