"""A small test helper for the CUDA twins of chapters 09-10 (kernels/conv_dgrad/*.cu).

Compile check (any machine with cuda-bindings and nvidia-cuda-nvrtc from pip, no GPU):
    compile_twin("10_swizzle", {"KH": 3, ...}, arch="compute_90") -> PTX text

Run on an NVIDIA GPU with CuPy (checked against the NumPy reference, timed with CUDA events),
e.g. under Nsight Compute to count shared-memory bank conflicts:
    python tests/cuda_twins.py --stages 10_transposed,10_swizzle --layer res64@56 --n 8
It builds each twin with the JIT parameters its OpenCL stage would get on the named device
(registry defaults < results/tuned.json < the fitted tile) and launches the same geometry.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from helpers.stages import get_stage  # noqa: E402
from helpers.tuning import tuned_defines  # noqa: E402

TWINS = ("09_prefetch", "10_transposed", "10_padded", "10_swizzle")


def twin_source(key: str) -> str:
    return (ROOT / "kernels" / "conv_dgrad" / f"{key}.cu").read_text()


def twin_defines(key: str, problem, device: str = "NVIDIA H200") -> tuple[dict, tuple, tuple]:
    """JIT parameters, grid and block of a twin for a problem, as its OpenCL stage would run."""
    s = get_stage("conv_dgrad", key[3:])
    d = {**s.defines, **tuned_defines("conv_dgrad", s.key, device)}
    need = s.requires(problem, d)
    if need:
        raise ValueError(f"{key} cannot run this problem: {need}")
    jit = {**problem.defines, **d, **s.jit(problem, d)}
    (g0, g1), (l0, _) = s.geometry(problem, d)
    return jit, (g0 // l0, g1, 1), (l0, 1, 1)


def compile_twin(key: str, defines: dict, arch: str = "compute_90") -> str:
    """PTX of a twin through NVRTC (cuda.bindings); raises RuntimeError with the compiler's log."""
    from cuda.bindings import nvrtc
    err, prog = nvrtc.nvrtcCreateProgram(twin_source(key).encode(), f"{key}.cu".encode(), 0, [], [])
    opts = [f"--gpu-architecture={arch}".encode(), f"-I{ROOT / 'kernels' / 'common'}".encode()]
    opts += [f"-D{k}={int(v)}".encode() for k, v in defines.items()]
    (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(f"{key}.cu with {defines} for {arch}:\n{log.decode(errors='replace')}")
    _, size = nvrtc.nvrtcGetPTXSize(prog)
    ptx = b" " * size
    nvrtc.nvrtcGetPTX(prog, ptx)
    return ptx.decode(errors="replace")


def run_twin(key: str, args: dict, repeats: int = 20) -> dict:
    """Run a twin with CuPy: max error against the reference, median time of `repeats` launches."""
    import cupy as cp
    import numpy as np

    from helpers.ops.conv_dgrad import reference
    from helpers.runner import prepare
    p = prepare("conv_dgrad", **args)
    jit, grid, block = twin_defines(key, p)
    opts = (f"-I{ROOT / 'kernels' / 'common'}",) + tuple(f"-D{k}={int(v)}" for k, v in jit.items())
    kern = cp.RawModule(code=twin_source(key), options=opts).get_function("conv_dgrad")
    dy = cp.asarray(p.inputs["grad_output"])
    y = dy if "output" in p.aliases else cp.asarray(p.inputs["output"])
    w = cp.asarray(p.inputs["weight"])
    dx = cp.full(p.outputs["grad_input"], np.nan, dtype=cp.float32)
    sc = [np.int32(p.scalars[k]) for k in p.scalars]
    launch = lambda: kern(grid, block, (dy, y, w, dx, *sc))
    launch()
    expected, _ = reference(p)
    err = float(np.nanmax(np.abs(cp.asnumpy(dx) - expected["grad_input"]))) if not cp.isnan(dx).any() else float("nan")
    times = []
    for _ in range(repeats):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record()
        launch()
        b.record()
        b.synchronize()
        times.append(cp.cuda.get_elapsed_time(a, b))
    return {"twin": key, "defines": jit, "grid": grid, "block": block, "max_abs_error": err,
            "median_ms": float(np.median(times)), "flops": p.flops}


def main() -> None:
    from helpers.layers import layer_set
    from helpers.ops.conv_dgrad import layer_args
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default=",".join(TWINS))
    ap.add_argument("--layer", default="res64@56")
    ap.add_argument("--n", type=int, default=8, help="batch (the layer's own when 0)")
    ap.add_argument("--repeats", type=int, default=20)
    a = ap.parse_args()
    lay = next(lay for lay in layer_set("resnet50") if lay["name"] == a.layer)
    if a.n:
        lay = dict(lay, n=a.n)
    for key in a.stages.split(","):
        print(json.dumps({"layer": a.layer, "n": lay["n"], **run_twin(key, layer_args(lay), a.repeats)}), flush=True)


if __name__ == "__main__":
    main()
