"""The page of a device suite's measurements: the curves, and each fitted parameter beside its model's."""

import html
from pathlib import Path

import pandas as pd

from .page import html_table, log_x_axis, page, plt, svg


def plot_device_curves(jobs: pd.DataFrame, sustained: pd.DataFrame) -> str:
    """The device suite's curves, a row of panels per tier: 4 KiB latency at QD1 as a distribution, random
    read and write bandwidth against queue depth per request size, read latency against the share of writes,
    and the sustained writes' bandwidth over time."""
    tiers = list(dict.fromkeys(jobs["tier"]))
    fig, axes = plt.subplots(len(tiers), 4, figsize=(15, 3.2 * len(tiers)), squeeze=False)
    percentiles = [c for c in jobs.columns if c.startswith("p") and c[1:].replace(".", "").isdigit()]
    for row, tier in zip(axes, tiers, strict=True):
        mine = jobs[jobs["tier"] == tier]
        for job in mine[mine["kind"] == "latency"].to_dict("records"):
            row[0].plot([job[p] for p in percentiles], [float(p[1:]) for p in percentiles], marker=".",
                        label=job["rw"])
        log_x_axis(row[0])
        row[0].set_xlabel("latency (us)")
        row[0].set_ylabel(f"{tier}: percentile")
        row[0].legend(fontsize=7)
        row[0].set_title("4 KiB at QD1", fontsize=9)
        grid = mine[mine["kind"] == "bandwidth"]
        for (rw, block), line in grid.groupby(["rw", "block_bytes"], sort=False):
            row[1].plot(line["iodepth"], line["mb_s"], marker="o", linestyle="-" if rw == "randread" else "--",
                        label=f"{rw} {block // 1024} KiB")
        log_x_axis(row[1], base=2)
        row[1].set_xlabel("queue depth")
        row[1].set_ylabel("MB/s")
        row[1].legend(fontsize=6)
        row[1].set_title("bandwidth against queue depth", fontsize=9)
        mixed = mine[(mine["kind"] == "mixed") & (mine["side"] == "read")]
        row[2].plot(mixed["write_pct"], mixed["p50"], marker="o", label="p50")
        row[2].plot(mixed["write_pct"], mixed["p99"], marker="^", label="p99")
        row[2].set_xlabel("writes (%)")
        row[2].set_ylabel("read latency (us)")
        row[2].legend(fontsize=7)
        row[2].set_title("4 KiB random reads among writes, QD4", fontsize=9)
        log = sustained[sustained["tier"] == tier]
        row[3].plot(log["t_s"], log["mb_s"])
        row[3].set_xlabel("seconds")
        row[3].set_ylabel("MB/s")
        row[3].set_ylim(bottom=0)
        row[3].set_title("sustained 128 KiB writes, QD32", fontsize=9)
    return svg(fig)


def write_devices_report(run_dir: Path, result: dict, fitted: dict[str, dict]) -> Path:
    """The device suite as a page: the curves, each tier's fitted profile (beside its model's, for an
    emulated tier), the small and misaligned requests, how the fit was made."""
    from ..devices import fit
    from ..devices.contract import rule_costs

    jobs = fit.job_rows(result)
    sections = [f"<p>Measured {html.escape(result['measured_at'])}: {result['runtime_s']} s per job, sustained "
                f"writes {result['sustained_s']} s, on a {result['scratch_bytes'] >> 20} MiB scratch file per tier "
                "(O_DIRECT, libaio). The curves and the small reads' table are as measured, in the host's time; the "
                "profiles are in the model's time (each tier's dilation taken out).</p>",
                plot_device_curves(jobs, fit.sustained_rows(result))]
    for tier in result["tiers"]:
        values = fitted[tier["name"]]
        table = (fit.comparison(tier, values) if tier.get("profile")
                 else pd.DataFrame({"parameter": list(values), "fitted": list(values.values())}))
        sections += [f"<h2>{html.escape(tier['name'])} ({html.escape(tier['role'])} tier, dilation "
                     f"{tier['dilation']}): profiles/{html.escape(tier['name'])}.toml</h2>", html_table(table)]
    sections += ["<h2>What breaking each rule of the contract costs here</h2><p>Per tier, a job of the suite that "
                 "keeps the rule beside one that breaks it, in the host's time; cost_x is the broken one's time per "
                 "byte over the kept one's (docs/metrics.md, \"The unwritten contract of a fast SSD\").</p>",
                 html_table(rule_costs(result))]
    odd = jobs[jobs["kind"].isin(["small", "misaligned", "latency"]) & (jobs["rw"] == "randread")]
    sections += ["<h2>Small and misaligned reads (QD1)</h2>",
                 html_table(odd[["tier", "kind", "block_bytes", "align_bytes", "iops", "mean_us", "p50", "p99"]]),
                 "<h2>How each parameter is fitted</h2><pre>" + html.escape(fit.__doc__) + "</pre>"]
    path = run_dir / "report.html"
    path.write_text(page(f"tierlab devices: {', '.join(t['name'] for t in result['tiers'])}", sections))
    return path
