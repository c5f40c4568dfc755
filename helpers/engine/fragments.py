"""Where a warp's registers come from: the fragment layouts of the warp-level matrix instructions
the tensor-core stages use (chapter 13), as NumPy tables. One model, used by the chapter's
pictures, bank layouts and exercise check (helpers/chapters/pictures_tensor_cores.py,
tensor_core_layouts.py, exercises/ch13.py), by the ldmatrix addresses the
kernels must give (``ldmatrix_rows``), and by the CPU emulation of the kernels, whose mma.sync,
ldmatrix and wgmma (and the TMA's swizzled boxes) read these tables (helpers/engine/backends/
emulated.py): a wrong entry here makes the emulated kernels wrong, and tests/test_fragments.py
checks every entry against the PTX ISA.

Within a warp, lane l is in group g = l / 4 (eight groups), at place t = l % 4 in it. A register
holds one 32-bit value (tf32, f32) or two 16-bit ones (f16, bf16: the lower half first).

    mma.m16n8k8, tf32        A 16 x 8 (m x k): register j of lane l is A[8 (j % 2) + g][4 (j / 2) + t]
                             B 8 x 8 (k x n):  register j is B[4 j + t][g]
    mma.m16n8k16, f16/bf16   A 16 x 16: register j, half h is A[8 (j % 2) + g][8 (j / 2) + 2 t + h]
                             B 16 x 8:  register j, half h is B[8 j + 2 t + h][g]
    both                     C, D 16 x 8 (fp32): register j is C[8 (j / 2) + g][2 t + j % 2]
    ldmatrix.m8n8.x4.b16     four 8 x 8 matrices of 16-bit values: lane l gives the address of row
                             l % 8 of matrix l / 8; register j of lane l receives matrix j's row g,
                             columns 2 t and 2 t + 1 (halves 0 and 1)
    wgmma.m64nNk8/k16, D     64 x N (fp32): warp w of the warpgroup holds rows 16 w .. 16 w + 15, each
                             8 columns as C above: register i of its lane is C's register i % 4 of
                             the 8 columns from 8 (i / 4)
    128-byte swizzle         wgmma's shared operands: the 16-byte chunk j of a 128-byte line lies at
                             chunk j ^ (the line's place in its 1024-byte pattern)

    fragment("m16n8k16", "A")[l, j, h]   -> (row, column) of A held by lane l, register j, half h
"""
from __future__ import annotations

import functools

import numpy as np

# (rows, columns) of each operand and (registers, values per register) of a lane's fragment
SHAPES = {"m16n8k8": {"A": (16, 8, 4, 1), "B": (8, 8, 2, 1), "C": (16, 8, 4, 1)},     # tf32 operands
          "m16n8k16": {"A": (16, 16, 4, 2), "B": (16, 8, 2, 2), "C": (16, 8, 4, 1)}}  # f16 / bf16


