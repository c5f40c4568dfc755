"""`python -m helpers.ncu_banks`: Nsight Compute's shared-memory bank conflicts of chapters 09-10's
CUDA twins, recorded in results/local/ (on an NVIDIA GPU with CuPy and ncu).

    python -m helpers.ncu_banks                  # writes results/local/ncu_banks_rowcopy_conv_dgrad_<device>.json

One ncu session profiles every configuration below, each launched once on res64@56 with a batch
of 8 (``helpers.profile_stage``'s path: built through the engine, checked against the reference).
Each row keeps the twin, its JIT parameters, grid and block, its error, and ncu's counts: bank
conflicts and instructions of shared loads and stores, and the kernel's duration. Chapter 10 and
tests/test_local.py compare the rows with the bank model (helpers/chapters/local.py).
"""
from __future__ import annotations

import argparse
import csv
import datetime as dt
import io
import json
import shlex
import subprocess
import sys

from .analysis.results import RESULTS
from .bench import slug

LAYER, N = "res64@56", 8
TILE = dict(TX=32, CB=32, KC=4, XPW=8, CPW=4)
CONFIGS = [   # (twin, defines): 09's last stage, 10's three layouts, the swizzle at both tiles and copies
    ("prefetch", dict(TILE, TY=4)),
    ("transposed", dict(TILE, TY=8)),
    ("padded", dict(TILE, TY=8)),
    *[("swizzle", dict(TILE, TY=ty, ROWCOPY=rc)) for ty in (4, 8) for rc in (0, 1)],
]
METRICS = {"l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum": "shared_ld_conflicts",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": "shared_st_conflicts",
           "smsp__sass_inst_executed_op_shared_ld.sum": "shared_ld_instructions",
           "smsp__sass_inst_executed_op_shared_st.sum": "shared_st_instructions",
           "gpu__time_duration.sum": "ncu_time_ns"}
MARK = "NCU_BANKS_RUN "


def launch_all() -> None:
    """The profiled process: each configuration launched once, in order, one JSON line each."""
    from .profile_stage import profile
    for twin, defines in CONFIGS:
        out = profile("conv_dgrad", f"{twin}_cuda", LAYER, N, defines)
        print(MARK + json.dumps(out), flush=True)


def parse(stdout: str) -> list[dict]:
    """Rows from ncu's CSV (kernel ID, metric, value) and the profiled process's JSON lines."""
    runs = [json.loads(line[len(MARK):]) for line in stdout.splitlines() if line.startswith(MARK)]
    table = csv.DictReader(io.StringIO("\n".join(l for l in stdout.splitlines() if l.startswith('"'))))
    counts: dict[int, dict] = {}
    for rec in table:
        if rec["Metric Name"] in METRICS:
            counts.setdefault(int(rec["ID"]), {})[METRICS[rec["Metric Name"]]] = int(rec["Metric Value"].replace(",", ""))
    if len(runs) != len(CONFIGS) or len(counts) != len(runs):
        raise RuntimeError(f"expected {len(CONFIGS)} launches, got {len(runs)} runs and {len(counts)} profiled "
                           f"kernels; ncu's output:\n{stdout[-2000:]}")
    rows = []
    for run, i in zip(runs, sorted(counts)):
        (_, grid, block), = run["steps"]
        rows.append({"twin": run["stage"].removesuffix("_cuda"), "layer": run["layer"], "n": run["n"],
                     "defines": run["defines"], "grid": [g // b for g, b in zip(grid, block)] + [1] * (3 - len(grid)),
                     "block": block + [1] * (3 - len(block)), "max_abs_error": run["max_error"], **counts[i]})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.ncu_banks", description=__doc__.split("\n")[0])
    ap.add_argument("--launch", action="store_true", help=argparse.SUPPRESS)   # the process ncu profiles
    ap.add_argument("--ncu", default="ncu", help="the Nsight Compute command line tool")
    ap.add_argument("--out", default=None, help="JSON path (default results/local/ncu_banks_rowcopy_conv_dgrad_<device>.json)")
    a = ap.parse_args(argv)
    if a.launch:
        launch_all()
        return 0
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True).stdout.splitlines()[0]
    device, driver = (s.strip() for s in smi.split(","))
    cmd = [a.ncu, "--metrics", ",".join(METRICS), "--csv", "-k", "regex:conv_dgrad",
           sys.executable, "-m", "helpers.ncu_banks", "--launch"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", file=sys.stderr)
        return proc.returncode
    rec = {"schema": 1, "kind": "ncu_bank_conflicts", "device": device, "driver": driver,
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "command": "python -m helpers.ncu_banks", "ncu_command": shlex.join(["ncu", *cmd[1:]]),
           "rows": parse(proc.stdout)}
    path = a.out or RESULTS / "local" / f"ncu_banks_rowcopy_conv_dgrad_{slug(device)}.json"   # as bench names files
    with open(path, "w") as f:
        f.write(json.dumps(rec, indent=1) + "\n")
    for r in rec["rows"]:
        d = r["defines"]
        print(f"{r['twin']:<11} TY={d['TY']} ROWCOPY={d.get('ROWCOPY', '-')}  store conflicts "
              f"{r['shared_st_conflicts']:>10,}  load conflicts {r['shared_ld_conflicts']:>9,}")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
