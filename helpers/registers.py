"""Register and spill counts as NVIDIA's compiler reports them, recorded in results/ so that the
chapters can show them on any machine: stages 07-08 of the input gradient (chapter 07), batch
norm stage 06's forward kernel per units held, with and without its offsets (chapter 14), and the
phase-split stages with split-K off and on (chapter 11); chapters 09-10's stages and their CUDA
twins at the tuned tiles (chapter 10).

    python -m helpers.registers              # on an NVIDIA GPU: writes results/registers_conv_dgrad_<device>.json
    python -m helpers.registers --table one_pass      # results/registers_one_pass_<device>.json
    python -m helpers.registers --table split_k       # results/registers_split_k_<device>.json
    python -m helpers.registers --table local         # results/registers_local_<device>.json
    python -m helpers.registers --out -      # print only

Other drivers report nothing (the command says so and writes nothing).
"""
from __future__ import annotations

import re
import sys

import pyopencl as cl

from .engine.build import build, build_log
from .runner import jit_defines, prepare, resolve, stage_source


def ptxas_usage(log: str, kernel: str | None = None) -> dict | None:
    """Registers and spill bytes from an NVIDIA build log built with -cl-nv-verbose, else None: of
    ``kernel`` (the log's section after "Compiling entry function 'kernel'"), or of the first."""
    if kernel and log:
        m = re.search(rf"entry function '{re.escape(kernel)}'(.*?)(?=entry function '|\Z)", log, re.S)
        log = m.group(1) if m else ""
    m = re.search(r"Used (\d+) registers", log or "")
    if not m:
        return None
    spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
    stack = re.search(r"(\d+) bytes stack frame", log)
    return {"registers": int(m.group(1)),
            "spill_stores": int(spill.group(1)) if spill else 0,
            "spill_loads": int(spill.group(2)) if spill else 0,
            "stack_bytes": int(stack.group(1)) if stack else 0}


def is_nvidia(ctx) -> bool:
    return "NVIDIA" in ctx.devices[0].platform.name.upper()


def _stage_build(ctx, stage, defines, op, problem_args) -> tuple:
    """What run_stage would build for a problem: (kernel path, JIT defines, generated source)."""
    problem = prepare(op, **problem_args)
    s, d = resolve(op, stage, problem, ctx, defines)
    jit = jit_defines(s, problem, d)
    return s.kernel, jit, stage_source(s, jit)


def register_usage(ctx, stage, defines: dict | None = None, op: str = "conv_dgrad", **problem_args):
    """Registers per work-item and spill bytes of a stage's kernel as NVIDIA's compiler reports
    them (build log with -cl-nv-verbose), or None on drivers that report nothing (PoCL, ...)."""
    if not is_nvidia(ctx):
        return None
    kernel, jit, source = _stage_build(ctx, stage, defines, op, problem_args)
    return ptxas_usage(build_log(ctx, kernel, jit, ["-cl-nv-verbose"], source=source))


def program_ptx(ctx, stage, defines: dict | None = None, op: str = "conv_dgrad", **problem_args) -> str | None:
    """The PTX NVIDIA's OpenCL compiler made of a stage's program for a problem (what the driver
    returns as the program's binary), or None on other drivers."""
    if not is_nvidia(ctx):
        return None
    kernel, jit, source = _stage_build(ctx, stage, defines, op, problem_args)
    program = build(ctx, kernel, jit, source=source)
    return program.get_info(cl.program_info.BINARIES)[0].decode(errors="replace")


REGISTER_GRID = {
    "input_depth": [{"CPW": c, "SPLIT": s} for c in (1, 2, 4, 8) for s in (1, 4, 16)],
    "width": [{"CPW": c, "XPW": x, "SPLIT": 4} for c in (4, 8) for x in (2, 4, 8)],
}


