"""Nsight Compute's recorded text reports, read (chapter 13's evidence): the metrics named, the
pipeline ncu names as the most used, and the warps' stall reasons, per run of a report.

    ncu_summary(names.ncu_report("nhwc", names.RECORDED))   # {"stage layer": {metric: (value, unit)}}
"""
from __future__ import annotations

import re

from ..analysis import names

NCU_METRICS = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "Issue Slots Busy",
               "Executed Ipc Active", "Eligible Warps Per Scheduler", "Registers Per Thread",
               "Static Shared Memory Per Block", "Theoretical Occupancy", "Achieved Occupancy")
# step 7's report adds where the bytes come from and how full each scheduler is
NCU_MEMORY = ("L2 Cache Throughput", "L2 Hit Rate", "DRAM Throughput", "Dynamic Shared Memory Per Block",
              "Active Warps Per Scheduler")
TOP_PIPE = re.compile(r"(\S+) is the highest-utilized pipeline \(([\d.]+)%\)")
STALL = re.compile(r"smsp__average_warps_issue_stalled_(\w+)_per_issue_active\.ratio\s+\S+\s+([\d.]+)")


def ncu_summary(path: str = names.ncu_report("nhwc", names.RECORDED), metrics=NCU_METRICS) -> dict:
    """{"stage layer": {metric: (value, unit)}} from a recorded Nsight Compute text report under
    results/ ("== stage layer" lines separate the runs; the ``metrics`` named, the pipeline ncu
    names as the most used, as "top pipeline": (percent, its name), and where the report holds
    them the warps' stall reasons, as "stalls": {reason: cycles per issued instruction})."""
    from ..analysis.results import RESULTS
    out, run = {}, None
    for line in (RESULTS / path).read_text().splitlines():
        if line.startswith("== "):
            run = line[3:].strip()
            out[run] = {}
            continue
        if run is None:
            continue
        top = TOP_PIPE.search(line)
        if top:
            out[run]["top pipeline"] = (float(top.group(2)), f"% ({top.group(1)})")
        stall = STALL.search(line)
        if stall:
            out[run].setdefault("stalls", {})[stall.group(1)] = float(stall.group(2))
        for name in metrics:
            if line.strip().startswith(name + " ") and name not in out[run]:   # the first: SpeedOfLight's
                parts = line.split()
                unit = " ".join(parts[len(name.split()):-1])
                out[run][name] = (float(parts[-1].replace(",", "")), unit)
    return out
