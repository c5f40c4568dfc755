"""The code generator for the unrolled 3x3 block of conv_dgrad stages 07 and 08 (combining
input depth and width); their launch geometry and JIT decisions are in helpers/launch/direct.py.

Stages 07 and 08 need straight-line code whose shape depends on three numbers: CPW input
channels and XPW x positions per work-item, and SPLIT, how many output depths' weights are
loaded together before they are used. ``-D`` can set numbers, but not write out the loads and
multiply-adds a given (CPW, XPW, SPLIT) needs without relying on every compiler to unroll loops
over private arrays into registers. So ``fast_block`` writes that code, and the stage's kernel
file marks where it goes (``// @generated``). ``kernel_text`` is what the registry's
``source=`` hook builds; ``generated_code`` is what a chapter shows.

    print(generated_code(cpw=2, xpw=1, split=4))
"""
from __future__ import annotations

import re

from ..engine.kernels import kernel_source

MARKER = "// @generated"
BLOCK = 16                 # output depths per iteration of the k loop (K % 16 == 0 on the fast path)
TAPS = 9                   # 3x3 weights per (input channel, output channel) pair
SPLITS = (1, 2, 4, 8, 16)  # SPLIT must divide 16


def check_params(d: dict) -> None:
    """The constraints written beside the defines in 07/08, checked before building."""
    for name in ("CPW", "XPW", "WG"):
        if name in d and (not isinstance(d[name], int) or d[name] < 1):
            raise ValueError(f"{name} must be a positive integer, got {d[name]!r}")
    if "SPLIT" in d and d["SPLIT"] not in SPLITS:
        raise ValueError(f"SPLIT must divide 16 (one of {SPLITS}), got {d['SPLIT']!r}")


# ------------------------------------------------------------------------------------------
# The generator

def weight_vectors(first_depth: int, last_depth: int) -> range:
    """float4 indices (within a 16-depth block of 144 floats) holding depths first..last."""
    return range(TAPS * first_depth // 4, (TAPS * (last_depth + 1) - 1) // 4 + 1)


def fast_block(cpw: int, xpw: int, split: int, width: bool = False) -> str:
    """Straight-line code for one 16-depth block of the 3x3 fast path.

    Expects in scope: ``k0``, ``K``, ``OHW``, ``ob`` (dy offset of (n, k0, 0, 0)), the tables
    ``rowok[3]``, ``rowoff[3]``, the weight tensor ``w``, the clamped channels ``cw[CPW]``,
    accumulators ``acc[CPW]`` (stage 07) or ``acc[CPW][XPW]`` (``width``: stage 08), and two
    macros: ``ROW_TAKEN(r)``, whether to run kernel row r at all, and ``LOAD_ROW(d, o, r)``, which
    fills ``float d[XPW + 2]`` with row r of the window (column u is x0 + PAD - 2 + u; zero where
    the output does not exist).

    Weights: the 144 floats of (c, k0..k0+15) are 36 aligned float4 (K % 16 == 0). The depths
    go in groups of ``split``: a group's float4 of every channel are loaded, then the group's
    depths are used (row by row, tap by tap). A float4 that straddles two groups is loaded once
    and kept (ping-pong): fewer depths per group mean shorter weight live ranges.
    """
    if split not in SPLITS:
        raise ValueError(f"split must divide 16 (one of {SPLITS}), got {split!r}")
    for name, v in (("cpw", cpw), ("xpw", xpw)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")

    def acc(j, p):
        return f"acc[{j}][{p}]" if width else f"acc[{j}]"

    out = []
    emit = out.append
    for j in range(cpw):
        emit(f"const __global float4* w{j} = (const __global float4*)(w + (cw[{j}] * K + k0) * 9);")
    loaded = set()
    for g0 in range(0, BLOCK, split):
        need = [q for q in weight_vectors(g0, g0 + split - 1) if q not in loaded]
        emit(f"// depths k0+{g0}..k0+{g0 + split - 1}: float4 {need[0]}..{need[-1]} of each channel"
             if need else f"// depths k0+{g0}..k0+{g0 + split - 1}: weights already loaded")
        for j in range(cpw):
            if need:
                emit(" ".join(f"const float4 w{j}_{q} = w{j}[{q}];" for q in need))
        loaded.update(need)
        for r in range(3):
            emit(f"if (ROW_TAKEN({r})) {{")
            for i in range(g0, g0 + split):
                emit(f"    {{ float d[{xpw + 2}]; LOAD_ROW(d, ob + {i} * OHW + rowoff[{r}], {r});")
                for j in range(cpw):
                    for p in range(xpw):
                        terms = []
                        for s in range(3):       # tap (r, s) of depth i: float 9i + 3r + s
                            e = TAPS * i + 3 * r + s
                            terms.append(f"d[{p + 2 - s}] * w{j}_{e // 4}.s{e % 4}")
                        # a + x*y contracts to one fused multiply-add (OpenCL's default FP_CONTRACT)
                        emit(f"      {acc(j, p)} = {acc(j, p)} + {' + '.join(terms)};")
                emit("    }")
            emit("}")
    return "\n".join(out)


def generated_code(cpw: int, xpw: int, split: int, width: bool = False, indent: int = 12) -> str:
    """The generated block, indented as it appears in the kernel."""
    pad = " " * indent
    return "\n".join(pad + line if line else line
                     for line in fast_block(cpw, xpw, split, width).splitlines())


def kernel_text(relpath: str, defines: dict) -> str:
    """The stage's kernel file with the generated block put in at the marker line."""
    check_params(defines)
    text = kernel_source(relpath)
    lines = text.splitlines()
    where = [i for i, line in enumerate(lines) if line.strip() == MARKER]
    if len(where) != 1:
        raise RuntimeError(f"kernels/{relpath} must have exactly one '{MARKER}' line")
    i = where[0]
    indent = len(lines[i]) - len(lines[i].lstrip())
    block = generated_code(int(defines.get("CPW", 1)), int(defines.get("XPW", 1)),
                           int(defines.get("SPLIT", BLOCK)), "XPW" in defines, indent)
    lines[i] = f"{' ' * indent}// generated by helpers/launch/unrolled.py: fast_block(cpw={defines.get('CPW', 1)}, " \
               f"xpw={defines.get('XPW', 1)}, split={defines.get('SPLIT', BLOCK)})\n{block}"
    return "\n".join(lines) + "\n"


def code_stats(cpw: int, xpw: int, split: int) -> dict:
    """Counts in one generated 16-depth block: weight float4 loads, dy row loads, multiply-adds,
    and the most weight floats live at once (loaded, still to be used) if run in code order."""
    code = fast_block(cpw, xpw, split)
    fmas = len(re.findall(r"d\[\d+\] \* w", code))
    vec_loads = len(re.findall(r"= w\d+\[\d+\];", code))
    rows = code.count("LOAD_ROW(")
    # liveness of each float4: from its load to its last use, in code order
    first, last = {}, {}
    for n, line in enumerate(code.splitlines()):
        for name in re.findall(r"const float4 (w\d+_\d+) =", line):
            first[name] = n
        for name in re.findall(r"(w\d+_\d+)\.s", line):
            last[name] = n
    peak = 0
    for n in range(len(code.splitlines())):
        live = sum(1 for v in first if first[v] <= n <= last.get(v, first[v]))
        peak = max(peak, live)
    return {"fmas": fmas, "weight_float4_loads": vec_loads, "dy_row_loads": rows,
            "peak_live_weight_floats": 4 * peak, "accumulators": cpw * xpw}
