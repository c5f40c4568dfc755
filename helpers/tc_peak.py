"""`python -m helpers.tc_peak`: the rate of Hopper's warpgroup MMA with nothing to feed it.

kernels/peak/wgmma.cu runs step 7's product loop (chapter 13) on tiles that stay in shared memory:
no gather, no barriers. Without copies it reaches what the tensor cores can do with wgmma reading
both operands from shared memory; with copies of step 7's volume beside it (from the L2 cache into
shared memory the tensor cores do not read), what those copies alone cost: as step 7 issues them
(cp.async, 16 bytes per thread) and as the Tensor Memory Accelerator would (cp.async.bulk, one
thread, 16 KB per instruction). Timed with CUDA events (warm-up, repeats, median and spread).
Writes results/tc/wgmma_peak_<device>.json.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import sys

from .analysis import names
from .engine.timing import Timing

KERNEL = "peak/wgmma.cu"
DATA_SHEET = {"tf32": 989.4 / 2, "fp16": 989.4}   # TFLOP/s, H100/H200 SXM dense (2:4 sparse halved)
# (precision, BN, WAITN, copies: 4 KB each per block and iteration, 12 is step 7's with 256-wide
# blocks; BULK: 0 cp.async, 16 bytes per thread, 1 cp.async.bulk)
CASES = (("tf32", 256, 1, 0, 0), ("tf32", 256, 0, 0, 0), ("tf32", 128, 1, 0, 0), ("fp16", 256, 1, 0, 0),
         ("fp16", 128, 1, 0, 0), ("tf32", 256, 1, 6, 0), ("tf32", 256, 1, 12, 0), ("tf32", 256, 1, 24, 0),
         ("fp16", 256, 1, 12, 0), ("tf32", 256, 1, 12, 1), ("tf32", 256, 1, 24, 1), ("fp16", 256, 1, 12, 1))
SINK = 48 * 1024             # kernels/peak/wgmma.cu: the shared memory the copies write
SPAN = 32 * 2**20            # bytes the copies read, cycling: less than the H100's and H200's L2 cache


def flops(precision: str, bn: int, blocks: int, iters: int) -> int:
    """Two warpgroups per block, four 64 x BN x k products per iteration (k = 8 tf32, 16 fp16)."""
    return blocks * 2 * iters * 4 * 2 * 64 * bn * (8 if precision == "tf32" else 16)


def shared_bytes(bn: int) -> int:
    """The A tile (128 rows of 128 bytes), the B tile (BN rows), 1024 bytes to align them, the
    copies' sink and two mbarriers."""
    return 1024 + (128 + bn) * 128 + SINK + 16


def measure(precision: str, bn: int, waitn: int, copies: int = 0, bulk: int = 0, iters: int = 4000,
            warmup: int = 2, repeats: int = 10) -> dict:
    import cupy
    from .engine.backends.cuda import build, time_launches
    mod = build(KERNEL, {"TF32": int(precision == "tf32"), "BN": bn, "WAITN": waitn, "BULK": bulk}, arch="sm_90a")
    k = mod.get_function("wgmma_rate")
    k.max_dynamic_shared_size_bytes = shared_bytes(bn)
    sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
    out, src = cupy.zeros(256, cupy.float32), cupy.ones(SPAN // 4, cupy.float32)
    grid = sms                                           # one block per SM, as step 7 runs
    args = (src, out, cupy.int32(iters), cupy.int32(copies), cupy.int64(SPAN))
    run = lambda: k((grid,), (256,), args, shared_mem=shared_bytes(bn))
    t = Timing(time_launches([run], warmup=warmup, repeats=repeats, flush_bytes=0))
    sec = t.median_ms * 1e-3
    tflops = flops(precision, bn, grid, iters) / sec / 1e12
    return {"precision": precision, "BN": bn, "WAITN": waitn, "copies": copies,
            "copy": "cp.async.bulk" if bulk else "cp.async",
            "copy_kb_per_iteration": copies * 256 * 16 / 1024, "blocks": grid, "iters": iters, **t.summary(),
            "tflops": tflops, "pct_data_sheet": 100 * tflops / DATA_SHEET[precision],
            "copy_tbps": grid * iters * copies * 256 * 16 / sec / 1e12}


def driver() -> str:
    """The NVIDIA driver's version as nvidia-smi prints it (the CUDA driver API's number without it)."""
    import subprocess
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, check=True).stdout.splitlines()[0].strip()
    except (OSError, subprocess.CalledProcessError, IndexError):
        import cupy
        return f"CUDA driver API {cupy.cuda.runtime.driverGetVersion()}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None, help="JSON path (default results/tc/wgmma_peak_<device>.json; '-': print)")
    a = ap.parse_args(argv)
    from .engine.backends import BackendUnavailable
    from .engine.backends.cuda import device
    try:
        dev = device()
    except BackendUnavailable as err:
        raise SystemExit(str(err)) from None
    name = dev["name"]
    if str(dev["compute_capability"]) != "90":     # wgmma is Hopper's alone (sm_90a)
        raise SystemExit(f"python -m helpers.tc_peak measures Hopper's wgmma: it needs an sm_90 GPU (H100, H200), "
                         f"but {name} is sm_{dev['compute_capability']}; the H200's run is in results/tc/")
    rows = [measure(*case) for case in CASES]
    out = {"schema": 1, "kind": "wgmma_peak", "device": {"name": name, "type": "GPU", "driver": driver()},
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join(["python -m helpers.tc_peak", *(sys.argv[1:] if argv is None else argv)]),
           "data_sheet_tflops": DATA_SHEET,
           "formula": "TFLOP/s = blocks x 2 warpgroups x iterations x 4 x 2 x 64 x BN x k / median time; "
                      "copies TB/s = blocks x iterations x copies x 256 threads x 16 bytes / median time",
           "rows": rows}
    text = json.dumps(out, indent=1)
    for r in rows:
        print(f"{r['precision']} BN {r['BN']:>3} wait<{r['WAITN']}> {r['copy']:<13} {r['copies']:>2}: "
              f"{r['tflops']:7.1f} TFLOP/s ({r['pct_data_sheet']:.1f} % of the data sheet), copies {r['copy_tbps']:.2f} TB/s")
    if a.out == "-":
        print(text)
        return 0
    path = names.path(names.wgmma_peak(name)) if a.out is None else a.out
    with open(path, "w") as f:
        f.write(text + "\n")
    print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