def register_table(ctx, layer: str = "res64@56") -> list[dict]:
    """register_usage for stages 07 and 08 over REGISTER_GRID on one resnet50 layer ([] off NVIDIA)."""
    from .ops.layers import args, layer_set
    lay = next(l for l in layer_set("resnet50") if l["name"] == layer)
    rows = []
    for stage, grid in REGISTER_GRID.items():
        for d in grid:
            u = register_usage(ctx, stage, defines=d, **args(lay))
            if u is None:
                return []
            rows.append({"stage": stage, "defines": d, **u})
            print(f"{stage:<12} {str(d):<36} {u['registers']:4d} registers  {u['spill_stores']:5d} B spill "
                  f"stores  {u['spill_loads']:5d} B spill loads", flush=True)
    return rows


ONE_PASS_ITEMS = (7, 13, 25)

UNIT_REGISTERS = 65536      # 32-bit registers of one compute unit (an SM of the H100 and H200)
UNIT_WORK_ITEMS = 2048      # work-items one such compute unit holds at most
REGISTER_BLOCK = 8          # registers a work-item is given in blocks of this many (see groups_per_unit)


def groups_per_unit(registers: int, wg: int = 256) -> int:
    """Work-groups of ``wg`` work-items that one compute unit holds at ``registers`` a work-item (as
    the compiler reports them), by registers and by work-items. An SM does not give out registers
    one at a time: it gives each warp blocks of 256, 8 a work-item, so the count is rounded up to a
    multiple of 8 first. 51 registers take 56: 65,536 // (256 * 56) = 4 work-groups of 256, not 5,
    as many as 59 registers (taking 64) leave."""
    allocated = -(-registers // REGISTER_BLOCK) * REGISTER_BLOCK
    return min(UNIT_WORK_ITEMS // wg, UNIT_REGISTERS // (wg * allocated))


def one_pass_table(ctx, items=ONE_PASS_ITEMS, wg: int = 256) -> list[dict]:
    """Batch norm stage 06's forward kernel (float4 units, two-pass statistics) per ITEMS and
    HOLD_OFFSETS: its registers and the work-groups of ``wg`` that leaves one compute unit
    (groups_per_unit); [] off NVIDIA. What the launch's HOLD_OFFSETS rule rests on
    (helpers/launch/batchnorm.py: one_pass_items)."""
    from .stages import get_stage
    if not is_nvidia(ctx):
        return []
    s = get_stage("batchnorm_forward", "one_pass")
    rows = []
    for n in items:
        for hold in (1, 0):
            jit = {**s.defines, "WG": wg, "ITEMS": n, "VEC4": 1, "HOLD_OFFSETS": hold, "UPDATE_RUNNING": 1}
            u = ptxas_usage(build_log(ctx, s.kernel, jit, ["-cl-nv-verbose"]), "bn_forward_train")
            if u is None:
                raise RuntimeError("the compiler's log names no register count: a cached build prints nothing "
                                   "(CUDA_CACHE_DISABLE=1, which main sets)")
            rows.append({"WG": wg, "ITEMS": n, "HOLD_OFFSETS": hold, **u,
                         "groups_per_unit": groups_per_unit(u["registers"], wg)})
            print(rows[-1], flush=True)
    return rows


SPLIT_K_TARGETS = (1, 256, 528)     # SPLITS 1, 2 and 3 on res512@7 at the H200's tuned tile


def split_k_table(ctx, layer: str = "res512@7") -> list[dict]:
    """The phase-split stages (chapter 11) on one resnet50 layer with split-K off and on: the
    registers and spills of each SPLITS, built with the device's tuned tile ([] off NVIDIA)."""
    from .ops.layers import args, layer_set
    lay = next(l for l in layer_set("resnet50") if l["name"] == layer)
    rows = []
    for stage in ("igemm_taps", "igemm_phases"):
        for target in SPLIT_K_TARGETS:
            d = {"SPLIT_TARGET": target}
            u = register_usage(ctx, stage, defines=d, **args(lay))
            if u is None:
                return []
            splits = _stage_build(ctx, stage, d, "conv_dgrad", args(lay))[1]["SPLITS"]
            rows.append({"stage": stage, "layer": layer, "SPLIT_TARGET": target, "SPLITS": splits, **u})
            print(rows[-1], flush=True)
    return rows


def local_table(ctx, layer: str = "res64@56") -> list[dict]:
    """Chapters 09-10's stages that have a CUDA twin, at the device's tuned tiles on one resnet50
    layer: the registers and spills of the OpenCL build (NVIDIA's OpenCL compiler), and of its CUDA
    twin at the same tile (NVRTC, as CuPy loads it; None where CUDA cannot run): chapter 10 sets
    them beside the twins' times ([] off NVIDIA)."""
    from .engine.backends import BackendUnavailable, cuda
    from .ops.layers import args, layer_set
    from .stages import LOCAL_TWINNED
    if not is_nvidia(ctx):
        return []
    lay = next(l for l in layer_set("resnet50") if l["name"] == layer)
    rows = []
    for stage in LOCAL_TWINNED:
        kernel, jit, source = _stage_build(ctx, stage, None, "conv_dgrad", args(lay))
        tile = {k: jit[k] for k in ("TX", "TY", "XPW", "CPW", "CB", "KC")}
        row = {"stage": stage, "layer": layer, "tile": tile,
               "opencl": ptxas_usage(build_log(ctx, kernel, jit, ["-cl-nv-verbose"], source=source)), "cuda": None}
        try:
            t_kernel, t_jit, t_source = _stage_build(ctx, stage + "_cuda", None, "conv_dgrad", args(lay))
        except BackendUnavailable as err:          # no CuPy or no CUDA device: the OpenCL counts alone
            print(f"{stage}_cuda: {err}".splitlines()[0], flush=True)
        else:
            if {k: t_jit[k] for k in tile} != tile:
                raise RuntimeError(f"{stage}_cuda runs another tile than {stage}: {t_jit} against {jit}")
            fn = cuda.build(t_kernel, t_jit, source=t_source).get_function("conv_dgrad")
            row["cuda"] = {"registers": int(fn.num_regs), "local_bytes": int(fn.local_size_bytes)}
        rows.append(row)
        print(rows[-1], flush=True)
    return rows


TABLES = {"conv_dgrad": register_table, "one_pass": one_pass_table, "split_k": split_k_table, "local": local_table}


def recorded_registers(table: str = "conv_dgrad") -> list[dict]:
    """Register tables recorded in results/ by ``python -m helpers.registers [--table T]`` on NVIDIA GPUs."""
    import json
    from .analysis import names
    return [json.loads(p.read_text()) for p in sorted(names.RESULTS.glob(names.registers(table, "{slug}").format(slug="*")))]


def main(argv=None) -> int:
    """python -m helpers.registers [--table conv_dgrad|one_pass] [--device D] [--out PATH|-]: record
    register and spill counts as NVIDIA's compiler reports them (results/registers_<table>_<device>.json)."""
    import argparse
    import datetime as dt
    import json
    from .engine.devices import device_info, get_context
    from .analysis import names
    ap = argparse.ArgumentParser(prog="python -m helpers.registers", description=main.__doc__.split("\n")[0])
    ap.add_argument("--table", default="conv_dgrad", choices=sorted(TABLES))
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    # NVIDIA's driver caches compiled kernels and then reports nothing: switch its cache off (it
    # reads this when the first context is made, so before get_context)
    import os
    os.environ.setdefault("CUDA_CACHE_DISABLE", "1")
    ctx = get_context(a.device)
    info = device_info(ctx)
    rows = TABLES[a.table](ctx)
    if not rows:
        print(f"{info['name']} ({info['platform']}) reports no register counts; only NVIDIA's driver does.")
        return 0
    if a.out != "-":
        names.RESULTS.mkdir(exist_ok=True)
        path = a.out or str(names.path(names.registers(a.table, info["name"])))
        extra = {"layer": "res64@56"} if a.table == "conv_dgrad" else {
            "command": f"python -m helpers.registers --table {a.table}" + (f" --device {a.device}" if a.device else "")}
        with open(path, "w") as f:
            json.dump({"kind": "registers", "device": info, **extra,
                       "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "rows": rows}, f, indent=1)
            f.write("\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
