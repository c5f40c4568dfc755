"""`python -m helpers.ncu_banks`: Nsight Compute's counts for chapters 09-10's CUDA twins, recorded
in results/local/ (on an NVIDIA GPU with CuPy and ncu). Two sets:

    python -m helpers.ncu_banks                  # banks:  results/local/ncu_banks_rowcopy_conv_dgrad_<device>.json
    python -m helpers.ncu_banks --set limits     # limits: results/local/ncu_limits_conv_dgrad_<device>.json

One ncu session profiles every configuration of the set, each launched once on res64@56
(``helpers.profile_stage``'s path: built through the engine, checked against the reference).
Each row keeps the twin, its JIT parameters, grid and block, its error, and ncu's counts.
- banks (batch 8): bank conflicts and instructions of shared loads and stores, and the kernel's
  duration. Chapter 10 and tests/test_local.py compare them with the bank model
  (helpers/chapters/local.py).
- limits (batch 64, the benchmark's, at the tiles of the recorded run): registers, active warps,
  busy issue slots, instructions (all, FFMA, shared and global), the warps' stall reasons per
  issued instruction: what limits a stage once its conflicts are gone (chapter 10).
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

from .analysis import names

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
STALLS = ("barrier", "dispatch_stall", "long_scoreboard", "math_pipe_throttle", "mio_throttle",
          "not_selected", "selected", "short_scoreboard", "wait")
LIMIT_METRICS = {"launch__registers_per_thread": "registers",
                 "sm__warps_active.avg.pct_of_peak_sustained_active": "warps_active_pct",
                 "smsp__issue_active.avg.pct_of_peak_sustained_active": "issue_active_pct",
                 "smsp__inst_executed.sum": "instructions",
                 "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum": "ffma_thread_instructions",
                 "smsp__sass_inst_executed_op_shared_ld.sum": "shared_ld_instructions",
                 "smsp__sass_inst_executed_op_shared_st.sum": "shared_st_instructions",
                 "smsp__sass_inst_executed_op_global_ld.sum": "global_ld_instructions",
                 "gpu__time_duration.sum": "ncu_time_ns",
                 **{f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio": f"stall_{r}" for r in STALLS}}
# the tiles of the recorded run (results/local/run2_*: the search's choices); 10_hoisted at 10_padded's
# tile, then at the tile its own search chose on the H200 (results/local/run4_tune_*)
LIMIT_CONFIGS = [*[(twin, dict(TILE, TY=ty)) for twin, ty in
                   (("prefetch", 4), ("transposed", 8), ("padded", 8), ("swizzle", 4), ("hoisted", 8))],
                 ("hoisted", dict(TILE, TY=4, XPW=4, CPW=8))]
SETS = {"banks": (CONFIGS, METRICS, N, "ncu_bank_conflicts", "ncu_banks_rowcopy"),
        "limits": (LIMIT_CONFIGS, LIMIT_METRICS, 64, "ncu_limits", "ncu_limits")}
MARK = "NCU_BANKS_RUN "


def launch_all(which: str = "banks") -> None:
    """The profiled process: each configuration of a set launched once, in order, one JSON line each."""
    from .profile_stage import profile
    configs, _, n, _, _ = SETS[which]
    for twin, defines in configs:
        out = profile("conv_dgrad", f"{twin}_cuda", LAYER, n, defines)
        print(MARK + json.dumps(out), flush=True)


def _number(text: str):
    """ncu's value: '1,234' -> 1234, '0.53' -> 0.53."""
    text = text.replace(",", "")
    return float(text) if any(c in text for c in ".eE") else int(text)


def parse(stdout: str, which: str = "banks") -> list[dict]:
    """Rows from ncu's CSV (kernel ID, metric, value) and the profiled process's JSON lines."""
    configs, metrics, _, _, _ = SETS[which]
    runs = [json.loads(line[len(MARK):]) for line in stdout.splitlines() if line.startswith(MARK)]
    table = csv.DictReader(io.StringIO("\n".join(l for l in stdout.splitlines() if l.startswith('"'))))
    counts: dict[int, dict] = {}
    for rec in table:
        if rec["Metric Name"] in metrics:
            counts.setdefault(int(rec["ID"]), {})[metrics[rec["Metric Name"]]] = _number(rec["Metric Value"])
    if len(runs) != len(configs) or len(counts) != len(runs):
        raise RuntimeError(f"expected {len(configs)} launches, got {len(runs)} runs and {len(counts)} profiled "
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
    ap.add_argument("--set", choices=sorted(SETS), default="banks", help="which counts (default banks)")
    ap.add_argument("--ncu", default="ncu", help="the Nsight Compute command line tool")
    ap.add_argument("--out", default=None, help="JSON path (default results/local/<set's name>_conv_dgrad_<device>.json)")
    a = ap.parse_args(argv)
    if a.launch:
        launch_all(a.set)
        return 0
    _, metrics, _, kind, stem = SETS[a.set]
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True).stdout.splitlines()[0]
    device, driver = (s.strip() for s in smi.split(","))
    cmd = [a.ncu, "--metrics", ",".join(metrics), "--csv", "-k", "regex:conv_dgrad",
           sys.executable, "-m", "helpers.ncu_banks", "--launch", "--set", a.set]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        print(proc.stdout[-3000:], proc.stderr[-3000:], sep="\n", file=sys.stderr)
        return proc.returncode
    rec = {"schema": 1, "kind": kind, "device": device, "driver": driver,
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "command": "python -m helpers.ncu_banks" + (f" --set {a.set}" if a.set != "banks" else ""),
           "ncu_command": shlex.join(["ncu", *("python3" if c == sys.executable else c for c in cmd[1:])]),
           "rows": parse(proc.stdout, a.set)}
    path = a.out or names.path(names.ncu_banks(stem, device))
    with open(path, "w") as f:
        f.write(json.dumps(rec, indent=1) + "\n")
    for r in rec["rows"]:
        d = r["defines"]
        if a.set == "banks":
            print(f"{r['twin']:<11} TY={d['TY']} ROWCOPY={d.get('ROWCOPY', '-')}  store conflicts "
                  f"{r['shared_st_conflicts']:>10,}  load conflicts {r['shared_ld_conflicts']:>9,}")
        else:
            print(f"{r['twin']:<11} TY={d['TY']}  {r['registers']} registers, issue {r['issue_active_pct']:.1f} %, "
                  f"FFMA {r['ffma_thread_instructions'] / 32 / r['instructions']:.1%} of instructions")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
