"""gemm: the course's matrix product C = A . B (chapter 11), whose tile loop
(kernels/common/gemm_core.h) the GEMM-based stages of the other operations share."""
from ..launch import gemm
from .params import GEMM_TUNE, TILES, WG, WG_TUNE
from .stage import Stage

STAGES = [
    Stage("gemm", 1, "naive", "gemm/01_naive.cl",
          "one work-item per element of C; every operand fetched from global memory",
          family=gemm, launch="gemm_naive", defines=WG, tune=WG_TUNE),
    Stage("gemm", 2, "local_tiles", "gemm/02_local_tiles.cl",
          "TS x TS tiles of A and B through local memory, one element of C per work-item",
          family=gemm, launch="gemm_local", defines={"TS": 16}, tune={"TS": [8, 16]}),
    Stage("gemm", 3, "register_blocked", "gemm/03_register_blocked.cl",
          "a WM x WN block of C per work-item in registers, float4 tile loads where rows allow "
          "(kernels/common/gemm_core.h)",
          family=gemm, launch="gemm_blocked", defines=TILES, tune=GEMM_TUNE, jit=gemm.gemm_vectors,
          requires=gemm.gemm_tiles_requires, fast={"GEMM_VEC_A": 1, "GEMM_VEC_B": 1}),
]
