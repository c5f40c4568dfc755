"""Summaries of recorded runs: geometric means over layers, per stage; the vendor's name and the
method it ran; a ladder's steps; the repetitions of one timing in one or two groups."""
from __future__ import annotations

import math


def geomean(values) -> float:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else float("nan")


def summary(out: dict) -> dict:
    """Per stage: geometric means over the layers of GFLOP/s and of the speed-ups."""
    res = {}
    for key in dict.fromkeys(r["key"] for r in out["rows"]):
        rows = [r for r in out["rows"] if r["key"] == key]
        res[key] = {"gflops": geomean(r["gflops"] for r in rows), "gbps": geomean(r["gbps"] for r in rows),
                    "x_first": geomean(r.get("x_first") for r in rows),
                    "x_vendor": geomean(r.get("x_vendor") for r in rows)}
    return res


def ranked(summary_: dict, keys=None) -> list[str]:
    """Stage keys of a ``summary`` (``keys``: some of them), fastest first by their speed-up over
    the op's first stage."""
    return sorted(keys if keys is not None else summary_, key=lambda k: -summary_[k]["x_first"])


def kernels_ms(row: dict, names=None) -> float:
    """The summed times of a row's kernels timed alone (``steps_ms``; ``names``: only those)."""
    return sum(ms for name, ms in row["steps_ms"] if names is None or name in names)


def outside_kernels_ms(row: dict) -> float:
    """A stage's time outside its kernels timed alone: its median minus their sum (the gaps between
    launches, and what a kernel costs only beside the others)."""
    return row["median_ms"] - kernels_ms(row)


def vendor_name(out: dict) -> str:
    """The vendor library a run compared with: its vendor rows' ``name``; without rows (no GPU, or
    --no-vendor) the op's own (``VENDOR`` of helpers/ops/<op>.py: cuBLAS for the GEMM, PyTorch for
    batch norm), else cuDNN."""
    if out.get("vendor"):
        return out["vendor"][0].get("name", "cuDNN")
    from ..ops import op_module          # the op's modules import no OpenCL or CUDA
    try:
        return getattr(op_module(out.get("op")), "VENDOR", "cuDNN")
    except ValueError:                   # an op this checkout does not have
        return "cuDNN"


def vendor_algorithm(vendor_row: dict) -> str:
    """The method the vendor library ran on a layer, named from its kernels as a run records them:
    'FFT' (cuDNN's fft2d kernels), 'implicit GEMM', or 'not an FFT' (another engine)."""
    names = " ".join(vendor_row.get("kernel_names", [])).lower()
    return "FFT" if "fft" in names else "implicit GEMM" if "implicit_gemm" in names else "not an FFT"


def ladder_steps(out: dict, first: str | None = None, last: str | None = None) -> list[str]:
    """A ladder stage by stage, geometric means over the run's layers: TFLOP/s, x the first stage,
    x the stage before, x the vendor; then last / first (two stage keys, when given) and the
    measured FMA peak."""
    s, prev, lines = summary(out), None, []
    for key, v in s.items():
        step = f"x{v['x_first'] / s[prev]['x_first']:.2f}" if prev else "-"
        lines.append(f"  {key:<20} {v['gflops'] / 1000:5.1f} TFLOP/s  x{v['x_first']:5.2f} {next(iter(s))[3:]:<7}"
                     f"{step:>6} the stage before  x{v['x_vendor']:.2f} {vendor_name(out)}")
        prev = key
    tail = f"  {last} / {first}: x{s[last]['x_first'] / s[first]['x_first']:.1f}; " if first and last else "  "
    lines.append(tail + f"measured FMA peak {out['roofline']['fma_gflops'] / 1000:.1f} TFLOP/s")
    return lines


def two_modes(times, gap: float = 0.05):
    """The repetitions of one timing split at its widest gap between neighbouring sorted times,
    when that gap is more than ``gap`` of the median (a kernel that runs at one of two speeds from
    launch to launch): ((count, fastest, slowest) of the faster group, the same of the slower), or
    None when the times form one group."""
    t = sorted(times)
    if len(t) < 2:
        return None
    i = max(range(1, len(t)), key=lambda k: t[k] - t[k - 1])
    if t[i] - t[i - 1] <= gap * t[len(t) // 2]:
        return None
    return (i, t[0], t[i - 1]), (len(t) - i, t[i], t[-1])