def _place(shape: str, operand: str, g: int, t: int, j: int, h: int) -> tuple[int, int]:
    """(row, column) of register j, half h of the lane in group g at place t."""
    if operand == "C":
        return 8 * (j // 2) + g, 2 * t + j % 2
    if shape == "m16n8k8":
        return (8 * (j % 2) + g, 4 * (j // 2) + t) if operand == "A" else (4 * j + t, g)
    return (8 * (j % 2) + g, 8 * (j // 2) + 2 * t + h) if operand == "A" else (8 * j + 2 * t + h, g)


@functools.lru_cache(maxsize=None)
def fragment(shape: str, operand: str) -> np.ndarray:
    """int32 [32 lanes, registers, values per register, 2]: the (row, column) of the operand each
    lane's register value holds (``shape``: "m16n8k8" (tf32) or "m16n8k16" (f16, bf16); ``operand``:
    "A", "B" or "C", C also D)."""
    if shape not in SHAPES or operand not in SHAPES[shape]:
        raise ValueError(f"fragment: shape is one of {', '.join(SHAPES)} and operand 'A', 'B' or 'C', "
                         f"not {shape!r}, {operand!r}")
    _, _, regs, values = SHAPES[shape][operand]
    out = np.array([[[_place(shape, operand, lane // 4, lane % 4, j, h) for h in range(values)]
                     for j in range(regs)] for lane in range(32)], dtype=np.int32)
    out.flags.writeable = False
    return out


def owner(shape: str, operand: str, row: int, col: int) -> tuple[int, int, int]:
    """(lane, register, half) holding element (row, col) of the operand."""
    hit = np.argwhere((fragment(shape, operand) == (row, col)).all(axis=-1))
    if len(hit) != 1:
        rows, cols = SHAPES[shape][operand][:2]
        raise ValueError(f"{operand} of mma.{shape} is {rows} x {cols}: no element ({row}, {col})")
    return tuple(int(v) for v in hit[0])


def fragment_owner(operand: str, row: int, col: int) -> tuple[int, int]:
    """(lane, register) holding element (row, col) of an m16n8k8 TF32 operand: A is 16x8 (m x k),
    B is 8x8 (k x n), C is 16x8 (m x n) (chapter 13's picture and exercise)."""
    if operand not in ("A", "B", "C"):
        raise ValueError(f"operand is 'A', 'B' or 'C', not {operand!r}")
    return owner("m16n8k8", operand, row, col)[:2]


def ldmatrix_x4() -> tuple[np.ndarray, np.ndarray]:
    """ldmatrix.sync.aligned.m8n8.x4.b16: ([4 matrices, 8 rows] -> the lane giving that row's
    address, [32 lanes, 2 halves, 2] -> the (row, column) of each matrix a lane's register holds;
    register j holds matrix j)."""
    lanes = np.arange(32, dtype=np.int32).reshape(4, 8)
    values = np.array([[(lane // 4, 2 * (lane % 4) + h) for h in range(2)] for lane in range(32)], dtype=np.int32)
    return lanes, values


def ldmatrix_rows(operand: str) -> list[tuple[int, int]]:
    """The row and 16-byte chunk of a shared tile each lane must address so that ldmatrix.x4's four
    registers are an mma.m16n8k16 fragment: "A", a 16 x 16 tile of A (a row per m, k along it; the
    registers a0..a3); "B", two 8-column tiles of B side by side, stored as 16 rows of n with k along
    them (registers b0, b1 of the first, then of the second). Derived from the two layouts above;
    raises if a matrix row would not be 8 consecutive values of one tile row."""
    lanes, values = ldmatrix_x4()
    frag = fragment("m16n8k16", operand)
    out = [None] * 32
    for m in range(4):
        tile, reg = (0, m) if operand == "A" else (m // 2, m % 2)
        for r in range(8):
            # matrix m's row r, column c lands in lane 4 r + c / 2, half c % 2, register m
            cells = [tuple(frag[4 * r + c // 2, reg, c % 2]) for c in range(8)]
            if operand == "B":                   # B[k][n] stored as row n, k along it
                cells = [(n + 8 * tile, k) for k, n in cells]
            row, k0 = cells[0]
            if k0 % 8 or cells != [(row, k0 + c) for c in range(8)]:
                raise ValueError(f"ldmatrix cannot load {operand}'s fragment: matrix {m} row {r} is {cells}")
            out[int(lanes[m, r])] = (int(row), int(k0 // 8))
    return out


def wgmma_accumulator(n: int = 256) -> np.ndarray:
    """int32 [128 threads of the warpgroup, n / 2 registers, 1, 2]: the (row, column) of D (64 x n)
    each fp32 accumulator of a wgmma.mma_async of width n holds (the first n / 2 registers of width
    256 are those of any narrower width)."""
    if n % 8 or not 8 <= n <= 256:
        raise ValueError(f"wgmma widths are multiples of 8 up to 256, not {n}")
    c = fragment("m16n8k16", "C")[:, :, 0]
    out = np.array([[[(16 * (thread // 32) + c[thread % 32, i % 4, 0], 8 * (i // 4) + c[thread % 32, i % 4, 1])]
                     for i in range(n // 2)] for thread in range(128)], dtype=np.int32)
    out.flags.writeable = False
    return out


def swizzle_128b() -> np.ndarray:
    """int32 [8, 8]: where 16-byte chunk j of a 128-byte line of shared memory lies, by the line's
    place in its 1024-byte pattern (the row): the 128-byte swizzle of wgmma's matrix descriptors."""
    return np.array([[j ^ row for j in range(8)] for row in range(8)], dtype=np.int32)


def tables() -> dict:
    """The emulator's tables (helpers/engine/backends/emulator/instructions.cpp: emu_set_fragments)."""
    lanes, values = ldmatrix_x4()
    return {"a_tf32": fragment("m16n8k8", "A"), "b_tf32": fragment("m16n8k8", "B"),
            "a_16": fragment("m16n8k16", "A"), "b_16": fragment("m16n8k16", "B"),
            "c": fragment("m16n8k16", "C"), "ldm_lanes": lanes, "ldm_values": values,
            "d_wgmma": wgmma_accumulator(), "swizzle_128b": swizzle_128b()}
